/* ops.c -- the op descriptor table (ops.h): every op's tensors, in one place. */
#include "ops.h"
#include "gen.h"

#include <math.h>
#include <string.h>

static const char *const k_sym_names[CG_SYM_COUNT] = {"", "B", "T", "G", "H", "dk", "dv", "L", "D", "N", "S"};
_Static_assert(CG_SYM_COUNT <= CG_SHAPE_MAX_SYMS, "cg_sym grows within CG_SHAPE_MAX_SYMS");

const char *cg_sym_name(cg_sym s) { return (unsigned)s < CG_SYM_COUNT ? k_sym_names[s] : ""; }

cg_status cg_sym_parse(const char *name, cg_sym *out) {
    for (int s = 1; s < CG_SYM_COUNT; s++)
        if (name && !strcmp(name, k_sym_names[s])) {
            if (out) *out = (cg_sym)s;
            return CG_OK;
        }
    return CG_EINVAL;
}

/* ------------------------------------------------------------------ table */

#define B_ CG_SYM_B
#define T_ CG_SYM_T
#define G_ CG_SYM_G
#define H_ CG_SYM_H
#define DK CG_SYM_DK
#define DV CG_SYM_DV
#define L_ CG_SYM_L
#define D_ CG_SYM_D
#define N_ CG_SYM_N
#define NO CG_SYM_NONE

#define LC (CG_TD_LAYOUT | CG_TD_CONTIG)
#define LCH (LC | CG_TD_HALF) /* and 16-bit capable */
#define HF CG_TD_HALF
#define PS CG_TD_PERSEQ /* per sequence with cu_seqlens */
#define IN CG_TD_IN
#define OUT CG_TD_OUT

/* the tensor tables, their row macros, the dimension offsets and the tuning seeds, aligned by hand
 * (clang-format would re-indent the row lists and spread the braced lists) */
// clang-format off
/* name, file, role, optional, requires, grad_of, extents, flags, lo, hi, tol, args type, args field,
 * problem type, view field, shape flag (CG_KS_*, set when the tensor is given; 0: none) */
#define ROW(nm, file, role, opt, req, gof, e0, e1, e2, e3, fl, lo, hi, tol, AT, af, PT, vf, kf)                \
    {nm, file, role, opt, req, gof, {e0, e1, e2, e3}, fl, lo, hi, tol, offsetof(AT, af), offsetof(PT, vf), kf}

/* SSD: q, k [B, T, G, dk]; v, o, dout [B, T, H, dv]; log_alpha [B, T, H]; states [B, H, dk, dv]. */
#define SSD_INPUTS(AT)                                                                                         \
    ROW("q", NULL, IN, 0, NULL, NULL, B_, T_, G_, DK, LCH, -1, 1, CG_TOL_NONE, AT, q, cg_ssd_prob, q, 0),       \
    ROW("k", NULL, IN, 0, NULL, NULL, B_, T_, G_, DK, LCH, -1, 1, CG_TOL_NONE, AT, k, cg_ssd_prob, k, 0),       \
    ROW("v", NULL, IN, 0, NULL, NULL, B_, T_, H_, DV, LCH, -1, 1, CG_TOL_NONE, AT, v, cg_ssd_prob, v, 0),       \
    ROW("log_alpha", NULL, IN, 0, NULL, NULL, B_, T_, H_, NO, CG_TD_LAYOUT, -0.3, 0, CG_TOL_NONE, AT,          \
        log_alpha, cg_ssd_prob, la, 0),                                                                        \
    ROW("h0", NULL, IN, 1, NULL, NULL, B_, H_, DK, DV, CG_TD_CONTIG | PS, -1, 1, CG_TOL_NONE, AT, h0, cg_ssd_prob, h0, \
        CG_KS_H0)

static const cg_tdesc k_ssd_fwd[] = {
    SSD_INPUTS(cg_ssd_fwd_args),
    ROW("o", NULL, OUT, 0, NULL, NULL, B_, T_, H_, DV, LCH, 0, 0, CG_TOL_FWD, cg_ssd_fwd_args, o, cg_ssd_prob, o, 0),
    ROW("hT", NULL, OUT, 1, NULL, NULL, B_, H_, DK, DV, CG_TD_CONTIG | PS, 0, 0, CG_TOL_FWD, cg_ssd_fwd_args, hT,
        cg_ssd_prob, hT, CG_KS_HT),
};

#define SSD_BWD(nm, file, role, opt, gof, e0, e1, e2, e3, fl, lo, hi, tol, af, vf, kf)                         \
    ROW(nm, file, role, opt, NULL, gof, e0, e1, e2, e3, fl, lo, hi, tol, cg_ssd_bwd_args, af, cg_ssd_prob, vf, kf)
static const cg_tdesc k_ssd_bwd[] = {
    SSD_INPUTS(cg_ssd_bwd_args),
    SSD_BWD("dout", "do", IN, 0, NULL, B_, T_, H_, DV, LCH, -1, 1, CG_TOL_NONE, dout, dout, 0),
    SSD_BWD("dhT", NULL, IN, 1, NULL, B_, H_, DK, DV, CG_TD_CONTIG | PS, -1, 1, CG_TOL_NONE, dhT, dhT, CG_KS_DHT),
    SSD_BWD("dq", NULL, OUT, 0, "q", B_, T_, G_, DK, LCH, 0, 0, CG_TOL_BWD, dq, grad_q, 0),
    SSD_BWD("dk", NULL, OUT, 0, "k", B_, T_, G_, DK, LCH, 0, 0, CG_TOL_BWD, dk, grad_k, 0),
    SSD_BWD("dv", NULL, OUT, 0, "v", B_, T_, H_, DV, LCH, 0, 0, CG_TOL_BWD, dv, grad_v, 0),
    SSD_BWD("dlog_alpha", NULL, OUT, 0, "log_alpha", B_, T_, H_, NO, CG_TD_LAYOUT, 0, 0, CG_TOL_BWD, dlog_alpha, grad_la,
            0),
    SSD_BWD("dh0", NULL, OUT, 1, "h0", B_, H_, DK, DV, CG_TD_CONTIG | PS, 0, 0, CG_TOL_BWD, dh0, grad_h0, 0),
};

/* Selective scan: x, delta, z, y, dy [B, L, D]; A [D, N]; B, C [B, L, G, N] (G left out when
 * ungrouped); D, delta_bias [D]; states [B, D, N]. */
#define GR CG_TD_GROUPABLE
#define SS(AT, nm, role, opt, req, gof, e0, e1, e2, e3, fl, lo, hi, tol, af, vf, kf)                           \
    ROW(nm, NULL, role, opt, req, gof, e0, e1, e2, e3, fl, lo, hi, tol, AT, af, cg_sscan_prob, vf, kf)
