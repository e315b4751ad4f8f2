/* test_dtype.c -- 16-bit storage (issue #15), host side: the dtype rules of validation
 * (docs/dtypes.md), the views' load/store rounding once, backends that do not take 16-bit
 * tensors refusing by name, the auto backend never choosing one of them, the host-copy
 * fallback copying 2-byte elements, and the reference's 16-bit outputs being its float64
 * results rounded once. */
#include "test_dtype_lib.h"

#include "gen.h"

static cg_context *new_ctx(void) {
    cg_context *ctx = NULL;
    if (cg_context_create(&ctx) != CG_OK) abort();
    return ctx;
}

/* The symbol values (by cg_sym) of an SSD or a selective-scan problem, B = 2, G = 2. */
typedef struct dtt_dims {
    int64_t v[CG_SYM_COUNT];
} dtt_dims;
static dtt_dims ssd_dims(int64_t T, int64_t dk, int64_t dv) {
    dtt_dims d = {{0}};
    d.v[CG_SYM_B] = 2, d.v[CG_SYM_T] = T, d.v[CG_SYM_G] = 2, d.v[CG_SYM_H] = 4, d.v[CG_SYM_DK] = dk, d.v[CG_SYM_DV] = dv;
    return d;
}
static dtt_dims sscan_dims(int64_t L, int64_t D, int64_t N) {
    dtt_dims d = {{0}};
    d.v[CG_SYM_B] = 2, d.v[CG_SYM_L] = L, d.v[CG_SYM_D] = D, d.v[CG_SYM_N] = N, d.v[CG_SYM_G] = 2;
    return d;
}

/* A new context and a, b: one bf16 problem of op twice, the same inputs (seed; dtt_pair,
 * token-major); pair_close frees the three. */
static cg_context *pair_open(dtt_prob *a, dtt_prob *b, cg_op op, dtt_dims dims, uint64_t seed) {
    dtt_pair(a, b, op, dims.v, 0, CG_BF16, seed);
    return new_ctx();
}
static void pair_close(cg_context *ctx, dtt_prob *a, dtt_prob *b) {
    dtt_free(a);
    dtt_free(b);
    cg_context_free(ctx);
}

/* Validate p's args; the problem into prob. */
static cg_status validate(cg_context *ctx, dtt_prob *p, void *prob) {
    return cg__op_validate(ctx, p->d, dtt_args(p), prob);
}

/* Replace tensor name of p by one of dtype dt (same shape, zero-filled). */
static void retype(dtt_prob *p, const char *name, cg_dtype dt) {
    int i = dtt_idx(p, name);
    cg_tbuf n = cg_tbuf_new(dt, p->t[i].t.ndim, p->t[i].t.shape);
    cg_tbuf_free(&p->t[i]);
    p->t[i] = n;
}

CG_TEST(dtype_table_marks_16bit_tensors) {
    /* the tensors peers take in 16 bits (issue #15 item 1), and only those */
    const char *half[CG_OP_COUNT] = {"q k v o", "q k v dout dq dk dv", "x delta B C z y",
                                     "x delta B C z dy dx ddelta dB dC dz", "q k v beta o",
                                     "q k v beta dout dq dk dv dbeta", "q k v cache o",
                                     "x delta B C z cache y",
                                     "q k v beta cache o", "a b x y",
                                     "a b x dy da db dx"};
    for (int op = 0; op < CG_OP_COUNT; op++) {
        const cg_op_desc *d = cg__op_desc((cg_op)op);
        char got[256] = "";
        size_t n = 0;
        for (int i = 0; i < d->nt; i++)
            if (d->t[i].flags & CG_TD_HALF) n += (size_t)snprintf(got + n, sizeof got - n, "%s%s", n ? " " : "", d->t[i].name);
        CG_CHECK(!strcmp(got, half[op]), "%s: 16-bit tensors %s, expected %s", d->name, got, half[op]);
        /* outputs follow: o <- v, y <- x, a gradient <- its input */
        for (int i = 0; i < d->nt; i++) {
            int like = cg__op_dtype_like(d, i);
            if (d->t[i].grad_of) CG_CHECK(like == cg__op_tensor(d, d->t[i].grad_of), "%s.%s", d->name, d->t[i].name);
        }
    }
    const cg_op_desc *f = cg__op_desc(CG_OP_SSD_FWD), *s = cg__op_desc(CG_OP_SSCAN_FWD);
    CG_CHECK(cg__op_dtype_like(f, cg__op_tensor(f, "o")) == cg__op_tensor(f, "v"), "o follows v");
    CG_CHECK(cg__op_dtype_like(s, cg__op_tensor(s, "y")) == cg__op_tensor(s, "x"), "y follows x");
    CG_CHECK(cg__op_dtype_like(f, cg__op_tensor(f, "hT")) == -1, "hT follows nothing (float32)");
}

