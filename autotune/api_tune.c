/* api_tune.c -- cg_tune and cg_config_lookup (include/chunkgen.h, "tuning"): the public
 * shape (cg_shape) in, the tuner's shape (cg_tune_shape) inside. Nothing else in the
 * library calls into this file. */
#include "autotune.h"
#include "abi.h"
#include "ops.h"

#include <stddef.h>
#include <string.h>

/* The tuner's shape of a public one: its op's extents by symbol, the dtype signature of
 * its 16-bit tensors, the varlen class. dir: 1 forward, 2 backward (the shape's op). */
static cg_status tune_shape_of(cg_context *ctx, const char *what, const cg_shape *in, cg_tune_shape *s, int *dir,
                               cg_op *op) {
    cg_shape sh;
    cg_status st = in ? cg__abi_in(ctx, what, &sh, sizeof sh, in) : cg__err(ctx, CG_EINVAL, "%s: NULL", what);
    if (st != CG_OK) return st;
    if ((unsigned)sh.op >= (unsigned)CG_OP_COUNT)
        return cg__err(ctx, CG_EINVAL, "%s.op: %d is not an op (expected 0 .. %d)", what, (int)sh.op, CG_OP_COUNT - 1);
    const cg_op_desc *d = cg__op_desc(sh.op);
    cg__tune_shape_init(s, sh.op);
    cg_shape *ts = &s->shape;
    for (int i = 1; i < CG_SYM_COUNT; i++) /* the op's symbols */
        if (d->dim_off[i] != (size_t)-1) ts->dim[i] = sh.dim[i];
    if (ts->dim[CG_SYM_G] < 1) ts->dim[CG_SYM_G] = 1; /* ungrouped: one group */
    for (int i = 0; i < d->nkey; i++)
        if (sh.dim[d->key[i]] < 1)
            return cg__err(ctx, CG_EINVAL, "%s: %s = %lld but expected a positive extent", what, cg_sym_name(d->key[i]),
                           (long long)sh.dim[d->key[i]]);
    const int64_t B = ts->dim[CG_SYM_B], T = ts->dim[d->seq];
    if (B < 1 || T < 1)
        return cg__err(ctx, CG_EINVAL, "%s: B = %lld, %s = %lld but expected positive extents", what, (long long)B,
                       cg_sym_name(d->seq), (long long)T);
    if (sh.dtype == CG_F64)
        return cg__err(ctx, CG_EINVAL, "%s.dtype: f64 runs on the ref backend only, which has nothing to tune", what);
    ts->dtype = sh.dtype, ts->half = sh.half, ts->given = sh.given; /* the dtype signature's */
    if (sh.nseq > 0) { /* varlen: B = 1, T the packed total, the longest sequence's class */
        if (B != 1 || sh.longest < 1)
            return cg__err(ctx, CG_EINVAL, "%s: a varlen shape needs B = 1 and longest=N (got B = %lld, longest %lld)",
                           what, (long long)B, (long long)sh.longest);
        ts->nseq = sh.nseq;
        ts->longest = sh.longest < T ? sh.longest : T;
    }
    *dir = d->bwd ? 2 : 1;
    *op = sh.op;
    return CG_OK;
}

/* ------------------------------------------------------------ shape sets
 * The built-in sets are the op table's data (cg_op_desc.seeds, seq_gpu, seq_cpu: each
 * family's row says its own): every family in the table's order, each seed at each of the
 * family's sequence lengths for the backend. */

/* Built-in shape i of backend b's set as shape text into buf (its name in *name); 0 past
 * the end. */
static int builtin_at(cg_backend b, int i, char *buf, size_t cap, const char **name) {
    const cg_op_desc *d;
    for (int f = 0; (d = cg__tune_family_at(f)) != NULL; f++) {
        const int64_t *seq = b == CG_BACKEND_CPU ? d->seq_cpu : d->seq_gpu;
        for (int k = 0; d->seeds && d->seeds[k].items; k++)
            for (int q = 0; q < 4 && seq[q]; q++)
                if (i-- == 0) {
                    snprintf(buf, cap, "%s:%s,%s=%lld", d->name, d->seeds[k].items, cg_sym_name(d->seq),
                             (long long)seq[q]);
                    *name = d->seeds[k].name;
                    return 1;
                }
    }
    return 0;
}

static int builtin_count(cg_backend b) {
    char text[CG_SHAPE_TEXT_MAX];
    const char *name;
    int n = 0;
    while (builtin_at(b, n, text, sizeof text, &name)) n++;
    return n;
}

