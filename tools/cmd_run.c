/* cmd_run.c -- `chunkgen run FAMILY` (ssd, sscan): run one op on .npy files.
 *
 * Inputs are .npy files (float32, float16, bfloat16 as ml_dtypes saves it, float64
 * converted) named after the op's arguments in the input directory; outputs are written
 * as .npy files named after the results, each in the dtype the call gives it
 * (docs/dtypes.md). The 16-bit-capable inputs keep their file's dtype, or all take
 * --dtype; the float32-only ones (log_alpha, states, A, D, delta_bias) are float32. Every shape comes from
 * the arrays: the defining arrays (q and v for SSD, x, A and B for the selective scan)
 * fix the dimensions and every other array is checked against them, so a mismatch is
 * reported in terms of files. The ops, their tensors, shapes and dtypes come from the
 * public header (cg_op_describe, cg_shape_of, cg_op_tensor_dims, cg_op_dtypes, cg_run). */
#include "chunkgen.h"
#include "cli.h"
#include "cli_args.h"
#include "cli_common.h"
#include "npy.h"
#include "cli_op.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define RUN_ERRLEN 1024

/* The families of the op table that `run` takes (a forward and a backward op: not the
 * decode steps, whose state cache it does not write back yet), each once (in the table's
 * order), as "A|B" (sep "|") or "A or B" (sep " or "). */
static void run_families(const char *sep, char *buf, size_t cap) {
    size_t m = 0;
    buf[0] = '\0';
    for (int op = 0; op < cg_op_count(); op++) {
        cli_op d, e;
        int seen = cli_op_load((cg_op)op, &d) != 0 || cli_op_find(d.in.family, 1, &e) != 0;
        for (int j = 0; j < op && !seen; j++) seen = !cli_op_load((cg_op)j, &e) && !strcmp(e.in.family, d.in.family);
        if (seen) continue;
        m += (size_t)snprintf(buf + m, m < cap ? cap - m : 0, "%s%s", m ? sep : "", d.in.family);
    }
}

/* The usage text, its families from the op table (filled by cg_cmd_run). */
static char run_usage[1024];

static void run_usage_fill(void) {
    char fam[256];
    run_families("|", fam, sizeof fam);
    snprintf(run_usage, sizeof run_usage,
             "usage: chunkgen run %s [options] --in DIR [--out DIR]\n"
             "       chunkgen run %s [options] IN_DIR [OUT_DIR]\n"
             "\n"
             "Runs one op on .npy files named after its inputs (float32, float16 '<f2', bfloat16\n"
             "'<V2' as numpy saves ml_dtypes.bfloat16, float64 converted) and writes .npy files named\n"
             "after its outputs (OUT_DIR defaults to IN_DIR and is created if missing).\n",
             fam, fam);
}

/* The files of each op from the op table: "  ssd   reads  q k v log_alpha [h0] (and do
 * [dhT] with --grad)" and the same for the outputs; [x]: optional, or written only when
 * its input is given. */
static void run_files(FILE *f, const cli_op *fwd, const cli_op *bwd, int output) {
    for (int w = 0; w < 2; w++) {
        const cli_op *d = w ? bwd : fwd;
        int n = 0;
        for (int i = 0; i < d->in.ntensors; i++) {
            const cg_tensor_info *t = &d->t[i];
            if (t->output != output || (w && !output && cli_op_tensor(fwd, t->name) >= 0)) continue;
            int g = cli_op_tensor(d, t->grad_of);
            int opt = !output ? t->optional : t->requires || (g >= 0 && d->t[g].optional);
            fprintf(f, "%s%s%s%s", n++ ? " " : w ? " (and " : "", opt ? "[" : "", t->file, opt ? "]" : "");
        }
        if (w && n) fputs(" with --grad)", f);
    }
    fputc('\n', f);
}

