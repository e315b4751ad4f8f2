/* test_varlen_gpu.c -- the generated selective-scan and SSD kernels on packed batches:
 * cu_seqlens read on the device (docs/varlen.md, "Backends"), run by the SIMT emulator
 * (the same source and launcher as the cuda backend) and compiled by NVRTC.
 *   varlen_gpu_sscan_emulate    the default configs: packed = the per-sequence calls
 *                               (emulated too) concatenated, forward and every gradient,
 *                               states per sequence, lengths [1, 37, 64, 200, 0, 5],
 *                               grouped B/C and not, [B, L, D] and [B, D, L] memory,
 *                               int32 / int64 offsets, states given and absent
 *   varlen_gpu_sscan_fwd_space  the configs of the space that sweep_sample.h selects
 *   varlen_gpu_sscan_bwd_space  (every one under CHUNKGEN_TEST_SWEEP=full) against the
 *                               float64 reference's packed call
 *   varlen_gpu_sscan_clamp      offsets that break the contract: no access out of bounds
 *                               (every tensor and the offsets end at a guard page: an
 *                               access past the end faults), status OK
 *   varlen_gpu_ssd_emulate      the SSD's default configs as sscan_emulate, forward and every
 *                               gradient: G = 2 < H = 4 and G = H = 4, dk = 5, dv = 7, both
 *                               layouts, int32 / int64, states given and absent, both mixes
 *   varlen_gpu_ssd_pinned      a pinned config for the packed and the per-sequence calls: equal
 *                               exactly, float32 and bf16 q, k, v (dout), both strategies / heads
 *   varlen_gpu_ssd_fwd_space    the selected configs of the SSD forward's (backward's) space,
 *   varlen_gpu_ssd_bwd_space    both strategies (heads), against the reference's packed call
 *   varlen_gpu_ssd_clamp        as sscan_clamp, the SSD forward's seq and 3phase, the
 *                               backward's heads=loop and split
 *   varlen_gpu_nvrtc_sm80/sm90  the selected varlen kernels (sscan and SSD, both directions)
 *                               through NVRTC and ptxas: 0 spills (CHUNKGEN_TEST_KCACHE as
 *                               the other NVRTC sweeps) */
#include "varlen_testlib.h"
#include "sweep_sample.h"

#include "cuda/cg_cuda.h"
#include "cuda_testlib.h"
#include "gen.h"
#include "nvrtc_testlib.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* D = 24 channels in G = 2 groups of 12 (so channel blocks of 8, 16 and 32 meet one or
 * both groups), N = 5 states (masked lanes), packed L = 307. */
static void dims_of(int64_t dims[CG_SYM_COUNT], int ungrouped) {
    memset(dims, 0, sizeof(int64_t) * CG_SYM_COUNT);
    dims[CG_SYM_B] = 1, dims[CG_SYM_D] = 24, dims[CG_SYM_N] = 5, dims[CG_SYM_G] = ungrouped ? 1 : 2;
}

/* The SSD's: G = 2 groups of H = 4 heads (ungrouped: G = H), dk = 5, dv = 7 (padded
 * tiles, the 4-byte loads). */
static void ssd_dims_of(int64_t dims[CG_SYM_COUNT], int ungrouped) {
    memset(dims, 0, sizeof(int64_t) * CG_SYM_COUNT);
    dims[CG_SYM_B] = 1, dims[CG_SYM_G] = ungrouped ? 4 : 2, dims[CG_SYM_H] = 4, dims[CG_SYM_DK] = 5, dims[CG_SYM_DV] = 7;
}
#define TOL_TF32 5e-3 /* SSD precision=tf32 (one tf32 product per matmul) */
static int is_ssd(cg_op op) { return op == CG_OP_SSD_FWD || op == CG_OP_SSD_BWD; }
static void op_dims(cg_op op, int64_t dims[CG_SYM_COUNT], int ungrouped) {
    if (is_ssd(op)) ssd_dims_of(dims, ungrouped);
    else dims_of(dims, ungrouped);
}

/* A second length mix: 0-length sequences first and last (offsets 0 and L repeated),
 * starts 1 and 2 steps apart (several in one chunk), packed L = 203. */
static const int64_t k_edge[6] = {0, 130, 1, 2, 70, 0};

static unsigned omit_states(cg_op op) {
    const cg_op_desc *d = cg__op_desc(op);
    unsigned omit = 1u << cg__op_tensor(d, "h0");
    if (d->bwd) omit |= 1u << cg__op_tensor(d, "dhT");
    return omit;
}