#define SSCAN_INPUTS(AT)                                                                                       \
    SS(AT, "x", IN, 0, NULL, NULL, B_, L_, D_, NO, HF, -1, 1, CG_TOL_NONE, x, x, 0),                            \
    SS(AT, "delta", IN, 0, NULL, NULL, B_, L_, D_, NO, HF, -1, 1, CG_TOL_NONE, delta, delta, 0),                \
    SS(AT, "A", IN, 0, NULL, NULL, D_, N_, NO, NO, 0, -2, -0.1, CG_TOL_NONE, A, A, 0),                         \
    SS(AT, "B", IN, 0, NULL, NULL, B_, L_, G_, N_, GR | HF, -1, 1, CG_TOL_NONE, B, Bm, 0),                          \
    SS(AT, "C", IN, 0, NULL, NULL, B_, L_, G_, N_, GR | HF, -1, 1, CG_TOL_NONE, C, Cm, 0),                          \
    SS(AT, "D", IN, 1, NULL, NULL, D_, NO, NO, NO, 0, -1, 1, CG_TOL_NONE, D, Dv, CG_KS_HAS_D),                 \
    SS(AT, "z", IN, 1, NULL, NULL, B_, L_, D_, NO, HF, -1, 1, CG_TOL_NONE, z, z, CG_KS_HAS_Z),                  \
    SS(AT, "delta_bias", IN, 1, NULL, NULL, D_, NO, NO, NO, 0, -1, 0, CG_TOL_NONE, delta_bias, dbias, CG_KS_HAS_BIAS), \
    SS(AT, "h0", IN, 1, NULL, NULL, B_, D_, N_, NO, PS, -1, 1, CG_TOL_NONE, h0, h0, CG_KS_H0)

#define SF cg_sscan_fwd_args
static const cg_tdesc k_sscan_fwd[] = {
    SSCAN_INPUTS(SF),
    SS(SF, "y", OUT, 0, NULL, NULL, B_, L_, D_, NO, HF, 0, 0, CG_TOL_FWD, y, y, 0),
    SS(SF, "hT", OUT, 1, NULL, NULL, B_, D_, N_, NO, PS, 0, 0, CG_TOL_FWD, hT, hT, CG_KS_HT),
};

#define SB cg_sscan_bwd_args
#define BW CG_TOL_BWD
static const cg_tdesc k_sscan_bwd[] = {
    SSCAN_INPUTS(SB),
    SS(SB, "dy", IN, 0, NULL, NULL, B_, L_, D_, NO, HF, -1, 1, CG_TOL_NONE, dy, dy, 0),
    SS(SB, "dhT", IN, 1, NULL, NULL, B_, D_, N_, NO, PS, -1, 1, CG_TOL_NONE, dhT, dhT, CG_KS_DHT),
    SS(SB, "dx", OUT, 0, NULL, "x", B_, L_, D_, NO, HF, 0, 0, BW, dx, dx, 0),
    SS(SB, "ddelta", OUT, 0, NULL, "delta", B_, L_, D_, NO, HF, 0, 0, BW, ddelta, ddelta, 0),
    SS(SB, "dA", OUT, 0, NULL, "A", D_, N_, NO, NO, 0, 0, 0, BW, dA, dA, 0),
    SS(SB, "dB", OUT, 0, NULL, "B", B_, L_, G_, N_, GR | HF, 0, 0, BW, dB, dB, 0),
    SS(SB, "dC", OUT, 0, NULL, "C", B_, L_, G_, N_, GR | HF, 0, 0, BW, dC, dC, 0),
    SS(SB, "dD", OUT, 1, "D", "D", D_, NO, NO, NO, 0, 0, 0, BW, dD, dD, 0),
    SS(SB, "dz", OUT, 1, "z", "z", B_, L_, D_, NO, HF, 0, 0, BW, dz, dz, 0),
    SS(SB, "ddelta_bias", OUT, 1, "delta_bias", "delta_bias", D_, NO, NO, NO, 0, 0, 0, BW, ddelta_bias, ddbias, 0),
    SS(SB, "dh0", OUT, 1, NULL, "h0", B_, D_, N_, NO, PS, 0, 0, BW, dh0, dh0, 0),
};

static const cg_scalar_desc k_sscan_fwd_scalars[] = {
    {"delta_softplus", offsetof(cg_sscan_fwd_args, delta_softplus), offsetof(cg_sscan_prob, softplus), CG_KS_SOFTPLUS},
};
static const cg_scalar_desc k_sscan_bwd_scalars[] = {
    {"delta_softplus", offsetof(cg_sscan_bwd_args, delta_softplus), offsetof(cg_sscan_prob, softplus), CG_KS_SOFTPLUS},
};

/* Gated delta rule: q, k [B, T, G, dk]; v, o, dout [B, T, H, dv]; g, beta [B, T, H]; states
 * [B, H, dk, dv] float32. Test and tuning data: k in [-0.15, 0.15] and beta in [0, 1] keep
 * the unnormalised recurrence contractive up to dk = 256 (beta |k|^2 < 2); g as SSD's decay. */
#define GDR(AT, nm, file, role, opt, gof, e0, e1, e2, e3, fl, lo, hi, tol, af, vf, kf)                      \
    ROW(nm, file, role, opt, NULL, gof, e0, e1, e2, e3, fl, lo, hi, tol, AT, af, cg_gdr_prob, vf, kf)
#define GDR_INPUTS(AT)                                                                                         \
    GDR(AT, "q", NULL, IN, 0, NULL, B_, T_, G_, DK, LCH, -1, 1, CG_TOL_NONE, q, q, 0),                          \
    GDR(AT, "k", NULL, IN, 0, NULL, B_, T_, G_, DK, LCH, -0.15, 0.15, CG_TOL_NONE, k, k, 0),                    \
    GDR(AT, "v", NULL, IN, 0, NULL, B_, T_, H_, DV, LCH, -1, 1, CG_TOL_NONE, v, v, 0),                          \
    GDR(AT, "g", NULL, IN, 0, NULL, B_, T_, H_, NO, CG_TD_LAYOUT, -0.3, 0, CG_TOL_NONE, g, g, 0),               \
    GDR(AT, "beta", NULL, IN, 0, NULL, B_, T_, H_, NO, CG_TD_LAYOUT | HF, 0, 1, CG_TOL_NONE, beta, beta, 0),    \
    GDR(AT, "h0", NULL, IN, 1, NULL, B_, H_, DK, DV, CG_TD_CONTIG | PS, -1, 1, CG_TOL_NONE, h0, h0, CG_KS_H0)

#define GF cg_gdr_fwd_args
static const cg_tdesc k_gdr_fwd[] = {
    GDR_INPUTS(GF),
    GDR(GF, "o", NULL, OUT, 0, NULL, B_, T_, H_, DV, LCH, 0, 0, CG_TOL_FWD, o, o, 0),
    GDR(GF, "hT", NULL, OUT, 1, NULL, B_, H_, DK, DV, CG_TD_CONTIG | PS, 0, 0, CG_TOL_FWD, hT, hT, CG_KS_HT),
};

#define GB cg_gdr_bwd_args
static const cg_tdesc k_gdr_bwd[] = {
    GDR_INPUTS(GB),
    GDR(GB, "dout", "do", IN, 0, NULL, B_, T_, H_, DV, LCH, -1, 1, CG_TOL_NONE, dout, dout, 0),
    GDR(GB, "dhT", NULL, IN, 1, NULL, B_, H_, DK, DV, CG_TD_CONTIG | PS, -1, 1, CG_TOL_NONE, dhT, dhT, CG_KS_DHT),
    GDR(GB, "dq", NULL, OUT, 0, "q", B_, T_, G_, DK, LCH, 0, 0, BW, dq, grad_q, 0),
    GDR(GB, "dk", NULL, OUT, 0, "k", B_, T_, G_, DK, LCH, 0, 0, BW, dk, grad_k, 0),
    GDR(GB, "dv", NULL, OUT, 0, "v", B_, T_, H_, DV, LCH, 0, 0, BW, dv, grad_v, 0),
    GDR(GB, "dg", NULL, OUT, 0, "g", B_, T_, H_, NO, CG_TD_LAYOUT, 0, 0, BW, dg, grad_g, 0),
    GDR(GB, "dbeta", NULL, OUT, 0, "beta", B_, T_, H_, NO, CG_TD_LAYOUT | HF, 0, 0, BW, dbeta, grad_beta, 0),
    GDR(GB, "dh0", NULL, OUT, 1, "h0", B_, H_, DK, DV, CG_TD_CONTIG | PS, 0, 0, BW, dh0, grad_h0, 0),
};

