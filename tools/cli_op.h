/* cli_op.h -- an op as the public header describes it (cg_op_describe, cg_op_tensor_info),
 * read once, for the commands that handle any op (`run`, `bench`): nothing in the CLI lists
 * an op's tensors or names an op. */
#ifndef CG_CLI_OP_H
#define CG_CLI_OP_H

#include "chunkgen.h"

#include <stddef.h>

#define CLI_OP_MAXT 32      /* tensors of an op, cu_seqlens included */
#define CLI_ARGS_BYTES 4096 /* room for any op's args struct (cg_op_info.args_size) */

typedef struct cli_op {
    cg_op op;
    cg_op_info in;
    cg_tensor_info t[CLI_OP_MAXT]; /* t[in.ntensors]: cu_seqlens when in.has_varlen */
} cli_op;

/* An args struct of any op (zeroed: every size 0, this header's layout). */
typedef union cli_args {
    unsigned char bytes[CLI_ARGS_BYTES];
    int64_t align_;
    void *align_p_;
} cli_args;

/* The op of family ("ssd", "sscan": cg_op_info.family) and direction (bwd 0 or 1) into
 * *o; -1 when there is none (or it does not fit). */
int cli_op_find(const char *family, int bwd, cli_op *o);
/* Op number op into *o; -1 when op is not an op (or does not fit). */
int cli_op_load(cg_op op, cli_op *o);
/* Index of the tensor named name in o (cu_seqlens excluded), or -1. */
int cli_op_tensor(const cli_op *o, const char *name);
/* "[B, T, G, dk]": tensor i's symbols in the caller's order (cg_op_tensor_dims). */
const char *cli_op_dims_text(const cli_op *o, int i, cg_layout layout, int grouped, char *buf, size_t cap);

#endif