CG_TEST(dtype_rules_ssd) {
    cg_context *ctx = new_ctx();
    const dtt_dims dims = ssd_dims(5, 7, 6);
    cg_ssd_prob pr;
    for (int h = 0; h < 2; h++) {
        const cg_dtype H = h ? CG_F16 : CG_BF16, other = h ? CG_BF16 : CG_F16;
        const char *Hn = h ? "CG_F16" : "CG_BF16";
        dtt_prob p;
        dtt_new(&p, CG_OP_SSD_FWD, dims.v, 1, h, H, CG_F32, 0);
        CG_CHECK_OK(ctx, validate(ctx, &p, &pr));
        CG_CHECK(pr.dtype == CG_F32, "math class %d, expected CG_F32", (int)pr.dtype);
        CG_CHECK(pr.q.dt == H && pr.o.dt == H && pr.la.dt == CG_F32 && pr.hT.dt == CG_F32, "views' storage dtypes");
        /* q alone 16-bit, the rest float32: allowed */
        retype(&p, "k", CG_F32), retype(&p, "v", CG_F32), retype(&p, "o", CG_F32);
        CG_CHECK_OK(ctx, validate(ctx, &p, &pr));
        /* o follows v */
        retype(&p, "v", H);
        CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, "o: dtype CG_F32 but expected", "o f32 with v 16-bit");
        CG_CHECK(strstr(cg_errmsg(ctx), Hn) && strstr(cg_errmsg(ctx), "like v"), "message: %s", cg_errmsg(ctx));
        retype(&p, "o", H);
        CG_CHECK_OK(ctx, validate(ctx, &p, &pr));
        /* one 16-bit dtype per call */
        retype(&p, "k", other);
        CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, "k: dtype", "two 16-bit dtypes");
        CG_CHECK(strstr(cg_errmsg(ctx), "one 16-bit dtype per call"), "message: %s", cg_errmsg(ctx));
        retype(&p, "k", H);
        /* states and log_alpha stay float32 */
        const char *f32only[] = {"log_alpha", "h0", "hT"};
        for (int j = 0; j < 3; j++) {
            retype(&p, f32only[j], H);
            CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, f32only[j], f32only[j]);
            CG_CHECK(strstr(cg_errmsg(ctx), "expected CG_F32") && strstr(cg_errmsg(ctx), "stays float32"), "message: %s",
                     cg_errmsg(ctx));
            retype(&p, f32only[j], CG_F32);
        }
        /* float64 does not mix with 16-bit (a float64 call is all CG_F64) */
        retype(&p, "log_alpha", CG_F64);
        CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, "log_alpha: dtype CG_F64 but expected CG_F32", "f64 la");
        retype(&p, "log_alpha", CG_F32);
        /* 2-byte alignment */
        int iq = dtt_idx(&p, "q");
        void *q0 = p.t[iq].t.data;
        p.t[iq].t.data = (char *)q0 + 1;
        CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, "q: data pointer", "odd bf16 pointer");
        CG_CHECK(strstr(cg_errmsg(ctx), "aligned to 2 bytes"), "message: %s", cg_errmsg(ctx));
        p.t[iq].t.data = q0;
        /* unknown dtype */
        p.t[iq].t.dtype = (cg_dtype)9;
        CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, "q: unknown dtype 9", "dtype 9");
        p.t[iq].t.dtype = H;
        CG_CHECK_OK(ctx, validate(ctx, &p, &pr));
        dtt_free(&p);

        /* backward: a gradient has its input's dtype; dh0 without h0 is float32 */
        dtt_new(&p, CG_OP_SSD_BWD, dims.v, 1, h, H, CG_F32, 1u << cg__op_tensor(cg__op_desc(CG_OP_SSD_BWD), "h0"));
        CG_CHECK_OK(ctx, validate(ctx, &p, &pr));
        CG_CHECK(pr.grad_q.dt == H && pr.grad_la.dt == CG_F32 && pr.grad_h0.dt == CG_F32 && pr.dout.dt == H, "bwd views");
        retype(&p, "dv", CG_F32);
        CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, "dv: dtype CG_F32", "dv f32 with v 16-bit");
        CG_CHECK(strstr(cg_errmsg(ctx), "gradient has its input's dtype"), "message: %s", cg_errmsg(ctx));
        retype(&p, "dv", H);
        retype(&p, "dout", CG_F32); /* dout: free (float32 or the call's 16-bit dtype) */
        CG_CHECK_OK(ctx, validate(ctx, &p, &pr));
        dtt_free(&p);
    }
    cg_context_free(ctx);
}