static void run_usage_more(FILE *f) {
    for (int op = 0; op < cg_op_count(); op++) { /* each family: its forward and backward */
        cli_op fwd, bwd;
        if (cli_op_load((cg_op)op, &fwd) || fwd.in.bwd || cli_op_find(fwd.in.family, 1, &bwd)) continue;
        fprintf(f, "  %-5s reads  ", fwd.in.family);
        run_files(f, &fwd, &bwd, 0);
        fputs("        writes ", f);
        run_files(f, &fwd, &bwd, 1);
    }
    fputs("Gradients are written only for the inputs that were given. The shapes come from the\n"
          "arrays.\n",
          f);
}

/* ------------------------------------------------------------------ errors */

#define run_fail(...) cli_fail("run", __VA_ARGS__)
#define run_usage_err(...) cg_cli_usage_err("run", __VA_ARGS__)

/* ----------------------------------------------------------------- options */

typedef struct run_opts {
    cli_op fwd, bwd; /* the family's ops (the first positional argument) */
    cg_backend backend;
    int grad, softplus, verbose;
    cg_layout layout;
    int layout_given;
    const char *config;
    int threads; /* -1: library default */
    int dtype;   /* --dtype: the storage of every 16-bit-capable input; -1: each file's */
    const char *in, *out;
    const char *cu;          /* --cu-seqlens FILE.npy: packed sequences (docs/varlen.md); NULL */
    const char *op, *pos[2]; /* the positional arguments */
    int npos;
} run_opts;

static int opt_backend(void *opts, const char *v, char *err, size_t errlen) {
    if (cg_backend_parse(v, &((run_opts *)opts)->backend) == CG_OK) return 0;
    return snprintf(err, errlen, "unknown backend '%s' (expected auto, cpu, ref, emulate or cuda)", v), -1;
}

static int opt_layout(void *opts, const char *v, char *err, size_t errlen) {
    run_opts *o = opts;
    if (strcmp(v, "token") == 0 || strcmp(v, "bthd") == 0) o->layout = CG_LAYOUT_TOKEN_MAJOR;
    else if (strcmp(v, "head") == 0 || strcmp(v, "bhtd") == 0) o->layout = CG_LAYOUT_HEAD_MAJOR;
    else return snprintf(err, errlen, "unknown layout '%s' (expected token/bthd or head/bhtd)", v), -1;
    o->layout_given = 1;
    return 0;
}

static int opt_dtype(void *opts, const char *v, char *err, size_t errlen) {
    run_opts *o = opts;
    for (int dt = CG_F32; dt <= CG_F16; dt++)
        if (dt != CG_F64 && !strcmp(v, cg_dtype_name((cg_dtype)dt))) return o->dtype = dt, 0;
    return snprintf(err, errlen, "unknown dtype '%s' (expected f32, bf16 or f16)", v), -1;
}

static int run_positional(void *opts, const char *a, char *err, size_t errlen) {
    run_opts *o = opts;
    if (!o->op) o->op = a;
    else if (o->npos < 2) o->pos[o->npos++] = a;
    else return snprintf(err, errlen, "unexpected argument '%s'", a), -1;
    return 0;
}

static const cg_cli_opt k_run_opts[] = {
    {"--backend", 0, CG_CLI_FN, 0, "auto|cpu|ref|emulate|cuda", "backend (default auto)", 0, 0, opt_backend},
    {"--grad", 0, CG_CLI_FLAG, offsetof(run_opts, grad), NULL, "also run the backward pass", 0, 0, NULL},
    {"--delta-softplus", 0, CG_CLI_FLAG, offsetof(run_opts, softplus), NULL, "sscan: dt = softplus(delta + delta_bias)",
     0, 0, NULL},
    {"--layout", 0, CG_CLI_FN, 0, "token|head",
     "ssd: token-major [B,T,heads,dim] (default; alias bthd)\n"
     "or head-major [B,heads,T,dim] (alias bhtd)",
     0, 0, opt_layout},
    {"--dtype", 0, CG_CLI_FN, 0, "f32|bf16|f16",
     "storage of the 16-bit-capable inputs (q k v do / x delta B C z dy;\n"
     "default: each file's dtype); outputs follow (docs/dtypes.md)",
     0, 0, opt_dtype},
    CG_CLI_OPT_CONFIG(run_opts, config),
    CG_CLI_OPT_THREADS(run_opts, threads),
    CG_CLI_OPT_VERBOSE(run_opts, verbose, "print which backend and config ran"),
    {"--in", 0, CG_CLI_STR, offsetof(run_opts, in), "DIR", "input directory", 0, 0, NULL},
    {"--cu-seqlens", 0, CG_CLI_STR, offsetof(run_opts, cu), "FILE.npy",
     "offsets of sequences packed along T (L) with B = 1:\n"
     "int32/int64 [N + 1]; the states (h0, hT, ...) are then [N, ...] (docs/varlen.md)",
     0, 0, NULL},
    {"--out", 0, CG_CLI_STR, offsetof(run_opts, out), "DIR", "output directory", 0, 0, NULL},
    CG_CLI_OPT_END};

