/* test_cpu_key.c -- the CPU tuning key: the ISA variant and the batch x heads parallelism
 * against the thread count are part of it (autotune/key.c). */
#include "cg_test.h"

#include "../autotune/autotune.h"
#include "cpu/cpu_isa.h"
#include "ops.h"

#include <string.h>

static cg_tune_key key_of(cg_context *ctx, int64_t B, int64_t H, int sscan) {
    cg_tune_shape s;
    const cg_op op = sscan ? CG_OP_SSCAN_FWD : CG_OP_SSD_FWD;
    cg__tune_shape_init(&s, op);
    int64_t *x = s.shape.dim;
    cg__tune_shape_set_seq(&s, 300);
    x[CG_SYM_B] = B, x[CG_SYM_G] = 1;
    if (sscan) x[CG_SYM_D] = 64, x[CG_SYM_N] = 16;
    else x[CG_SYM_H] = H, x[CG_SYM_DK] = 48, x[CG_SYM_DV] = 40;
    cg_tune_key k;
    memset(&k, 0, sizeof k);
    CG_CHECK_OK(ctx, cg__tune_key_make(ctx, "cpu", &s, 0, &k));
    return k;
}

CG_TEST(tune_cpu_key_par_isa) {
    CG_TEST_CONTEXT(ctx);
    CG_CHECK_OK(ctx, cg_context_set_threads(ctx, 4));
    char t1[1024], t2[1024];
    /* B x H below, at and above the 4 threads */
    cg_tune_key k1 = key_of(ctx, 1, 1, 0), k2 = key_of(ctx, 1, 2, 0), k4 = key_of(ctx, 2, 2, 0),
                k8 = key_of(ctx, 4, 2, 0), k3 = key_of(ctx, 3, 1, 0);
    CG_CHECK(k1.threads == 4 && k1.par == 1 && k2.par == 2 && k4.par == 4 && k8.par == 4 && k3.par == 4,
             "par: %d %d %d %d %d", k1.par, k2.par, k4.par, k8.par, k3.par);
    cg__tune_key_text(&k1, 1, t1, sizeof t1);
    cg__tune_key_text(&k2, 1, t2, sizeof t2);
    CG_CHECK(strcmp(t1, t2) != 0 && strstr(t1, "par=1;") && strstr(t2, "par=2;"), "par in the key: %s", t1);
    cg__tune_key_text(&k4, 1, t1, sizeof t1);
    cg__tune_key_text(&k8, 1, t2, sizeof t2);
    CG_CHECK(strcmp(t1, t2) == 0, "every thread busy either way: one key (%s)", t1);
    cg_tune_key s1 = key_of(ctx, 1, 0, 1), s4 = key_of(ctx, 8, 0, 1);
    CG_CHECK(s1.par == 1 && s4.par == 4, "sscan par: %d %d", s1.par, s4.par);
    /* the ISA variant names the device */
    char want[32];
    snprintf(want, sizeof want, "[%s]", cg__cpu_isa_ops()->name);
    CG_CHECK(strstr(k1.device, want) != NULL, "device '%s' names the variant %s", k1.device, want);
    cg_tune_key dk;
    CG_CHECK_OK(ctx, cg__tune_device_key(ctx, "cpu", &dk));
    CG_CHECK(!strcmp(dk.device, k1.device), "the device key matches the entries' (%s vs %s)", dk.device, k1.device);
    cg_context_free(ctx);
}