static const cg_scalar_desc k_gdr_fwd_scalars[] = {
    {"use_qk_l2norm", offsetof(cg_gdr_fwd_args, use_qk_l2norm), offsetof(cg_gdr_prob, l2norm), CG_KS_L2NORM},
};
static const cg_scalar_desc k_gdr_bwd_scalars[] = {
    {"use_qk_l2norm", offsetof(cg_gdr_bwd_args, use_qk_l2norm), offsetof(cg_gdr_prob, l2norm), CG_KS_L2NORM},
};
/* scale: 0 is fla's default, dk^-1/2 */
static double gdr_scale_default(const int64_t dim[CG_SYM_COUNT]) { return 1.0 / sqrt((double)dim[CG_SYM_DK]); }
static const cg_real_desc k_gdr_fwd_reals[] = {
    {"scale", offsetof(cg_gdr_fwd_args, scale), offsetof(cg_gdr_prob, scale), 0, HUGE_VAL, gdr_scale_default, "dk^-1/2"},
};
static const cg_real_desc k_gdr_bwd_reals[] = {
    {"scale", offsetof(cg_gdr_bwd_args, scale), offsetof(cg_gdr_prob, scale), 0, HUGE_VAL, gdr_scale_default, "dk^-1/2"},
};

/* cu_seqlens [N + 1] of each op (docs/varlen.md): an optional integer input, not in t[]. */
#define CU_ROW(AT, PT) ROW("cu_seqlens", NULL, IN, 1, NULL, NULL, NO, NO, NO, NO, CG_TD_INDEX, 0, 0, CG_TOL_NONE, AT, cu_seqlens, PT, cu, 0)
static const cg_tdesc k_cu[] = {CU_ROW(cg_ssd_fwd_args, cg_ssd_prob), CU_ROW(cg_ssd_bwd_args, cg_ssd_prob),
                                CU_ROW(cg_sscan_fwd_args, cg_sscan_prob), CU_ROW(cg_sscan_bwd_args, cg_sscan_prob),
                                CU_ROW(cg_gdr_fwd_args, cg_gdr_prob), CU_ROW(cg_gdr_bwd_args, cg_gdr_prob)};

/* Decode steps (issue #36): the chunked ops' tensors for T (L) tokens per entry, a state
 * cache [S, ...] read and written in place (CG_TD_INPLACE), the slot indices (CG_TD_INDEX:
 * state_indices [B], dst_indices [B, T]; cg_slot_desc below). Token-major only. */
#define S_ CG_SYM_S
#define IX CG_TD_INDEX
#define CH (CG_TD_CONTIG | CG_TD_HALF)
/* A step's row over its args type AT and problem type PT; the rows every step over a
 * [S, H, dk, dv] cache shares: q, k, v before its gates (k's range: the gated delta rule
 * keeps its keys small), the cache, the slot indices and o after them. */
#define ST(AT, PT, nm, role, opt, e0, e1, e2, e3, fl, lo, hi, tol, af, vf)                                    \
    ROW(nm, NULL, role, opt, NULL, NULL, e0, e1, e2, e3, fl, lo, hi, tol, AT, af, PT, vf, 0)
#define STEP_QKV(AT, PT, klo, khi)                                                                             \
    ST(AT, PT, "q", IN, 0, B_, T_, G_, DK, CH, -1, 1, CG_TOL_NONE, q, q),                                       \
    ST(AT, PT, "k", IN, 0, B_, T_, G_, DK, CH, klo, khi, CG_TOL_NONE, k, k),                                    \
    ST(AT, PT, "v", IN, 0, B_, T_, H_, DV, CH, -1, 1, CG_TOL_NONE, v, v)
#define STEP_CACHE_O(AT, PT)                                                                                   \
    ST(AT, PT, "cache", IN, 0, S_, H_, DK, DV, CH | CG_TD_INPLACE, -1, 1, CG_TOL_FWD, cache, cache),            \
    ST(AT, PT, "state_indices", IN, 0, B_, NO, NO, NO, IX, 0, 0, CG_TOL_NONE, state_indices, idx),              \
    ST(AT, PT, "dst_indices", IN, 1, B_, T_, NO, NO, IX, 0, 0, CG_TOL_NONE, dst_indices, dst),                  \
    ST(AT, PT, "o", OUT, 0, B_, T_, H_, DV, CH, 0, 0, CG_TOL_FWD, o, o)
static const cg_tdesc k_ssd_step[] = {
    STEP_QKV(cg_ssd_step_args, cg_ssd_step_prob, -1, 1),
    ST(cg_ssd_step_args, cg_ssd_step_prob, "log_alpha", IN, 0, B_, T_, H_, NO, 0, -0.3, 0, CG_TOL_NONE, log_alpha, la),
    STEP_CACHE_O(cg_ssd_step_args, cg_ssd_step_prob),
};
#define SST(nm, role, opt, e0, e1, e2, e3, fl, lo, hi, tol, af, vf, kf)                                        \
    ROW(nm, NULL, role, opt, NULL, NULL, e0, e1, e2, e3, fl, lo, hi, tol, cg_sscan_step_args, af, cg_sscan_step_prob, vf, kf)
static const cg_tdesc k_sscan_step[] = {
    SST("x", IN, 0, B_, L_, D_, NO, HF, -1, 1, CG_TOL_NONE, x, x, 0),
    SST("delta", IN, 0, B_, L_, D_, NO, HF, -1, 1, CG_TOL_NONE, delta, delta, 0),
    SST("A", IN, 0, D_, N_, NO, NO, 0, -2, -0.1, CG_TOL_NONE, A, A, 0),
    SST("B", IN, 0, B_, L_, G_, N_, GR | HF, -1, 1, CG_TOL_NONE, B, Bm, 0),
    SST("C", IN, 0, B_, L_, G_, N_, GR | HF, -1, 1, CG_TOL_NONE, C, Cm, 0),
    SST("D", IN, 1, D_, NO, NO, NO, 0, -1, 1, CG_TOL_NONE, D, Dv, CG_KS_HAS_D),
    SST("z", IN, 1, B_, L_, D_, NO, HF, -1, 1, CG_TOL_NONE, z, z, CG_KS_HAS_Z),
    SST("delta_bias", IN, 1, D_, NO, NO, NO, 0, -1, 0, CG_TOL_NONE, delta_bias, dbias, CG_KS_HAS_BIAS),
    SST("cache", IN, 0, S_, D_, N_, NO, CH | CG_TD_INPLACE, -1, 1, CG_TOL_FWD, cache, cache, 0),
    SST("state_indices", IN, 0, B_, NO, NO, NO, IX, 0, 0, CG_TOL_NONE, state_indices, idx, 0),
    SST("dst_indices", IN, 1, B_, L_, NO, NO, IX, 0, 0, CG_TOL_NONE, dst_indices, dst, 0),
    SST("y", OUT, 0, B_, L_, D_, NO, HF, 0, 0, CG_TOL_FWD, y, y, 0),
};
static const cg_scalar_desc k_sscan_step_scalars[] = {
    {"delta_softplus", offsetof(cg_sscan_step_args, delta_softplus), offsetof(cg_sscan_step_prob, softplus),
     CG_KS_SOFTPLUS},
};
/* state_indices and dst_indices are tensors 5 and 6 of the SSD step, 9 and 10 of the scan's */
static const cg_slot_desc k_ssd_step_slots = {5, 6, CG_SYM_S}, k_sscan_step_slots = {9, 10, CG_SYM_S};
/* The gated delta rule's step (issue #36): gdr_fwd's tensors (token-major) over a cache. */
static const cg_tdesc k_gdr_step[] = {
    STEP_QKV(cg_gdr_step_args, cg_gdr_step_prob, -0.15, 0.15),
    ST(cg_gdr_step_args, cg_gdr_step_prob, "g", IN, 0, B_, T_, H_, NO, 0, -0.3, 0, CG_TOL_NONE, g, g),
    ST(cg_gdr_step_args, cg_gdr_step_prob, "beta", IN, 0, B_, T_, H_, NO, HF, 0, 1, CG_TOL_NONE, beta, beta),
    STEP_CACHE_O(cg_gdr_step_args, cg_gdr_step_prob),
};
static const cg_scalar_desc k_gdr_step_scalars[] = {
    {"use_qk_l2norm", offsetof(cg_gdr_step_args, use_qk_l2norm), offsetof(cg_gdr_step_prob, l2norm),
     CG_KS_L2NORM},
};
static const cg_real_desc k_gdr_step_reals[] = {
    {"scale", offsetof(cg_gdr_step_args, scale), offsetof(cg_gdr_step_prob, scale), 0, HUGE_VAL, gdr_scale_default,
     "dk^-1/2"},
};
static const cg_slot_desc k_gdr_step_slots = {6, 7, CG_SYM_S};