static const cg_cli_cmd k_run_cmd = {"run", run_usage, k_run_opts, run_positional, run_usage_more};

/* 0 on success, else the exit code (2 usage, or -1 for --help printed). */
static int parse_opts(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->backend = CG_BACKEND_AUTO;
    o->layout = CG_LAYOUT_TOKEN_MAJOR;
    o->threads = -1;
    o->dtype = -1;
    int rc = cg_cli_parse(&k_run_cmd, argc, argv, o);
    if (rc) return rc;
    const char *op = o->op, *const *pos = o->pos;
    int npos = o->npos;
    char fam[256];
    run_families(" or ", fam, sizeof fam);
    if (!op) return run_usage_err("missing the op: %s", fam);
    if (cli_op_find(op, 0, &o->fwd) || cli_op_find(op, 1, &o->bwd))
        return run_usage_err("unknown op '%s' (expected %s)", op, fam);
    if (npos > 0) {
        if (o->in) return run_usage_err("input directory given twice ('%s' and --in %s)", pos[0], o->in);
        o->in = pos[0];
    }
    if (npos > 1) {
        if (o->out) return run_usage_err("output directory given twice ('%s' and --out %s)", pos[1], o->out);
        o->out = pos[1];
    }
    if (!o->in) return run_usage_err("missing the input directory (--in DIR)");
    if (!o->out) o->out = o->in;
    int softplus = 0;
    for (int k = 0; k < o->fwd.in.nscalars; k++) softplus |= !strcmp(o->fwd.in.scalars[k], "delta_softplus");
    if (o->softplus && !softplus) return run_usage_err("--delta-softplus applies to sscan only");
    if (!o->fwd.in.has_layout && o->layout_given && o->layout != CG_LAYOUT_TOKEN_MAJOR)
        return run_usage_err("--layout head applies to ssd only (sscan arrays are [B, L, D] etc.)");
    return 0;
}

/* ------------------------------------------------------------------ arrays */

static int dims_fit(int ndim, const int64_t *shape);

typedef struct run_arr {
    const char *name;
    char path[PATH_MAX];
    cg_npy a;
    int present;
    cg_dtype dt;    /* the tensor's storage dtype */
    uint16_t *half; /* 16-bit storage (a.data narrowed); NULL for float32 */
} run_arr;

static int is_half(cg_dtype dt) { return dt == CG_BF16 || dt == CG_F16; }

/* "float32", "bfloat16", "float16" (numpy's names, for the messages). */
static const char *np_name(int dt) {
    return dt == CG_BF16 ? "bfloat16" : dt == CG_F16 ? "float16" : dt == CG_F64 ? "float64" : "float32";
}

/* Store r as dt: 16-bit values narrowed once (exact for a file of that dtype). -1: OOM. */
static int arr_store(run_arr *r, cg_dtype dt) {
    r->dt = dt;
    if (!is_half(dt)) return 0;
    r->half = malloc((size_t)(r->a.count ? r->a.count : 1) * sizeof *r->half);
    if (!r->half) return -1;
    for (int64_t i = 0; i < r->a.count; i++)
        r->half[i] = dt == CG_BF16 ? cg_f32_to_bf16(r->a.data[i]) : cg_f32_to_f16(r->a.data[i]);
    return 0;
}

