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

#endif
