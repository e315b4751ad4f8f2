/* sscan_testlib.c -- see sscan_testlib.h. No tests here. */
#include "sscan_testlib.h"

const char *const sst_names[T_COUNT] = {"x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0", "dy",
                                        "dhT", "y", "hT", "dx", "ddelta", "dA", "dB", "dC", "dD", "dz",
                                        "ddelta_bias", "dh0"};

int sst_dims(const sst_case *c, int i, int64_t *sh, int *perm, int *permuted) {
    *permuted = 0;
    switch (i) {
    case T_X: case T_DELTA: case T_Z: case T_DY: case T_Y: case T_DX: case T_DDELTA: case T_DZ:
        sh[0] = c->B, sh[1] = c->L, sh[2] = c->D;
        perm[0] = 0, perm[1] = 2, perm[2] = 1;
        *permuted = c->strided;
        return 3;
    case T_A: case T_DA:
        sh[0] = c->D, sh[1] = c->N;
        return 2;
    case T_B: case T_C: case T_DB: case T_DC:
        sh[0] = c->B, sh[1] = c->L;
        *permuted = c->strided;
        if (c->G) {
            sh[2] = c->G, sh[3] = c->N;
            perm[0] = 0, perm[1] = 2, perm[2] = 3, perm[3] = 1;
            return 4;
        }
        sh[2] = c->N;
        perm[0] = 0, perm[1] = 2, perm[2] = 1;
        return 3;
    case T_D: case T_BIAS: case T_DD: case T_DBIAS:
        sh[0] = c->D;
        return 1;
    default: /* h0, dhT, hT, dh0 */
        sh[0] = c->B, sh[1] = c->D, sh[2] = c->N;
        return 3;
    }
}

int sst_on(const sst_case *c, int i) {
    switch (i) {
    case T_Z: case T_DZ: return c->z;
    case T_D: case T_DD: return c->Dv;
    case T_BIAS: case T_DBIAS: return c->bias;
    case T_H0: return c->h0;
    case T_DHT: return c->dhT;
    case T_HT: case T_DH0: return c->outs;
    default: return 1;
    }
}

void sst_free(sst_set *s) {
    for (int i = 0; i < T_COUNT; i++) cg_tbuf_free(&s->t[i]);
}

cg_tensor sst_opt(const sst_set *s, int i) {
    static const cg_tensor absent;
    return s->on[i] ? s->t[i].t : absent;
}

cg_sscan_fwd_args sst_fwd_args(const sst_set *s, const sst_case *c) {
    cg_sscan_fwd_args a = {
        .x = s->t[T_X].t, .delta = s->t[T_DELTA].t, .A = s->t[T_A].t, .B = s->t[T_B].t, .C = s->t[T_C].t,
        .D = sst_opt(s, T_D), .z = sst_opt(s, T_Z), .delta_bias = sst_opt(s, T_BIAS), .h0 = sst_opt(s, T_H0),
        .delta_softplus = c->softplus, .y = s->t[T_Y].t, .hT = sst_opt(s, T_HT)};
    return a;
}

cg_sscan_bwd_args sst_bwd_args(const sst_set *s, const sst_case *c) {
    cg_sscan_bwd_args a = {
        .x = s->t[T_X].t, .delta = s->t[T_DELTA].t, .A = s->t[T_A].t, .B = s->t[T_B].t, .C = s->t[T_C].t,
        .D = sst_opt(s, T_D), .z = sst_opt(s, T_Z), .delta_bias = sst_opt(s, T_BIAS), .h0 = sst_opt(s, T_H0),
        .dy = s->t[T_DY].t, .dhT = sst_opt(s, T_DHT), .delta_softplus = c->softplus,
        .dx = s->t[T_DX].t, .ddelta = s->t[T_DDELTA].t, .dA = s->t[T_DA].t, .dB = s->t[T_DB].t,
        .dC = s->t[T_DC].t, .dD = sst_opt(s, T_DD), .dz = sst_opt(s, T_DZ), .ddelta_bias = sst_opt(s, T_DBIAS),
        .dh0 = sst_opt(s, T_DH0)};
    return a;
}