/* LRU (docs/lru.md): a, b, x, y, dy [B, L, D] in either layout (head-major: [B, D, L]);
 * states h0, hT, dhT, dh0 [B, D] float32. Test and tuning data: a in [0.5, 1] (a decay, as
 * RG-LRU's), b and x in [-1, 1]. */
#define LRU(AT, nm, role, opt, gof, e0, e1, e2, fl, lo, hi, tol, af, vf, kf)                                   \
    ROW(nm, NULL, role, opt, NULL, gof, e0, e1, e2, NO, fl, lo, hi, tol, AT, af, cg_lru_prob, vf, kf)
#define LH (CG_TD_LAYOUT | HF)
#define LRU_INPUTS(AT)                                                                                         \
    LRU(AT, "a", IN, 0, NULL, B_, L_, D_, LH, 0.5, 1, CG_TOL_NONE, a, a, 0),                                    \
    LRU(AT, "b", IN, 0, NULL, B_, L_, D_, LH, -1, 1, CG_TOL_NONE, b, b, 0),                                     \
    LRU(AT, "x", IN, 0, NULL, B_, L_, D_, LH, -1, 1, CG_TOL_NONE, x, x, 0),                                     \
    LRU(AT, "h0", IN, 1, NULL, B_, D_, NO, PS, -1, 1, CG_TOL_NONE, h0, h0, CG_KS_H0)
#define LF cg_lru_fwd_args
static const cg_tdesc k_lru_fwd[] = {
    LRU_INPUTS(LF),
    LRU(LF, "y", OUT, 0, NULL, B_, L_, D_, LH, 0, 0, CG_TOL_FWD, y, y, 0),
    LRU(LF, "hT", OUT, 1, NULL, B_, D_, NO, PS, 0, 0, CG_TOL_FWD, hT, hT, CG_KS_HT),
};
#define LB cg_lru_bwd_args
static const cg_tdesc k_lru_bwd[] = {
    LRU_INPUTS(LB),
    LRU(LB, "dy", IN, 0, NULL, B_, L_, D_, LH, -1, 1, CG_TOL_NONE, dy, dy, 0),
    LRU(LB, "dhT", IN, 1, NULL, B_, D_, NO, PS, -1, 1, CG_TOL_NONE, dhT, dhT, CG_KS_DHT),
    LRU(LB, "da", OUT, 0, "a", B_, L_, D_, LH, 0, 0, BW, da, grad_a, 0),
    LRU(LB, "db", OUT, 0, "b", B_, L_, D_, LH, 0, 0, BW, db, grad_b, 0),
    LRU(LB, "dx", OUT, 0, "x", B_, L_, D_, LH, 0, 0, BW, dx, grad_x, 0),
    LRU(LB, "dh0", OUT, 1, "h0", B_, D_, NO, PS, 0, 0, BW, dh0, grad_h0, 0),
};
static const cg_tdesc k_lru_cu[] = {
    ROW("cu_seqlens", NULL, IN, 1, NULL, NULL, NO, NO, NO, NO, CG_TD_INDEX, 0, 0, CG_TOL_NONE, cg_lru_fwd_args,
        cu_seqlens, cg_lru_prob, cu, 0),
    ROW("cu_seqlens", NULL, IN, 1, NULL, NULL, NO, NO, NO, NO, CG_TD_INDEX, 0, 0, CG_TOL_NONE, cg_lru_bwd_args,
        cu_seqlens, cg_lru_prob, cu, 0),
};

#define NONE_OFF ((size_t)-1)
/* where problem type PT keeps the extent of symbol SYM: in its shape (internal.h) */
#define DIM_OFF(PT, SYM) offsetof(PT, shape.dim[CG_SYM_##SYM])
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define SSD_DIMS                                                                                               \
    {NONE_OFF, DIM_OFF(cg_ssd_prob, B), DIM_OFF(cg_ssd_prob, T), DIM_OFF(cg_ssd_prob, G),                   \
     DIM_OFF(cg_ssd_prob, H), DIM_OFF(cg_ssd_prob, DK), DIM_OFF(cg_ssd_prob, DV), NONE_OFF, NONE_OFF, NONE_OFF, \
     NONE_OFF}
#define GDR_DIMS                                                                                               \
    {NONE_OFF, DIM_OFF(cg_gdr_prob, B), DIM_OFF(cg_gdr_prob, T), DIM_OFF(cg_gdr_prob, G),                   \
     DIM_OFF(cg_gdr_prob, H), DIM_OFF(cg_gdr_prob, DK), DIM_OFF(cg_gdr_prob, DV), NONE_OFF, NONE_OFF, NONE_OFF, \
     NONE_OFF}
#define SSCAN_DIMS                                                                                             \
    {NONE_OFF, DIM_OFF(cg_sscan_prob, B), NONE_OFF, DIM_OFF(cg_sscan_prob, G), NONE_OFF, NONE_OFF, NONE_OFF, \
     DIM_OFF(cg_sscan_prob, L), DIM_OFF(cg_sscan_prob, D), DIM_OFF(cg_sscan_prob, N), NONE_OFF}

#define LRU_DIMS                                                                                               \
    {NONE_OFF, DIM_OFF(cg_lru_prob, B), NONE_OFF, NONE_OFF, NONE_OFF, NONE_OFF, NONE_OFF, DIM_OFF(cg_lru_prob, L), \
     DIM_OFF(cg_lru_prob, D), NONE_OFF, NONE_OFF}
#define SSD_STEP_DIMS                                                                                          \
    {NONE_OFF, DIM_OFF(cg_ssd_step_prob, B), DIM_OFF(cg_ssd_step_prob, T), DIM_OFF(cg_ssd_step_prob, G),     \
     DIM_OFF(cg_ssd_step_prob, H), DIM_OFF(cg_ssd_step_prob, DK), DIM_OFF(cg_ssd_step_prob, DV), NONE_OFF,   \
     NONE_OFF, NONE_OFF, DIM_OFF(cg_ssd_step_prob, S)}
