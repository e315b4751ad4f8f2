// mma16.cu -- the 16-bit helpers of templates/cg_device.cuh, for tests/test_emu_half.c:
// bf16/fp16 conversions and 16-byte loads/stores of 8 halves, mma m16n8k16 (bf16 and
// fp16, fp32 accumulate) and ldmatrix x1/x2/x4 (.trans). The mma fragments are built
// here with the PTX ISA's m16n8k16 table written out (not through cg_mma_h16_*), and
// every lane's registers go out as they are: the test maps them back with its own copy
// of the table, so a wrong layout in the emulator fails instead of agreeing with itself.
// NVRTC compiles this file too (sm_80, sm_90).

struct emu_h16_params {
    const unsigned short *A; // [tiles][16][16] bf16 or fp16 bits, row-major
    const unsigned short *B; // [tiles][16][8]
    const float *C;          // [tiles][16][8]
    float *D;                // [tiles][32 lanes][4 registers]
    int f16;                 // 0: bf16, 1: fp16
    const float *cvt_in;     // [ncvt]
    unsigned short *cvt_bf16, *cvt_f16; // [ncvt] rounded
    float *wide;             // [2][ncvt]: cvt_bf16 / cvt_f16 widened again by cg_load8
    unsigned short *st8;     // [2][ncvt]: cvt_in rounded by cg_store8 (bf16, fp16)
    int ncvt;                // a multiple of 8
    const unsigned short *S; // ldmatrix source: 32 rows of 8 halves
    unsigned *L;             // [6 variants][32 lanes][4]: x1, x2, x4, x1.trans, x2.trans, x4.trans
    int misalign;            // emu_ldmatrix: lane 3 gives a row address 2 bytes off (an error)
};

__device__ unsigned emu_pack(unsigned short lo, unsigned short hi) { return (unsigned)lo | ((unsigned)hi << 16); }

extern "C" __global__ void emu_mma16(emu_h16_params p) {
    const int lane = threadIdx.x & 31;
    const int tile = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    const unsigned short *A = p.A + tile * 256, *B = p.B + tile * 128;
    const float *C = p.C + tile * 128;
    const int g = lane >> 2, t = lane & 3;
    // PTX ISA: a_i at row g (+8 for i = 2, 3, 6, 7), column 2t + (i & 1) (+8 for i >= 4)
    const unsigned a[4] = {emu_pack(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
                           emu_pack(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
                           emu_pack(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
                           emu_pack(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
    // b_i at row 2t + (i & 1) (+8 for i >= 2), column g
    const unsigned b[2] = {emu_pack(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]),
                           emu_pack(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g])};
    const float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
    float d[4];
    if (p.f16) cg_mma_f16_16x8x16(d, a, b, c);
    else cg_mma_bf16_16x8x16(d, a, b, c);
    float *D = p.D + (tile * 32 + lane) * 4;
    for (int i = 0; i < 4; i++) D[i] = d[i];
}

// One thread per 8 values: round (cg_round), widen again (cg_load8), round with cg_store8.
extern "C" __global__ void emu_cvt16(emu_h16_params p) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= p.ncvt) return;
    for (int k = 0; k < 8; k++) {
        p.cvt_bf16[i + k] = cg_round<cg_bf16>(p.cvt_in[i + k]).u;
        p.cvt_f16[i + k] = cg_round<cg_f16>(p.cvt_in[i + k]).u;
    }
    float v[8];
    cg_load8(reinterpret_cast<const cg_bf16 *>(p.cvt_bf16 + i), v);
    for (int k = 0; k < 8; k++) p.wide[i + k] = v[k];
    cg_load8(reinterpret_cast<const cg_f16 *>(p.cvt_f16 + i), v);
    for (int k = 0; k < 8; k++) p.wide[p.ncvt + i + k] = v[k];
    cg_store8(reinterpret_cast<cg_bf16 *>(p.st8 + i), p.cvt_in + i);
    cg_store8(reinterpret_cast<cg_f16 *>(p.st8 + p.ncvt + i), p.cvt_in + i);
}

// One warp. Shared memory holds the 32 rows of S; lane l gives the address of row
// (l * 5 + 3) % 32 (a permutation, so the test sees which address went where).
extern "C" __global__ void emu_ldmatrix(emu_h16_params p) {
    __shared__ __align__(16) unsigned short s[32 * 8 + 8];
    const int lane = threadIdx.x & 31;
    for (int k = 0; k < 8; k++) s[lane * 8 + k] = p.S[lane * 8 + k];
    __syncthreads();
    const unsigned short *row = s + ((lane * 5 + 3) % 32) * 8 + (p.misalign && lane == 3 ? 1 : 0);
    unsigned r[4];
    unsigned *L = p.L + lane * 4;
    for (int v = 0; v < 6; v++) { // x1, x2, x4, x1.trans, x2.trans, x4.trans: 1 << v % 3 registers
        if (v == 0) cg_ldmatrix_x1(r, row);
        else if (v == 1) cg_ldmatrix_x2(r, row);
        else if (v == 2) cg_ldmatrix_x4(r, row);
        else if (v == 3) cg_ldmatrix_x1_trans(r, row);
        else if (v == 4) cg_ldmatrix_x2_trans(r, row);
        else cg_ldmatrix_x4_trans(r, row);
        for (int i = 0; i < 1 << v % 3; i++) L[v * 128 + i] = r[i];
    }
}
