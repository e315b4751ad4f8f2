/* cmd_run.c -- `chunkgen run ssd|sscan`: run one op on .npy files.
 *
 * Inputs are float32 .npy files named after the op's arguments in the input directory;
 * outputs are written as .npy files named after the results. Every shape comes from
 * the arrays: the defining arrays (q and v for SSD, x, A and B for the selective scan)
 * fix the dimensions and every other array is checked against them, so a mismatch is
 * reported in terms of files before the library sees anything. */
#include "chunkgen.h"
#include "cli.h"
#include "npy.h"
#include "fsutil.h"
#include "../autotune/autotune.h"

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

static const char run_usage[] =
    "usage: chunkgen run ssd|sscan [options] --in DIR [--out DIR]\n"
    "       chunkgen run ssd|sscan [options] IN_DIR [OUT_DIR]\n"
    "\n"
    "Runs one op on float32 .npy files named after its inputs and writes .npy files\n"
    "named after its outputs (OUT_DIR defaults to IN_DIR and is created if missing).\n"
    "  ssd   reads  q k v log_alpha [h0] (and do [dhT] with --grad)\n"
    "        writes o hT (and dq dk dv dlog_alpha [dh0] with --grad)\n"
    "  sscan reads  x delta A B C [D] [z] [delta_bias] [h0] (and dy [dhT] with --grad)\n"
    "        writes y hT (and dx ddelta dA dB dC [dD] [dz] [ddelta_bias] [dh0] with --grad)\n"
    "Gradients are written only for the inputs that were given.\n"
    "\n"
    "options:\n"
    "  --backend auto|cpu|ref|emulate|cuda   backend (default auto)\n"
    "  --grad                  also run the backward pass\n"
    "  --delta-softplus        sscan: dt = softplus(delta + delta_bias)\n"
    "  --layout token|head     ssd: token-major [B,T,heads,dim] (default; alias bthd)\n"
    "                          or head-major [B,heads,T,dim] (alias bhtd)\n"
    "  --config k=v,...        pin a kernel/CPU config, e.g. chunk=64,threads=2; per pass\n"
    "                          with scopes: 'ssd_fwd:chunk=64;ssd_bwd:recompute=4' (the\n"
    "                          first part whose scope is the pass's op, ssd or sscan, or\n"
    "                          none, applies; a pass without one runs tuned/default)\n"
    "  --threads N             CPU threads (0 = all cores)\n"
    "  --verbose               print which backend and config ran\n"
    "  --in DIR, --out DIR     input and output directories\n";

/* ------------------------------------------------------------------ errors */

