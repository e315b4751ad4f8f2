/* bench.h -- the pieces of `chunkgen bench` (tools/cmd_bench.c and tools/bench_*.c): the
 * options, the matrix, a cell's tensors, the measurement and the JSON document. Each
 * bench_*.c file has one job:
 *   bench_opts.c     the option table (tools/cli_args.h), its checks, the presets and the matrix
 *   bench_util.c     clocks, percentiles, progress lines, JSON numbers, memory counters
 *   bench_probe.c    the CPU's and the GPU's bounds for the roofline
 *   bench_cell.c     a cell's tensors, inputs, API argument structs and device copies
 *   bench_ref.c      the float64 reference of a cell and the relative errors
 *   bench_measure.c  timing one impl on one cell
 *   bench_json.c     rows, roofline fields, the device and config blocks, the write
 *   cmd_bench.c      the command: the matrix loop, one impl on one cell */
#ifndef CG_BENCH_H
#define CG_BENCH_H

#include "chunkgen.h"
#include "bench_probe.h"
#include "cli_op.h"

#include <jansson.h>

#include <stddef.h>
#include <stdint.h>

#define MAXLIST 16

/* One shape of the matrix: the op family's (cg_op_info.family) extents by symbol (cg_sym),
 * all but the sequence's (--seq gives those); 0 for a symbol not given (an ungrouped
 * scan's G). states: the family's optional state inputs are given (the seeds': SSD's h0). */
typedef struct bconfig {
    char family[16];
    char name[48];
    int64_t dims[CG_SHAPE_MAX_SYMS];
    int states;
} bconfig;

typedef struct bench_opts {
    int want_cpu, want_cuda, want_emu, want_ref, want_cuda_def; /* -1 unset */
    int backend_given, impls_given;
    int op;             /* --op: 0 every family, else the choice's index (1-based) */
    const char *family; /* --op's family, or NULL */
    char family_buf[16];
    char presets[MAXLIST][48]; /* --preset: names of the seeds' shapes */
    int npresets;
    int64_t seqs[MAXLIST];
    int nseqs;
    int mode;                    /* 0 both, 1 fwd, 2 fwd_bwd */
    bconfig custom[2 * MAXLIST]; /* --ssd-shape, --sscan-shape, in their order */
    int ncustom;
    cg_layout layout;
    cg_dtype dtype; /* --dtype: storage of the 16-bit-capable tensors (CG_F32 default) */
    int all, threads, repeats, warmup, no_check, no_probe, quiet, verbose;
    double min_time, ref_max_s;
    int64_t ref_seq, emu_max_seq;
    const char *commit, *out;
    const char *config; /* --config: pinned for the chunkgen impls except chunkgen_cuda_default */
} bench_opts;

typedef enum { IMPL_CPU, IMPL_CUDA, IMPL_CUDA_DEF, IMPL_EMU, IMPL_REF, IMPL_COUNT } impl_kind;
extern const char *const k_impl_names[IMPL_COUNT];

/* One float32 tensor of a cell, in the op's logical dim order (SSD: [b, t, g|h, i];
 * la: [b, t, h]; states [b, h, i, j]; sscan as in chunkgen.h). The memory order may be
 * a permutation (head-major SSD), so strides are kept per logical dim. */
typedef struct btensor {
    const char *name;
    int used, nd;
    int has_b, has_t; /* logical dim 0 is batch, dim 1 is time */
    int head_perm;    /* head-major: the API's dims 1 and 2 are logical 2 and 1 */
    int out;          /* written by the op */
    int grad;         /* a gradient (named by the input it is the gradient of) */
    int ramp;         /* an input filled with -(i + 1) along its last extent, not drawn */
    double lo, hi;    /* an input's range: the op table's, or the seeds' (bench_cell.c) */
    int64_t n[4], s[4], count;
    cg_dtype dt;   /* storage dtype (the cell's 16-bit dtype for the 16-bit-capable tensors) */
    float *h;      /* host values (16-bit inputs: rounded once) */
    uint16_t *st;  /* 16-bit tensors: the call's host memory; NULL for float32 */
    void *d;       /* device (cuda) */
    double *ref;   /* float64 reference values of an output, on the cut, contiguous */
    int64_t rn[4]; /* the cut's shape */
} btensor;