#define GDR_STEP_DIMS                                                                                          \
    {NONE_OFF, DIM_OFF(cg_gdr_step_prob, B), DIM_OFF(cg_gdr_step_prob, T), DIM_OFF(cg_gdr_step_prob, G),     \
     DIM_OFF(cg_gdr_step_prob, H), DIM_OFF(cg_gdr_step_prob, DK), DIM_OFF(cg_gdr_step_prob, DV), NONE_OFF,   \
     NONE_OFF, NONE_OFF, DIM_OFF(cg_gdr_step_prob, S)}
#define SSCAN_STEP_DIMS                                                                                        \
    {NONE_OFF, DIM_OFF(cg_sscan_step_prob, B), NONE_OFF, DIM_OFF(cg_sscan_step_prob, G), NONE_OFF, NONE_OFF,  \
     NONE_OFF, DIM_OFF(cg_sscan_step_prob, L), DIM_OFF(cg_sscan_step_prob, D), DIM_OFF(cg_sscan_step_prob, N), \
     DIM_OFF(cg_sscan_step_prob, S)}

/* Built-in tuning shapes: the seeds' four SSD configs at T = 512, 2048 and 8192 (the CPU
 * at 512 and 2048: the 8192 bucket is reached by nearest-bucket lookup; the key's par field
 * tells batch x heads against the threads apart); the selective scan at batch 4, dim
 * 256/512/1024, state 16 (the CPU at L = 2048). */
static const cg_tune_seed k_ssd_seeds[] = {{"B=4,G=2,H=8,dk=128,dv=128", "g2h8_d128"},
                                           {"B=2,G=1,H=24,dk=128,dv=64", "g1h24_dk128_dv64"},
                                           {"B=4,G=1,H=1,dk=128,dv=128", "g1h1_d128"},
                                           {"B=4,G=2,H=4,dk=48,dv=40", "g2h4_dk48_dv40"},
                                           {NULL, NULL}};
/* issue #35's cells, [B, T, fla H, fla HV, dk, dv]: Qwen3-Next's layer [1, 4096, 16, 32, 128,
 * 128], [4, 2048, 4, 4, 128, 128] and [2, 1000, 2, 6, 48, 40] (T from seq_gpu / seq_cpu) */
static const cg_tune_seed k_gdr_seeds[] = {{"B=1,G=16,H=32,dk=128,dv=128", "g16h32_d128"},
                                           {"B=4,G=4,H=4,dk=128,dv=128", "g4h4_d128"},
                                           {"B=2,G=2,H=6,dk=48,dv=40", "g2h6_dk48_dv40"},
                                           {NULL, NULL}};
static const cg_tune_seed k_sscan_seeds[] = {
    {"B=4,D=256,N=16", "d256_n16"}, {"B=4,D=512,N=16", "d512_n16"}, {"B=4,D=1024,N=16", "d1024_n16"}, {NULL, NULL}};
#define NO_SEEDS NULL, {0}, {0}
// clang-format on
/* Each op's model of its work (the flops column, cg_op_flops; docs/bench.md). SSD: the
 * chunked algorithm with chunk C per (b, h) and chunk of c tokens: forward c(c+1)(dk+dv)
 * for the causal halves of Q K^T and P V plus 4 c dk dv for Q S0 and the chunk state;
 * backward c(c+1)(3dk+2dv) + 10 c dk dv + 4 c dk. A varlen batch counts as one sequence. */
/* A chunked op's flops: per(c, dk, dv, bwd) for each chunk of c tokens (T / C of C, one of
 * T % C when that is not 0), for every (b, h). */
typedef double (*chunk_flops_fn)(double c, double dk, double dv, int bwd);
static double chunked_flops(const int64_t dim[CG_SYM_COUNT], int64_t C, int bwd, chunk_flops_fn per) {
    const double dk = (double)dim[CG_SYM_DK], dv = (double)dim[CG_SYM_DV];
    const int64_t T = dim[CG_SYM_T];
    double tot = 0;
    for (int part = 0; part < 2; part++) {
        double c = (double)(part ? T % C : C), nchunks = (double)(part ? (T % C ? 1 : 0) : T / C);
        if (nchunks == 0) continue;
        tot += nchunks * per(c, dk, dv, bwd);
    }
    return tot * (double)dim[CG_SYM_B] * (double)dim[CG_SYM_H];
}
static double ssd_chunk_flops(double c, double dk, double dv, int bwd) {
    return bwd ? c * (c + 1) * (3 * dk + 2 * dv) + 10 * c * dk * dv + 4 * c * dk
               : c * (c + 1) * (dk + dv) + 4 * c * dk * dv;
}
static double ssd_flops(const int64_t dim[CG_SYM_COUNT], int64_t C, int bwd) {
    return chunked_flops(dim, C, bwd, ssd_chunk_flops);
}
static double ssd_fwd_flops(const int64_t dim[CG_SYM_COUNT], int64_t chunk) { return ssd_flops(dim, chunk, 0); }
static double ssd_bwd_flops(const int64_t dim[CG_SYM_COUNT], int64_t chunk) { return ssd_flops(dim, chunk, 1); }
/* Selective scan: per (b, l, d, n) 7 flops forward and 24 backward (its recompute of the
 * forward included), per (b, l, d) 11 forward and 20 backward; exp, softplus and sigmoid
 * count as one. No parameter. */
static double sscan_flops(const int64_t dim[CG_SYM_COUNT], double per_n, double per_d) {
    return (double)dim[CG_SYM_B] * (double)dim[CG_SYM_L] * (double)dim[CG_SYM_D] *
           (per_n * (double)dim[CG_SYM_N] + per_d);
}
/* Gated delta rule (MATH_GDN.md 2.5 and 3.2): the chunked algorithm, dense, per value head
 * and chunk of c tokens: forward 6 c dk dv + 6 c^2 dk + 4 c^2 dv + c^3/3 (the solve);
 * backward 16 c dk dv + 18 c^2 dk + 10 c^2 dv + 4 c^3. */
static double gdr_chunk_flops(double c, double dk, double dv, int bwd) {
    return bwd ? 16 * c * dk * dv + 18 * c * c * dk + 10 * c * c * dv + 4 * c * c * c
               : 6 * c * dk * dv + 6 * c * c * dk + 4 * c * c * dv + c * c * c / 3;
}
static double gdr_flops(const int64_t dim[CG_SYM_COUNT], int64_t C, int bwd) {
    return chunked_flops(dim, C, bwd, gdr_chunk_flops);
}
static double gdr_fwd_flops(const int64_t dim[CG_SYM_COUNT], int64_t chunk) { return gdr_flops(dim, chunk, 0); }
static double gdr_bwd_flops(const int64_t dim[CG_SYM_COUNT], int64_t chunk) { return gdr_flops(dim, chunk, 1); }
static double sscan_fwd_flops(const int64_t dim[CG_SYM_COUNT], int64_t p) { return (void)p, sscan_flops(dim, 7, 11); }
static double sscan_bwd_flops(const int64_t dim[CG_SYM_COUNT], int64_t p) { return (void)p, sscan_flops(dim, 24, 20); }

/* Decode steps: per token and (b, h) 5 dk dv (the decay, the update, the output); the
 * scan's per token as the forward's. No parameter. */