CG_TEST(varlen_gpu_sscan_emulate) {
    for (int op = CG_OP_SSCAN_FWD; op <= CG_OP_SSCAN_BWD; op++)
        for (int v = 0; v < 4; v++) { /* bit 0: ungrouped, bit 1: [B, D, L] memory */
            int64_t dims[CG_SYM_COUNT];
            const int flags = (v & 1 ? VL_UNGROUPED : 0) | (v & 2 ? VL_SEQ_MAJOR : 0);
            dims_of(dims, v & 1);
            vl_check_packed((cg_op)op, dims, 0, CG_BACKEND_EMULATE, v & 1 ? CG_I32 : CG_I64, v == 1 ? omit_states((cg_op)op) : 0,
                            31 + (uint64_t)(op * 4 + v), flags);
        }
    /* 0-length sequences first and last (an offset at L), starts 2 steps apart */
    for (int op = CG_OP_SSCAN_FWD; op <= CG_OP_SSCAN_BWD; op++) {
        int64_t dims[CG_SYM_COUNT];
        dims_of(dims, 0);
        vl_check_packed_lens((cg_op)op, dims, 0, CG_BACKEND_EMULATE, CG_I64, 0, 41 + (uint64_t)op, 0, k_edge, 6);
    }
}

CG_TEST(varlen_gpu_ssd_emulate) {
    for (int o = CG_OP_SSD_FWD; o <= CG_OP_SSD_BWD; o++) {
        const cg_op op = (cg_op)o;
        for (int v = 0; v < 4; v++) { /* bit 0: G = H, bit 1: head-major layout */
            int64_t dims[CG_SYM_COUNT];
            ssd_dims_of(dims, v & 1);
            vl_check_packed(op, dims, v >> 1, CG_BACKEND_EMULATE, v & 1 ? CG_I32 : CG_I64, v == 1 ? omit_states(op) : 0,
                            51 + (uint64_t)(o * 4 + v), 0);
        }
        for (int hm = 0; hm < 2; hm++) { /* 0-length sequences first and last, starts 1 and 2 steps apart */
            int64_t dims[CG_SYM_COUNT];
            ssd_dims_of(dims, 0);
            vl_check_packed_lens(op, dims, hm, CG_BACKEND_EMULATE, CG_I64, 0, 61 + (uint64_t)(o * 2 + hm), 0, k_edge, 6);
        }
    }
}

/* With one config pinned, the packed call runs the per-sequence calls' kernels on the same
 * chunks (every chunk starts at a sequence start): the results agree bit for bit, 16-bit
 * inputs too (the widening, the rounding of o / dq, dk, dv once). */
CG_TEST(varlen_gpu_ssd_pinned) {
    static const struct {
        cg_op op;
        int flags;
        const char *config;
    } k_runs[] = {
        {CG_OP_SSD_FWD, 0, "chunk=16,block_dv=16,warps=2,stages=2,precision=3xtf32,strategy=seq"},
        {CG_OP_SSD_FWD, VL_BF16, "chunk=16,block_dv=16,warps=2,stages=1,precision=mma16,strategy=3phase"},
        {CG_OP_SSD_BWD, VL_BF16, "chunk=16,block_dv=16,warps=2,precision=mma16,heads=split,recompute=1"},
        {CG_OP_SSD_BWD, 0, "chunk=16,block_dv=16,warps=4,precision=ieee,heads=loop,recompute=1"},
    };
    for (size_t r = 0; r < sizeof k_runs / sizeof k_runs[0]; r++) {
        int64_t dims[CG_SYM_COUNT];
        ssd_dims_of(dims, 0);
        vl_check_packed_cfg(k_runs[r].op, dims, (int)(r & 1), CG_BACKEND_EMULATE, CG_I32, 0, 71 + (uint64_t)r,
                            k_runs[r].flags, k_runs[r].config);
    }
}

/* The shape validation gives the packed problem (runtime/launch.c), and its shape flags as
 * the generator's extra flags (gen.h); returns them. */