static const char *tune_backend(cg_context *ctx, cg_backend b) {
    if (b == CG_BACKEND_AUTO) {
        cg_tune_key k;
        if (cg__tune_device_key(ctx, "cuda", &k) == CG_OK) return "cuda";
        ctx->errmsg[0] = '\0';
        return "cpu";
    }
    if (b == CG_BACKEND_CPU || b == CG_BACKEND_CUDA || b == CG_BACKEND_EMULATE) return cg_backend_name(b);
    return NULL;
}

static cg_status tune(cg_context *ctx, const cg_shape *shapes, int nshapes, const cg_tune_options *opts,
                      cg_tune_summary *out) {
    cg_tune_options o;
    cg_status st = cg__abi_in(ctx, "opts", &o, sizeof o, opts);
    if (st != CG_OK) return st;
    if (nshapes < 0 || (nshapes && !shapes))
        return cg__err(ctx, CG_EINVAL, "shapes: %d shapes at %p (expected nshapes >= 0 and the array)", nshapes,
                       (const void *)shapes);
    if (o.directions < 0 || o.directions > 3)
        return cg__err(ctx, CG_EINVAL, "opts.directions: %d (expected 0, 1 forward, 2 backward or 3 both)",
                       o.directions);
    if (o.nshards > 1 && (o.shard < 0 || o.shard >= o.nshards))
        return cg__err(ctx, CG_EINVAL, "opts.shard: %d but expected 0 <= shard < nshards = %d", o.shard, o.nshards);
    const char *backend = tune_backend(ctx, o.backend);
    if (!backend)
        return cg__err(ctx, CG_EINVAL, "opts.backend: %s cannot be tuned (expected auto, cpu, cuda or emulate)",
                       cg_backend_name(o.backend));
    cg_tune_opts io;
    cg__tune_opts_default(&io);
    io.dir_mask = o.directions ? o.directions : 3;
    io.budget_s = o.budget_s, io.jobs = o.jobs, io.min_time_s = o.min_time_s, io.max_candidates = o.max_candidates;
    io.force = o.force, io.verify_T = o.verify_T, io.shard = o.shard, io.nshards = o.nshards;
    cg_tune_shape *ts = NULL;
    int n = 0;
    /* an array of the caller's cg_shape: its stride is the caller's sizeof (growth rule) */
    const size_t stride = nshapes && shapes[0].size ? shapes[0].size : sizeof(cg_shape);
    if (nshapes) {
        if (!(ts = calloc((size_t)nshapes, sizeof *ts))) return cg__err(ctx, CG_ENOMEM, "cg_tune: out of memory");
        for (int i = 0; st == CG_OK && i < nshapes; i++) {
            char what[32];
            snprintf(what, sizeof what, "shapes[%d]", i);
            int dir = 0;
            cg_op op;
            st = tune_shape_of(ctx, what, (const cg_shape *)((const char *)shapes + (size_t)i * stride), &ts[n], &dir,
                               &op);
            if (!o.directions) ts[n].dirs = dir;
            n++;
        }
    } else { /* the built-in set, of one family or both */
        cg_backend bk = CG_BACKEND_CPU;
        cg_backend_parse(backend, &bk);
        const int nb = builtin_count(bk);
        if (!(ts = calloc((size_t)nb, sizeof *ts))) return cg__err(ctx, CG_ENOMEM, "cg_tune: out of memory");
        for (int i = 0; st == CG_OK && i < nb; i++) {
            cg_shape sh = {.size = sizeof sh};
            int dir = 0;
            cg_op op;
            char text[CG_SHAPE_TEXT_MAX];
            const char *name = "";
            builtin_at(bk, i, text, sizeof text, &name);
            if ((st = cg_shape_parse(ctx, text, &sh)) != CG_OK) break;
            if (o.family && strcmp(o.family, "all") && strcmp(o.family, cg__op_desc(sh.op)->family)) continue;
            if ((st = tune_shape_of(ctx, "built-in shape", &sh, &ts[n], &dir, &op)) != CG_OK) break;
            snprintf(ts[n].name, sizeof ts[n].name, "%s", name);
            n++;
        }
        if (st == CG_OK && !n && o.family)
            st = cg__err(ctx, CG_EINVAL, "opts.family: \"%s\" has no built-in shapes", o.family);
    }
    cg_tune_summary sum = {.size = sizeof sum};
    if (st == CG_OK) {
        cg_tune_sum is;
        st = cg__tune_run(ctx, backend, ts, n, &io, &is);
        sum.keys = is.keys, sum.tuned = is.tuned, sum.resumed = is.resumed, sum.cached = is.cached + is.kept_other;
        sum.unsupported = is.unsupported, sum.failed = is.failed, sum.skipped_budget = is.skipped_budget;
        sum.other_shards = is.other_shards, sum.candidates = is.candidates, sum.rejected = is.rejected;
        sum.seconds = is.seconds;
    }
    cg_backend_parse(backend, &sum.backend);
    free(ts);
    if (out && cg__abi_out(ctx, "summary", out, &sum, sizeof sum) != CG_OK && st == CG_OK) st = CG_EINVAL;
    return st;
}