CG_TEST(dtype_rules_sscan) {
    cg_context *ctx = new_ctx();
    const dtt_dims dims = sscan_dims(6, 4, 3);
    cg_sscan_prob pr;
    dtt_prob p;
    dtt_new(&p, CG_OP_SSCAN_BWD, dims.v, 1, 0, CG_BF16, CG_F32, 0);
    CG_CHECK_OK(ctx, validate(ctx, &p, &pr));
    CG_CHECK(pr.x.dt == CG_BF16 && pr.dB.dt == CG_BF16 && pr.A.dt == CG_F32 && pr.dA.dt == CG_F32, "views");
    /* the mix: bf16 x with float32 delta (then ddelta follows delta) */
    retype(&p, "delta", CG_F32);
    CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, "ddelta: dtype CG_BF16 but expected CG_F32 like delta",
                     "ddelta follows delta");
    retype(&p, "ddelta", CG_F32);
    CG_CHECK_OK(ctx, validate(ctx, &p, &pr));
    const char *f32only[] = {"A", "D", "delta_bias", "h0", "dhT", "dA", "dD", "ddelta_bias", "dh0"};
    for (int j = 0; j < 9; j++) {
        retype(&p, f32only[j], CG_BF16);
        CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, f32only[j], f32only[j]);
        CG_CHECK(strstr(cg_errmsg(ctx), "stays float32"), "message: %s", cg_errmsg(ctx));
        retype(&p, f32only[j], CG_F32);
    }
    retype(&p, "dC", CG_F16);
    CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, "dC: dtype CG_F16", "dC f16 in a bf16 call");
    dtt_free(&p);
    /* ungrouped B, C in f16 with f32 x: y follows x */
    dtt_new(&p, CG_OP_SSCAN_FWD, dims.v, 0, 0, CG_F16, CG_F32, 0);
    retype(&p, "x", CG_F32);
    CG_CHECK_REFUSED(ctx, validate(ctx, &p, &pr), CG_EINVAL, "y: dtype CG_F16 but expected CG_F32 like x", "y follows x");
    retype(&p, "y", CG_F32);
    CG_CHECK_OK(ctx, validate(ctx, &p, &pr));
    CG_CHECK(pr.Bm.dt == CG_F16 && pr.y.dt == CG_F32, "views");
    dtt_free(&p);
    cg_context_free(ctx);
}

