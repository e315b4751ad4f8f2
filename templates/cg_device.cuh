// cg_device.cuh -- the device-helper layer of chunkgen's kernel templates.
//
// Two implementations of one interface:
//  - NVRTC / nvcc (CG_EMULATE undefined): PTX inline asm for sm_80 and later;
//  - the SIMT emulator (CG_EMULATE, emulator/cg_emu.h prepended): scalar code that
//    reproduces each instruction's exact per-lane fragment layout, so a kernel that
//    runs right under the emulator runs right on the GPU.
// Plain CUDA C++ with no includes (NVRTC has no standard headers): 32-bit words are
// `unsigned`, which is uint32_t on every target.
//
// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, D[16x8] = A[16x8] B[8x8] + C,
// with g = lane / 4 (groupID) and t = lane % 4 (threadID_in_group):
//   a[0] = A[g][t]    a[1] = A[g+8][t]    a[2] = A[g][t+4]    a[3] = A[g+8][t+4]
//   b[0] = B[t][g]    b[1] = B[t+4][g]
//   c[0] = C[g][2t]   c[1] = C[g][2t+1]   c[2] = C[g+8][2t]   c[3] = C[g+8][2t+1]
// (cg_mma_tf32_{a,b,c}_{row,col} below give these coordinates.) The tensor core reads
// only the top 19 bits of each A/B word; round with cg_to_tf32 first.
// The 16-bit side (bf16/fp16 storage and conversions, 16-byte loads of 8 halves,
// mma m16n8k16 with fp32 accumulate, ldmatrix) is further down, with its layouts.
#ifndef CG_DEVICE_CUH
#define CG_DEVICE_CUH

#define CG_DEV __device__ __forceinline__

// ------------------------------------------------------------- lanes and warps
CG_DEV int cg_lane_id() { return (int)(threadIdx.x & 31u); }

// Fragment coordinates of mma m16n8k8 tf32 for lane and element i.
CG_DEV int cg_mma_tf32_a_row(int lane, int i) { return (lane >> 2) + ((i & 1) << 3); }
CG_DEV int cg_mma_tf32_a_col(int lane, int i) { return (lane & 3) + ((i & 2) << 1); }
CG_DEV int cg_mma_tf32_b_row(int lane, int i) { return (lane & 3) + (i << 2); }
CG_DEV int cg_mma_tf32_b_col(int lane, int i) { return (lane >> 2) + 0 * i; }
CG_DEV int cg_mma_tf32_c_row(int lane, int i) { return (lane >> 2) + ((i & 2) << 2); }
CG_DEV int cg_mma_tf32_c_col(int lane, int i) { return ((lane & 3) << 1) + (i & 1); }

// --------------------------------------------------- dynamic shared memory
// CG_DYN_SMEM(float, s); declares `float *s` at the block's dynamic shared memory
// (16-byte aligned). Plain `extern __shared__ T s[];` works too under both. (The
// emulator's loader turns this declaration into a macro; outside any #if, so that the
// #line it adds is not skipped and the lines below keep their numbers.)
extern __shared__ __align__(16) unsigned char cg_dyn_smem_raw[];
#define CG_DYN_SMEM(type, name) type *name = reinterpret_cast<type *>(cg_dyn_smem_raw)

// ------------------------------------------------------------------------ tf32
#ifdef CG_EMULATE
// cvt.rna.tf32.f32: round to nearest, ties away from zero, to 10 mantissa bits; the
// low 13 bits of the result are 0. Adding half an ulp to the magnitude bits and
// truncating rounds ties away (sign-magnitude); a carry into the exponent is the
// correct round-up (to infinity past the largest tf32). NaN stays NaN.
CG_DEV unsigned cg_to_tf32(float x) {
    unsigned u = __float_as_uint(x);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return 0x7FFFFFFFu;
    return (u + 0x1000u) & 0xFFFFE000u;
}
#else
CG_DEV unsigned cg_to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
#endif

// x rounded to tf32, as a float.
CG_DEV float cg_tf32_round(float x) { return __uint_as_float(cg_to_tf32(x)); }

// 3xTF32 operands: x ~= hi + lo, both tf32; the error of hi*hi + hi*lo + lo*hi is
// about 2^-21 relative, fp32-level.
CG_DEV void cg_split_tf32(float x, unsigned &hi, unsigned &lo) {
    hi = cg_to_tf32(x);
    lo = cg_to_tf32(x - __uint_as_float(hi));
}