static void arr_path(const char *dir, const char *name, char *out, size_t outlen) {
    size_t n = strlen(dir);
    snprintf(out, outlen, "%s%s%s.npy", dir, (n && dir[n - 1] == '/') ? "" : "/", name);
}

/* Load dir/name.npy. Absent: fine when optional; `why` says what needs a required one. */
static int arr_load(const run_opts *o, run_arr *r, const char *name, int required, const char *why) {
    r->name = name;
    arr_path(o->in, name, r->path, sizeof r->path);
    struct stat st;
    if (stat(r->path, &st) != 0 && errno == ENOENT) {
        if (required) return run_fail("missing required input %s%s", r->path, why ? why : "");
        return 0;
    }
    char err[RUN_ERRLEN];
    if (cg_npy_read(r->path, &r->a, err, sizeof err) != 0) return run_fail("%s", err);
    if (!dims_fit(r->a.t.ndim, r->a.t.shape)) {
        char sb[96];
        cg_npy_free(&r->a);
        return run_fail("%s: shape %s is too large (its strides overflow 64 bits)", r->path,
                        cg_npy_shape_str(r->a.t.ndim, r->a.t.shape, sb, sizeof sb));
    }
    if (r->a.from_f64) fprintf(stderr, "chunkgen run: note: %s holds float64 values; rounded to float32\n", r->path);
    r->present = 1;
    return 0;
}

static void arr_free(run_arr *r) {
    cg_npy_free(&r->a);
    free(r->half);
    r->half = NULL;
}

/* 1 when the strides of a contiguous array of shape (zero-size dims counted as 1) and
 * its float32 byte size fit in 64 bits. */
static int dims_fit(int ndim, const int64_t *shape) {
    int64_t s = (int64_t)sizeof(float);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &s)) return 0;
    return 1;
}

/* The tensor of an input; absent (data NULL) when the file was not given. */
static cg_tensor in_tensor(const run_arr *r) {
    cg_tensor t;
    if (!r->present) {
        memset(&t, 0, sizeof t);
        return t;
    }
    t = r->a.t; /* the file's tensor (cg_npy_read), in its storage */
    if (r->half) t.data = r->half;
    t.dtype = r->dt;
    return t;
}

/* ----------------------------------------------------------------- outputs */

#define RUN_MAX_OUT 12

typedef struct run_out {
    const char *name;
    int ndim;
    int64_t shape[4];
    cg_dtype dt;
    void *data; /* dt's elements */
    int64_t count;
} run_out;

typedef struct run_outs {
    int n;
    run_out o[RUN_MAX_OUT];
} run_outs;

/* Add an output of the given shape and dtype (zeroed); returns its tensor or an absent one on OOM. */
static cg_tensor out_add(run_outs *os, const char *name, cg_dtype dt, int ndim, const int64_t *shape, int *oom) {
    run_out *o = &os->o[os->n++];
    o->name = name;
    o->ndim = ndim;
    o->dt = dt;
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        o->shape[i] = shape[i];
        if (shape[i] < 0 || __builtin_mul_overflow(count, shape[i], &count)) count = -1;
    }
    if (count < 0 || !dims_fit(ndim, shape)) { /* too large: treated as out of memory */
        o->data = NULL;
        *oom = 1;
        return cg_tensor_contiguous(NULL, dt, ndim, shape);
    }
    o->count = count;
    o->data = calloc(count > 0 ? (size_t)count : 1, cg_dtype_size(dt));
    if (!o->data) *oom = 1;
    return cg_tensor_contiguous(o->data, dt, ndim, shape);
}

static void outs_free(run_outs *os) {
    for (int i = 0; i < os->n; i++) free(os->o[i].data);
    os->n = 0;
}

/* Write every output to a temp file next to its final name, then rename them all into
 * place: a failure part-way (full disk, read-only directory) leaves the previous run's
 * files as they were and no temp files. The output directory is created with its
 * parents. */