/* The float32-only backends refuse 16-bit tensors by name; auto never picks them. */
CG_TEST(dtype_backends_refuse_by_name) {
    dtt_prob p, r;
    cg_context *ctx = pair_open(&p, &r, CG_OP_SSD_FWD, ssd_dims(5, 7, 6), 3);
    const cg_backend_vt *vts[] = {&cg__backend_cpu, &cg__backend_emulate, &cg__backend_cuda};
    const cg_backend bes[] = {CG_BACKEND_CPU, CG_BACKEND_EMULATE, CG_BACKEND_CUDA};
    for (int b = 0; b < 3; b++) {
        if (vts[b]->half & CG_DTM(CG_BF16)) continue; /* this backend takes them (issue #15 items 2, 3) */
        CG_CHECK_REFUSED(ctx, dtt_run(ctx, &p, bes[b]), CG_EUNSUPPORTED, "q is CG_BF16", vts[b]->name);
        CG_CHECK(strstr(cg_errmsg(ctx), vts[b]->name), "message names the backend: %s", cg_errmsg(ctx));
    }
    CG_CHECK_OK(ctx, dtt_run(ctx, &r, CG_BACKEND_REF));
    CG_CHECK_OK(ctx, dtt_run(ctx, &p, CG_BACKEND_AUTO));
    const char *line = cg_last_dispatch(ctx);
    if (cg__backend_cpu.half & CG_DTM(CG_BF16)) {
        CG_CHECK(strstr(line, "backend=cpu"), "auto with a cpu that takes bf16: %s", line);
    } else {
        CG_CHECK(strstr(line, "backend=ref") && strstr(line, "cpu takes no CG_BF16 tensors yet"), "dispatch: %s", line);
        const char *bad = dtt_first_diff(&p, &r);
        CG_CHECK(!bad, "%s: auto (ref) differs from ref", bad);
    }
    pair_close(ctx, &p, &r);
}

/* cg__vstore rounds a double once: no double rounding through float32. */
CG_TEST(dtype_vstore_rounds_once) {
    uint16_t buf[1];
    cg_view vb = {buf, CG_BF16, {1, 0, 0, 0}}, vh = {buf, CG_F16, {1, 0, 0, 0}};
    /* 1 + 2^-8 + 2^-30: above the bf16 midpoint 1 + 2^-8, but float32 rounds it onto the
     * midpoint, which then ties to even (1.0) */
    double x = 1.0 + ldexp(1, -8) + ldexp(1, -30);
    cg__vstore(&vb, 0, 0, 0, 0, x);
    CG_CHECK(cg__vload(&vb, 0, 0, 0, 0) == 1.0 + ldexp(1, -7), "bf16 of %.17g: %.17g", x, cg__vload(&vb, 0, 0, 0, 0));
    cg__vstore(&vb, 0, 0, 0, 0, -x);
    CG_CHECK(cg__vload(&vb, 0, 0, 0, 0) == -(1.0 + ldexp(1, -7)), "bf16 of -x");
    x = 1.0 + ldexp(1, -11) + ldexp(1, -40);
    cg__vstore(&vh, 0, 0, 0, 0, x);
    CG_CHECK(cg__vload(&vh, 0, 0, 0, 0) == 1.0 + ldexp(1, -10), "f16 of %.17g: %.17g", x, cg__vload(&vh, 0, 0, 0, 0));
    /* random doubles: the stored value is a nearest 16-bit value (ties: the even one) */
    cg_rng r = {77};
    for (int k = 0; k < 200000; k++) {
        int half = k & 1;
        cg_view *v = half ? &vh : &vb;
        double y = ldexp(cg_rng_uniform(&r, -1, 1), (int)cg_rng_uniform(&r, half ? -20 : -60, half ? 15 : 60));
        cg__vstore(v, 0, 0, 0, 0, y);
        uint16_t got = buf[0];
        double g = cg__vload(v, 0, 0, 0, 0);
        /* the neighbours of got toward y must not be closer */
        int worse = 0;
        for (int dlt = -1; dlt <= 1; dlt += 2) {
            buf[0] = (uint16_t)(got + dlt);
            double n = cg__vload(v, 0, 0, 0, 0);
            if (n != n || isinf(n)) continue;
            double en = fabs(n - y), eg = fabs(g - y);
            if (en < eg || (en == eg && (got & 1))) worse = 1;
        }
        if (worse && !isinf(g)) {
            CG_CHECK(0, "%s of %.17g gave %.17g (0x%04x): a neighbour is nearer", half ? "f16" : "bf16", y, g, got);
            break;
        }
    }
    /* NaN stays NaN */
    cg__vstore(&vb, 0, 0, 0, 0, NAN);
    CG_CHECK(isnan(cg__vload(&vb, 0, 0, 0, 0)), "bf16 NaN");
    cg__vstore(&vh, 0, 0, 0, 0, -NAN);
    CG_CHECK(isnan(cg__vload(&vh, 0, 0, 0, 0)), "f16 NaN");
}

