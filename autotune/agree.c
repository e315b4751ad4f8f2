/* agree.c -- tuning that agrees across processes and machines: the deterministic choice
 * between entries of one key (the merge rule of import, of concurrent tunes and of
 * sharded tunes), the Lua validity check of a stored config, the shard of a key, and the
 * test-only fake measurement source.
 *
 * Merge rule (cg__tune_entry_pick): a finished entry beats an unfinished one; among
 * finished ones, the one whose best median is fastest wins unless the others are within
 * its noise (its IQR or the other's, whichever is larger, clamped to [CG_TUNE_TIE_REL,
 * CG_TUNE_TIE_MAX] of its median): those tie, and a tie goes to the best config's place
 * in the space's order (the default first), then the config text, more repetitions, the
 * smaller median, then creation time and host. The choice depends only on the set of
 * entries, never on the order they arrive in, so every rank, shard and merge of the same
 * measurements ends with the same winner, and noise alone cannot flip it. */
#include "autotune.h"
#include "env.h"
#include "ops.h"
#include "cpu/cpu_isa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- merge rule */

static int finished(const cg_tune_entry *e) { return e->complete && e->best >= 0 && e->best < e->ncand; }

static double best_ms(const cg_tune_entry *e) { return finished(e) ? e->cand[e->best].median_ms : INFINITY; }

/* Strict tie-break order: < 0 when a comes first. */
static int tie_cmp(const cg_tune_entry *a, const cg_tune_entry *b) {
    if (finished(a) != finished(b)) return finished(a) ? -1 : 1;
    if (!finished(a)) return strcmp(a->created, b->created) > 0 ? -1 : (strcmp(a->created, b->created) < 0);
    const cg_tune_cand *x = &a->cand[a->best], *y = &b->cand[b->best];
    int c;
    if (a->truncated != b->truncated) return a->truncated ? 1 : -1;
    if (x->order != y->order) return x->order < y->order ? -1 : 1;
    if ((c = strcmp(x->cfg, y->cfg))) return c;
    if (x->reps != y->reps) return x->reps > y->reps ? -1 : 1;
    if (x->median_ms != y->median_ms) return x->median_ms < y->median_ms ? -1 : 1;
    if ((c = strcmp(a->created, b->created))) return c;
    return strcmp(a->host, b->host);
}

int cg__tune_entry_pick(const cg_tune_entry *const *v, int n) {
    if (n <= 0) return -1;
    int fast = 0;
    for (int i = 1; i < n; i++) {
        double mi = best_ms(v[i]), mf = best_ms(v[fast]);
        if (mi < mf || (mi == mf && tie_cmp(v[i], v[fast]) < 0)) fast = i;
    }
    if (!finished(v[fast])) { /* none finished: the most recent unfinished one */
        int w = 0;
        for (int i = 1; i < n; i++)
            if (tie_cmp(v[i], v[w]) < 0) w = i;
        return w;
    }
    const double m0 = best_ms(v[fast]);
    int win = fast;
    for (int i = 0; i < n; i++) {
        if (i == fast || !finished(v[i])) continue;
        double noise = fmax(v[fast]->cand[v[fast]->best].iqr_ms, v[i]->cand[v[i]->best].iqr_ms);
        if (noise > CG_TUNE_TIE_MAX * m0) noise = CG_TUNE_TIE_MAX * m0;
        if (noise < CG_TUNE_TIE_REL * m0) noise = CG_TUNE_TIE_REL * m0;
        if (best_ms(v[i]) - m0 <= noise && tie_cmp(v[i], v[win]) < 0) win = i;
    }
    return win;
}

int cg__tune_entry_beats(const cg_tune_entry *a, const cg_tune_entry *b) {
    const cg_tune_entry *v[2] = {a, b};
    return cg__tune_entry_pick(v, 2) == 0;
}

/* ------------------------------------------------------------------ shards */

int cg__tune_shard_of(const cg_tune_key *k, int n) {
    if (n <= 1) return 0;
    /* The shape part of the key only: any machine, thread count or version agrees on
     * which shard a key belongs to. */
    cg_tune_key s = *k;
    memset(s.device, 0, sizeof s.device);
    memset(s.nvrtc, 0, sizeof s.nvrtc);
    memset(s.driver, 0, sizeof s.driver);
    memset(s.version, 0, sizeof s.version);
    s.cc = s.sm_count = s.threads = 0;
    char text[1024];
    cg__tune_key_text(&s, 1, text, sizeof text);
    return (int)(cg__tune_hash(text, strlen(text), 0) % (uint64_t)n);
}