static int outs_write(const run_opts *opt, const run_outs *os) {
    int e = cg_npy_mkdirs(opt->out);
    if (e == ENOTDIR) return run_fail("output path %s is not a directory", opt->out);
    if (e) return run_fail("cannot create output directory %s: %s", opt->out, strerror(e));
    char path[RUN_MAX_OUT][PATH_MAX], tmp[RUN_MAX_OUT][PATH_MAX + 200];
    int staged = 0, rc = 0;
    for (int i = 0; i < os->n && !rc; i++) {
        const run_out *o = &os->o[i];
        char err[RUN_ERRLEN];
        arr_path(opt->out, o->name, path[i], sizeof path[i]);
        float *vals = o->data; /* 16-bit outputs widened (exact), written back narrowed: the same bits */
        if (is_half(o->dt)) {
            vals = malloc((size_t)(o->count ? o->count : 1) * sizeof *vals);
            if (!vals) {
                rc = run_fail("out of memory writing %s; no output written", path[i]);
                break;
            }
            const uint16_t *h = o->data;
            for (int64_t j = 0; j < o->count; j++)
                vals[j] = o->dt == CG_BF16 ? cg_bf16_to_f32(h[j]) : cg_f16_to_f32(h[j]);
        }
        int w = cg_npy_write_tmp_as(path[i], tmp[i], sizeof tmp[i], vals, o->dt, o->ndim, o->shape, err, sizeof err);
        if (vals != o->data) free(vals);
        if (w != 0) rc = run_fail("%s; no output written", err);
        else staged++;
    }
    for (int i = 0; i < staged && !rc; i++)
        if (rename(tmp[i], path[i]) != 0) {
            rc = run_fail("cannot rename %s to %s: %s%s", tmp[i], path[i], strerror(errno),
                          i ? "; the outputs before it were written" : "; no output written");
            for (int j = i; j < staged; j++) unlink(tmp[j]);
            return rc;
        }
    if (rc) {
        for (int i = 0; i < staged; i++) unlink(tmp[i]);
        return rc;
    }
    for (int i = 0; i < os->n; i++) {
        char sb[96];
        printf("wrote %s %s %s\n", path[i], cg_npy_shape_str(os->o[i].ndim, os->o[i].shape, sb, sizeof sb),
               np_name(os->o[i].dt));
    }
    return 0;
}

/* --------------------------------------------------------------------- ops */

static int lib_fail(cg_context *ctx, const char *what, cg_status st, const cg_exec *ex) {
    return run_fail("%s on backend %s failed (%s): %s", what, cg_backend_name(ex->backend), cg_status_str(st),
                    cg_errmsg(ctx));
}

/* --verbose: the dispatch line, and the tuned-config key the call looked up (the CPU
 * key holds the thread count: --threads 1 and --threads 2 use different entries). */
static void say_dispatch(const run_opts *o, cg_context *ctx, const char *what, cg_op op, const void *args) {
    if (!o->verbose) return;
    const char *d = cg_last_dispatch(ctx);
    fprintf(stderr, "chunkgen run: %s: %s\n", what, d);
    const char *b = strstr(d, "backend=");
    char name[16] = "";
    cg_backend backend;
    if (b) sscanf(b + 8, "%15[a-z]", name);
    if (cg_backend_parse(name, &backend) != CG_OK ||
        (backend != CG_BACKEND_CPU && backend != CG_BACKEND_CUDA && backend != CG_BACKEND_EMULATE))
        return;
    cg_shape sh = {.size = sizeof sh};
    cg_tuned_config tc = {.size = sizeof tc};
    if (cg_shape_of(ctx, op, args, &sh) != CG_OK || cg_config_lookup(ctx, backend, &sh, &tc) != CG_OK) return;
    char dev[200];
    if (backend == CG_BACKEND_CPU) snprintf(dev, sizeof dev, "%d threads, %s", tc.threads, tc.device);
    else snprintf(dev, sizeof dev, "%s sm_%d", tc.device, tc.cc);
    fprintf(stderr, "chunkgen run: %s: tuned-config key %s (%s, chunkgen %s): %s\n", what, tc.key, dev, cg_version(),
            tc.path);
}

/* Where the sizes tensor i is checked against come from: "like q.npy" when an earlier
 * given input has the same extents, else "(B, T like q.npy; H like v.npy)": the inputs that
 * give the symbols (cg_op_info.sym_from). */