/* The reference on 16-bit tensors: its float64 results on the same (rounded) inputs,
 * rounded once, bit for bit; float32-only tensors as float32. */
CG_TEST(dtype_ref_rounds_its_f64_results) {
    cg_context *ctx = new_ctx();
    for (int op = 0; op < CG_OP_COUNT; op++) {
        const cg_op_desc *d = cg__op_desc((cg_op)op);
        if (cg__op_slots(d)) continue; /* decode steps (slot indices): tests/test_step.c */
        const dtt_dims dims = d->seq == CG_SYM_T ? ssd_dims(37, 7, 40) : sscan_dims(37, 6, 5); /* ssd, gdr */
        for (int h = 0; h < 2; h++) {
            dtt_prob p, r;
            dtt_new(&p, (cg_op)op, dims.v, 1, h, h ? CG_F16 : CG_BF16, CG_F32, 0);
            dtt_new(&r, (cg_op)op, dims.v, 1, h, CG_F64, CG_F64, 0);
            dtt_fill(&p, 10 + (uint64_t)op);
            dtt_copy_inputs(&r, &p);
            CG_CHECK_OK(ctx, dtt_run(ctx, &p, CG_BACKEND_REF));
            CG_CHECK_OK(ctx, dtt_run(ctx, &r, CG_BACKEND_REF));
            for (int i = 0; i < d->nt; i++) {
                if (d->t[i].role != CG_TD_OUT || !p.t[i].t.data) continue;
                cg_tbuf want = cg_tbuf_new(p.t[i].t.dtype, p.t[i].t.ndim, p.t[i].t.shape);
                cg_tbuf_copy(&want, &r.t[i]); /* rounds once */
                size_t bytes = (size_t)want.count * cg__dtype_size(want.t.dtype);
                CG_CHECK(!memcmp(want.mem, p.t[i].mem, bytes), "%s.%s (%s): not the float64 result rounded once",
                         d->name, d->t[i].name, cg__dtype_name(p.t[i].t.dtype));
                cg_tbuf_free(&want);
            }
            dtt_free(&p);
            dtt_free(&r);
        }
    }
    cg_context_free(ctx);
}

/* The auto backend's host copies carry 2-byte elements: the reference on host copies of
 * emulator kernel memory equals the reference on the tensors themselves. */
CG_TEST(dtype_fallback_copies_16bit) {
    dtt_prob a, b;
    cg_context *ctx = pair_open(&a, &b, CG_OP_SSCAN_BWD, sscan_dims(13, 6, 5), 21);
    CG_CHECK_OK(ctx, dtt_run(ctx, &b, CG_BACKEND_REF));
    cg_sscan_prob p;
    CG_CHECK_OK(ctx, validate(ctx, &a, &p));
    cg_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    CG_CHECK_OK(ctx, cg__host_fallback(ctx, &cg__kexec_emu, &cg__backend_ref, CG_OP_SSCAN_BWD, &p, &cfg, NULL, "test"));
    const char *bad = dtt_first_diff(&a, &b);
    CG_CHECK(!bad, "%s: the fallback differs from ref", bad);
    /* through cg__host_fallback the cpu backend refuses 16-bit tensors it does not take */
    if (!(cg__backend_cpu.half & CG_DTM(CG_BF16)))
        CG_CHECK_REFUSED(ctx, cg__host_fallback(ctx, &cg__kexec_emu, &cg__backend_cpu, CG_OP_SSCAN_BWD, &p, &cfg, NULL, "t"),
                         CG_EUNSUPPORTED, "backend cpu", "cpu on host copies");
    pair_close(ctx, &a, &b);
}