static int shape_packed(cg_op op, int ungrouped, cg_shape *ks) {
    memset(ks, 0, sizeof *ks);
    ks->size = sizeof *ks, ks->op = op, ks->nseq = VL_NLENS;
    int64_t L = 0;
    for (int i = 0; i < VL_NLENS; i++) L += k_edge[i]; /* the shorter mix: its space holds the other's */
    if (is_ssd(op)) {
        ssd_dims_of(ks->dim, ungrouped);
        ks->dim[CG_SYM_B] = 1, ks->dim[CG_SYM_T] = L;
        return CG_KS_H0 | (cg__op_desc(op)->bwd ? CG_KS_DHT | CG_KS_BWD : CG_KS_HT);
    }
    ks->dim[CG_SYM_B] = 1, ks->dim[CG_SYM_L] = L, ks->dim[CG_SYM_D] = 24, ks->dim[CG_SYM_N] = 5;
    ks->dim[CG_SYM_G] = ungrouped ? 1 : 2;
    const int flags = CG_KS_H0 | CG_KS_SOFTPLUS | CG_KS_HAS_D | CG_KS_HAS_Z | CG_KS_HAS_BIAS | (ungrouped ? 0 : CG_KS_GROUPED);
    return flags | (cg__op_desc(op)->bwd ? CG_KS_DHT | CG_KS_BWD : CG_KS_HT);
}

static void cfg_text(const cg_cfg *c, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < c->n && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s=%s", i ? "," : "", c->kv[i].key, c->kv[i].val);
}

/* The configs of op's space on the packed shape that cg_sweep_select keeps (the covering
 * sample, every one under CHUNKGEN_TEST_SWEEP=full: sweep_sample.h), emulated, against the
 * reference's packed call (itself one B = 1 call per sequence), taking turns over the two
 * length mixes. */
static void run_space_on(cg_op op, cg_backend be) {
    cg_devinfo dev;
    cg_context *ctx = cg_test_device_context(be, &dev);
    if (!ctx) return;
    const cg_op_desc *d = cg__op_desc(op);
    int64_t dims[CG_SYM_COUNT];
    op_dims(op, dims, 0);
    cg_shape ks;
    const int ksf = shape_packed(op, 0, &ks);
    /* the other strategy (the SSD backward's: its heads) */
    const char *alt = op == CG_OP_SSD_BWD ? "heads=split" : is_ssd(op) ? "strategy=3phase" : "strategy=par";
    cg_cfg *space = NULL;
    int n = 0;
    CG_CHECK_OK(ctx, cg__gen_space(ctx, d->name, &ks, ksf, &dev, &space, &n));
    CG_CHECK(n > 1, "%s: %d configs", d->name, n);
    const int64_t *mix[2] = {vl_lens, k_edge};
    dtt_prob pk[2], rf[2];
    cg_tbuf cu[2];
    for (int m = 0; m < 2; m++) {
        vl_packed_new(&pk[m], op, dims, 0, mix[m], VL_NLENS, 0, 0);
        dtt_fill(&pk[m], 77 + (uint64_t)op);
        vl_packed_new(&rf[m], op, dims, 0, mix[m], VL_NLENS, 0, 0);
        dtt_copy_inputs(&rf[m], &pk[m]);
        cu[m] = vl_cu_new(m ? CG_I64 : CG_I32, mix[m], VL_NLENS);
        CG_CHECK_OK(ctx, vl_run_packed(ctx, &rf[m], CG_BACKEND_REF, &cu[m], NULL));
    }
    cg_sweep_sel sel;
    cg_sweep_select_array(space, n, CG_SWEEP_VALUES, &sel); /* the varlen build: a variant (sweep_sample.h) */
    int ran = 0, par = 0, kept = 0;
    for (int q = 0; q < n; q++) {
        if (!cg_sweep_keeps(&sel, q)) continue;
        char cfg[512];
        cfg_text(&space[q], cfg, sizeof cfg);
        const int sp = strstr(cfg, alt) != NULL, m = kept++ % 2;
        for (int i = 0; i < d->nt; i++) /* no output of an earlier config survives */
            if (d->t[i].role == CG_TD_OUT && pk[m].t[i].t.data) memset(pk[m].t[i].mem, 0xff, (size_t)pk[m].t[i].count * 4);
        cg_status s = vl_run_packed(ctx, &pk[m], be, &cu[m], cfg);
        CG_CHECK(s == CG_OK, "%s config %s: %s", d->name, cfg, cg_errmsg(ctx));
        if (s != CG_OK) continue;
        CG_CHECK(strstr(cg_last_dispatch(ctx), "varlen=6 sequences") != NULL, "dispatch line: %s", cg_last_dispatch(ctx));
        ran++;
        par += sp;
        for (int i = 0; i < d->nt; i++) {
            if (d->t[i].role != CG_TD_OUT || !pk[m].t[i].t.data) continue;
            double err = cg_rel_err(&pk[m].t[i], &rf[m].t[i]);
            /* plain tf32 products (SSD): the SSD tests' tf32 tolerance (tests/test_ssd_gen.c) */
            const double tol = strstr(cfg, "precision=tf32") ? TOL_TF32 : cg__tol(d->t[i].tol);
            CG_CHECK(err <= tol, "%s config %s packed (lengths %d): %s differs from ref's by %.3g (target %g)", d->name,
                     cfg, m, d->t[i].name, err, tol);
        }
    }
    CG_CHECK(par > 0 && par < ran, "%s: the sweep covers both strategies (%d of %d %s)", d->name, par, ran, alt);
    CG_CHECK(ran == sel.nkept, "%s: %d of %d configs ran", d->name, ran, sel.nkept);
    char what[96];
    fprintf(stderr, "  %s: varlen configs run on %s: %s\n", d->name, cg_backend_name(be),
            cg_sweep_describe(&sel, what, sizeof what));
    cg_sweep_sel_free(&sel);
    for (int m = 0; m < 2; m++) {
        cg_tbuf_free(&cu[m]);
        dtt_free(&pk[m]);
        dtt_free(&rf[m]);
    }
    free(space);
    cg_context_free(ctx);
}

