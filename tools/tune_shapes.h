/* tune_shapes.h -- the shapes of `chunkgen tune` (tools/tune_shapes.c): the shape syntax of
 * every command (cg_shape_parse, docs/shapes.md) with an op or an op family in front, and
 * the older positional form, deprecated. */
#ifndef CG_TUNE_SHAPES_H
#define CG_TUNE_SHAPES_H

#include "chunkgen.h"

typedef struct tune_shape_opts {
    const char *family; /* --op: the family of a shape without OP: in front; NULL: all (then OP: is needed) */
    int dir_mask;       /* --dir: 1 fwd, 2 bwd, 3 both: the ops a family name stands for */
    const char *dtype;  /* --dtype SIG for every shape; NULL: as the shape says (f32) */
    int64_t varlen;     /* --varlen MAX: every shape as a varlen key (B = 1); 0: none */
} tune_shape_opts;

typedef struct tune_shapes {
    cg_shape *v;
    int n, cap;
} tune_shapes;

/* The shapes of one --shape TEXT, appended to out: "OP:ITEM,..." (that op), "FAMILY:ITEM,..."
 * or "ITEM,..." with --op (the family's ops of --dir), ITEM as cg_shape_parse reads it;
 * or, deprecated, positional numbers "[FAMILY:]B,T,G,H,dk,dv" (ssd) / "B,L,D,N[,G]" (sscan).
 * 0, or the exit code (message printed). */
int tune_shapes_add(const char *cmd, cg_context *ctx, const char *text, const tune_shape_opts *o, tune_shapes *out);
/* Every line of path ("-": stdin) as a --shape ("FAMILY NUMBERS [NAME]" lines too; # comments). */
int tune_shapes_read(const char *cmd, cg_context *ctx, const char *path, const tune_shape_opts *o, tune_shapes *out);
/* The backend's built-in set (cg_tune_builtin_shapes) with --dtype and --varlen applied. */
int tune_shapes_builtin(const char *cmd, cg_context *ctx, cg_backend backend, const tune_shape_opts *o,
                        tune_shapes *out);

#endif