/* ------------------------------------------------------------ fake timing */

int cg__tune_fake_timing(void) {
    const char *v = cg__env(CG_ENV_TUNE_FAKE_TIMING);
    return v && *v && strcmp(v, "0");
}

void cg__tune_fake_measure(const cg_tune_key *k, const char *cfg, cg_tune_cand *c) {
    char text[1400];
    cg__tune_key_text(k, 1, text, sizeof text);
    size_t n = strlen(text);
    snprintf(text + n, sizeof text - n, "|%s", cfg);
    uint64_t h = cg__tune_hash(text, strlen(text), 0);
    c->median_ms = 0.5 + (double)(h % 4096) / 256.0; /* 0.5 .. 16.5 ms */
    c->iqr_ms = 0.005 * c->median_ms;
    c->reps = 5;
}

/* ------------------------------------------------------------------ spaces */

const char *cg__tune_space_kernel(const char *backend, const cg_op_desc *op) {
    if (strcmp(backend, "cpu")) return op->name; /* a generated kernel per op: "ssd_fwd" */
    /* the CPU path's space covers both directions of the family: generator/cpu/<family>_cpu.lua */
    static __thread char name[48];
    snprintf(name, sizeof name, "%s_cpu", op->family);
    return name;
}

const cg_op_desc *cg__tune_op(const cg_tune_shape *s, int bwd) {
    const cg_op_desc *fam = cg__tune_family(s);
    for (int i = 0; i < CG_OP_COUNT; i++) {
        const cg_op_desc *d = cg__op_desc((cg_op)i);
        if (!strcmp(d->family, fam->family) && d->bwd == !!bwd) return d;
    }
    return fam;
}

int cg__tune_call_shape(const cg_tune_shape *s, int bwd, cg_shape *out) {
    memset(out, 0, sizeof *out);
    const cg_op_desc *d = cg__tune_op(s, bwd);
    out->size = sizeof *out;
    out->op = d->op;
    for (int i = 1; i < CG_SYM_COUNT; i++)
        if (d->dim_off[i] != (size_t)-1) out->dim[i] = cg__tune_shape_dim(s, (cg_sym)i);
    int groupable = 0;
    for (int i = 0; i < d->nt; i++) {
        if (d->t[i].optional) out->given |= (uint64_t)1 << i;
        groupable |= (d->t[i].flags & CG_TD_GROUPABLE) != 0;
    }
    for (int i = 0; i < d->nscalar; i++) out->scalars |= 1u << i;
    out->grouped = groupable && s->shape.dim[CG_SYM_G] > 1;
    /* The 16-bit tensors, from the shape's dtype signature over the tuner's problem. */
    out->dtype = CG_F32;
    int dt[CG_OP_MAX_TENSORS];
    char sig[32];
    cg__tune_shape_sig(s, sig, sizeof sig);
    if (cg__op_dtype_unsig(NULL, d, sig, dt) == CG_OK)
        for (int i = 0; i < d->nt; i++)
            if (dt[i] >= 0 && cg__dtype_half((cg_dtype)dt[i]))
                out->dtype = (cg_dtype)dt[i], out->half |= (uint64_t)1 << i;
    return bwd ? CG_KS_BWD : 0;
}

static const cg_kexec *kexec_of(const char *backend) {
    if (!strcmp(backend, "cuda")) return &cg__kexec_cuda;
    if (!strcmp(backend, "emulate")) return &cg__kexec_emu;
    return NULL;
}

