/* tune_testlib.c -- helpers of the tuner/store tests (test_tune.c, test_rel.c, test_agree.c). */
#include "tune_testlib.h"
#include "cg_test.h"

cg_context *tune_test_ctx(const char *dir) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) abort();
    cg_context_set_cache_dir(ctx, dir);
    return ctx;
}

cg_tune_cand tune_test_cand(const char *cfg, int order, cg_tune_verdict v, double ms, double iqr) {
    cg_tune_cand c;
    memset(&c, 0, sizeof c);
    snprintf(c.cfg, sizeof c.cfg, "%s", cfg);
    c.order = order;
    c.verdict = v;
    c.median_ms = ms;
    c.iqr_ms = iqr;
    c.reps = 5;
    return c;
}

void tune_test_entry(cg_context *ctx, cg_tune_entry *e, int64_t T, int64_t dv, int bwd, const char *cfg, int order,
                     double ms, double iqr) {
    memset(e, 0, sizeof *e);
    cg_tune_shape s;
    cg__tune_shape_init(&s, CG_OP_SSD_FWD);
    int64_t *x = s.shape.dim;
    cg__tune_shape_set_seq(&s, T);
    x[CG_SYM_B] = 1, x[CG_SYM_G] = 1, x[CG_SYM_H] = 2, x[CG_SYM_DK] = 16,
    x[CG_SYM_DV] = dv;
    snprintf(s.name, sizeof s.name, "test_dv%lld", (long long)dv);
    CG_CHECK_OK(ctx, cg__tune_key_make(ctx, "cpu", &s, bwd, &e->key));
    e->shape = s;
    e->complete = 1;
    snprintf(e->kernel, sizeof e->kernel, "ssd_cpu");
    cg_tune_cand c = tune_test_cand(cfg, order, CG_TV_OK, ms, iqr);
    cg__tune_entry_add(e, &c);
    e->best = 0;
}

static void listen_fn(const cg_progress *e, void *user) {
    tune_test_events *ev = user;
    static const char *const kinds[] = {"start", "step", "done", "message"};
    int *count[] = {&ev->start, &ev->step, &ev->done, &ev->message};
    if ((unsigned)e->kind < 4) (*count[e->kind])++;
    ev->n++;
    size_t n = strlen(ev->text);
    snprintf(ev->text + n, sizeof ev->text - n, "%s|%d|%s|%s|%s\n", (unsigned)e->kind < 4 ? kinds[e->kind] : "?",
             (int)e->level, e->task, e->subject, e->text);
}

void tune_test_listen(cg_context *ctx, tune_test_events *ev) {
    if (ev) memset(ev, 0, sizeof *ev);
    cg_context_set_progress(ctx, ev ? listen_fn : NULL, ev);
}
