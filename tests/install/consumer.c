/* consumer.c -- a program outside the project, built against an installed chunkgen
 * (tests/install/run.sh): a small SSD forward on the cpu backend, checked against the
 * float64-accumulating ref backend on the same inputs. Prints "ok" and exits 0. */
#include <chunkgen.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, T = 7, G = 1, H = 2, DK = 3, DV = 2 };

int main(void) {
    if (cg_version_number() != CG_VERSION_NUMBER) {
        fprintf(stderr, "library %d, header %d\n", cg_version_number(), CG_VERSION_NUMBER);
        return 1;
    }
    static float q[B * T * G * DK], k[B * T * G * DK], v[B * T * H * DV], la[B * T * H];
    static float o_cpu[B * T * H * DV], o_ref[B * T * H * DV];
    unsigned s = 12345;
    for (int i = 0; i < B * T * G * DK; i++) {
        q[i] = (float)((s = s * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
        k[i] = (float)((s = s * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
    }
    for (int i = 0; i < B * T * H * DV; i++) v[i] = (float)((s = s * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
    for (int i = 0; i < B * T * H; i++) la[i] = -(float)((s = s * 1103515245u + 12345u) >> 16 & 1023) / 2048.0f;
    const int64_t sq[] = {B, T, G, DK}, sv[] = {B, T, H, DV}, sl[] = {B, T, H};
    cg_context *ctx;
    if (cg_context_create(&ctx) != CG_OK) return 1;
    cg_ssd_fwd_args a = CG_SSD_FWD_ARGS_INIT;
    a.q = cg_tensor_contiguous(q, CG_F32, 4, sq);
    a.k = cg_tensor_contiguous(k, CG_F32, 4, sq);
    a.v = cg_tensor_contiguous(v, CG_F32, 4, sv);
    a.log_alpha = cg_tensor_contiguous(la, CG_F32, 3, sl);
    cg_exec ex = CG_EXEC_INIT;
    const cg_backend backends[2] = {CG_BACKEND_CPU, CG_BACKEND_REF};
    float *outs[2] = {o_cpu, o_ref};
    for (int b = 0; b < 2; b++) {
        ex.backend = backends[b];
        a.o = cg_tensor_contiguous(outs[b], CG_F32, 4, sv);
        cg_status st = cg_ssd_fwd(ctx, &a, &ex);
        if (st != CG_OK) {
            fprintf(stderr, "cg_ssd_fwd (%s): %s: %s\n", cg_backend_name(ex.backend), cg_status_str(st), cg_errmsg(ctx));
            cg_context_free(ctx);
            return 1;
        }
    }
    double err = 0, mx = 0;
    for (int i = 0; i < B * T * H * DV; i++) {
        err = fmax(err, fabs((double)o_cpu[i] - o_ref[i]));
        mx = fmax(mx, fabs((double)o_ref[i]));
    }
    cg_context_free(ctx);
    if (!(mx > 0) || !(err / mx < 1e-5)) {
        fprintf(stderr, "cpu vs ref: rel err %g (max |ref| %g)\n", err / mx, mx);
        return 1;
    }
    printf("ok chunkgen %s rel_err %.2e\n", cg_version(), err / mx);
    return 0;
}