static double ssd_step_flops(const int64_t dim[CG_SYM_COUNT], int64_t p) {
    return (void)p, 5.0 * (double)dim[CG_SYM_B] * (double)dim[CG_SYM_T] * (double)dim[CG_SYM_H] *
                        (double)dim[CG_SYM_DK] * (double)dim[CG_SYM_DV];
}
/* The gated delta rule's step: per token and (b, h) about 7 dk dv (MATH_GDN.md 5.3). */
static double gdr_step_flops(const int64_t dim[CG_SYM_COUNT], int64_t p) {
    return (void)p, 7.0 * (double)dim[CG_SYM_B] * (double)dim[CG_SYM_T] * (double)dim[CG_SYM_H] *
                        (double)dim[CG_SYM_DK] * (double)dim[CG_SYM_DV];
}

/* LRU: per (b, l, d) 3 flops forward (a h + b x); backward 8 (the forward's recompute, g =
 * dy + a g, and g h, g x, g b). No parameter. A memory-bound op: docs/lru.md gives bytes. */
static double lru_flops(const int64_t dim[CG_SYM_COUNT], double per) {
    return per * (double)dim[CG_SYM_B] * (double)dim[CG_SYM_L] * (double)dim[CG_SYM_D];
}
static double lru_fwd_flops(const int64_t dim[CG_SYM_COUNT], int64_t p) { return (void)p, lru_flops(dim, 3); }
static double lru_bwd_flops(const int64_t dim[CG_SYM_COUNT], int64_t p) { return (void)p, lru_flops(dim, 8); }

/* the op table, one op a row: clang-format would put each field on a line of its own */
// clang-format off
static const cg_op_desc k_ops[] = {
    {CG_OP_SSD_FWD, "ssd_fwd", "ssd", 0, "cg_ssd_fwd_args", sizeof(cg_ssd_fwd_args), sizeof(cg_ssd_prob),
     COUNT(k_ssd_fwd), k_ssd_fwd, 0, NULL, SSD_DIMS, CG_SYM_T, CG_SYM_H, CG_SYM_G,
     offsetof(cg_ssd_fwd_args, layout), NONE_OFF, offsetof(cg_ssd_prob, dtype), 4, {DK, DV, G_, H_}, &k_cu[0],
     offsetof(cg_ssd_prob, nseq), H_, k_ssd_seeds, {512, 2048, 8192}, {512, 2048}, ssd_fwd_flops, "chunk", 64, 0, NULL},
    {CG_OP_SSD_BWD, "ssd_bwd", "ssd", 1, "cg_ssd_bwd_args", sizeof(cg_ssd_bwd_args), sizeof(cg_ssd_prob),
     COUNT(k_ssd_bwd), k_ssd_bwd, 0, NULL, SSD_DIMS, CG_SYM_T, CG_SYM_H, CG_SYM_G,
     offsetof(cg_ssd_bwd_args, layout), NONE_OFF, offsetof(cg_ssd_prob, dtype), 4, {DK, DV, G_, H_}, &k_cu[1],
     offsetof(cg_ssd_prob, nseq), H_, NO_SEEDS, ssd_bwd_flops, "chunk", 64, 0, NULL},
    {CG_OP_SSCAN_FWD, "sscan_fwd", "sscan", 0, "cg_sscan_fwd_args", sizeof(cg_sscan_fwd_args),
     sizeof(cg_sscan_prob), COUNT(k_sscan_fwd), k_sscan_fwd, COUNT(k_sscan_fwd_scalars), k_sscan_fwd_scalars,
     SSCAN_DIMS, CG_SYM_L, CG_SYM_D, CG_SYM_G, NONE_OFF, offsetof(cg_sscan_prob, grouped),
     offsetof(cg_sscan_prob, dtype), 3, {D_, N_, G_, NO}, &k_cu[2], offsetof(cg_sscan_prob, nseq), G_,
     k_sscan_seeds, {512, 2048, 8192}, {2048}, sscan_fwd_flops, NULL, 0, 0, NULL},
    {CG_OP_SSCAN_BWD, "sscan_bwd", "sscan", 1, "cg_sscan_bwd_args", sizeof(cg_sscan_bwd_args),
     sizeof(cg_sscan_prob), COUNT(k_sscan_bwd), k_sscan_bwd, COUNT(k_sscan_bwd_scalars), k_sscan_bwd_scalars,
     SSCAN_DIMS, CG_SYM_L, CG_SYM_D, CG_SYM_G, NONE_OFF, offsetof(cg_sscan_prob, grouped),
     offsetof(cg_sscan_prob, dtype), 3, {D_, N_, G_, NO}, &k_cu[3], offsetof(cg_sscan_prob, nseq), G_, NO_SEEDS, sscan_bwd_flops, NULL, 0,
     0, NULL},
    {CG_OP_GDR_FWD, "gdr_fwd", "gdr", 0, "cg_gdr_fwd_args", sizeof(cg_gdr_fwd_args), sizeof(cg_gdr_prob),
     COUNT(k_gdr_fwd), k_gdr_fwd, COUNT(k_gdr_fwd_scalars), k_gdr_fwd_scalars, GDR_DIMS, CG_SYM_T, CG_SYM_H, CG_SYM_G,
     offsetof(cg_gdr_fwd_args, layout), NONE_OFF, offsetof(cg_gdr_prob, dtype), 4, {DK, DV, G_, H_}, &k_cu[4],
     offsetof(cg_gdr_prob, nseq), H_, k_gdr_seeds, {512, 2048, 8192}, {512, 2048}, gdr_fwd_flops, "chunk", 64,
     COUNT(k_gdr_fwd_reals), k_gdr_fwd_reals},
    {CG_OP_GDR_BWD, "gdr_bwd", "gdr", 1, "cg_gdr_bwd_args", sizeof(cg_gdr_bwd_args), sizeof(cg_gdr_prob),
     COUNT(k_gdr_bwd), k_gdr_bwd, COUNT(k_gdr_bwd_scalars), k_gdr_bwd_scalars, GDR_DIMS, CG_SYM_T, CG_SYM_H, CG_SYM_G,
     offsetof(cg_gdr_bwd_args, layout), NONE_OFF, offsetof(cg_gdr_prob, dtype), 4, {DK, DV, G_, H_}, &k_cu[5],
     offsetof(cg_gdr_prob, nseq), H_, NO_SEEDS, gdr_bwd_flops, "chunk", 64, COUNT(k_gdr_bwd_reals), k_gdr_bwd_reals},
    {CG_OP_SSD_STEP, "ssd_step", "ssd_decode", 0, "cg_ssd_step_args", sizeof(cg_ssd_step_args),
     sizeof(cg_ssd_step_prob), COUNT(k_ssd_step), k_ssd_step, 0, NULL, SSD_STEP_DIMS, CG_SYM_T, CG_SYM_H, CG_SYM_G,
     NONE_OFF, NONE_OFF, offsetof(cg_ssd_step_prob, dtype), 4, {DK, DV, G_, H_}, NULL,
     offsetof(cg_ssd_step_prob, nseq), H_, NO_SEEDS, ssd_step_flops, NULL, 0, 0, NULL},
    {CG_OP_SSCAN_STEP, "sscan_step", "sscan_decode", 0, "cg_sscan_step_args", sizeof(cg_sscan_step_args),
     sizeof(cg_sscan_step_prob), COUNT(k_sscan_step), k_sscan_step, COUNT(k_sscan_step_scalars), k_sscan_step_scalars,
     SSCAN_STEP_DIMS, CG_SYM_L, CG_SYM_D, CG_SYM_G, NONE_OFF, offsetof(cg_sscan_step_prob, grouped),
     offsetof(cg_sscan_step_prob, dtype), 3, {D_, N_, G_, NO}, NULL, offsetof(cg_sscan_step_prob, nseq), D_,
     NO_SEEDS, sscan_fwd_flops, NULL, 0, 0, NULL},
    {CG_OP_GDR_STEP, "gdr_step", "gdr_decode", 0, "cg_gdr_step_args", sizeof(cg_gdr_step_args),
     sizeof(cg_gdr_step_prob), COUNT(k_gdr_step), k_gdr_step, COUNT(k_gdr_step_scalars), k_gdr_step_scalars,
     GDR_STEP_DIMS, CG_SYM_T, CG_SYM_H, CG_SYM_G, NONE_OFF, NONE_OFF, offsetof(cg_gdr_step_prob, dtype), 4,
     {DK, DV, G_, H_}, NULL, offsetof(cg_gdr_step_prob, nseq), H_, NO_SEEDS, gdr_step_flops, NULL, 0,
     COUNT(k_gdr_step_reals), k_gdr_step_reals},
    {CG_OP_LRU_FWD, "lru_fwd", "lru", 0, "cg_lru_fwd_args", sizeof(cg_lru_fwd_args), sizeof(cg_lru_prob),
     COUNT(k_lru_fwd), k_lru_fwd, 0, NULL, LRU_DIMS, CG_SYM_L, NO, NO, offsetof(cg_lru_fwd_args, layout), NONE_OFF,
     offsetof(cg_lru_prob, dtype), 1, {D_, NO, NO, NO}, &k_lru_cu[0], offsetof(cg_lru_prob, nseq), D_, NO_SEEDS,
     lru_fwd_flops, NULL, 0, 0, NULL},
    {CG_OP_LRU_BWD, "lru_bwd", "lru", 1, "cg_lru_bwd_args", sizeof(cg_lru_bwd_args), sizeof(cg_lru_prob),
     COUNT(k_lru_bwd), k_lru_bwd, 0, NULL, LRU_DIMS, CG_SYM_L, NO, NO, offsetof(cg_lru_bwd_args, layout), NONE_OFF,
     offsetof(cg_lru_prob, dtype), 1, {D_, NO, NO, NO}, &k_lru_cu[1], offsetof(cg_lru_prob, nseq), D_, NO_SEEDS,
     lru_bwd_flops, NULL, 0, 0, NULL},
};
// clang-format on