#ifdef CG_EMULATE
namespace cg_emu {
// One lane's operands of an mma (tf32 16x8x8, 16-bit 16x8x16).
struct mma_rec {
    const unsigned *a, *b;
    const float *c;
    float *d;
};
// Every lane's d of the warp's 16x8 product C + A B over K (the C and D fragments' layout is
// the same for both shapes), summed in the order C, then k = 0..K-1.
template <int K>
static void mma_write_d(void *const *args, const float (&A)[16][K], const float (&B)[K][8], const float (&C)[16][8]) {
    for (int l = 0; l < 32; l++) {
        const mma_rec *r = static_cast<const mma_rec *>(args[l]);
        for (int i = 0; i < 4; i++) {
            const int m = cg_mma_tf32_c_row(l, i), n = cg_mma_tf32_c_col(l, i);
            float acc = C[m][n];
            for (int k = 0; k < K; k++) acc += A[m][k] * B[k][n];
            r->d[i] = acc;
        }
    }
}
// The whole warp's fragments -> the 16x8x8 product. The tensor core ignores the low
// 13 bits of A and B; products of tf32 values are exact in fp32, so the sum order
// (C, then k = 0..7) is the only rounding choice, and a real GPU may differ from it
// in the last bits.
__attribute__((unused)) static void mma_tf32_fn(void *const *args, unsigned) {
    float A[16][8], B[8][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const mma_rec *r = static_cast<const mma_rec *>(args[l]);
        for (int i = 0; i < 4; i++)
            A[cg_mma_tf32_a_row(l, i)][cg_mma_tf32_a_col(l, i)] = __uint_as_float(r->a[i] & 0xFFFFE000u);
        for (int i = 0; i < 2; i++)
            B[cg_mma_tf32_b_row(l, i)][cg_mma_tf32_b_col(l, i)] = __uint_as_float(r->b[i] & 0xFFFFE000u);
        for (int i = 0; i < 4; i++) C[cg_mma_tf32_c_row(l, i)][cg_mma_tf32_c_col(l, i)] = r->c[i];
    }
    mma_write_d<8>(args, A, B, C);
}
} // namespace cg_emu
#endif

// d = A b + c for one warp (every lane of the warp must call it, converged).
// d may alias c.
CG_DEV void cg_mma_tf32_16x8x8(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]) {
#ifdef CG_EMULATE
    if (::cg_emu::self()->blk->nthreads % 32)
        ::cg_emu::fail("mma.sync needs full warps; the block has %d threads", ::cg_emu::self()->blk->nthreads);
    float out[4];
    ::cg_emu::mma_rec rec{a, b, c, out};
    ::cg_emu::g_api->warp_sync(::cg_emu::self(), 0xFFFFFFFFu, "mma.sync.m16n8k8.tf32", __LINE__, &rec,
                               &::cg_emu::mma_tf32_fn);
    for (int i = 0; i < 4; i++) d[i] = out[i];
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                   "f"(c[3]));
#endif
}

// The same from fp32 fragments, rounded to tf32 (precision tf32).
CG_DEV void cg_mma_tf32_16x8x8_f(float d[4], const float a[4], const float b[2], const float c[4]) {
    unsigned ta[4], tb[2];
    for (int i = 0; i < 4; i++) ta[i] = cg_to_tf32(a[i]);
    for (int i = 0; i < 2; i++) tb[i] = cg_to_tf32(b[i]);
    cg_mma_tf32_16x8x8(d, ta, tb, c);
}

// 3xTF32 from split operands (cg_split_tf32): the small terms first.
CG_DEV void cg_mma_3xtf32_16x8x8(float d[4], const unsigned a_hi[4], const unsigned a_lo[4], const unsigned b_hi[2],
                                 const unsigned b_lo[2], const float c[4]) {
    float t[4];
    cg_mma_tf32_16x8x8(t, a_lo, b_hi, c);
    cg_mma_tf32_16x8x8(t, a_hi, b_lo, t);
    cg_mma_tf32_16x8x8(d, a_hi, b_hi, t);
}

