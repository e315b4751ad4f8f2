/* tuner.c -- `chunkgen tune`: enumerate, cg__tprob_verify, cg__tprob_measure, select, store.
 *
 * Per (shape, direction) -- one store key:
 *   1. the space: generator/cpu/<op>_cpu.lua for the CPU backend (cpu_space.c), the
 *      generator's kernel (cg__gen_space) for cuda/emulate, pruned by its constraints;
 *   2. a verification problem (same dk/dv/G/H or D/N/G, batch 1, a short T that still
 *      spans several chunks/segments) is run once on the float64 reference
 *      (CG_BACKEND_REF); every candidate's outputs -- forward: o and hT (y and hT); backward:
 *      every gradient -- must be within 1e-5 (forward) / 1e-4 (gradients) relative error;
 *   3. each candidate that verifies is timed on the full shape: one warm-up, then runs
 *      until a minimum time and count; median and IQR are kept. cuda/emulate: per run the
 *      L2 is flushed outside the timed region and the executor's timer (CUDA events)
 *      brackets the launches; cpu: the monotonic clock around the call. A candidate is rejected with a reason (compile, resources,
 *      launch, wrong, timeout) that is stored, so a resumed tune does not retry it;
 *   4. the fastest wins; candidates within noise of it tie and the first in the space's
 *      order wins the tie (cg__tune_select); every candidate's timing is kept;
 *   5. the entry is written after every candidate (complete = false), so an interrupted
 *      tune keeps what it measured and a rerun resumes; complete = true at the end.
 * For cuda/emulate, --jobs worker threads (own contexts, same cache directory) compile
 * the candidates ahead of the measuring thread, warming the binary cache. */
#include "tune_prob.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void cg__tune_opts_default(cg_tune_opts *o) {
    memset(o, 0, sizeof *o);
    o->op_mask = -1; /* every family */
    o->dir_mask = 3;
}

/* ------------------------------------------------------------ compile ahead
 * Generated backends: worker threads, each with its own context on the same cache
 * directory, instantiate and load every candidate once, so that the binary cache is warm
 * when the measuring thread gets to it. Their results are only a warm-up: the measuring
 * thread's own load decides (and records) a compile failure. */

typedef struct ahead {
    const cg_kexec *kx;
    const char *kernel;
    cg_shape shape;
    int flags;
    cg_devinfo dev;
    const cg_cfg *cfgs;
    int n;
    char cache_dir[4096];
    int threads;
    atomic_int next;
    atomic_int stop;
    pthread_t th[64];
    int started;
} ahead;

static void *ahead_main(void *arg) {
    ahead *a = arg;
    cg_context *w = NULL;
    if (cg__context_new(&w) != CG_OK) return NULL; /* compiles only: no config source */
    cg_context_set_cache_dir(w, a->cache_dir);
    cg_context_set_threads(w, 1);
    for (;;) {
        int i = atomic_fetch_add(&a->next, 1);
        if (i >= a->n || atomic_load(&a->stop)) break;
        cg_plan plan;
        if (cg__gen_plan(w, a->kernel, &a->shape, a->flags, &a->dev, &a->cfgs[i], &plan) == CG_OK) {
            void *mod = NULL;
            a->kx->load(w, &plan, &mod);
            cg__plan_free(&plan);
        }
    }
    cg_context_free(w);
    return NULL;
}

static void ahead_start(ahead *a, int jobs) {
    a->started = 0;
    int n = jobs < 64 ? jobs : 64;
    for (int i = 0; i < n; i++)
        if (pthread_create(&a->th[i], NULL, ahead_main, a) == 0) a->started++;
}

static void ahead_stop(ahead *a) {
    atomic_store(&a->stop, 1);
    for (int i = 0; i < a->started; i++) pthread_join(a->th[i], NULL);
    a->started = 0;
}

/* ------------------------------------------------------------------ output
 * Nothing is printed: each key is a task of the context's progress events (START, a STEP
 * per candidate, DONE with its result; MESSAGE for what happens on the way). */

typedef struct tstate {
    const struct tenv *env;
    const cg_tune_opts *o;
    const char *dir;
    double deadline; /* whole tune; 0: none */
    cg_tune_sum *sum;
    int ikey, nkeys;  /* the key's place in the run, 1-based */
    char what[200];   /* the key: "cpu ssd fwd T=2048" */
    const char *name; /* the shape's name, else the key's extents */
    char keyname[200];
} tstate;