cg_status cg__tune_space(cg_context *ctx, const cg_tune_key *key, const char *kernel, const cg_shape *shape, int flags,
                         cg_devinfo *dev, cg_cfg **cfgs, int *n, cg_cfg *def) {
    memset(dev, 0, sizeof *dev);
    memset(def, 0, sizeof *def);
    *cfgs = NULL;
    *n = 0;
    const cg_kexec *kx = kexec_of(key->backend);
    if (!kx) {
        snprintf(dev->name, sizeof dev->name, "%s", key->device);
        dev->sm_count = key->threads;
        snprintf(dev->isa, sizeof dev->isa, "%s", cg__cpu_isa_ops()->name); /* the variant the candidates run */
        return cg__tune_cpu_space(ctx, kernel, shape, flags, dev, cfgs, n, def);
    }
    cg_status st = kx->device(ctx, dev);
    if (st == CG_OK) st = cg__gen_space(ctx, kernel, shape, flags, dev, cfgs, n);
    if (st == CG_OK) {
        cg_plan plan;
        if (cg__gen_plan(ctx, kernel, shape, flags, dev, NULL, &plan) == CG_OK) {
            *def = plan.params;
            cg__plan_free(&plan);
        }
        ctx->errmsg[0] = '\0';
    }
    return st;
}

/* Same keys and values, in any order. */
static int cfg_same(const cg_cfg *a, const cg_cfg *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++) {
        const char *v = cg__cfg_str(b, a->kv[i].key, NULL);
        if (!v || strcmp(v, a->kv[i].val)) return 0;
    }
    return 1;
}

cg_status cg__tune_entry_check_space(cg_context *ctx, const cg_tune_entry *e, char *why, size_t cap) {
    if (e->best < 0 || !e->cand[e->best].cfg[0]) return CG_OK; /* the default config */
    const cg_tune_key *k = &e->key;
    const cg_op_desc *d = cg__tune_key_family(k); /* validated with the key: known */
    const int fam = cg__tune_family_index(d), bwd = !strcmp(k->dir, "bwd");
    /* The measured shape when it fits the key (the op table's key column), else the key's
     * own (batch 1, T = bucket). */
    cg_tune_shape s = e->shape;
    const int64_t T = cg__tune_shape_family(&s) == fam ? cg__tune_shape_seq(&s) : 0;
    int fits = T >= 1 && s.shape.dim[CG_SYM_B] >= 1 && T <= k->seq_bucket && cg__tune_bucket(T) == k->seq_bucket;
    for (int i = 0; i < d->nkey; i++) fits &= cg__tune_shape_dim(&s, d->key[i]) == cg__tune_key_dim(k, d->key[i]);
    if (!fits) {
        cg__tune_shape_init(&s, d->op);
        s.shape.dim[CG_SYM_B] = 1, s.shape.dim[d->seq] = k->seq_bucket;
        for (int i = 0; i < d->nkey; i++) s.shape.dim[d->key[i]] = cg__tune_key_dim(k, d->key[i]);
    }
    if (cg__tune_shape_set_sig(NULL, &s, k->dtype) != CG_OK) /* the key's dtype signature is the entry's */
        cg__tune_shape_set_sig(NULL, &s, "f32");
    cg_shape sh;
    const int flags = cg__tune_call_shape(&s, bwd, &sh);
    cg_devinfo dev;
    cg_cfg *cfgs = NULL, def, want;
    int n = 0;
    const char *kernel = cg__tune_space_kernel(k->backend, cg__tune_op(&s, bwd));
    cg_status st = cg__tune_space(ctx, k, kernel, &sh, flags, &dev, &cfgs, &n, &def);
    if (st != CG_OK) {
        snprintf(why, cap, "cannot check config %s against the %s constraints: %s", e->cand[e->best].cfg, kernel,
                 ctx->errmsg[0] ? ctx->errmsg : cg_status_str(st));
        ctx->errmsg[0] = '\0';
        free(cfgs);
        return st;
    }
    int ok = cg__cfg_parse(NULL, e->cand[e->best].cfg, &want) == CG_OK;
    int found = 0;
    for (int i = 0; ok && !found && i < n; i++) found = cfg_same(&want, &cfgs[i]);
    /* A CPU config stored before its space gained a key (ssd_cpu's heads) names fewer keys:
     * it runs with the space's default for the others, and that completed config is checked. */
    cg_cfg full;
    if (ok && !found && !strcmp(k->backend, "cpu") &&
        cg__gen_resolve(ctx, kernel, &sh, flags, &dev, &want, &full) == CG_OK)
        for (int i = 0; !found && i < n; i++) found = cfg_same(&full, &cfgs[i]);
    ctx->errmsg[0] = '\0';
    free(cfgs);
    if (found) return CG_OK;
    snprintf(why, cap, "config %s is not one the %s constraints accept for this key (%d valid configs)",
             e->cand[e->best].cfg, kernel, n);
    return CG_EINVAL;
}
