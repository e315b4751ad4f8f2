/* op_info.h -- the op table's public view (runtime/op_info.c) and what runtime/shape.c
 * shares with it. */
#ifndef CG_OP_INFO_H
#define CG_OP_INFO_H

#include "abi.h"
#include "ops.h"

/* The descriptor of op, or NULL with a message naming op when op is not a cg_op value. */
const cg_op_desc *cg__op_checked(cg_context *ctx, cg_op op);
/* Tensor i of d as the public API numbers them: the table's tensors, then cu_seqlens
 * (index d->nt) when d has one; NULL when out of range. */
const cg_tdesc *cg__op_tdesc(const cg_op_desc *d, int i);

#endif