static void event(tstate *ts, cg_progress_kind kind, cg_log_level level, const char *fmt, ...) CG_PRINTF(4, 5);
static void event(tstate *ts, cg_progress_kind kind, cg_log_level level, const char *fmt, ...) {
    if (!ts->env->ctx->progress) return;
    char text[CG_TUNE_CFG_TEXT + 400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    cg__progress(ts->env->ctx, (cg_progress){.kind = kind,
                                             .level = level,
                                             .task = ts->what,
                                             .subject = ts->name,
                                             .text = text,
                                             .index = ts->ikey,
                                             .count = ts->nkeys});
}

static void step(tstate *ts, int done, int total, const cg_tune_entry *e) {
    cg_context *ctx = ts->env->ctx;
    if (!ctx->progress) return;
    char best[CG_TUNE_CFG_TEXT + 40] = "";
    int b = cg__tune_select(e->cand, e->ncand, CG_TUNE_TIE_REL, NULL);
    if (b >= 0)
        snprintf(best, sizeof best, "best %.3f ms %s", e->cand[b].median_ms,
                 e->cand[b].cfg[0] ? e->cand[b].cfg : "(default)");
    cg__progress(ctx, (cg_progress){.kind = CG_PROGRESS_STEP,
                                    .level = CG_LOG_INFO,
                                    .task = ts->what,
                                    .subject = ts->name,
                                    .text = best,
                                    .index = ts->ikey,
                                    .count = ts->nkeys,
                                    .done = done,
                                    .total = total});
}

#define CONFIRM_TOP 3

/* Time the candidates top[0..n) of e round-robin, one run each per round, until each has
 * the minimum time and count; their medians and IQRs are replaced by these. */
static cg_status confirm(const tenv *env, tprob *p, cg_tune_entry *e, const int *top, int n, const mparams *mp) {
    double *t = malloc((size_t)n * (size_t)mp->max_reps * sizeof *t);
    double *total = calloc((size_t)n, sizeof *total);
    cg_cfg *cfgs = calloc((size_t)n, sizeof *cfgs);
    cg_status st = (t && total && cfgs) ? CG_OK : CG_ENOMEM;
    for (int i = 0; st == CG_OK && i < n; i++) st = cg__cfg_parse(env->ctx, e->cand[top[i]].cfg, &cfgs[i]);
    int reps = 0;
    while (st == CG_OK && reps < mp->max_reps) {
        int enough = reps >= mp->min_reps;
        for (int i = 0; i < n; i++) enough &= total[i] >= mp->min_time;
        if (enough) break;
        for (int i = 0; st == CG_OK && i < n; i++) {
            double dt = 0;
            st = cg__tprob_run_timed(env, p, &cfgs[i], &dt);
            t[i * mp->max_reps + reps] = dt;
            total[i] += dt;
        }
        reps++;
    }
    for (int i = 0; st == CG_OK && i < n; i++) {
        double *x = t + i * mp->max_reps;
        qsort(x, (size_t)reps, sizeof *x, cg__tune_cmp_dbl);
        cg_tune_cand *c = &e->cand[top[i]];
        c->median_ms = 1e3 * cg__tune_quantile(x, reps, 0.5);
        c->iqr_ms = 1e3 * (cg__tune_quantile(x, reps, 0.75) - cg__tune_quantile(x, reps, 0.25));
        c->reps = reps;
        if (!(c->median_ms > 0)) c->median_ms = 1e-6;
    }
    free(t);
    free(total);
    free(cfgs);
    return st;
}

/* ---------------------------------------------------------------- one key */

static void stamp(cg_tune_entry *e) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(e->created, sizeof e->created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char h[64] = "";
    gethostname(h, sizeof h - 1);
    snprintf(e->host, sizeof e->host, "%s", h);
}

/* Candidates of a precision class: fp32 admits ieee and 3xtf32, not plain tf32. */
static int precision_ok(const cg_tune_key *k, const cg_cfg *c) {
    const char *p = cg__cfg_str(c, "precision", NULL);
    if (!p || strcmp(k->precision, "fp32")) return 1;
    return strcmp(p, "tf32") != 0 && strcmp(p, "bf16") != 0 && strcmp(p, "fp16") != 0;
}

/* Parameters that trade memory for time (ssd_bwd's recompute: chunks per stored
 * state) stay at the default's choice, which follows a memory rule: a tuner that only
 * measures time would always buy speed with memory. */
static const char *const k_memory_keys[] = {"recompute"};

static int memory_ok(const cg_cfg *def, const cg_cfg *c) {
    for (size_t i = 0; i < sizeof k_memory_keys / sizeof k_memory_keys[0]; i++) {
        const char *d = cg__cfg_str(def, k_memory_keys[i], NULL), *v = cg__cfg_str(c, k_memory_keys[i], NULL);
        if (d && v && strcmp(d, v)) return 0;
    }
    return 1;
}

static cg_status tune_key(tstate *ts, const cg_tune_shape *s, int bwd, int keys_left) {
    const tenv *env = ts->env;
    cg_context *ctx = env->ctx;
    const cg_tune_opts *o = ts->o;
    const cg_op_desc *opd = cg__tune_op(s, bwd);
    snprintf(ts->what, sizeof ts->what, "%s %s %s %s=%lld", env->backend, opd->family, bwd ? "bwd" : "fwd",
             cg_sym_name(opd->seq), (long long)cg__tune_shape_seq(s));
    ts->name = s->name;
    cg_tune_key key;
    cg_status st = cg__tune_key_make(ctx, env->backend, s, bwd, &key);
    if (st != CG_OK) return st;
    char brief[200];
    cg__tune_key_brief(&key, brief, sizeof brief);
    if (!s->name[0]) { /* a shape without a name: its key's extents ("dk8 dv8 G1 H2 bf16") tell it apart */
        const cg_op_desc *fam = cg__tune_key_family(&key);
        ts->keyname[0] = '\0';
        for (int i = 0; fam && i < fam->nkey; i++)
            snprintf(ts->keyname + strlen(ts->keyname), sizeof ts->keyname - strlen(ts->keyname), "%s%s%lld",
                     i ? " " : "", cg_sym_name(fam->key[i]), (long long)cg__tune_key_dim(&key, fam->key[i]));
        if (strcmp(key.dtype, "f32"))
            snprintf(ts->keyname + strlen(ts->keyname), sizeof ts->keyname - strlen(ts->keyname), " %s", key.dtype);
        ts->name = ts->keyname;
    }
    event(ts, CG_PROGRESS_START, CG_LOG_INFO, "%s", brief);

    cg_tune_entry e;
    int resumed = 0;
    char forced_over[160] = ""; /* --force: the finished entry this tune replaces */
    st = cg__tune_store_get(ctx, ts->dir, &key, &e);
    if (st == CG_OK) {
        if (e.complete && !e.truncated && !o->force) {
            event(ts, CG_PROGRESS_DONE, CG_LOG_INFO, "already tuned, %s",
                  e.best >= 0 && e.cand[e.best].cfg[0] ? e.cand[e.best].cfg : "(default)");
            cg__tune_entry_free(&e);
            ts->sum->cached++;
            return CG_OK;
        }
        if (o->force) {
            snprintf(forced_over, sizeof forced_over, "%s|%s|%d", e.created, e.host, e.ncand);
            cg__tune_entry_free(&e);
            memset(&e, 0, sizeof e);
        } else {
            resumed = 1;
        }
    } else if (st == CG_EIO) {
        cg__tune_warn_once(ts->dir, ctx->errmsg);
        memset(&e, 0, sizeof e);
    } else {
        memset(&e, 0, sizeof e);
    }
    ctx->errmsg[0] = '\0';
    e.key = key;
    e.shape = *s;
    e.best = -1;
    e.complete = 0;
    e.truncated = 0;
    snprintf(e.kernel, sizeof e.kernel, "%s", cg__tune_space_kernel(env->backend, cg__tune_op(s, bwd)));

    /* The space */
    cg_shape sh;
    const int kflags = cg__tune_call_shape(s, bwd, &sh);
    cg_devinfo dev;
    cg_cfg *cfgs = NULL, def;
    int ncfg = 0;
    st = cg__tune_space(ctx, &key, e.kernel, &sh, kflags, &dev, &cfgs, &ncfg, &def);
    if (st == CG_ENOTFOUND) { /* no generated kernel or CPU space for this op (yet): its calls run the default */
        event(ts, CG_PROGRESS_DONE, CG_LOG_WARN, "skipped: %s", ctx->errmsg);
        ctx->errmsg[0] = '\0';
        ts->sum->unsupported++;
        cg__tune_entry_free(&e);
        return CG_OK;
    }
    if (st != CG_OK) {
        cg__tune_entry_free(&e);
        return st;
    }
    int m = 0;
    for (int i = 0; i < ncfg; i++)
        if (precision_ok(&key, &cfgs[i]) && memory_ok(&def, &cfgs[i])) cfgs[m++] = cfgs[i];
    ncfg = m;
    if (o->max_candidates > 0 && ncfg > o->max_candidates) ncfg = o->max_candidates;
    e.space_size = ncfg;

    /* Problems: verification (batch 1, short T, with the reference) and the full one. */
    int64_t maxc = 0;
    for (int i = 0; i < ncfg; i++) {
        /* the chunk (SSD spaces) or the segment (selective-scan spaces) the config runs */
        int64_t c = cg__cfg_int(&cfgs[i], "chunk", cg__cfg_int(&cfgs[i], "segment", 0));
        if (c > maxc) maxc = c;
    }
    int64_t vT = o->verify_T > 0 ? o->verify_T : (2 * maxc + 3 > 67 ? 2 * maxc + 3 : 67);
    if (vT > cg__tune_shape_seq(s)) vT = cg__tune_shape_seq(s);
    e.verify_T = vT;
    tprob full, ver;
    double t_setup = cg__tune_now_s();
    if ((st = cg__tprob_init(env, &ver, s, bwd, 1, vT, 1)) != CG_OK) {
        free(cfgs);
        cg__tune_entry_free(&e);
        return st;
    }
    /* A backend without a kernel for this op (yet), or that does not take its 16-bit
     * tensors, skips the key; so does one that runs no varlen problems of the op (neither
     * the host runner nor kernels reading cu_seqlens: docs/varlen.md). */
    const int no_varlen = s->shape.longest && !env->vt->varlen && !(env->vt->varlen_kernels & (1u << ver.op));
    if (no_varlen) cg__err(ctx, CG_EUNSUPPORTED, "backend %s does not take variable-length batches yet", env->backend);
    if (no_varlen || cg__backend_dtypes(ctx, env->vt, ver.op, &ver.prob) != CG_OK ||
        !env->vt->supports(ctx, ver.op, &ver.prob, NULL)) {
        event(ts, CG_PROGRESS_DONE, CG_LOG_WARN, "skipped: %s",
              ctx->errmsg[0] ? ctx->errmsg : "the backend cannot run it");
        ctx->errmsg[0] = '\0';
        ts->sum->unsupported++;
        cg__tprob_free(env, &ver);
        free(cfgs);
        cg__tune_entry_free(&e);
        return CG_OK;
    }
    if ((st = cg__tprob_init(env, &full, s, bwd, s->shape.dim[CG_SYM_B], cg__tune_shape_seq(s), 0)) != CG_OK) {
        cg__tprob_free(env, &ver);
        free(cfgs);
        cg__tune_entry_free(&e);
        return st;
    }
    t_setup = cg__tune_now_s() - t_setup;

    ahead ah;
    memset(&ah, 0, sizeof ah);
    if (env->kx && ncfg > 0) {
        ah.kx = env->kx;
        ah.kernel = e.kernel;
        ah.shape = sh;
        ah.flags = kflags;
        ah.dev = dev;
        ah.cfgs = cfgs;
        ah.n = ncfg;
        snprintf(ah.cache_dir, sizeof ah.cache_dir, "%s", cg__cache_dir(ctx));
        ahead_start(&ah, o->jobs > 0 ? o->jobs : cg__online_cores());
    }

    /* Budget: this key's share of what is left. */
    double key_start = cg__tune_now_s(), key_deadline = 0;
    if (ts->deadline > 0) key_deadline = key_start + (ts->deadline - key_start) / (keys_left > 0 ? keys_left : 1);
    mparams mp;
    mp.min_time = o->min_time_s > 0 ? o->min_time_s : (env->kx && strcmp(env->backend, "emulate") ? 0.1 : 0.03);
    mp.min_reps = o->min_reps > 0 ? o->min_reps : 5;
    mp.max_reps = o->max_reps > 0 ? o->max_reps : 200;
    mp.timeout = 60;

    /* Slot 0 is the default config (empty: what an untuned call runs), the baseline of
     * `chunkgen show`'s speed-up; it comes first in the order, so it wins ties. Slots
     * 1..ncfg are the space's configs in its order. */
    cg_cfg none;
    memset(&none, 0, sizeof none);
    cg__cfg_text(&def, e.default_cfg, sizeof e.default_cfg);
    int done = 0, rejected = 0, measured = 0;
    for (int j = 0; resumed && j <= ncfg; j++) {
        char t[CG_TUNE_CFG_TEXT] = "";
        if (j) cg__cfg_text(&cfgs[j - 1], t, sizeof t);
        if (cg__tune_entry_find(&e, t)) done++;
    }
    if (resumed) event(ts, CG_PROGRESS_MESSAGE, CG_LOG_INFO, "resuming, %d of %d candidates done", done, ncfg + 1);
    int truncated = 0, adopted = 0;
    const int fake = cg__tune_fake_timing(); /* tests: fixed timings, no confirmation */
    for (int j = 0; j <= ncfg; j++) {
        const cg_cfg *cfg = j ? &cfgs[j - 1] : &none;
        char text[CG_TUNE_CFG_TEXT] = "";
        if (j) cg__cfg_text(cfg, text, sizeof text);
        cg_tune_cand *have = cg__tune_entry_find(&e, text);
        if (have) {
            have->order = j; /* the space's order may have changed with the version */
            continue;
        }
        if (j && key_deadline > 0 && cg__tune_now_s() > key_deadline) {
            truncated = 1;
            break;
        }
        cg_tune_cand c;
        memset(&c, 0, sizeof c);
        snprintf(c.cfg, sizeof c.cfg, "%s", text);
        c.order = j;
        /* A candidate 20x slower than the best so far is not worth its time. */
        int b = cg__tune_select(e.cand, e.ncand, CG_TUNE_TIE_REL, NULL);
        mp.timeout = b >= 0 ? fmax(20e-3 * e.cand[b].median_ms, 0.5) : 60;
        c.verdict = cg__tprob_verify(env, &ver, cfg, &c.err, c.detail, sizeof c.detail);
        if (c.verdict == CG_TV_OK && fake) cg__tune_fake_measure(&key, text, &c);
        else if (c.verdict == CG_TV_OK) c.verdict = cg__tprob_measure(env, &full, cfg, &mp, &c);
        ctx->errmsg[0] = '\0';
        if (c.verdict != CG_TV_OK) {
            rejected++;
            if (!j)
                event(ts, CG_PROGRESS_MESSAGE, CG_LOG_WARN, "the default config is rejected (%s: %s)",
                      cg__tune_verdict_name(c.verdict), c.detail);
        }
        measured++;
        if ((st = cg__tune_entry_add(&e, &c)) != CG_OK) break;
        done++;
        stamp(&e);
        /* Another process may have finished this key meanwhile: then adopt its entry
         * rather than overwrite it with an unfinished one. */
        cg_tune_entry other;
        if (cg__tune_store_get(ctx, ts->dir, &key, &other) == CG_OK) {
            char sig[160];
            snprintf(sig, sizeof sig, "%s|%s|%d", other.created, other.host, other.ncand);
            /* --force: the entry being replaced is not "finished by another process" */
            int finished = other.complete && !other.truncated && strcmp(sig, forced_over);
            cg__tune_entry_free(&other);
            if (finished) {
                adopted = 1;
                break;
            }
        }
        ctx->errmsg[0] = '\0';
        if ((st = cg__tune_store_put(ctx, ts->dir, &e)) != CG_OK) break;
        step(ts, done, ncfg + 1, &e);
    }
    if (st == CG_OK && adopted) {
        if (ah.started) ahead_stop(&ah);
        cg__tprob_free(env, &full);
        cg__tprob_free(env, &ver);
        free(cfgs);
        cg__tune_entry_free(&e);
        event(ts, CG_PROGRESS_DONE, CG_LOG_INFO, "finished by another process meanwhile");
        ts->sum->cached++;
        return CG_OK;
    }
    /* Confirmation: the fastest few and the default again, interleaved, so that a change
     * in machine load during the sweep does not decide the winner. */
    if (st == CG_OK) {
        int top[CONFIRM_TOP + 1], nt = 0;
        cg_tune_cand *dc = cg__tune_entry_find(&e, "");
        if (dc && dc->verdict == CG_TV_OK) top[nt++] = (int)(dc - e.cand);
        for (int r = 0; r < CONFIRM_TOP; r++) {
            int b = -1;
            for (int i = 0; i < e.ncand; i++) {
                int used = 0;
                for (int t = 0; t < nt; t++) used |= top[t] == i;
                if (!used && e.cand[i].verdict == CG_TV_OK && (b < 0 || e.cand[i].median_ms < e.cand[b].median_ms))
                    b = i;
            }
            if (b >= 0) top[nt++] = b;
        }
        if (nt > 1 && !fake) {
            mparams mc = mp;
            mc.min_time = 2 * mp.min_time;
            mc.timeout = 1e9;
            if ((st = confirm(env, &full, &e, top, nt, &mc)) != CG_OK) ctx->errmsg[0] = '\0';
            st = CG_OK; /* a failure keeps the sweep's timings */
        }
    }
    cg_tune_cand *dc = cg__tune_entry_find(&e, "");
    if (dc && dc->verdict == CG_TV_OK) {
        e.default_ms = dc->median_ms;
        e.default_iqr_ms = dc->iqr_ms;
    }
    if (ah.started) ahead_stop(&ah);
    cg__tprob_free(env, &full);
    cg__tprob_free(env, &ver);
    free(cfgs);
    if (st != CG_OK) {
        cg__tune_entry_free(&e);
        return st;
    }
    int ru = -1;
    e.best = cg__tune_select(e.cand, e.ncand, CG_TUNE_TIE_REL, &ru);
    e.complete = 1;
    e.truncated = truncated;
    stamp(&e);
    /* Another process (a rank of the same job) may have finished this key while this one
     * measured: the merge rule decides, so every rank ends with the same winner. */
    cg_tune_entry other;
    int keep_other = 0;
    if (cg__tune_store_get(ctx, ts->dir, &key, &other) == CG_OK) {
        char sig[160];
        snprintf(sig, sizeof sig, "%s|%s|%d", other.created, other.host, other.ncand);
        keep_other = other.complete && strcmp(sig, forced_over) && cg__tune_entry_beats(&other, &e);
        cg__tune_entry_free(&other);
    }
    ctx->errmsg[0] = '\0';
    if (keep_other) {
        event(ts, CG_PROGRESS_DONE, CG_LOG_INFO,
              "another process finished it meanwhile with a result the merge rule keeps");
        ts->sum->kept_other++;
        ts->sum->candidates += measured;
        cg__tune_entry_free(&e);
        return CG_OK;
    }
    st = cg__tune_store_put(ctx, ts->dir, &e);
    ts->sum->candidates += measured;
    ts->sum->rejected += rejected;
    if (resumed) ts->sum->resumed++;
    if (st == CG_OK) {
        ts->sum->tuned++;
        char speed[64] = "";
        if (e.best >= 0 && e.default_ms > 0)
            snprintf(speed, sizeof speed, ", default %.3f ms: %.2fx", e.default_ms,
                     e.default_ms / e.cand[e.best].median_ms);
        if (e.best >= 0)
            event(ts, CG_PROGRESS_DONE, CG_LOG_INFO, "%d candidates, %d rejected%s; best %s %.3f ms%s%s", e.ncand,
                  rejected, truncated ? " (budget: truncated)" : "",
                  e.cand[e.best].cfg[0] ? e.cand[e.best].cfg : "(default)", e.cand[e.best].median_ms, speed,
                  t_setup > 5 ? " [slow reference setup]" : "");
        else
            event(ts, CG_PROGRESS_DONE, CG_LOG_WARN, "no candidate passed (%d rejected); the default config stays",
                  rejected);
    }
    cg__tune_entry_free(&e);
    return st;
}

/* ------------------------------------------------------------------- run */

static int dirs_of(const cg_tune_opts *o, const cg_tune_shape *s) { return s->dirs ? s->dirs : o->dir_mask; }

cg_status cg__tune_run(cg_context *ctx, const char *backend, const cg_tune_shape *shapes, int nshapes,
                       const cg_tune_opts *o, cg_tune_sum *sum) {
    memset(sum, 0, sizeof *sum);
    tenv env;
    memset(&env, 0, sizeof env);
    env.ctx = ctx;
    env.backend = backend;
    if (!strcmp(backend, "cpu")) {
        env.vt = &cg__backend_cpu;
    } else if (!strcmp(backend, "cuda")) {
        env.vt = &cg__backend_cuda;
        env.kx = &cg__kexec_cuda;
    } else if (!strcmp(backend, "emulate")) {
        env.vt = &cg__backend_emulate;
        env.kx = &cg__kexec_emu;
    } else {
        return cg__err(ctx, CG_EINVAL, "tune: backend \"%s\": expected cpu, cuda or emulate", backend);
    }
    if (!env.vt || (strcmp(backend, "cpu") && !env.kx))
        return cg__err(ctx, CG_EUNSUPPORTED, "tune: backend %s is not built into this library", backend);
    if (env.kx) {
        cg_devinfo dev;
        cg_status st = env.kx->device(ctx, &dev);
        if (st != CG_OK) return st;
    }
    for (int i = 0; i < nshapes; i++)
        if (!cg__tune_family(&shapes[i]))
            return cg__err(ctx, CG_EINVAL, "tune: shapes[%d].shape.op: %d is not an op of the op table", i,
                           (int)shapes[i].shape.op);
    tstate ts = {.env = &env, .o = o, .dir = cg__tune_store_dir(ctx), .sum = sum};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ts.dir);
    ts.dir = dir;
    if (cg__tune_mkdirs(dir) != 0) return cg__err(ctx, CG_EIO, "tune: cannot create the config store %s", dir);
    double t0 = cg__tune_now_s();
    if (o->budget_s > 0) ts.deadline = t0 + o->budget_s;
    for (int i = 0; i < nshapes; i++)
        for (int d = 0; d < 2; d++)
            if ((dirs_of(o, &shapes[i]) >> d & 1) && ((unsigned)o->op_mask >> cg__tune_shape_family(&shapes[i]) & 1))
                sum->keys++;
    cg_status first_err = CG_OK;
    char first_msg[CG_ERRMSG_CAP] = "";
    int k = 0;
    for (int i = 0; i < nshapes; i++) {
        for (int d = 0; d < 2; d++) {
            if (!(dirs_of(o, &shapes[i]) >> d & 1) || !((unsigned)o->op_mask >> cg__tune_shape_family(&shapes[i]) & 1))
                continue;
            k++;
            ts.ikey = k;
            ts.nkeys = sum->keys;
            if (o->nshards > 1) {
                cg_tune_key key;
                if (cg__tune_key_make(ctx, backend, &shapes[i], d, &key) == CG_OK &&
                    cg__tune_shard_of(&key, o->nshards) != o->shard) {
                    sum->other_shards++;
                    continue;
                }
                ctx->errmsg[0] = '\0';
            }
            if (ts.deadline > 0 && cg__tune_now_s() >= ts.deadline) {
                sum->skipped_budget++;
                continue;
            }
            cg_status st = tune_key(&ts, &shapes[i], d, sum->keys - k + 1);
            if (st != CG_OK) {
                sum->failed++;
                event(&ts, CG_PROGRESS_DONE, CG_LOG_ERROR, "failed: %s", ctx->errmsg);
                if (first_err == CG_OK) {
                    first_err = st;
                    snprintf(first_msg, sizeof first_msg, "%s", ctx->errmsg);
                }
                if (st == CG_EIO || st == CG_ENODEV) break; /* the store or the device is gone */
            }
        }
    }
    sum->seconds = cg__tune_now_s() - t0;
    if (sum->skipped_budget) {
        ts.what[0] = '\0', ts.name = "", ts.ikey = ts.nkeys = 0;
        event(&ts, CG_PROGRESS_MESSAGE, CG_LOG_WARN, "the budget ran out: %d key(s) not tuned; rerun to continue",
              sum->skipped_budget);
    }
    if (first_err != CG_OK) return cg__err(ctx, first_err, "%s", first_msg);
    return CG_OK;
}
