/* test_dtype_tune.c -- the dtype signature in the tuning key (issue #15 item 4): a config
 * tuned for float32 is never applied to a 16-bit call or the reverse (exact or nearest
 * bucket), mixed signatures are keys of their own, and float32 entries keep the format
 * of the stores written before 16-bit storage existed. */
#include "tune_testlib.h"
#include "cg_test.h"
#include "ops.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* A validated-looking SSD problem (B 1, T, G 1, H 2, dk 16, dv) whose q, k, v, o are
 * stored as qkv (only the views' presence and dtypes matter to the key). */
static cg_ssd_prob ssd_prob(int64_t T, int64_t dv, cg_dtype q, cg_dtype kv) {
    static float dummy[1];
    cg_ssd_prob p;
    memset(&p, 0, sizeof p);
    CG_DIM(&p, B) = 1, CG_DIM(&p, T) = T, CG_DIM(&p, G) = 1, CG_DIM(&p, H) = 2, CG_DIM(&p, DK) = 16, CG_DIM(&p, DV) = dv;
    cg_view *v[] = {&p.q, &p.k, &p.v, &p.la, &p.o};
    cg_dtype dt[] = {q, kv, kv, CG_F32, kv};
    for (int i = 0; i < 5; i++) v[i]->p = dummy, v[i]->dt = dt[i];
    return p;
}

static const char *lookup(cg_context *ctx, const cg_ssd_prob *p, cg_cfg *cfg) {
    cg_cfg_source src = CG_SRC_DEFAULT;
    CG_CHECK_OK(ctx, cg__tune_config_source.lookup(ctx, "cpu", CG_OP_SSD_FWD, p, cfg, &src));
    return cg__cfg_source_name(src);
}

/* A complete entry of the shape of p with one candidate cfg. */
static void put_entry(cg_context *ctx, const cg_ssd_prob *p, const char *cfg) {
    cg_tune_entry e;
    tune_test_entry(ctx, &e, CG_DIM(p, T), CG_DIM(p, DV), 0, cfg, 0, 1.0, 0.01);
    cg__tune_shape_of(CG_OP_SSD_FWD, p, &e.shape);
    CG_CHECK_OK(ctx, cg__tune_key_make(ctx, "cpu", &e.shape, 0, &e.key));
    CG_CHECK_OK(ctx, cg__tune_store_put(ctx, cg__tune_store_dir(ctx), &e));
    cg__tune_entry_free(&e);
}

CG_TEST(dtype_tune_key_separates_dtypes) {
    char dir[64] = "/tmp/cg_dtype_tune_XXXXXX";
    if (!mkdtemp(dir)) abort();
    cg_context *ctx = tune_test_ctx(dir);
    unsetenv("CHUNKGEN_CONFIG");
    unsetenv("CHUNKGEN_TUNE_ON_MISS");
    cg_cfg cfg;
    const cg_ssd_prob f32 = ssd_prob(512, 16, CG_F32, CG_F32), bf = ssd_prob(512, 16, CG_BF16, CG_BF16);
    const cg_ssd_prob f16 = ssd_prob(512, 16, CG_F16, CG_F16), mixed = ssd_prob(512, 16, CG_BF16, CG_F32);
    const cg_ssd_prob bf_far = ssd_prob(4096, 16, CG_BF16, CG_BF16), f32_far = ssd_prob(4096, 16, CG_F32, CG_F32);
    /* the signatures */
    cg_tune_shape s;
    char sig[32];
    cg__tune_shape_of(CG_OP_SSD_FWD, &f32, &s);
    cg__tune_shape_sig(&s, sig, sizeof sig);
    CG_CHECK(!strcmp(sig, "f32"), "f32 signature %s", sig);
    cg__tune_shape_of(CG_OP_SSD_FWD, &bf, &s);
    cg__tune_shape_sig(&s, sig, sizeof sig);
    CG_CHECK(!strcmp(sig, "bf16"), "bf16 signature %s", sig);
    cg__tune_shape_of(CG_OP_SSD_FWD, &mixed, &s);
    cg__tune_shape_sig(&s, sig, sizeof sig);
    CG_CHECK(!strcmp(sig, "bf16-q"), "mixed signature %s", sig);

    /* float32 entry: used by float32 calls, never by 16-bit ones (not even nearest bucket) */
    put_entry(ctx, &f32, "chunk=32,block_dv=16,threads=0");
    const char *lv = lookup(ctx, &f32, &cfg);
    CG_CHECK(!strcmp(lv, "exact") && cg__cfg_int(&cfg, "chunk", 0) == 32, "f32: %s", lv);
    const cg_ssd_prob *others[] = {&bf, &f16, &mixed, &bf_far};
    for (int i = 0; i < 4; i++) {
        lv = lookup(ctx, others[i], &cfg);
        CG_CHECK(!strcmp(lv, "default") && cfg.n == 0, "16-bit call %d took the float32 config (%s)", i, lv);
    }
    /* a bf16 entry: used by bf16 calls (exact and nearest), never by float32, f16 or the mix */
    put_entry(ctx, &bf, "chunk=16,block_dv=16,threads=0");
    lv = lookup(ctx, &bf, &cfg);
    CG_CHECK(!strcmp(lv, "exact") && cg__cfg_int(&cfg, "chunk", 0) == 16, "bf16: %s", lv);
    lv = lookup(ctx, &bf_far, &cfg);
    CG_CHECK(!strcmp(lv, "nearest-bucket") && cg__cfg_int(&cfg, "chunk", 0) == 16, "bf16 T=4096: %s", lv);
    lv = lookup(ctx, &f32, &cfg);
    CG_CHECK(!strcmp(lv, "exact") && cg__cfg_int(&cfg, "chunk", 0) == 32, "f32 after bf16 entry: %s", lv);
    lv = lookup(ctx, &f32_far, &cfg);
    CG_CHECK(!strcmp(lv, "nearest-bucket") && cg__cfg_int(&cfg, "chunk", 0) == 32, "f32 T=4096: %s", lv);
    lv = lookup(ctx, &f16, &cfg);
    CG_CHECK(!strcmp(lv, "default"), "f16 took another dtype's config (%s)", lv);
    lv = lookup(ctx, &mixed, &cfg);
    CG_CHECK(!strcmp(lv, "default"), "bf16-q took another signature's config (%s)", lv);
    cg_context_free(ctx);
}

/* Whether d has a 16-bit-capable input named nm. */
static int half_in(const cg_op_desc *d, const char *nm) {
    const int i = cg__op_tensor(d, nm);
    return i >= 0 && d->t[i].role == CG_TD_IN && (d->t[i].flags & CG_TD_HALF);
}

/* The signature round-trips through the op table (the tuner builds its problems from it). */
CG_TEST(dtype_tune_signature_roundtrip) {
    for (int op = 0; op < CG_OP_COUNT; op++) {
        const cg_op_desc *d = cg__op_desc((cg_op)op);
        const char *sigs[] = {"f32", "bf16", "f16", "bf16-v", "f16-x-B"};
        for (int k = 0; k < 5; k++) {
            int dt[CG_OP_MAX_TENSORS];
            cg_status st = cg__op_dtype_unsig(NULL, d, sigs[k], dt);
            /* bf16-v: the ops with a 16-bit-capable input v (ssd, gdr); f16-x-B: with x and B (sscan) */
            const int fits = k < 3 || (k == 3 ? half_in(d, "v") : half_in(d, "x") && half_in(d, "B"));
            CG_CHECK((st == CG_OK) == fits, "%s %s: %s", d->name, sigs[k], cg_status_str(st));
            if (st != CG_OK) continue;
            char back[64];
            cg__op_dtype_sig(d, dt, back, sizeof back);
            CG_CHECK(!strcmp(back, sigs[k]), "%s: %s came back as %s", d->name, sigs[k], back);
            cg_dtype want[CG_OP_MAX_TENSORS], math;
            CG_CHECK(cg__op_dtypes(NULL, d, dt, want, &math) == CG_OK, "%s %s: the dtypes break the rules", d->name,
                     sigs[k]);
        }
        int dt[CG_OP_MAX_TENSORS];
        CG_CHECK(cg__op_dtype_unsig(NULL, d, "bf16-log_alpha", dt) == CG_EINVAL, "log_alpha is float32 only");
        CG_CHECK(cg__op_dtype_unsig(NULL, d, "f64", dt) == CG_EINVAL, "f64 is no tuning signature");
    }
}

/* A float32 entry is written as before #15: key.dtype "f32", no shape dtype, and its
 * key text (which names the file) carries dtype=f32 where the older stores had it. */
CG_TEST(dtype_tune_f32_entries_unchanged) {
    char dir[64] = "/tmp/cg_dtype_tune_XXXXXX";
    if (!mkdtemp(dir)) abort();
    cg_context *ctx = tune_test_ctx(dir);
    const cg_ssd_prob f32 = ssd_prob(512, 16, CG_F32, CG_F32), bf = ssd_prob(512, 16, CG_BF16, CG_BF16);
    const cg_ssd_prob *ps[] = {&f32, &bf};
    for (int i = 0; i < 2; i++) {
        put_entry(ctx, ps[i], "chunk=32,block_dv=16,threads=0");
        cg_tune_shape s;
        cg__tune_shape_of(CG_OP_SSD_FWD, ps[i], &s);
        cg_tune_key k;
        CG_CHECK_OK(ctx, cg__tune_key_make(ctx, "cpu", &s, 0, &k));
        char text[1024], file[64], path[4400];
        cg__tune_key_text(&k, 1, text, sizeof text);
        CG_CHECK(strstr(text, i ? ";dtype=bf16;precision=fp32;" : ";dtype=f32;precision=fp32;"), "key text %s", text);
        cg__tune_entry_file(&k, file, sizeof file);
        snprintf(path, sizeof path, "%s/%s", cg__tune_store_dir(ctx), file);
        json_error_t je;
        json_t *j = json_load_file(path, 0, &je);
        CG_CHECK(j != NULL, "%s: %s", path, je.text);
        if (!j) continue;
        const char *kd = json_string_value(json_object_get(json_object_get(j, "key"), "dtype"));
        json_t *sd = json_object_get(json_object_get(j, "shape"), "dtype");
        CG_CHECK(kd && !strcmp(kd, i ? "bf16" : "f32"), "key.dtype %s", kd ? kd : "(none)");
        CG_CHECK(i ? sd != NULL : sd == NULL, "shape.dtype %s for entry %d", sd ? "present" : "absent", i);
        json_decref(j);
        cg_tune_entry e;
        CG_CHECK_OK(ctx, cg__tune_store_get(ctx, cg__tune_store_dir(ctx), &k, &e));
        CG_CHECK(!strcmp(e.key.dtype, k.dtype), "read back %s", e.key.dtype);
        cg__tune_entry_free(&e);
    }
    cg_context_free(ctx);
}

/* The tuner's problems in 16-bit storage: built from a signature, the inputs rounded once
 * (the float64 reference on the rounded values), the 16-bit tensors staged through kernel
 * memory (the emulator's executor: host memory behind the same copies) or used in place,
 * and a 16-bit output verified against its dtype's target. Run here on the reference
 * backend, the one that takes 16-bit tensors on every machine. */
#include "../autotune/tune_prob.h"

CG_TEST(dtype_tune_problems_16bit) {
    char dir[64] = "/tmp/cg_dtype_tune_XXXXXX";
    if (!mkdtemp(dir)) abort();
    cg_context *ctx = tune_test_ctx(dir);
    for (int fam = 0; fam < 2; fam++)
        for (int k = 0; k < 3; k++) {
            cg_tune_shape s;
            const cg_op op = fam ? CG_OP_SSCAN_FWD : CG_OP_SSD_FWD;
            const int64_t T = 19;
            cg__tune_shape_init(&s, op);
            int64_t *x = s.shape.dim;
            cg__tune_shape_set_seq(&s, T);
            x[CG_SYM_B] = 1, x[CG_SYM_G] = 2;
            if (fam) x[CG_SYM_D] = 6, x[CG_SYM_N] = 5;
            else x[CG_SYM_H] = 4, x[CG_SYM_DK] = 7, x[CG_SYM_DV] = 12;
            const char *sig = k == 0 ? "bf16" : k == 1 ? "f16" : fam ? "bf16-x-C" : "f16-v";
            CG_CHECK_OK(ctx, cg__tune_shape_set_sig(ctx, &s, sig));
            for (int bwd = 0; bwd < 2; bwd++)
                for (int staged = 0; staged < 2; staged++) {
                    tenv env = {ctx, "emulate", &cg__backend_ref, staged ? &cg__kexec_emu : NULL};
                    tprob p;
                    CG_CHECK_OK(ctx, cg__tprob_init(&env, &p, &s, bwd, 1, T, 1));
                    int n16 = 0;
                    for (int i = 0; i < p.nt; i++) n16 += cg__dtype_half((cg_dtype)p.dt[i]);
                    CG_CHECK(n16 > 0, "%s %s: no 16-bit tensor", sig, bwd ? "bwd" : "fwd");
                    double worst = 0;
                    char detail[256] = "";
                    cg_tune_verdict v = cg__tprob_verify(&env, &p, NULL, &worst, detail, sizeof detail);
                    CG_CHECK(v == CG_TV_OK, "%s %s %s staged %d: verdict %d: %s", fam ? "sscan" : "ssd", sig,
                             bwd ? "bwd" : "fwd", staged, (int)v, detail);
                    /* the 16-bit outputs' rounding shows, within the dtype's target */
                    CG_CHECK(worst > 0 && worst <= 1e-2, "%s: worst rel err %g", sig, worst);
                    cg__tprob_free(&env, &p);
                }
        }
    cg_context_free(ctx);
}

/* The tuner plans 16-bit keys with the shape a call of that dtype gets: Lua's shape.dtypes
 * and flags of its shape (cg__tune_call_shape, from the signature) equal what the launcher
 * derives from the problem's views (cg__shape_of_prob). Needs the kernel shape's dtypes
 * (issue #15 item 2). */
CG_TEST(dtype_tune_kshape_dtypes) {
#ifdef CG_KS_DTYPES_CAP
    char dir[64] = "/tmp/cg_dtype_tune_XXXXXX";
    if (!mkdtemp(dir)) abort();
    cg_context *ctx = tune_test_ctx(dir);
    const char *sigs[] = {"f32", "bf16", "f16", "bf16-x-B"};
    for (int k = 0; k < 4; k++)
        for (int bwd = 0; bwd < 2; bwd++) {
            cg_tune_shape s;
            const int64_t T = 9;
            cg__tune_shape_init(&s, CG_OP_SSCAN_FWD);
            int64_t *x = s.shape.dim;
            cg__tune_shape_set_seq(&s, T);
            x[CG_SYM_B] = 1, x[CG_SYM_G] = 2, x[CG_SYM_D] = 6, x[CG_SYM_N] = 5;
            CG_CHECK_OK(ctx, cg__tune_shape_set_sig(ctx, &s, sigs[k]));
            tenv env = {ctx, "emulate", &cg__backend_ref, NULL};
            tprob p;
            CG_CHECK_OK(ctx, cg__tprob_init(&env, &p, &s, bwd, 1, T, 0));
            cg_shape sh, tsh;
            char a[CG_KS_DTYPES_CAP], b[CG_KS_DTYPES_CAP];
            cg__shape_of_prob(cg__op_desc(p.op), &p.prob, &sh);
            const int tflags = cg__tune_call_shape(&s, bwd, &tsh);
            cg__shape_dtypes(&sh, a);
            cg__shape_dtypes(&tsh, b);
            CG_CHECK(!strcmp(a, b), "%s %s: tuner \"%s\", launcher \"%s\"", sigs[k], bwd ? "bwd" : "fwd", b, a);
            CG_CHECK(cg__shape_kflags(&tsh, tflags) == cg__shape_kflags(&sh, bwd ? CG_KS_BWD : 0),
                     "%s %s: tuner's flags %#x, launcher's %#x", sigs[k], bwd ? "bwd" : "fwd",
                     (unsigned)cg__shape_kflags(&tsh, tflags), (unsigned)cg__shape_kflags(&sh, bwd ? CG_KS_BWD : 0));
            cg__tprob_free(&env, &p);
        }
    cg_context_free(ctx);
#else
    cg_test_skip("this build's kernel shape has no dtypes (issue #15 item 2 not merged)");
#endif
}