// 3xTF32 from fp32 fragments (precision 3xtf32: fp32 accuracy on tensor cores).
CG_DEV void cg_mma_3xtf32_16x8x8_f(float d[4], const float a[4], const float b[2], const float c[4]) {
    unsigned ah[4], al[4], bh[2], bl[2];
    for (int i = 0; i < 4; i++) cg_split_tf32(a[i], ah[i], al[i]);
    for (int i = 0; i < 2; i++) cg_split_tf32(b[i], bh[i], bl[i]);
    cg_mma_3xtf32_16x8x8(d, ah, al, bh, bl, c);
}

// ---------------------------------------------------------------- bf16 and fp16
// Storage types: the raw 16-bit patterns (2 bytes, 2-byte aligned; distinct types, so
// overloads pick the conversion). Widening is exact. Narrowing rounds to nearest, ties
// to even: cvt.rn on the GPU; under the emulator runtime/half.h's functions (appended
// to emulator/cg_emu.h), the host's one definition. The two agree bit for bit on every
// input but NaN, which stays a NaN (the GPU's cvt may return a canonical NaN).
struct cg_bf16 {
    unsigned short u;
};
struct cg_f16 {
    unsigned short u;
};

CG_DEV float cg_f32(float x) { return x; }
CG_DEV float cg_f32(cg_bf16 h) { return __uint_as_float((unsigned)h.u << 16); }
template <class T> CG_DEV T cg_round(float x);
template <> CG_DEV float cg_round<float>(float x) { return x; }
#ifdef CG_EMULATE
CG_DEV float cg_f32(cg_f16 h) { return ::cg__f16_to_f32(h.u); }
template <> CG_DEV cg_bf16 cg_round<cg_bf16>(float x) { return cg_bf16{::cg__f32_to_bf16(x)}; }
template <> CG_DEV cg_f16 cg_round<cg_f16>(float x) { return cg_f16{::cg__f32_to_f16(x)}; }
// Two values in one 32-bit word: lo in bits 0..15, hi in 16..31 (as in mma fragments).
template <class T> CG_DEV unsigned cg_pack2(float lo, float hi) {
    return (unsigned)cg_round<T>(lo).u | ((unsigned)cg_round<T>(hi).u << 16);
}
#else
CG_DEV float cg_f32(cg_f16 h) {
    float r;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(r) : "h"(h.u));
    return r;
}
template <> CG_DEV cg_bf16 cg_round<cg_bf16>(float x) {
    cg_bf16 r;
    asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(r.u) : "f"(x));
    return r;
}
template <> CG_DEV cg_f16 cg_round<cg_f16>(float x) {
    cg_f16 r;
    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(r.u) : "f"(x));
    return r;
}
// cvt.rn.{bf16,f16}x2.f32 d, a, b puts a in the upper half and b in the lower.
template <class T> CG_DEV unsigned cg_pack2(float lo, float hi);
template <> CG_DEV unsigned cg_pack2<cg_bf16>(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
template <> CG_DEV unsigned cg_pack2<cg_f16>(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
#endif
template <class T> CG_DEV float cg_lo(unsigned w) { return cg_f32(T{(unsigned short)(w & 0xFFFFu)}); }
template <class T> CG_DEV float cg_hi(unsigned w) { return cg_f32(T{(unsigned short)(w >> 16)}); }

// 8 halves from one 16-byte load (p 16-byte aligned), widened; and 8 floats rounded and
// stored with one 16-byte store.
template <class T> CG_DEV void cg_load8(const T *p, float v[8]) {
    const uint4 w = *reinterpret_cast<const uint4 *>(p);
    const unsigned u[4] = {w.x, w.y, w.z, w.w};
    for (int i = 0; i < 4; i++) {
        v[2 * i] = cg_lo<T>(u[i]);
        v[2 * i + 1] = cg_hi<T>(u[i]);
    }
}
template <class T> CG_DEV void cg_store8(T *p, const float v[8]) {
    uint4 w;
    w.x = cg_pack2<T>(v[0], v[1]);
    w.y = cg_pack2<T>(v[2], v[3]);
    w.z = cg_pack2<T>(v[4], v[5]);
    w.w = cg_pack2<T>(v[6], v[7]);
    *reinterpret_cast<uint4 *>(p) = w;
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, D[16x8] = A[16x16]
// B[16x8] + C. Each 32-bit A/B register holds two elements, the lower index in bits
// 0..15. With g = lane / 4, t = lane % 4 (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type"):
//   a0,a1 = A[g][2t..2t+1]     a2,a3 = A[g+8][2t..2t+1]
//   a4,a5 = A[g][2t+8..2t+9]   a6,a7 = A[g+8][2t+8..2t+9]      (registers a[0..3])
//   b0,b1 = B[2t..2t+1][g]     b2,b3 = B[2t+8..2t+9][g]        (registers b[0..1])
//   c, d as in m16n8k8 (cg_mma_tf32_c_*).
// Element i (0..7 of A, 0..3 of B) of lane:
CG_DEV int cg_mma_h16_a_row(int lane, int i) { return (lane >> 2) + (((i >> 1) & 1) << 3); }
CG_DEV int cg_mma_h16_a_col(int lane, int i) { return ((lane & 3) << 1) + (i & 1) + ((i >> 2) << 3); }
CG_DEV int cg_mma_h16_b_row(int lane, int i) { return ((lane & 3) << 1) + (i & 1) + ((i >> 1) << 3); }
CG_DEV int cg_mma_h16_b_col(int lane, int i) { return (lane >> 2) + 0 * i; }

#ifdef CG_EMULATE
namespace cg_emu {
// The whole warp's fragments -> the 16x8x16 product in fp32. A product of two bf16 or
// two fp16 values is exact in fp32 (at most 22 significant bits), so the sum order
// (C, then k = 0..15) is the only rounding choice, as in mma_tf32_fn.
template <class T> static void mma_h16_fn(void *const *args, unsigned) {
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; l++) {
        const mma_rec *r = static_cast<const mma_rec *>(args[l]);
        for (int i = 0; i < 8; i++) {
            const unsigned w = r->a[i >> 1];
            A[cg_mma_h16_a_row(l, i)][cg_mma_h16_a_col(l, i)] = (i & 1) ? cg_hi<T>(w) : cg_lo<T>(w);
        }
        for (int i = 0; i < 4; i++) {
            const unsigned w = r->b[i >> 1];
            B[cg_mma_h16_b_row(l, i)][cg_mma_h16_b_col(l, i)] = (i & 1) ? cg_hi<T>(w) : cg_lo<T>(w);
        }
        for (int i = 0; i < 4; i++) C[cg_mma_tf32_c_row(l, i)][cg_mma_tf32_c_col(l, i)] = r->c[i];
    }
    mma_write_d<16>(args, A, B, C);
}
template <class T>
static void mma_h16(float d[4], const unsigned a[4], const unsigned b[2], const float c[4], const char *what) {
    if (self()->blk->nthreads % 32) fail("%s needs full warps; the block has %d threads", what, self()->blk->nthreads);
    float out[4];
    mma_rec rec{a, b, c, out};
    g_api->warp_sync(self(), 0xFFFFFFFFu, what, 0, &rec, &mma_h16_fn<T>);
    for (int i = 0; i < 4; i++) d[i] = out[i];
}
} // namespace cg_emu
#endif

// d = A b + c for one warp (every lane of the warp, converged); d may alias c. The 16-bit
// inputs are of storage type T, PTX type ty (bf16, f16).
#ifdef CG_EMULATE
#define CG__MMA_H16(T, ty) ::cg_emu::mma_h16<T>(d, a, b, c, "mma.sync.m16n8k16." #ty)
#else
#define CG__MMA_H16(T, ty)                                                                                             \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." #ty "." #ty ".f32 "                                          \
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"                               \
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                      \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),  \
                   "f"(c[3]))
#endif
CG_DEV void cg_mma_bf16_16x8x16(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]) {
    CG__MMA_H16(cg_bf16, bf16);
}
CG_DEV void cg_mma_f16_16x8x16(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]) {
    CG__MMA_H16(cg_f16, f16);
}
#undef CG__MMA_H16
// The one for storage type T (cg_bf16 or cg_f16).
template <class T>
CG_DEV void cg_mma_h16_16x8x16(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]);
template <>
CG_DEV void cg_mma_h16_16x8x16<cg_bf16>(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]) {
    cg_mma_bf16_16x8x16(d, a, b, c);
}
template <>
CG_DEV void cg_mma_h16_16x8x16<cg_f16>(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]) {
    cg_mma_f16_16x8x16(d, a, b, c);
}