static void run_space(cg_op op) { run_space_on(op, CG_BACKEND_EMULATE); }

CG_TEST(varlen_gpu_sscan_fwd_space) { run_space(CG_OP_SSCAN_FWD); }
CG_TEST(varlen_gpu_sscan_bwd_space) { run_space(CG_OP_SSCAN_BWD); }
CG_TEST(varlen_gpu_ssd_fwd_space) { run_space(CG_OP_SSD_FWD); }
CG_TEST(varlen_gpu_ssd_bwd_space) { run_space(CG_OP_SSD_BWD); }
/* Natively on a GPU (skipped without one): the varlen kernels reading cu_seqlens on the
 * device, the same selection of the device's space, against the float64 reference. */
CG_TEST(varlen_gpu_cuda_sscan_fwd) { run_space_on(CG_OP_SSCAN_FWD, CG_BACKEND_CUDA); }
CG_TEST(varlen_gpu_cuda_sscan_bwd) { run_space_on(CG_OP_SSCAN_BWD, CG_BACKEND_CUDA); }
CG_TEST(varlen_gpu_cuda_ssd_fwd) { run_space_on(CG_OP_SSD_FWD, CG_BACKEND_CUDA); }
CG_TEST(varlen_gpu_cuda_ssd_bwd) { run_space_on(CG_OP_SSD_BWD, CG_BACKEND_CUDA); }

/* A copy of bytes at src ending (16-byte aligned) right before a PROT_NONE page, with one
 * before the page it starts in; *map, *len: the mapping to unmap. */
static void *guarded(const void *src, size_t bytes, void **map, size_t *len) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (bytes + pg - 1) / pg * pg;
    *len = body + 2 * pg;
    char *m = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) abort();
    if (mprotect(m, pg, PROT_NONE) || mprotect(m + pg + body, pg, PROT_NONE)) abort();
    char *d = m + pg + body - (bytes + 15) / 16 * 16;
    memcpy(d, src, bytes);
    *map = m;
    return d;
}

/* Offsets that break the contract (device offsets are not validated): decreasing, past
 * L, negative, first not 0. The call runs, every access stays in bounds (the emulator
 * fails the launch on any out-of-bounds access); the values are unspecified. */