/* A cell's tensors are built from the op table (cg_op_describe): the forward op's tensors
 * in its order, then the backward op's that the forward lacks; the ones a cell does not
 * use stay unused. */
#define MAX_T 24

/* An op as the bench sees it: the public description (tools/cli_op.h) and each tensor's
 * dims in the order a caller gives them, token-major and ungrouped (cg_op_tensor_dims). */
typedef struct bop {
    cli_op o;
    int nd[CLI_OP_MAXT];
    cg_sym dims[CLI_OP_MAXT][CG_MAX_DIMS];
} bop;

typedef struct cell {
    const bconfig *cfg;
    int64_t seq;
    int bwd; /* fwd_bwd */
    cg_layout layout;
    cg_dtype dtype;                  /* the 16-bit-capable tensors' storage (CG_F32: all float32) */
    int64_t dims[CG_SHAPE_MAX_SYMS]; /* each symbol's extent (by cg_sym); 0: not given (sscan's G) */
    btensor t[MAX_T];
    int nt;
    int map[2][MAX_T]; /* the cell tensor of each tensor of the forward [0] and backward [1] op */
    int64_t cut_t;     /* tokens of the reference cut */
    int have_ref;
    char ref_err[512];
    double ref_s_per_bt; /* the reference's seconds per (batch element x token) on one thread, measured; 0: not */
} cell;

/* Memory (host or device) and the cut of one run. */
typedef struct bptrs {
    void *p[MAX_T];
    int64_t b, tt; /* 0: full */
} bptrs;

typedef struct runner {
    cell *c;
    impl_kind impl;
    cg_context *ctx;
    cg_exec ex;
    int cuda; /* device memory; sync after each sample */
    char msg[1024];
    int skipped;           /* msg is a reason to skip, not an error */
    const char *config[2]; /* the --config part of the forward and the backward call (NULL: none) */
    char config_buf[2][512];
} runner;

typedef struct meas {
    double compile_s, median_ms, q1_ms, q3_ms;
    double cpu_ms; /* median process CPU time per call (all threads) */
    int inner, samples;
    double workspace_mb; /* NaN: unknown */
} meas;

#define MAX_SAMPLES 200

typedef struct bench {
    bench_opts *o;
    int threads;
    cpu_info ci;
    gpu_info gi;
    cg_context *ctx_cpu, *ctx_cuda, *ctx_cuda_def, *ctx_emu, *ctx_ref;
    int want[IMPL_COUNT];
    char unavailable[IMPL_COUNT][320]; /* non-empty: the impl cannot run here, and why */
    char def_cache[256];
    json_t *doc, *results;
    int errors;
    int cpu_subset; /* fwd_bwd at seq > 2048 left out */
} bench;