static void expect_from(const cli_op *d, int i, const run_arr *a, char *buf, size_t cap) {
    const cg_tensor_info *t = &d->t[i];
    for (int j = 0; j < i; j++) {
        const cg_tensor_info *u = &d->t[j];
        if (!a[j].present || u->output || u->ndim != t->ndim || memcmp(u->ext, t->ext, sizeof t->ext) ||
            (u->flags & CG_TENSOR_GROUPABLE) != (t->flags & CG_TENSOR_GROUPABLE))
            continue;
        snprintf(buf, cap, "like %s.npy", u->file);
        return;
    }
    size_t n = 0;
    buf[0] = 0;
    for (int j = 0; j < d->in.ntensors; j++) { /* each supplying tensor once, with its symbols */
        if (j == i) continue;
        int first = 1;
        for (int k = 0; k < t->ndim; k++) {
            if (d->in.sym_from[t->ext[k]] != j) continue;
            n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", first ? (n ? "; " : "(") : ", ",
                                  cg_sym_name(t->ext[k]));
            first = 0;
        }
        if (!first) n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, " like %s.npy", d->t[j].file);
    }
    if (n && n < cap) snprintf(buf + n, cap - n, ")");
}

/* The extents tensor i of d has in a call of sh's symbols (the caller's order); its rank. */
static int want_shape(const cli_op *d, int i, const cg_shape *sh, int64_t want[4]) {
    cg_sym syms[CG_MAX_DIMS];
    const int nd = cg_op_tensor_dims(d->op, i, sh->layout, sh->grouped, syms);
    for (int k = 0; k < nd; k++)
        want[k] = k == 0 && sh->nseq && (d->t[i].flags & CG_TENSOR_PER_SEQ) ? sh->nseq : sh->dim[syms[k]];
    return nd;
}

/* After the library refused the inputs (cg_shape_of): the first given file whose shape
 * differs from what the files that give the symbols say, as a message naming files; else
 * the library's message, its leading tensor name ("q: ...") made the file's path. */
static int shape_fail(cg_context *ctx, const cli_op *d, const run_arr *a, cg_layout layout, int64_t nseq) {
    cg_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.layout = layout;
    sh.grouped = 1;
    sh.nseq = nseq;
    int ok = 1;
    for (int i = 0; i < d->in.ntensors; i++) /* grouped unless a groupable input leaves G out */
        if (!d->t[i].output && !d->t[i].optional && (d->t[i].flags & CG_TENSOR_GROUPABLE) && a[i].present)
            sh.grouped = a[i].a.t.ndim == d->t[i].ndim;
    for (int k = 0; k < d->in.nsyms && ok; k++) { /* each symbol from its file */
        const cg_sym sy = d->in.syms[k];
        const int j = d->in.sym_from[sy];
        cg_sym syms[CG_MAX_DIMS];
        const int nd = cg_op_tensor_dims(d->op, j, layout, sh.grouped, syms);
        ok = a[j].present && a[j].a.t.ndim == nd;
        sh.dim[sy] = sy == CG_SYM_G && !sh.grouped ? 1 : 0;
        for (int p = 0; p < nd && ok; p++)
            if (syms[p] == sy) sh.dim[sy] = a[j].a.t.shape[p];
        ok = ok && sh.dim[sy] > 0;
    }
    if (ok && d->in.divisible != CG_SYM_NONE) /* the symbols' own rule (H % G) is the library's to say */
        ok = sh.dim[d->in.divisible] % sh.dim[d->in.divisor] == 0;
    for (int i = 0; i < d->in.ntensors && ok; i++) { /* every other input against those sizes */
        if (!a[i].present) continue;
        int64_t want[4];
        const int nd = want_shape(d, i, &sh, want);
        int same = a[i].a.t.ndim == nd;
        for (int k = 0; same && k < nd; k++) same = a[i].a.t.shape[k] == want[k];
        if (same) continue;
        char got[96], exp[96], dt[64], from[256];
        expect_from(d, i, a, from, sizeof from);
        return run_fail("%s: shape %s but expected %s %s %s", a[i].path,
                        cg_npy_shape_str(a[i].a.t.ndim, a[i].a.t.shape, got, sizeof got),
                        cg_npy_shape_str(nd, want, exp, sizeof exp),
                        cli_op_dims_text(d, i, layout, sh.grouped, dt, sizeof dt), from);
    }
    const char *m = cg_errmsg(ctx), *colon = strchr(m, ':');
    for (int i = 0; colon && i < d->in.ntensors; i++)
        if (a[i].present && strlen(d->t[i].name) == (size_t)(colon - m) &&
            !strncmp(m, d->t[i].name, (size_t)(colon - m)))
            return run_fail("%s%s", a[i].path, colon);
    return run_fail("%s", m);
}