// ------------------------------------------------------------------- ldmatrix
// ldmatrix.sync.aligned.m8n8.x{1,2,4}{,.trans}.shared.b16: N (1, 2, 4) 8x8 matrices of
// 16-bit elements from shared memory. Lane l gives the address of row l % 8 of matrix
// l / 8 (16 bytes, 16-byte aligned; lanes 8N..31 are ignored); every lane of the warp
// calls it, converged. Register r[m] of lane l holds matrix m's elements
//   [g][2t], [g][2t+1]        (g = l / 4, t = l % 4; lower element in bits 0..15)
//   [2t][g], [2t+1][g]        with .trans (the fragment of the transposed matrix).
#ifdef CG_EMULATE
namespace cg_emu {
struct ldmatrix_rec {
    const unsigned char *row;
    unsigned *r;
};
// NOSAN: the copy below is the whole warp's, made by whichever lane arrived last; each
// lane's own row read is what ldmatrix() reports to the race check and the statistics.
template <int N, bool TRANS> CG_EMU_NOSAN static void ldmatrix_fn(void *const *args, unsigned) {
    unsigned short M[4][8][8];
    for (int l = 0; l < 8 * N; l++) {
        const unsigned char *p = static_cast<const ldmatrix_rec *>(args[l])->row;
        if ((uintptr_t)p & 15u) fail("ldmatrix: lane %d's row address %p is not 16-byte aligned", l, (const void *)p);
        memcpy(M[l >> 3][l & 7], p, 16);
    }
    for (int l = 0; l < 32; l++) {
        const ldmatrix_rec *r = static_cast<const ldmatrix_rec *>(args[l]);
        const int g = l >> 2, t = l & 3;
        for (int m = 0; m < N; m++) {
            const unsigned lo = TRANS ? M[m][2 * t][g] : M[m][g][2 * t];
            const unsigned hi = TRANS ? M[m][2 * t + 1][g] : M[m][g][2 * t + 1];
            r->r[m] = lo | (hi << 16);
        }
    }
}
template <int N, bool TRANS> __attribute__((noinline)) static void ldmatrix(unsigned *r, const void *row) {
    if (self()->blk->nthreads % 32) fail("ldmatrix needs full warps; the block has %d threads", self()->blk->nthreads);
#ifdef CG_EMU_RACECHECK
    // As on the GPU, lane l < 8N reads its 16-byte row: one shared load per lane at the
    // caller's line (bank-conflict counts of the warp-wide request, race check).
    if (self()->lane < 8 * N) access(row, 16, 0, __builtin_return_address(0));
#endif
    ldmatrix_rec rec{static_cast<const unsigned char *>(row), r};
    g_api->warp_sync(self(), 0xFFFFFFFFu, TRANS ? "ldmatrix.trans" : "ldmatrix", 0, &rec, &ldmatrix_fn<N, TRANS>);
}
} // namespace cg_emu
CG_DEV void cg_ldmatrix_x1(unsigned r[1], const void *row) { ::cg_emu::ldmatrix<1, false>(r, row); }
CG_DEV void cg_ldmatrix_x2(unsigned r[2], const void *row) { ::cg_emu::ldmatrix<2, false>(r, row); }
CG_DEV void cg_ldmatrix_x4(unsigned r[4], const void *row) { ::cg_emu::ldmatrix<4, false>(r, row); }
CG_DEV void cg_ldmatrix_x1_trans(unsigned r[1], const void *row) { ::cg_emu::ldmatrix<1, true>(r, row); }
CG_DEV void cg_ldmatrix_x2_trans(unsigned r[2], const void *row) { ::cg_emu::ldmatrix<2, true>(r, row); }
CG_DEV void cg_ldmatrix_x4_trans(unsigned r[4], const void *row) { ::cg_emu::ldmatrix<4, true>(r, row); }
#else
#define CG_SMEM_(p) ((unsigned)__cvta_generic_to_shared(p))
// .x<n> and its .trans: the register list regs, the outputs r[0..n-1] (the variadic tail).
#define CG_LDMATRIX_(n, regs, ...)                                                                                     \
    CG_DEV void cg_ldmatrix_x##n(unsigned r[n], const void *row) {                                                     \
        asm volatile("ldmatrix.sync.aligned.m8n8.x" #n ".shared.b16 " regs ";\n" : __VA_ARGS__ : "r"(CG_SMEM_(row)));  \
    }                                                                                                                  \
    CG_DEV void cg_ldmatrix_x##n##_trans(unsigned r[n], const void *row) {                                             \
        asm volatile("ldmatrix.sync.aligned.m8n8.x" #n ".trans.shared.b16 " regs ";\n"                                 \
                     : __VA_ARGS__                                                                                     \
                     : "r"(CG_SMEM_(row)));                                                                            \
    }