cg_status cg_tune(cg_context *ctx, const cg_shape *shapes, int nshapes, const cg_tune_options *opts,
                  cg_tune_summary *summary) {
    if (!ctx || cg__ctx_enter(ctx, "cg_tune") != CG_OK) return CG_EINVAL;
    cg_status st = tune(ctx, shapes, nshapes, opts, summary);
    cg__ctx_leave(ctx);
    return st;
}

cg_status cg_config_lookup(cg_context *ctx, cg_backend backend, const cg_shape *shape, cg_tuned_config *out) {
    if (!ctx || cg__ctx_enter(ctx, "cg_config_lookup") != CG_OK) return CG_EINVAL;
    cg_tuned_config r = {.size = sizeof r, .source = "default"};
    cg_tune_shape s;
    int dir = 0;
    cg_op op = (cg_op)0;
    cg_status st = tune_shape_of(ctx, "shape", shape, &s, &dir, &op);
    if (st == CG_OK && backend != CG_BACKEND_CPU && backend != CG_BACKEND_CUDA && backend != CG_BACKEND_EMULATE)
        st = cg__err(ctx, CG_EINVAL, "backend: %s keeps no tuned configs (expected cpu, cuda or emulate)",
                     cg_backend_name(backend));
    cg_tune_key k;
    cg_cfg_source src = CG_SRC_DEFAULT;
    if (st == CG_OK)
        st = cg__tune_lookup_shape(ctx, cg_backend_name(backend), op, &s, r.config, sizeof r.config, &src, &k);
    if (st == CG_OK) {
        r.source = cg__cfg_source_name(src);
        cg__tune_key_brief(&k, r.key, sizeof r.key);
        char name[64];
        cg__tune_entry_file(&k, name, sizeof name);
        snprintf(r.path, sizeof r.path, "%s/%s", cg__tune_store_dir(ctx), name);
        snprintf(r.device, sizeof r.device, "%s", k.device);
        r.threads = k.threads, r.cc = k.cc;
        st = cg__abi_out(ctx, "out", out, &r, sizeof r);
    }
    cg__ctx_leave(ctx);
    return st;
}

cg_status cg_tune_builtin_shapes(cg_context *ctx, cg_backend backend, cg_shape *shapes, int cap, int *n) {
    if (!ctx || cg__ctx_enter(ctx, "cg_tune_builtin_shapes") != CG_OK) return CG_EINVAL;
    cg_status st = CG_OK;
    const char *b = tune_backend(ctx, backend);
    if (!b)
        st = cg__err(ctx, CG_EINVAL, "backend: %s cannot be tuned (expected auto, cpu, cuda or emulate)",
                     cg_backend_name(backend));
    if (st == CG_OK && (cap < 0 || (cap && !shapes) || !n))
        st = cg__err(ctx, CG_EINVAL, "shapes, cap, n: expected room for cap >= 0 shapes and a count");
    if (st == CG_OK) {
        cg_backend bk = CG_BACKEND_CPU;
        cg_backend_parse(b, &bk);
        const int nb = builtin_count(bk);
        const size_t stride = cap && shapes[0].size ? shapes[0].size : sizeof(cg_shape);
        for (int i = 0; st == CG_OK && i < nb && i < cap; i++) {
            cg_shape *out = (cg_shape *)((char *)shapes + (size_t)i * stride);
            char text[CG_SHAPE_TEXT_MAX];
            const char *name;
            builtin_at(bk, i, text, sizeof text, &name);
            out->size = stride;
            st = cg_shape_parse(ctx, text, out);
        }
        *n = nb;
    }
    cg__ctx_leave(ctx);
    return st;
}

cg_status cg_tune_backend(cg_context *ctx, cg_backend backend, cg_backend *out) {
    if (!ctx || cg__ctx_enter(ctx, "cg_tune_backend") != CG_OK) return CG_EINVAL;
    const char *b = tune_backend(ctx, backend);
    cg_status st = !out ? cg__err(ctx, CG_EINVAL, "out: NULL")
                   : b  ? cg_backend_parse(b, out)
                        : cg__err(ctx, CG_EINVAL, "backend: %s cannot be tuned (expected auto, cpu, cuda or emulate)",
                                  cg_backend_name(backend));
    cg__ctx_leave(ctx);
    return st;
}
