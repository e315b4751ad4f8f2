/* ref_sscan.c -- float64 sequential-scan reference of the selective scan (Mamba-1 S6).
 *
 * Per (b, d), with group g = d / (D/G) (G = 1 when B/C are not grouped):
 *   dt_t = delta_t (+ bias_d), softplus(dt_t) if the flag is set
 *   h_t[n] = exp(dt_t A[d,n]) h_{t-1}[n] + dt_t B_t[g,n] x_t,   h_{-1} = h0 or 0
 *   y_t = sum_n C_t[g,n] h_t[n] + D_d x_t;   y_t *= silu(z_t) when z is given.
 * The backward is reverse-mode AD of that loop, with the states of one
 * (b, d) row kept in a buffer of (L+1) * N doubles. Sums over channels and batches (dA,
 * dB, dC, dD, ddelta_bias) are accumulated in double in a fixed order: b ascending, d
 * ascending, t descending. Views of any dtype and strides go through cg__vload/vstore. */
#include "internal.h"

#include <math.h>
#include <string.h>

/* log(1 + e^x) without overflow; NaN propagates. */
static double softplus(double x) { return x > 20.0 ? x : log1p(exp(x)); }
static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* Raw (pre-softplus) dt and dt of token t, channel d. */
static double dt_of(const cg_sscan_prob *p, int64_t b, int64_t t, int64_t d, double *raw) {
    double r = cg__vload(&p->delta, b, t, d, 0);
    if (p->dbias.p) r += cg__vload(&p->dbias, d, 0, 0, 0);
    if (raw) *raw = r;
    return p->softplus ? softplus(r) : r;
}

/* Runs the recurrence of row (b, d) from h0. With y: writes y. With hs: keeps every
 * state (hs[0..N) = h0, hs[(t+1)N..] = h_t). Leaves h_{L-1} in h. */
static void row_forward(const cg_sscan_prob *p, int64_t b, int64_t d, const double *A, double *h, double *hs,
                        int write_y) {
    const int64_t N = CG_DIM(p, N), g = d / (CG_DIM(p, D) / CG_DIM(p, G));
    const double Dd = p->Dv.p ? cg__vload(&p->Dv, d, 0, 0, 0) : 0.0;
    for (int64_t n = 0; n < N; n++) h[n] = p->h0.p ? cg__vload(&p->h0, b, d, n, 0) : 0.0;
    if (hs) memcpy(hs, h, (size_t)N * sizeof(double));
    for (int64_t t = 0; t < CG_DIM(p, L); t++) {
        const double dt = dt_of(p, b, t, d, NULL), x = cg__vload(&p->x, b, t, d, 0);
        double y = 0;
        for (int64_t n = 0; n < N; n++) {
            h[n] = exp(dt * A[n]) * h[n] + dt * cg__vload(&p->Bm, b, t, g, n) * x;
            y += cg__vload(&p->Cm, b, t, g, n) * h[n];
        }
        if (hs) memcpy(hs + (t + 1) * N, h, (size_t)N * sizeof(double));
        if (!write_y) continue;
        y += Dd * x;
        if (p->z.p) {
            double z = cg__vload(&p->z, b, t, d, 0);
            y *= z * sigmoid(z);
        }
        cg__vstore(&p->y, b, t, d, 0, y);
    }
}

cg_status cg__sscan_ref_fwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)cfg;
    (void)ex;
    const int64_t N = CG_DIM(p, N);
    double *A = malloc((size_t)(2 * N) * sizeof(double));
    if (!A) return cg__err(ctx, CG_ENOMEM, "ref sscan forward: out of memory (N=%lld)", (long long)N);
    double *h = A + N;
    for (int64_t b = 0; b < CG_DIM(p, B); b++)
        for (int64_t d = 0; d < CG_DIM(p, D); d++) {
            for (int64_t n = 0; n < N; n++) A[n] = cg__vload(&p->A, d, n, 0, 0);
            row_forward(p, b, d, A, h, NULL, 1);
            if (p->hT.p)
                for (int64_t n = 0; n < N; n++) cg__vstore(&p->hT, b, d, n, 0, h[n]);
        }
    free(A);
    return CG_OK;
}