const cg_op_desc *cg__op_desc(cg_op op) {
    CG_ASSERT((unsigned)op < (unsigned)COUNT(k_ops) && k_ops[op].op == op);
    return &k_ops[op];
}

const cg_op_desc *cg__op_find(const char *name) {
    for (int i = 0; i < COUNT(k_ops); i++)
        if (name && !strcmp(k_ops[i].name, name)) return &k_ops[i];
    return NULL;
}

const cg_view cg__view_absent;

const cg_slot_desc *cg__op_slots(const cg_op_desc *d) {
    switch (d->op) {
    case CG_OP_SSD_STEP: return &k_ssd_step_slots;
    case CG_OP_SSCAN_STEP: return &k_sscan_step_slots;
    case CG_OP_GDR_STEP: return &k_gdr_step_slots;
    default: return NULL;
    }
}

int cg__op_tensor(const cg_op_desc *d, const char *name) {
    for (int i = 0; i < d->nt; i++)
        if (name && !strcmp(d->t[i].name, name)) return i;
    return -1;
}

/* ------------------------------------------------------------ accessors */

int64_t cg__prob_dim(const cg_op_desc *d, const void *prob, cg_sym s) {
    if (s == CG_SYM_NONE) return 1;
    if ((unsigned)s >= CG_SYM_COUNT || d->dim_off[s] == NONE_OFF) return 0;
    return *(const int64_t *)((const char *)prob + d->dim_off[s]);
}

int cg__prob_grouped(const cg_op_desc *d, const void *prob) {
    return d->grouped_off == NONE_OFF ? 0 : *(const int *)((const char *)prob + d->grouped_off);
}

void cg__prob_extents(const cg_op_desc *d, const void *prob, int i, int64_t n[4]) {
    for (int k = 0; k < 4; k++) n[k] = cg__prob_dim(d, prob, d->t[i].ext[k]);
    const int64_t nseq = *cg__prob_nseq(d, prob);
    if (nseq && (d->t[i].flags & CG_TD_PERSEQ)) n[0] = nseq; /* varlen: a state per sequence */
}

/* The caller's order of tensor i: logical index of each given dimension; returns ndim. */
int cg__op_given_order(const cg_op_desc *d, int i, int grouped, int hm, int order[4]) {
    const cg_tdesc *t = &d->t[i];
    int n = 0;
    for (int k = 0; k < 4; k++) {
        if (t->ext[k] == CG_SYM_NONE) continue;
        if ((t->flags & CG_TD_GROUPABLE) && t->ext[k] == CG_SYM_G && !grouped) continue;
        order[n++] = k;
    }
    if ((t->flags & CG_TD_LAYOUT) && hm && n >= 3) {
        int tmp = order[1];
        order[1] = order[2];
        order[2] = tmp;
    }
    return n;
}

int cg__op_given_shape(const cg_op_desc *d, int i, const int64_t dims[CG_SYM_COUNT], int grouped, int hm,
                       int64_t shape[4]) {
    int order[4];
    int n = cg__op_given_order(d, i, grouped, hm, order);
    for (int k = 0; k < 4; k++) shape[k] = k < n ? dims[d->t[i].ext[order[k]]] : 0;
    return n;
}

void cg__op_dims_text(const cg_op_desc *d, int i, int grouped, int hm, char *buf, size_t cap) {
    int order[4];
    int n = cg__op_given_order(d, i, grouped, hm, order);
    size_t m = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < n && m < cap; k++)
        m += (size_t)snprintf(buf + m, cap - m, "%s%s", k ? ", " : "", cg_sym_name(d->t[i].ext[order[k]]));
    if (m < cap) snprintf(buf + m, cap - m, "]");
}

/* ---------------------------------------------------------------- dtypes */

int cg__op_dtype_like(const cg_op_desc *d, int i) {
    const cg_tdesc *t = &d->t[i];
    if (t->role != CG_TD_OUT) return -1;
    if (t->grad_of) return cg__op_tensor(d, t->grad_of);
    if (!(t->flags & CG_TD_HALF)) return -1;
    for (int j = 0; j < d->nt; j++)
        if (d->t[j].role == CG_TD_IN && (d->t[j].flags & CG_TD_HALF) && !memcmp(d->t[j].ext, t->ext, sizeof t->ext))
            return j;
    return -1;
}

int cg__prob_half(const cg_op_desc *d, const void *prob) {
    for (int i = 0; i < d->nt; i++) {
        const cg_view *v = cg__prob_view(d, prob, i);
        if (v->p && cg__dtype_half(v->dt)) return i;
    }
    return -1;
}

/* "q, k, v, o, ..." : the 16-bit-capable tensors of d (for messages). */
static const char *half_names(const cg_op_desc *d, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < d->nt && n < cap; i++)
        if (d->t[i].flags & CG_TD_HALF) n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", d->t[i].name);
    return buf;
}