static int run_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_fail(const char *fmt, ...) {
    va_list ap;
    fputs("chunkgen run: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

static int run_usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_usage_err(const char *fmt, ...) {
    va_list ap;
    fputs("chunkgen run: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n(run `chunkgen run --help` for the usage)\n", stderr);
    return 2;
}

/* ----------------------------------------------------------------- options */

typedef struct run_opts {
    int is_ssd;
    cg_backend backend;
    int grad, softplus, verbose;
    cg_layout layout;
    int layout_given;
    const char *config;
    int threads;            /* -1: library default */
    const char *in, *out;
} run_opts;

/* 0 on success, else the exit code (2 usage, or -1 for --help printed). */
static int parse_opts(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->backend = CG_BACKEND_AUTO;
    o->layout = CG_LAYOUT_TOKEN_MAJOR;
    o->threads = -1;
    const char *op = NULL, *pos[2] = {NULL, NULL};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(run_usage, stdout);
            return -1;
        }
        if (a[0] != '-' || a[1] == '\0') {
            if (!op) op = a;
            else if (npos < 2) pos[npos++] = a;
            else return run_usage_err("unexpected argument '%s'", a);
            continue;
        }
        /* --name or --name=value */
        char name[32];
        const char *eq = strchr(a, '='), *val = NULL;
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        if (nlen >= sizeof name) return run_usage_err("unknown option '%s'", a);
        memcpy(name, a, nlen);
        name[nlen] = '\0';
        int takes = strcmp(name, "--backend") == 0 || strcmp(name, "--layout") == 0 ||
                    strcmp(name, "--config") == 0 || strcmp(name, "--threads") == 0 ||
                    strcmp(name, "--in") == 0 || strcmp(name, "--out") == 0;
        if (takes) {
            if (eq) val = eq + 1;
            else if (i + 1 < argc) val = argv[++i];
            else return run_usage_err("option %s needs a value", name);
        } else if (eq) {
            return run_usage_err("option %s takes no value", name);
        }
        if (strcmp(name, "--grad") == 0) o->grad = 1;
        else if (strcmp(name, "--delta-softplus") == 0) o->softplus = 1;
        else if (strcmp(name, "--verbose") == 0 || strcmp(name, "-v") == 0) o->verbose = 1;
        else if (strcmp(name, "--backend") == 0) {
            if (cg_backend_parse(val, &o->backend) != CG_OK)
                return run_usage_err("unknown backend '%s' (expected auto, cpu, ref, emulate or cuda)", val);
        } else if (strcmp(name, "--layout") == 0) {
            if (strcmp(val, "token") == 0 || strcmp(val, "bthd") == 0) o->layout = CG_LAYOUT_TOKEN_MAJOR;
            else if (strcmp(val, "head") == 0 || strcmp(val, "bhtd") == 0) o->layout = CG_LAYOUT_HEAD_MAJOR;
            else return run_usage_err("unknown layout '%s' (expected token/bthd or head/bhtd)", val);
            o->layout_given = 1;
        } else if (strcmp(name, "--config") == 0) {
            o->config = val;
        } else if (strcmp(name, "--threads") == 0) {
            char *end;
            errno = 0;
            long t = strtol(val, &end, 10);
            if (errno || end == val || *end || t < 0 || t > 4096)
                return run_usage_err("--threads expects an integer in 0..4096, got '%s'", val);
            o->threads = (int)t;
        } else if (strcmp(name, "--in") == 0) {
            o->in = val;
        } else if (strcmp(name, "--out") == 0) {
            o->out = val;
        } else {
            return run_usage_err("unknown option '%s'", a);
        }
    }
    if (!op) return run_usage_err("missing the op: ssd or sscan");
    if (strcmp(op, "ssd") == 0) o->is_ssd = 1;
    else if (strcmp(op, "sscan") != 0) return run_usage_err("unknown op '%s' (expected ssd or sscan)", op);
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
    if (o->is_ssd && o->softplus) return run_usage_err("--delta-softplus applies to sscan only");
    if (!o->is_ssd && o->layout_given && o->layout != CG_LAYOUT_TOKEN_MAJOR)
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
} run_arr;

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
    if (!dims_fit(r->a.ndim, r->a.shape)) {
        char sb[96];
        cg_npy_free(&r->a);
        return run_fail("%s: shape %s is too large (its strides overflow 64 bits)", r->path,
                        cg_npy_shape_str(r->a.ndim, r->a.shape, sb, sizeof sb));
    }
    if (r->a.from_f64)
        fprintf(stderr, "chunkgen run: note: %s holds float64 values; rounded to float32\n", r->path);
    r->present = 1;
    return 0;
}

static void arr_free(run_arr *r) { cg_npy_free(&r->a); }

/* Check r against want (ndim dims); dims is e.g. "[B, T, G, dk]", from says where the
 * expected sizes came from. */
static int arr_expect(const run_arr *r, int ndim, const int64_t *want, const char *dims, const char *from) {
    if (!r->present) return 0;
    int ok = r->a.ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = r->a.shape[i] == want[i];
    if (ok) return 0;
    char got[96], exp[96];
    return run_fail("%s: shape %s but expected %s %s %s", r->path, cg_npy_shape_str(r->a.ndim, r->a.shape, got, sizeof got),
                    cg_npy_shape_str(ndim, want, exp, sizeof exp), dims, from);
}