/* Set the layout, the scalar options and cu_seqlens of an args struct of d. */
static void args_common(const run_opts *o, const cli_op *d, void *args, const cg_tensor *cu) {
    cg_layout *layout = cg_op_args_layout(d->op, args);
    if (layout) *layout = o->layout;
    for (int k = 0; k < d->in.nscalars; k++)
        if (!strcmp(d->in.scalars[k], "delta_softplus")) *cg_op_args_scalar(d->op, args, k) = o->softplus;
    if (d->in.has_varlen) *cg_op_args_tensor(d->op, args, d->in.ntensors) = *cu;
}

/* Run the op family's forward (and with --grad its backward) on the arrays of o->in. The
 * tensors, their shapes and which outputs exist come from the op table (cg_op_describe). */
static int run_op(const run_opts *o, cg_context *ctx, const cg_exec *ex, run_outs *os) {
    const cli_op *fwd = &o->fwd, *bwd = &o->bwd;
    const cli_op *all = o->grad ? bwd : fwd; /* its inputs include the forward's */
    run_arr a[CLI_OP_MAXT];
    memset(a, 0, sizeof a);
    int rc = 0;
    /* --cu-seqlens: the offsets (int64 in memory, whatever the file's width); the library
     * checks their values and names the first bad one */
    cg_npy_index cu;
    memset(&cu, 0, sizeof cu);
    cg_tensor cu_t;
    memset(&cu_t, 0, sizeof cu_t);
    if (o->cu) {
        char err[RUN_ERRLEN];
        if (cg_npy_read_index(o->cu, &cu, err, sizeof err) != 0) return run_fail("--cu-seqlens %s", err);
        cu_t = cg_tensor_contiguous(cu.v, CG_I64, 1, &cu.n);
    }
    const int64_t nseq = cu.n > 1 ? cu.n - 1 : 0; /* the states' first extent */
    cli_args args[2];
    memset(args, 0, sizeof args);
    /* inputs, by the name of their file */
    for (int i = 0; i < all->in.ntensors && !rc; i++) {
        const cg_tensor_info *t = &all->t[i];
        if (t->output) continue;
        const int grad_only = cli_op_tensor(fwd, t->name) < 0;
        rc = arr_load(o, &a[i], t->file, !t->optional, grad_only ? " (needed by --grad)" : NULL);
        *cg_op_args_tensor(all->op, &args[0], i) = in_tensor(&a[i]);
    }
    /* the library checks the inputs (outputs not made yet) and says the call's shape */
    cg_shape sh;
    memset(&sh, 0, sizeof sh);
    if (!rc) args_common(o, all, &args[0], &cu_t);
    if (!rc && cg_shape_of(ctx, all->op, &args[0], &sh) != CG_OK) rc = shape_fail(ctx, all, a, o->layout, nseq);
    for (int i = 0; i < all->in.ntensors && !rc;
         i++) { /* storage: --dtype or the file's (16-bit capable), else float32 */
        if (!a[i].present) continue;
        const int cap16 = (all->t[i].flags & CG_TENSOR_HALF) != 0;
        cg_dtype dt = cap16 && o->dtype >= 0                     ? (cg_dtype)o->dtype
                      : cap16 && is_half((cg_dtype)a[i].a.dtype) ? (cg_dtype)a[i].a.dtype
                                                                 : CG_F32;
        if (arr_store(&a[i], dt)) rc = run_fail("out of memory for %s", a[i].path);
        else if (a[i].a.dtype != (int)dt && a[i].a.dtype != CG_F64)
            fprintf(stderr, "chunkgen run: note: %s holds %s values; %s to %s%s\n", a[i].path, np_name(a[i].a.dtype),
                    is_half(dt) ? "rounded" : "widened", np_name(dt), cap16 ? "" : " (this tensor stays float32)");
    }
    if (rc) goto done;

    /* both passes' args: the inputs, the scalars, the outputs that exist */
    int oom = 0;
    const cli_op *pass[2] = {fwd, bwd};
    const int npass = o->grad ? 2 : 1;
    for (int p = 0; p < npass; p++) {
        const cli_op *d = pass[p];
        void *ap = &args[p];
        memset(ap, 0, sizeof args[p]);
        args_common(o, d, ap, &cu_t);
        int dt[CLI_OP_MAXT];
        cg_dtype want[CLI_OP_MAXT];
        for (int i = 0; i < d->in.ntensors; i++) {
            const int j = cli_op_tensor(all, d->t[i].name);
            dt[i] = !d->t[i].output && a[j].present ? (int)a[j].dt : -1;
            if (!d->t[i].output) *cg_op_args_tensor(d->op, ap, i) = in_tensor(&a[j]);
        }
        if (cg_op_dtypes(NULL, d->op, dt, want) != CG_OK) /* a bad mix: the call reports it */
            for (int i = 0; i < d->in.ntensors; i++) want[i] = CG_F32;
        for (int i = 0; i < d->in.ntensors; i++) {
            const cg_tensor_info *t = &d->t[i];
            if (!t->output) continue;
            /* optional outputs: gradients only of the inputs given; others (hT) always */
            if (t->optional && t->grad_of && !a[cli_op_tensor(all, t->grad_of)].present) continue;
            int64_t shape[4];
            const int nd = want_shape(d, i, &sh, shape);
            *cg_op_args_tensor(d->op, ap, i) = out_add(os, t->name, want[i], nd, shape, &oom);
        }
    }
    if (oom) {
        rc = run_fail("out of memory allocating the outputs");
        goto done;
    }
    for (int p = 0; p < npass && !rc; p++) {
        const cli_op *d = pass[p];
        char cbuf[1024], what[32], why[512];
        snprintf(what, sizeof what, "%s %s", d->in.family, d->in.bwd ? "backward" : "forward");
        cg_exec px = *ex;
        if (cg_cli_config_for(ex->config, d->in.name, cbuf, sizeof cbuf, &px.config, why, sizeof why) < 0) {
            rc = 2;
            run_fail("--config: %s", why);
            break;
        }
        cg_status st = cg_run(ctx, d->op, &args[p], &px);
        if (st != CG_OK) {
            rc = lib_fail(ctx, what, st, ex);
            break;
        }
        say_dispatch(o, ctx, what, d->op, &args[p]);
    }
done:
    for (int i = 0; i < CLI_OP_MAXT; i++) arr_free(&a[i]);
    cg_npy_index_free(&cu);
    return rc;
}

int cg_cmd_run(int argc, char **argv) {
    run_opts o;
    run_usage_fill();
    int rc = parse_opts(argc, argv, &o);
    if (rc < 0) return 0; /* --help */
    if (rc) return rc;

    cg_context *ctx = NULL;
    cg_status st = cg_context_create(&ctx);
    if (st != CG_OK) return run_fail("cannot create a context: %s", cg_status_str(st));
    if (o.threads >= 0 && (st = cg_context_set_threads(ctx, o.threads)) != CG_OK) {
        rc = run_fail("--threads %d: %s", o.threads, cg_errmsg(ctx));
        cg_context_free(ctx);
        return rc;
    }
    cg_exec ex;
    memset(&ex, 0, sizeof ex);
    ex.backend = o.backend;
    ex.config = o.config;

    run_outs os;
    memset(&os, 0, sizeof os);
    rc = run_op(&o, ctx, &ex, &os);
    if (!rc) rc = outs_write(&o, &os);
    outs_free(&os);
    cg_context_free(ctx);
    return rc;
}