/* ------------------------------------------------------------------ bench_opts.c */
/* 0 ok, -1 --help printed, 2 usage error printed. */
int bench_parse_opts(int argc, char **argv, bench_opts *o);
int bench_usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The shapes of the run into cfgs (at most max): each family's (--op's) custom shapes, or
 * its presets (--preset's). The count, or -1 after a usage error printed. */
int bench_matrix(const bench_opts *o, bconfig *cfgs, int max);

/* ------------------------------------------------------------------ bench_util.c */
double bench_now_s(void);
double bench_cpu_s(void);
int bench_cmp_dbl(const void *a, const void *b);
/* Percentile p in [0, 1] of sorted v, linear between order statistics (numpy's default). */
double bench_pctl(const double *v, int n, double p);
extern int bench_quiet;
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A JSON number, or null for a value that is not finite (jansson rejects NaN/Inf). */
json_t *bench_jnum(double x);
/* kB value of `key` in /proc/self/status, or -1. */
int64_t bench_proc_status_kb(const char *key);
/* Reset the peak RSS (VmHWM) to the current RSS; 0 on success. Linux >= 4.0. */
int bench_hwm_reset(void);

/* ----------------------------------------------------------------- bench_probe.c */
/* (bench_probe.h: bench_cpu_probe, bench_gpu_probe) */
/* The backend the cuda impls run on (its memory through cg_device_*): cuda, or (test hook,
 * for machines without a GPU) emulate when CHUNKGEN_BENCH_FAKE_CUDA=emulate (bench_measure.c). */
extern cg_backend bench_cuda_backend;
extern int bench_fake_cuda;
void bench_kexec_select(void);

/* ------------------------------------------------------------------ bench_cell.c */
extern const int64_t k_seed_seqs[3];
void bench_cell_define(cell *c);
/* The tensor's bytes in the call (the whole tensor, in its storage dtype). */
double bench_tbytes(const btensor *t);
/* Element off (in t's strides) of what the call wrote or read: st for 16-bit tensors. */
double bench_tval(const btensor *t, int64_t off);
int bench_cell_alloc(cell *c, char *err, size_t errlen);
void bench_cell_free(cell *c);
/* The shape of the cell's forward (bwd 0) or backward call, its extents only (token-major,
 * float32, no optional tensor): CG_OK, or the status of cg_shape_parse (message in ctx). */
cg_status bench_cell_shape(const cell *c, int bwd, cg_context *ctx, cg_shape *s);
/* The forward (bwd 0) or backward (bwd 1) op of the cell's family. */
const bop *bench_cell_op(const cell *c, int bwd);
/* Print what failed and abort: a broken invariant of the bench itself. */
#define BENCH_CHECK(cond)                                                                                              \
    do {                                                                                                               \
        if (!(cond)) bench_die(__FILE__, __LINE__, #cond);                                                             \
    } while (0)
void bench_die(const char *file, int line, const char *what) __attribute__((noreturn));
/* The args struct (of the op's type) of the cell's forward (bwd 0) or backward op over m:
 * every tensor of the op (an unused one absent), the layout, every scalar flag on
 * (delta_softplus). */
void bench_cell_args(const cell *c, const bptrs *m, int bwd, void *args);
void bench_host_ptrs(const cell *c, bptrs *m, int64_t b, int64_t tt);
void bench_device_ptrs(const cell *c, bptrs *m, int64_t b, int64_t tt);
int bench_cuda_cell_alloc(cell *c, cg_context *ctx, char *err, size_t errlen);
void bench_cuda_cell_free(cell *c, cg_context *ctx);
/* dir 0: every used tensor host -> device; dir 1: outputs device -> host. */
int bench_cuda_copy(cell *c, cg_context *ctx, int dir, char *err, size_t errlen);
/* Outputs filled with NaN before each impl, so an output it never writes shows. */
void bench_poison_outputs(cell *c);

/* ------------------------------------------------------------------- bench_ref.c */
/* The float64 reference of the cell's cut: one call per slice of the op's divisible
 * symbol (cg_op_info.divisible: SSD's heads, the selective scan's channels) on up to
 * threads workers; 0, or -1 with c->ref_err. */
int bench_reference(cell *c, int threads);
/* max |a - ref| / max |ref| over the cut of t; NaN when a holds a NaN. */
double bench_rel_err_cut(const btensor *t);

/* --------------------------------------------------------------- bench_measure.c */
int bench_runner_fail(runner *r, cg_status s, const char *what);
/* One fwd (and bwd for fwd_bwd) call on memory m. */
int bench_run_call(runner *r, const bptrs *m);
int bench_run_sync(runner *r);
int bench_measure(runner *r, const bptrs *m, const bench_opts *o, meas *out);

/* ------------------------------------------------------------------ bench_json.c */
json_t *bench_row_base(const bench *bn, const cell *c, impl_kind impl);
/* The flops of the cell's calls (forward, and backward for fwd_bwd) by each op's model
 * (cg_op_flops) with the model's parameter from cfg (NULL: its default); used: the
 * parameter taken ("chunk=64", "" for none). NaN (message in ctx) when refused. */
double bench_model_flops(cg_context *ctx, const cell *c, const char *cfg, char *used, size_t cap);
void bench_row_fail(bench *bn, json_t *row, int skipped, const char *msg);
/* Whether an impl's rel_err needs its own run on the cut (not the timed run's outputs). */
int bench_needs_cut_run(const cell *c);
void bench_add_rel_err(const cell *c, json_t *row);
void bench_add_roofline(const bench *bn, const cell *c, impl_kind impl, const char *dispatch, const meas *m,
                        json_t *row);
json_t *bench_device_block(const bench *bn);
json_t *bench_config_block(const bench *bn, const bconfig *cfgs, int ncfg, const int64_t *seqs, int nseqs, int argc,
                           char **argv);
/* Write the document (atomically for a file: FILE.tmp, then rename). */
int bench_write_doc(const bench *bn);

#endif