cg_status cg__op_dtypes(cg_context *ctx, const cg_op_desc *d, const int dt[], cg_dtype want[], cg_dtype *math) {
    int first = -1, half = -1;
    for (int i = 0; i < d->nt; i++) {
        if (dt[i] < 0 || (d->t[i].flags & CG_TD_INDEX)) continue; /* index tensors: their own rule (validate.c) */
        if (!cg__dtype_known((cg_dtype)dt[i]))
            return cg__err(ctx, CG_EINVAL, "%s: unknown dtype %d (expected CG_F32, CG_F64, CG_BF16 or CG_F16)",
                           d->t[i].name, dt[i]);
        if (first < 0) first = i;
        if (half < 0 && cg__dtype_half((cg_dtype)dt[i])) half = i;
    }
    *math = first >= 0 && dt[first] == CG_F64 ? CG_F64 : CG_F32;
    char names[256];
    for (int i = 0; i < d->nt; i++) {
        const cg_tdesc *t = &d->t[i];
        const int like = cg__op_dtype_like(d, i);
        want[i] = *math;
        if (like >= 0 && dt[like] >= 0 && *math == CG_F32) want[i] = (cg_dtype)dt[like];
        if (t->flags & CG_TD_INDEX) want[i] = dt[i] == CG_I64 ? CG_I64 : CG_I32;
        if (dt[i] < 0 || (t->flags & CG_TD_INDEX)) continue;
        const cg_dtype x = (cg_dtype)dt[i];
        if (*math == CG_F64 || x == CG_F64) {
            if (x != *math)
                return cg__err(ctx, CG_EINVAL,
                               "%s: dtype %s but expected %s like %s (CG_F64 calls take every tensor as CG_F64)",
                               t->name, cg__dtype_name(x), cg__dtype_name(*math), d->t[first].name);
            continue;
        }
        if (cg__dtype_half(x) && !(t->flags & CG_TD_HALF))
            return cg__err(ctx, CG_EINVAL,
                           "%s: dtype %s but expected CG_F32 (%s stays float32; 16-bit storage is for %s)", t->name,
                           cg__dtype_name(x), t->name, half_names(d, names, sizeof names));
        if (cg__dtype_half(x) && x != (cg_dtype)dt[half])
            return cg__err(ctx, CG_EINVAL,
                           "%s: dtype %s but expected %s like %s, or CG_F32 (one 16-bit dtype per call)", t->name,
                           cg__dtype_name(x), cg__dtype_name((cg_dtype)dt[half]), d->t[half].name);
        if (t->role == CG_TD_OUT && x != want[i]) {
            if (like >= 0 && dt[like] >= 0)
                return cg__err(ctx, CG_EINVAL, "%s: dtype %s but expected %s like %s (%s)", t->name, cg__dtype_name(x),
                               cg__dtype_name(want[i]), d->t[like].name,
                               t->grad_of ? "a gradient has its input's dtype" : "an output has its input's dtype");
            return cg__err(ctx, CG_EINVAL, "%s: dtype %s but expected %s", t->name, cg__dtype_name(x),
                           cg__dtype_name(want[i]));
        }
    }
    return CG_OK;
}

/* ----------------------------------------------------------- shape flags */

const cg_kflag_desc cg__kflags[] = {
    {CG_KS_H0, "h0", NULL},
    {CG_KS_HT, "hT", NULL},
    {CG_KS_DHT, "dhT", NULL},
    {CG_KS_SOFTPLUS, "softplus", NULL},
    {CG_KS_HAS_D, "has_D", NULL},
    {CG_KS_HAS_Z, "has_z", NULL},
    {CG_KS_HAS_BIAS, "has_bias", NULL},
    {CG_KS_GROUPED, "grouped", NULL},
    {CG_KS_BWD, "bwd", "the backward, for the CPU spaces"},
    {CG_KS_SEQ_MAJOR, "seq_major", "sscan: [B, D, L] memory"},
    {CG_KS_L2NORM, "l2norm", "gdr: use_qk_l2norm"},
};
const int cg__nkflags = COUNT(cg__kflags);

int cg__kflag_parse(const char *name) {
    for (int i = 0; i < cg__nkflags; i++)
        if (name && !strcmp(cg__kflags[i].name, name)) return cg__kflags[i].flag;
    return 0;
}

/* ------------------------------------------------------------- tolerance */

double cg__tol(cg_tol_class c) {
    switch (c) {
    case CG_TOL_FWD: return 1e-5;
    case CG_TOL_BWD: return 1e-4;
    default: return 0;
    }
}

double cg__tol_dtype(cg_tol_class c, cg_dtype dt) {
    if (c == CG_TOL_NONE) return 0;
    return dt == CG_BF16 ? 1e-2 : dt == CG_F16 ? 2e-3 : cg__tol(c);
}

void cg__op_dtype_sig(const cg_op_desc *d, const int dt[], char *buf, size_t cap) {
    int half = -1, all = 1;
    for (int i = 0; i < d->nt; i++) {
        if (d->t[i].role != CG_TD_IN || dt[i] < 0 || !(d->t[i].flags & CG_TD_HALF)) continue;
        if (cg__dtype_half((cg_dtype)dt[i])) {
            if (half < 0) half = dt[i];
        } else {
            all = 0;
        }
    }
    if (half < 0 || all) {
        snprintf(buf, cap, "%s", half < 0 ? "f32" : cg__dtype_word((cg_dtype)half));
        return;
    }
    size_t n = (size_t)snprintf(buf, cap, "%s", cg__dtype_word((cg_dtype)half));
    for (int i = 0; i < d->nt && n < cap; i++)
        if (d->t[i].role == CG_TD_IN && dt[i] >= 0 && cg__dtype_half((cg_dtype)dt[i]))
            n += (size_t)snprintf(buf + n, cap - n, "-%s", d->t[i].name);
}

cg_status cg__op_dtype_unsig(cg_context *ctx, const cg_op_desc *d, const char *sig, int dt[]) {
    cg_dtype half = CG_F32;
    const char *list = NULL;
    for (int w = CG_BF16; w <= CG_F16; w++) {
        size_t n = strlen(cg__dtype_word((cg_dtype)w));
        if (!strncmp(sig, cg__dtype_word((cg_dtype)w), n) && (sig[n] == 0 || sig[n] == '-')) {
            half = (cg_dtype)w;
            list = sig[n] ? sig + n + 1 : NULL;
        }
    }
    if (half == CG_F32 && strcmp(sig, "f32"))
        return cg__err(ctx, CG_EINVAL,
                       "dtype \"%s\": expected f32, bf16, f16, or bf16-NAME-NAME (the 16-bit inputs of %s)", sig,
                       d->name);
    for (int i = 0; i < d->nt; i++) dt[i] = d->t[i].role == CG_TD_IN ? CG_F32 : -1;
    if (half != CG_F32 && !list)
        for (int i = 0; i < d->nt; i++)
            if (d->t[i].role == CG_TD_IN && (d->t[i].flags & CG_TD_HALF)) dt[i] = half;
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, "-");
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        int i = cg__op_tensor(d, name);
        if (i < 0 || d->t[i].role != CG_TD_IN || !(d->t[i].flags & CG_TD_HALF))
            return cg__err(ctx, CG_EINVAL, "dtype \"%s\": %s is not a 16-bit-capable input of %s", sig, name, d->name);
        dt[i] = half;
        p += n + (p[n] == '-');
    }
    cg_dtype want[CG_OP_MAX_TENSORS], math;
    cg_status s = cg__op_dtypes(ctx, d, dt, want, &math);
    if (s) return s;
    for (int i = 0; i < d->nt; i++)
        if (d->t[i].role == CG_TD_OUT) dt[i] = want[i];
    return CG_OK;
}
