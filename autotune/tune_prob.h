/* tune_prob.h -- the tuner's problems (tune_prob.c): every tensor of an op from the op
 * table, the float64 reference, verification against it and timed measurement. Private
 * to autotune/. */
#ifndef CG_TUNE_PROB_H
#define CG_TUNE_PROB_H

#include "autotune.h"
#include "ops.h"

typedef struct tspec {
    const char *name;
    int ndim;
    int64_t shape[4];
    double lo, hi; /* input values uniform in [lo, hi) */
    int role;      /* CG_TD_IN or CG_TD_OUT */
    double tol;    /* outputs: accuracy target */
} tspec;

#define MAXT CG_OP_MAX_TENSORS

typedef struct tprob {
    cg_op op;
    int bwd, nt;
    tspec spec[MAXT];
    int used[MAXT];
    int64_t count[MAXT];
    int dt[MAXT];      /* storage dtype of each tensor (the shape's dtype signature) */
    float *host[MAXT]; /* values (inputs, rounded to dt) / results copied back (outputs) */
    void *stage[MAXT]; /* 16-bit tensors: host[] in their storage form; NULL otherwise */
    void *mem[MAXT];   /* what the backend reads: host[] for cpu, kernel memory otherwise */
    double *ref[MAXT]; /* float64 reference values (verification problems) */
    int64_t *cu, nseq; /* varlen (cg_tune_shape.shape.longest > 0): the offsets [nseq + 1] of
                            * the length mix (cg__tprob_mix); NULL otherwise */
    cg_prob_any prob;  /* the validated problem over mem[] (any op's: op_list.h) */
} tprob;

typedef struct tenv {
    cg_context *ctx;
    const char *backend;
    const cg_backend_vt *vt;
    const cg_kexec *kx; /* NULL for cpu */
} tenv;

typedef struct mparams {
    double min_time, timeout;
    int min_reps, max_reps;
} mparams;

/* The varlen class's length mix for a packed total T and longest sequence maxlen: sequences
 * of maxlen (capped at T), the last one the remainder. Writes the offsets [n + 1] into cu
 * (when not NULL) and returns n. */
int64_t cg__tprob_mix(int64_t T, int64_t maxlen, int64_t *cu);
/* Monotonic clock, seconds. */
double cg__tune_now_s(void);
void cg__tprob_free(const tenv *env, tprob *p);
cg_status cg__tprob_init(const tenv *env, tprob *p, const cg_tune_shape *s, int bwd, int64_t B, int64_t T,
                         int with_ref);
cg_status cg__tprob_run_timed(const tenv *env, tprob *p, const cg_cfg *cfg, double *sec);
cg_tune_verdict cg__tprob_verify(const tenv *env, tprob *v, const cg_cfg *cfg, double *worst, char *detail, size_t cap);
int cg__tune_cmp_dbl(const void *a, const void *b);
double cg__tune_quantile(const double *sorted, int n, double q);
cg_tune_verdict cg__tprob_measure(const tenv *env, tprob *p, const cg_cfg *cfg, const mparams *mp, cg_tune_cand *c);

#endif /* CG_TUNE_PROB_H */