static void clamp_run(cg_op op, const char *const strat[2]) {
    static const int64_t bad[][VL_NLENS + 1] = {
        {0, 40, 10, 500, -7, 300, 307}, {5, 5, 5, 5, 5, 5, 5}, {0, 1000, 1000, 2000, 3000, 4000, 5000},
        {-100, -50, 0, 10, 9, 8, -1}};
    cg_context *ctx = NULL;
    CG_CHECK_OK(ctx, cg_context_create(&ctx));
    for (int st = 0; st < 2; st++)
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            int64_t dims[CG_SYM_COUNT];
            op_dims(op, dims, 0);
            dtt_prob pk;
            vl_packed_new(&pk, op, dims, 0, vl_lens, VL_NLENS, 0, 0);
            dtt_fill(&pk, 3);
            cg_tbuf cu = vl_cu_new(CG_I64, vl_lens, VL_NLENS);
            /* host offsets are validated: validate good ones, then run the kernels
             * directly on bad ones, as on device offsets (which are not read) */
            const cg_op_desc *d = pk.d;
            void *args = (void *)dtt_args(&pk);
            *(cg_tensor *)((char *)args + d->varlen->arg_off) = cu.t;
            union {
                cg_sscan_prob sc;
                cg_ssd_prob sd;
            } u;
            cg_status s = op == CG_OP_SSCAN_FWD ? cg__sscan_fwd_prob(ctx, args, &u.sc)
                          : op == CG_OP_SSCAN_BWD ? cg__sscan_bwd_prob(ctx, args, &u.sc)
                          : op == CG_OP_SSD_FWD   ? cg__ssd_fwd_prob(ctx, args, &u.sd)
                                                  : cg__ssd_bwd_prob(ctx, args, &u.sd);
            CG_CHECK_OK(ctx, s);
            cg_view *cuv = cg__prob_cu(d, &u);
            CG_CHECK(*cg__prob_nseq(d, &u) == VL_NLENS && cuv->p == cu.mem, "%s: packed problem", d->name);
            /* every tensor and the offsets moved next to guard pages */
            void *map[CG_OP_MAX_TENSORS + 1] = {0};
            size_t len[CG_OP_MAX_TENSORS + 1] = {0};
            for (int i = 0; i < d->nt; i++) {
                cg_view *v = cg__prob_view(d, &u, i);
                CG_CHECK(v->p == pk.t[i].t.data && (!v->p || v->p == pk.t[i].mem), "%s: %s view", d->name, d->t[i].name);
                if (v->p) v->p = guarded(pk.t[i].mem, (size_t)pk.t[i].count * 4, &map[i], &len[i]);
            }
            cuv->p = guarded(bad[k], sizeof bad[k], &map[d->nt], &len[d->nt]);
            cg_cfg cfg;
            CG_CHECK_OK(ctx, cg__cfg_parse(ctx, strat[st], &cfg));
            cg_exec ex = CG_EXEC_INIT;
            const cg_backend_vt *vt = &cg__backend_emulate;
            s = vt->run(ctx, vt, op, &u, &cfg, &ex);
            CG_CHECK(s == CG_OK, "%s offsets %zu %s: %s", d->name, k, strat[st], cg_errmsg(ctx));
            for (int i = 0; i <= d->nt; i++)
                if (map[i]) munmap(map[i], len[i]);
            cg_tbuf_free(&cu);
            dtt_free(&pk);
        }
    cg_context_free(ctx);
}

CG_TEST(varlen_gpu_sscan_clamp) {
    static const char *const strat[2] = {"strategy=seq", "strategy=par"};
    for (int op = CG_OP_SSCAN_FWD; op <= CG_OP_SSCAN_BWD; op++) clamp_run((cg_op)op, strat);
}

/* The SSD forward's strategies (stages = 2: the prefetch of a sequence's next chunk), the
 * backward's heads. */
CG_TEST(varlen_gpu_ssd_clamp) {
    static const char *const fwd[2] = {"strategy=seq,stages=2", "strategy=3phase,stages=1"};
    static const char *const bwd[2] = {"heads=loop", "heads=split"};
    clamp_run(CG_OP_SSD_FWD, fwd);
    clamp_run(CG_OP_SSD_BWD, bwd);
}

/* The varlen kernels (CG_VARLEN) of the selected configs (sweep_sample.h), the sscan's
 * and the SSD's both directions, grouped and not, through NVRTC for sm_arch: no spills
 * (the f32 sweeps render nseq = 0 only). */
static void varlen_nvrtc(int arch) {
    cg_test_nvrtc nv;
    if (!cg_test_nvrtc_begin(&nv, arch)) return;
    static const cg_op ops[] = {CG_OP_SSCAN_FWD, CG_OP_SSCAN_BWD, CG_OP_SSD_FWD, CG_OP_SSD_BWD};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int ug = 0; ug < 2; ug++) {
            const cg_op op = ops[o];
            cg_shape ks;
            const int ksf = shape_packed(op, ug, &ks);
            int64_t *dim = ks.dim; /* realistic shapes: every config of the space is valid */
            if (is_ssd(op)) dim[CG_SYM_T] = 4096, dim[CG_SYM_H] = 8, dim[CG_SYM_G] = ug ? 8 : 2, dim[CG_SYM_DK] = dim[CG_SYM_DV] = 64;
            else dim[CG_SYM_L] = 4096, dim[CG_SYM_D] = 256, dim[CG_SYM_N] = 16;
            static const char *const defines[] = {"#define CG_VARLEN 1\n", NULL};
            cg_test_nvrtc_sample(&nv, cg__op_desc(op)->name, &ks, ksf, NULL, NULL, defines);
        }
    cg_test_nvrtc_end(&nv, "varlen", "");
}
CG_TEST(varlen_gpu_nvrtc_sm80) { varlen_nvrtc(80); }
CG_TEST(varlen_gpu_nvrtc_sm90) { varlen_nvrtc(90); }
