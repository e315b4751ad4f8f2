/* abi.h -- the growth rule of the public structs (include/chunkgen.h, "ABI and growth rule"). */
#ifndef CG_ABI_H
#define CG_ABI_H

#include "chunkgen.h"

/* Copy the caller's struct `in` (first member `size_t size`; NULL allowed) into `out` of
 * this header's layout (out_size bytes): the first in->size bytes (0: out_size), the
 * rest zero, out->size set to out_size. A NULL `in` gives an all-zero struct (of size
 * out_size). A larger size whose extra bytes are not all zero is CG_EUNSUPPORTED; a size
 * below sizeof(size_t) is CG_EINVAL. `what` names the argument in the message. */
cg_status cg__abi_in(cg_context *ctx, const char *what, void *out, size_t out_size, const void *in);

/* The reverse, for a struct the library fills (cg_op_info, cg_shape ...): `full` (this
 * header's layout, full_size bytes) into the caller's `out`, whose first member says its
 * size (0: full_size): the first min(size, full_size) bytes, the caller's newer members
 * beyond full_size zeroed, out->size kept. CG_EINVAL for a NULL out or a size below
 * sizeof(size_t). */
cg_status cg__abi_out(cg_context *ctx, const char *what, void *out, const void *full, size_t full_size);

#endif