/* A defining array only needs its rank checked. */
static int arr_rank(const run_arr *r, int ndim, const char *dims) {
    if (r->a.ndim == ndim) return 0;
    char got[96];
    return run_fail("%s: shape %s has %d dimension%s but expected %d %s", r->path,
                    cg_npy_shape_str(r->a.ndim, r->a.shape, got, sizeof got), r->a.ndim, r->a.ndim == 1 ? "" : "s",
                    ndim, dims);
}

static cg_tensor tensor_of(float *data, int ndim, const int64_t *shape) {
    cg_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = CG_F32;
    t.ndim = ndim;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t.shape[i] = shape[i];
        t.stride[i] = s;
        /* zero-size dims count as 1, as in cg_tensor_contiguous; dims_fit() has checked the
         * product, so this cannot overflow */
        if (__builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &s)) s = INT64_MAX;
    }
    return t;
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
    return tensor_of(r->a.data, r->a.ndim, r->a.shape);
}

/* ----------------------------------------------------------------- outputs */

#define RUN_MAX_OUT 12

typedef struct run_out {
    const char *name;
    int ndim;
    int64_t shape[4];
    float *data;
} run_out;

typedef struct run_outs {
    int n;
    run_out o[RUN_MAX_OUT];
} run_outs;

/* Add an output of the given shape (zeroed); returns its tensor or an absent one on OOM. */
static cg_tensor out_add(run_outs *os, const char *name, int ndim, const int64_t *shape, int *oom) {
    run_out *o = &os->o[os->n++];
    o->name = name;
    o->ndim = ndim;
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        o->shape[i] = shape[i];
        if (shape[i] < 0 || __builtin_mul_overflow(count, shape[i], &count)) count = -1;
    }
    if (count < 0 || !dims_fit(ndim, shape)) { /* too large: treated as out of memory */
        o->data = NULL;
        *oom = 1;
        return tensor_of(NULL, ndim, shape);
    }
    o->data = calloc(count > 0 ? (size_t)count : 1, sizeof(float));
    if (!o->data) *oom = 1;
    return tensor_of(o->data, ndim, shape);
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
    int e = cg__mkdirs(opt->out);
    if (e == ENOTDIR) return run_fail("output path %s is not a directory", opt->out);
    if (e) return run_fail("cannot create output directory %s: %s", opt->out, strerror(e));
    char path[RUN_MAX_OUT][PATH_MAX], tmp[RUN_MAX_OUT][PATH_MAX + 200];
    int staged = 0, rc = 0;
    for (int i = 0; i < os->n && !rc; i++) {
        const run_out *o = &os->o[i];
        char err[RUN_ERRLEN];
        arr_path(opt->out, o->name, path[i], sizeof path[i]);
        if (cg_npy_write_tmp(path[i], tmp[i], sizeof tmp[i], o->data, o->ndim, o->shape, err, sizeof err) != 0)
            rc = run_fail("%s; no output written", err);
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
        printf("wrote %s %s float32\n", path[i], cg_npy_shape_str(os->o[i].ndim, os->o[i].shape, sb, sizeof sb));
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
static void say_dispatch(const run_opts *o, cg_context *ctx, const char *what, const cg_tune_shape *s, int bwd) {
    if (!o->verbose) return;
    const char *d = cg_last_dispatch(ctx);
    fprintf(stderr, "chunkgen run: %s: %s\n", what, d);
    const char *b = strstr(d, "backend=");
    char backend[16] = "";
    if (b) sscanf(b + 8, "%15[a-z]", backend);
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda") && strcmp(backend, "emulate")) return;
    cg_tune_key k;
    if (cg__tune_key_make(ctx, backend, s, bwd, &k) != CG_OK) return;
    char brief[200], file[64], dev[200];
    cg__tune_key_brief(&k, brief, sizeof brief);
    cg__tune_entry_file(&k, file, sizeof file);
    if (!strcmp(backend, "cpu")) snprintf(dev, sizeof dev, "%d threads, %s", k.threads, k.device);
    else snprintf(dev, sizeof dev, "%s sm_%d", k.device, k.cc);
    fprintf(stderr, "chunkgen run: %s: tuned-config key %s (%s, chunkgen %s): %s/%s\n", what, brief, dev, k.version,
            cg__tune_store_dir(ctx), file);
}

enum { SSD_Q, SSD_K, SSD_V, SSD_LA, SSD_H0, SSD_DO, SSD_DHT, SSD_N };

/* The part of --config that applies to op ("ssd_fwd" ...) in buf, or NULL when none
 * does; -1 for a scope that names no op. */
static int pass_config(const char *cfg, const char *op, char *buf, size_t cap, const char **out) {
    *out = NULL;
    if (!cfg || !strchr(cfg, ':')) {
        *out = cfg;
        return 0;
    }
    static const char *const scopes[] = {"ssd", "sscan", "ssd_fwd", "ssd_bwd", "sscan_fwd", "sscan_bwd"};
    const size_t famlen = strchr(op, '_') ? (size_t)(strchr(op, '_') - op) : strlen(op);
    for (const char *s = cfg; *s;) {
        const char *end = strchr(s, ';');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', len), *eq = memchr(s, '=', len);
        const char *body = s;
        int applies = 1;
        if (colon && (!eq || colon < eq)) {
            size_t sl = (size_t)(colon - s);
            int known = 0;
            for (size_t i = 0; i < sizeof scopes / sizeof scopes[0]; i++)
                known |= strlen(scopes[i]) == sl && !strncmp(s, scopes[i], sl);
            if (!known) {
                run_fail("--config: unknown scope \"%.*s\" (expected ssd, sscan, ssd_fwd, ssd_bwd, sscan_fwd or "
                         "sscan_bwd before ':')", (int)sl, s);
                return -1;
            }
            applies = (sl == strlen(op) && !strncmp(s, op, sl)) || (sl == famlen && !strncmp(s, op, sl));
            body = colon + 1;
        }
        if (applies && !*out) {
            size_t bl = (size_t)(s + len - body);
            if (bl >= cap) bl = cap - 1;
            memcpy(buf, body, bl);
            buf[bl] = 0;
            *out = buf;
        }
        s += len + (end ? 1 : 0);
    }
    return 0;
}

static int run_ssd(const run_opts *o, cg_context *ctx, const cg_exec *ex, run_outs *os) {
    static const char *names[SSD_N] = {"q", "k", "v", "log_alpha", "h0", "do", "dhT"};
    run_arr a[SSD_N];
    memset(a, 0, sizeof a);
    int rc = 0;
    const char *needgrad = " (needed by --grad)";
    for (int i = 0; i < SSD_N && !rc; i++) {
        if ((i == SSD_DO || i == SSD_DHT) && !o->grad) continue;
        int req = i == SSD_Q || i == SSD_K || i == SSD_V || i == SSD_LA || i == SSD_DO;
        rc = arr_load(o, &a[i], names[i], req, i == SSD_DO ? needgrad : NULL);
    }
    const int hm = o->layout == CG_LAYOUT_HEAD_MAJOR;
    const char *qdims = hm ? "[B, G, T, dk]" : "[B, T, G, dk]";
    const char *vdims = hm ? "[B, H, T, dv]" : "[B, T, H, dv]";
    const char *ladims = hm ? "[B, H, T]" : "[B, T, H]";
    /* Shapes from q and v. */
    if (!rc) rc = arr_rank(&a[SSD_Q], 4, qdims);
    if (!rc) rc = arr_rank(&a[SSD_V], 4, vdims);
    int64_t B = 0, T = 0, G = 0, H = 0, dk = 0, dv = 0;
    if (!rc) {
        const int64_t *qs = a[SSD_Q].a.shape, *vs = a[SSD_V].a.shape;
        B = qs[0], T = qs[hm ? 2 : 1], G = qs[hm ? 1 : 2], dk = qs[3];
        H = vs[hm ? 1 : 2], dv = vs[3];
        int64_t want_v[4] = {B, hm ? H : T, hm ? T : H, dv};
        rc = arr_expect(&a[SSD_V], 4, want_v, vdims, "(B, T like q.npy)");
    }
    if (!rc && G > 0 && H % G != 0)
        rc = run_fail("%s: H = %lld heads is not a multiple of G = %lld groups (q.npy)", a[SSD_V].path, (long long)H,
                      (long long)G);
    int64_t qshape[4] = {B, hm ? G : T, hm ? T : G, dk};
    int64_t vshape[4] = {B, hm ? H : T, hm ? T : H, dv};
    int64_t lashape[3] = {B, hm ? H : T, hm ? T : H};
    int64_t hshape[4] = {B, H, dk, dv};
    const char *hfrom = "(B, dk like q.npy; H, dv like v.npy)";
    if (!rc) rc = arr_expect(&a[SSD_K], 4, qshape, qdims, "like q.npy");
    if (!rc) rc = arr_expect(&a[SSD_LA], 3, lashape, ladims, "(B, T like q.npy; H like v.npy)");
    if (!rc) rc = arr_expect(&a[SSD_H0], 4, hshape, "[B, H, dk, dv]", hfrom);
    if (!rc) rc = arr_expect(&a[SSD_DO], 4, vshape, vdims, "like v.npy");
    if (!rc) rc = arr_expect(&a[SSD_DHT], 4, hshape, "[B, H, dk, dv]", hfrom);
    if (rc) goto done;

    int oom = 0;
    cg_ssd_fwd_args fa;
    memset(&fa, 0, sizeof fa);
    fa.layout = o->layout;
    fa.q = in_tensor(&a[SSD_Q]);
    fa.k = in_tensor(&a[SSD_K]);
    fa.v = in_tensor(&a[SSD_V]);
    fa.log_alpha = in_tensor(&a[SSD_LA]);
    fa.h0 = in_tensor(&a[SSD_H0]);
    fa.o = out_add(os, "o", 4, vshape, &oom);
    fa.hT = out_add(os, "hT", 4, hshape, &oom);
    cg_ssd_bwd_args ba;
    memset(&ba, 0, sizeof ba);
    if (o->grad) {
        ba.layout = o->layout;
        ba.q = fa.q, ba.k = fa.k, ba.v = fa.v, ba.log_alpha = fa.log_alpha, ba.h0 = fa.h0;
        ba.dout = in_tensor(&a[SSD_DO]);
        ba.dhT = in_tensor(&a[SSD_DHT]);
        ba.dq = out_add(os, "dq", 4, qshape, &oom);
        ba.dk = out_add(os, "dk", 4, qshape, &oom);
        ba.dv = out_add(os, "dv", 4, vshape, &oom);
        ba.dlog_alpha = out_add(os, "dlog_alpha", 3, lashape, &oom);
        if (a[SSD_H0].present) ba.dh0 = out_add(os, "dh0", 4, hshape, &oom);
    }
    if (oom) {
        rc = run_fail("out of memory allocating the outputs");
        goto done;
    }
    char cbuf[1024];
    cg_exec px = *ex;
    if (pass_config(ex->config, "ssd_fwd", cbuf, sizeof cbuf, &px.config)) {
        rc = 2;
        goto done;
    }
    cg_status st = cg_ssd_fwd(ctx, &fa, &px);
    if (st != CG_OK) {
        rc = lib_fail(ctx, "ssd forward", st, ex);
        goto done;
    }
    cg_tune_shape ts;
    memset(&ts, 0, sizeof ts);
    ts.B = B, ts.T = T, ts.G = G, ts.H = H, ts.dk = dk, ts.dv = dv;
    say_dispatch(o, ctx, "ssd forward", &ts, 0);
    if (o->grad) {
        px = *ex;
        if (pass_config(ex->config, "ssd_bwd", cbuf, sizeof cbuf, &px.config)) {
            rc = 2;
            goto done;
        }
        st = cg_ssd_bwd(ctx, &ba, &px);
        if (st != CG_OK) {
            rc = lib_fail(ctx, "ssd backward", st, ex);
            goto done;
        }
        say_dispatch(o, ctx, "ssd backward", &ts, 1);
    }
done:
    for (int i = 0; i < SSD_N; i++) arr_free(&a[i]);
    return rc;
}

enum { SC_X, SC_DELTA, SC_A, SC_B, SC_C, SC_D, SC_Z, SC_BIAS, SC_H0, SC_DY, SC_DHT, SC_N };

static int run_sscan(const run_opts *o, cg_context *ctx, const cg_exec *ex, run_outs *os) {
    static const char *names[SC_N] = {"x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0", "dy", "dhT"};
    run_arr a[SC_N];
    memset(a, 0, sizeof a);
    int rc = 0;
    for (int i = 0; i < SC_N && !rc; i++) {
        if ((i == SC_DY || i == SC_DHT) && !o->grad) continue;
        int req = i <= SC_C || i == SC_DY;
        rc = arr_load(o, &a[i], names[i], req, i == SC_DY ? " (needed by --grad)" : NULL);
    }
    if (!rc) rc = arr_rank(&a[SC_X], 3, "[B, L, D]");
    if (!rc) rc = arr_rank(&a[SC_A], 2, "[D, N]");
    int64_t Bt = 0, L = 0, D = 0, N = 0, G = 1;
    int grouped = 0;
    if (!rc) {
        Bt = a[SC_X].a.shape[0], L = a[SC_X].a.shape[1], D = a[SC_X].a.shape[2];
        N = a[SC_A].a.shape[1];
        int64_t want_a[2] = {D, N};
        rc = arr_expect(&a[SC_A], 2, want_a, "[D, N]", "(D like x.npy)");
    }
    if (!rc) {
        const run_arr *b = &a[SC_B];
        grouped = b->a.ndim == 4;
        if (grouped) G = b->a.shape[2];
        int64_t want_b[4] = {Bt, L, grouped ? G : N, N};
        if (b->a.ndim != 3 && b->a.ndim != 4) {
            char got[96], exp[96];
            rc = run_fail("%s: shape %s but expected %s [B, L, N] or [B, L, G, N] (B, L like x.npy; N like A.npy)",
                          b->path, cg_npy_shape_str(b->a.ndim, b->a.shape, got, sizeof got),
                          cg_npy_shape_str(3, want_b, exp, sizeof exp));
        } else {
            rc = arr_expect(b, grouped ? 4 : 3, want_b, grouped ? "[B, L, G, N]" : "[B, L, N]",
                            "(B, L like x.npy; N like A.npy)");
        }
        if (!rc && grouped && (G == 0 || D % G != 0))
            rc = run_fail("%s: G = %lld groups do not divide D = %lld channels of x.npy", b->path, (long long)G,
                          (long long)D);
    }
    int64_t xshape[3] = {Bt, L, D}, bshape[4] = {Bt, L, grouped ? G : N, N}, ashape[2] = {D, N};
    int64_t dshape[1] = {D}, hshape[3] = {Bt, D, N};
    int bnd = grouped ? 4 : 3;
    const char *bdims = grouped ? "[B, L, G, N]" : "[B, L, N]";
    if (!rc) rc = arr_expect(&a[SC_DELTA], 3, xshape, "[B, L, D]", "like x.npy");
    if (!rc) rc = arr_expect(&a[SC_C], bnd, bshape, bdims, "like B.npy");
    if (!rc) rc = arr_expect(&a[SC_D], 1, dshape, "[D]", "(D like x.npy)");
    if (!rc) rc = arr_expect(&a[SC_Z], 3, xshape, "[B, L, D]", "like x.npy");
    if (!rc) rc = arr_expect(&a[SC_BIAS], 1, dshape, "[D]", "(D like x.npy)");
    if (!rc) rc = arr_expect(&a[SC_H0], 3, hshape, "[B, D, N]", "(B, D like x.npy; N like A.npy)");
    if (!rc) rc = arr_expect(&a[SC_DY], 3, xshape, "[B, L, D]", "like x.npy");
    if (!rc) rc = arr_expect(&a[SC_DHT], 3, hshape, "[B, D, N]", "(B, D like x.npy; N like A.npy)");
    if (rc) goto done;

    int oom = 0;
    cg_sscan_fwd_args fa;
    memset(&fa, 0, sizeof fa);
    fa.x = in_tensor(&a[SC_X]);
    fa.delta = in_tensor(&a[SC_DELTA]);
    fa.A = in_tensor(&a[SC_A]);
    fa.B = in_tensor(&a[SC_B]);
    fa.C = in_tensor(&a[SC_C]);
    fa.D = in_tensor(&a[SC_D]);
    fa.z = in_tensor(&a[SC_Z]);
    fa.delta_bias = in_tensor(&a[SC_BIAS]);
    fa.h0 = in_tensor(&a[SC_H0]);
    fa.delta_softplus = o->softplus;
    fa.y = out_add(os, "y", 3, xshape, &oom);
    fa.hT = out_add(os, "hT", 3, hshape, &oom);
    cg_sscan_bwd_args ba;
    memset(&ba, 0, sizeof ba);
    if (o->grad) {
        ba.x = fa.x, ba.delta = fa.delta, ba.A = fa.A, ba.B = fa.B, ba.C = fa.C;
        ba.D = fa.D, ba.z = fa.z, ba.delta_bias = fa.delta_bias, ba.h0 = fa.h0;
        ba.delta_softplus = o->softplus;
        ba.dy = in_tensor(&a[SC_DY]);
        ba.dhT = in_tensor(&a[SC_DHT]);
        ba.dx = out_add(os, "dx", 3, xshape, &oom);
        ba.ddelta = out_add(os, "ddelta", 3, xshape, &oom);
        ba.dA = out_add(os, "dA", 2, ashape, &oom);
        ba.dB = out_add(os, "dB", bnd, bshape, &oom);
        ba.dC = out_add(os, "dC", bnd, bshape, &oom);
        if (a[SC_D].present) ba.dD = out_add(os, "dD", 1, dshape, &oom);
        if (a[SC_Z].present) ba.dz = out_add(os, "dz", 3, xshape, &oom);
        if (a[SC_BIAS].present) ba.ddelta_bias = out_add(os, "ddelta_bias", 1, dshape, &oom);
        if (a[SC_H0].present) ba.dh0 = out_add(os, "dh0", 3, hshape, &oom);
    }
    if (oom) {
        rc = run_fail("out of memory allocating the outputs");
        goto done;
    }
    char cbuf[1024];
    cg_exec px = *ex;
    if (pass_config(ex->config, "sscan_fwd", cbuf, sizeof cbuf, &px.config)) {
        rc = 2;
        goto done;
    }
    cg_status st = cg_sscan_fwd(ctx, &fa, &px);
    if (st != CG_OK) {
        rc = lib_fail(ctx, "sscan forward", st, ex);
        goto done;
    }
    cg_tune_shape ts;
    memset(&ts, 0, sizeof ts);
    ts.sscan = 1, ts.B = Bt, ts.T = L, ts.D = D, ts.N = N, ts.G = G;
    say_dispatch(o, ctx, "sscan forward", &ts, 0);
    if (o->grad) {
        px = *ex;
        if (pass_config(ex->config, "sscan_bwd", cbuf, sizeof cbuf, &px.config)) {
            rc = 2;
            goto done;
        }
        st = cg_sscan_bwd(ctx, &ba, &px);
        if (st != CG_OK) {
            rc = lib_fail(ctx, "sscan backward", st, ex);
            goto done;
        }
        say_dispatch(o, ctx, "sscan backward", &ts, 1);
    }
done:
    for (int i = 0; i < SC_N; i++) arr_free(&a[i]);
    return rc;
}

int cg_cmd_run(int argc, char **argv) {
    run_opts o;
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
    rc = o.is_ssd ? run_ssd(&o, ctx, &ex, &os) : run_sscan(&o, ctx, &ex, &os);
    if (!rc) rc = outs_write(&o, &os);
    outs_free(&os);
    cg_context_free(ctx);
    return rc;
}
