/* kernel_shape.h -- the --shape and --flags of `chunkgen gen` and `chunkgen build-kernels`
 * (tools/kernel_shape.c), made into a cg_shape for each kernel asked about.
 *
 * --shape is a shape in the one syntax (docs/shapes.md, cg_shape_parse): "OP:ITEM,...".
 * The OP: may be left out ("KEY=N,ITEM,..."): the op is then the kernel's (for
 * build-kernels, each kernel's), the symbols not given take the historical defaults B=1,
 * T (L) = 256, G=1, H=1, T and L are one key, and the items that belong to another op
 * are left out (so one text can name an SSD and a selective-scan shape). --flags a,b
 * adds items by their historical words (h0, hT, dhT, softplus, has_D, has_z, has_bias,
 * grouped; bwd picks the backward op of a CPU space). */
#ifndef CG_KERNEL_SHAPE_H
#define CG_KERNEL_SHAPE_H

#include "chunkgen.h"

#include <stddef.h>
#include <stdio.h>

typedef struct cg_cli_kshape {
    char text[CG_SHAPE_TEXT_MAX]; /* --shape as given; "" when none */
    char items[256];              /* the items --flags stands for, comma-separated */
    int grouped, bwd;             /* --flags grouped (keeps a selective scan's G), bwd */
} cg_cli_kshape;

/* cg_cli_opt parsers of --shape and --flags into a cg_cli_kshape that must be the FIRST
 * member of the options struct. */
int cg_cli_kshape_opt(void *opts, const char *v, char *err, size_t errlen);
int cg_cli_kflags_opt(void *opts, const char *v, char *err, size_t errlen);
/* The --flags words and the shape item each stands for, for --help (a usage_more). */
void cg_cli_kflags_help(FILE *f);

/* 1 when k's text gives symbol `sym` ("dk", "D", "T" also for "L"). */
int cg_cli_kshape_gives(const cg_cli_kshape *k, const char *sym);
/* The op a kernel runs for k: the op named as the kernel (ssd_fwd), else, for a CPU
 * space (ssd_cpu), its family's forward or (--flags bwd) backward op; with an OP: in
 * the text, that op. 0, else -1 with err. */
int cg_cli_kshape_op(const cg_cli_kshape *k, const char *kernel, cg_op *op, char *err, size_t errlen);
/* The shape of op from k into *out. CG_OK, else the status with cg_errmsg(ctx). */
cg_status cg_cli_kshape_make(cg_context *ctx, const cg_cli_kshape *k, cg_op op, cg_shape *out);

#endif