CG_LDMATRIX_(1, "{%0}, [%1]", "=r"(r[0]))
CG_LDMATRIX_(2, "{%0, %1}, [%2]", "=r"(r[0]), "=r"(r[1]))
CG_LDMATRIX_(4, "{%0, %1, %2, %3}, [%4]", "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]))
#undef CG_LDMATRIX_
#undef CG_SMEM_
#endif

// ------------------------------------------------------------------ cp.async
// Global -> shared copies of 4, 8 or 16 bytes; both addresses aligned to the size.
// _zfill: copy the first src_bytes (0..size) and zero the rest (src must still be a
// valid address when src_bytes is 0: pass the tensor's base). .cg (L2 only) exists for
// 16 bytes. Emulated asynchronously, as on the GPU: the destination is poisoned (NaN
// bytes) at issue and the data lands only when the issuing thread waits for its group
// (cg_cp_async_wait<N> / _wait_all), so a read before the wait, or by another thread
// without a __syncthreads after the wait, sees garbage (and racecheck names it).
#ifdef CG_EMULATE
namespace cg_emu {
// noinline: the return address is the caller's line (access statistics, race reports).
__attribute__((noinline)) static void cp_async(void *dst, const void *src, int size, int src_bytes, int line) {
    if (((uintptr_t)dst | (uintptr_t)src) & (uintptr_t)(size - 1))
        fail("cp.async of %d bytes in line %d: misaligned address (dst %p, src %p)", size, line, dst, src);
    if (src_bytes < 0 || src_bytes > size)
        fail("cp.async of %d bytes in line %d: src_bytes %d out of range", size, line, src_bytes);
    g_api->cp_async(self(), dst, src, size, src_bytes, __builtin_return_address(0));
}
} // namespace cg_emu
#define CG_CP_ASYNC_(kind, n)                                                                                          \
    CG_DEV void cg_cp_async_##kind##n(void *dst, const void *src) { ::cg_emu::cp_async(dst, src, n, n, __LINE__); }    \
    CG_DEV void cg_cp_async_##kind##n##_zfill(void *dst, const void *src, int src_bytes) {                             \
        ::cg_emu::cp_async(dst, src, n, src_bytes, __LINE__);                                                          \
    }
