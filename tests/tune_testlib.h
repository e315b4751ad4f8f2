/* tune_testlib.h -- helpers of the tuner/store tests (tests/tune_testlib.c). */
#ifndef CG_TUNE_TESTLIB_H
#define CG_TUNE_TESTLIB_H

#include "../autotune/autotune.h"

/* A context whose cache directory is dir (aborts on failure). */
cg_context *tune_test_ctx(const char *dir);
/* A measured candidate: cfg at position order, verdict v, median ms, IQR iqr, 5 reps. */
cg_tune_cand tune_test_cand(const char *cfg, int order, cg_tune_verdict v, double ms, double iqr);
/* A complete CPU SSD entry of this machine (B 1, G 1, H 2, dk 16) for T and dv, direction
 * bwd, with one passing candidate cfg at position order, median ms, IQR iqr, 5 reps. */
void tune_test_entry(cg_context *ctx, cg_tune_entry *e, int64_t T, int64_t dv, int bwd, const char *cfg, int order,
                     double ms, double iqr);

/* The progress events of a context, as text: "KIND|level|task|subject|text" lines. */
typedef struct tune_test_events {
    char text[16384];
    int n, start, step, done, message;
} tune_test_events;
/* Send ctx's progress events into ev (cleared first); NULL ev: stop. */
void tune_test_listen(cg_context *ctx, tune_test_events *ev);

#endif