cg_status cg__sscan_ref_bwd(cg_context *ctx, const cg_sscan_prob *p, const cg_cfg *cfg, const cg_exec *ex) {
    (void)cfg;
    (void)ex;
    const int64_t L = CG_DIM(p, L), D = CG_DIM(p, D), N = CG_DIM(p, N), G = CG_DIM(p, G), dpg = D / G;
    /* A, h, g [N]; hs [(L+1) N]; dB, dC [L, G, N] per batch; dA [D, N]; dD, ddbias [D] */
    size_t n_all = (size_t)(3 * N + (L + 1) * N + 2 * L * G * N + D * N + 2 * D);
    double *mem = calloc(n_all, sizeof(double));
    if (!mem)
        return cg__err(ctx, CG_ENOMEM, "ref sscan backward: out of memory (%zu doubles for L=%lld, D=%lld, N=%lld)",
                       n_all, (long long)L, (long long)D, (long long)N);
    double *A = mem, *h = A + N, *gr = h + N, *hs = gr + N;
    double *dB = hs + (L + 1) * N, *dC = dB + L * G * N, *dA = dC + L * G * N;
    double *dD = dA + D * N, *ddb = dD + D;

    for (int64_t b = 0; b < CG_DIM(p, B); b++) {
        memset(dB, 0, (size_t)(2 * L * G * N) * sizeof(double));
        for (int64_t d = 0; d < D; d++) {
            const int64_t g = d / dpg;
            const double Dd = p->Dv.p ? cg__vload(&p->Dv, d, 0, 0, 0) : 0.0;
            for (int64_t n = 0; n < N; n++) A[n] = cg__vload(&p->A, d, n, 0, 0);
            row_forward(p, b, d, A, h, hs, 0);
            for (int64_t n = 0; n < N; n++) gr[n] = p->dhT.p ? cg__vload(&p->dhT, b, d, n, 0) : 0.0;
            for (int64_t t = L - 1; t >= 0; t--) {
                double raw;
                const double dt = dt_of(p, b, t, d, &raw), x = cg__vload(&p->x, b, t, d, 0);
                const double *hprev = hs + t * N, *hcur = hprev + N;
                double dy = cg__vload(&p->dy, b, t, d, 0);
                if (p->z.p) {
                    /* out = y * silu(z): dy_pre = dout silu(z), dz = dout y silu'(z) */
                    double z = cg__vload(&p->z, b, t, d, 0), s = sigmoid(z), y = Dd * x;
                    for (int64_t n = 0; n < N; n++) y += cg__vload(&p->Cm, b, t, g, n) * hcur[n];
                    if (p->dz.p) cg__vstore(&p->dz, b, t, d, 0, dy * y * s * (1.0 + z * (1.0 - s)));
                    dy *= z * s;
                }
                dD[d] += dy * x;
                double dx = Dd * dy, ddt = 0;
                for (int64_t n = 0; n < N; n++) {
                    const double Bn = cg__vload(&p->Bm, b, t, g, n), Cn = cg__vload(&p->Cm, b, t, g, n);
                    const double a = exp(dt * A[n]);
                    const int64_t o = (t * G + g) * N + n;
                    dC[o] += dy * hcur[n];
                    gr[n] += Cn * dy;
                    dx += gr[n] * dt * Bn;
                    dB[o] += gr[n] * dt * x;
                    ddt += gr[n] * (A[n] * a * hprev[n] + Bn * x);
                    dA[d * N + n] += gr[n] * dt * a * hprev[n];
                    gr[n] *= a;
                }
                const double ddelta = p->softplus ? ddt * sigmoid(raw) : ddt;
                ddb[d] += ddelta;
                cg__vstore(&p->dx, b, t, d, 0, dx);
                cg__vstore(&p->ddelta, b, t, d, 0, ddelta);
            }
            if (p->dh0.p)
                for (int64_t n = 0; n < N; n++) cg__vstore(&p->dh0, b, d, n, 0, gr[n]);
        }
        for (int64_t t = 0; t < L; t++)
            for (int64_t g = 0; g < G; g++)
                for (int64_t n = 0; n < N; n++) {
                    const int64_t o = (t * G + g) * N + n;
                    cg__vstore(&p->dB, b, t, g, n, dB[o]);
                    cg__vstore(&p->dC, b, t, g, n, dC[o]);
                }
    }
    for (int64_t d = 0; d < D; d++) {
        for (int64_t n = 0; n < N; n++) cg__vstore(&p->dA, d, n, 0, 0, dA[d * N + n]);
        if (p->dD.p) cg__vstore(&p->dD, d, 0, 0, 0, dD[d]);
        if (p->ddbias.p) cg__vstore(&p->ddbias, d, 0, 0, 0, ddb[d]);
    }
    free(mem);
    return CG_OK;
}

/* The ref backend's entry points for the selective-scan ops (host_backends.c). */
CG_HOST_OP_ENTRY(ref, sscan_fwd, cg_sscan_prob, cg__sscan_ref_fwd)
CG_HOST_OP_ENTRY(ref, sscan_bwd, cg_sscan_prob, cg__sscan_ref_bwd)