CG_DEV void cg_cp_async_commit() { ::cg_emu::g_api->cp_async_commit(::cg_emu::self()); }
template <int N> CG_DEV void cg_cp_async_wait() {
    static_assert(N >= 0 && N <= 7, "cp.async.wait_group N");
    ::cg_emu::g_api->cp_async_wait(::cg_emu::self(), N);
}
CG_DEV void cg_cp_async_wait_all() { ::cg_emu::g_api->cp_async_wait(::cg_emu::self(), -1); }
#else
#define CG_CP_ASYNC_(kind, n)                                                                                          \
    CG_DEV void cg_cp_async_##kind##n(void *dst, const void *src) {                                                    \
        const unsigned s = (unsigned)__cvta_generic_to_shared(dst);                                                    \
        asm volatile("cp.async." #kind ".shared.global [%0], [%1], " #n ";\n" ::"r"(s), "l"(src) : "memory");          \
    }                                                                                                                  \
    CG_DEV void cg_cp_async_##kind##n##_zfill(void *dst, const void *src, int src_bytes) {                             \
        const unsigned s = (unsigned)__cvta_generic_to_shared(dst);                                                    \
        asm volatile("cp.async." #kind ".shared.global [%0], [%1], " #n ", %2;\n" ::"r"(s), "l"(src), "r"(src_bytes)   \
                     : "memory");                                                                                      \
    }
CG_DEV void cg_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Wait until at most N committed groups are still in flight.
template <int N> CG_DEV void cg_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
CG_DEV void cg_cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
#endif
CG_CP_ASYNC_(ca, 4)
CG_CP_ASYNC_(ca, 8)
CG_CP_ASYNC_(ca, 16)
CG_CP_ASYNC_(cg, 16)
#undef CG_CP_ASYNC_

#undef CG_DEV
#endif // CG_DEVICE_CUH
