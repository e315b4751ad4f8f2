// mma.cu -- tensor-core and async-copy helpers of templates/cg_device.cuh, for
// tests/test_emu.c. Fragments are loaded with the PTX ISA's m16n8k8 .tf32 layout
// written out here (not through the cg_mma_tf32_* coordinate helpers), so a wrong
// layout in the emulator fails the test instead of agreeing with itself.

struct emu_mma_params {
    const float *A;   // [tiles][16][16] row-major (two k-steps of 8)
    const float *B;   // [tiles][16][8]
    const float *C;   // [tiles][16][8]
    float *D;         // [tiles][16][8] tf32
    float *D3;        // [tiles][16][8] 3xtf32
    const float *cvt_in;
    unsigned *cvt_out;
    int ncvt;
    const float *src; // cp.async source, 16-byte aligned
    float *dst;       // cp.async result [256]
    int misalign;     // emu_cp_async: offset the source by one float (an error)
};

extern "C" __global__ void emu_mma(emu_mma_params p) {
    const int lane = threadIdx.x & 31;
    const int tile = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    const float *A = p.A + tile * 256, *B = p.B + tile * 128, *C = p.C + tile * 128;
    const int g = lane >> 2, t = lane & 3;
    float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
    float d[4] = {c[0], c[1], c[2], c[3]}, d3[4] = {c[0], c[1], c[2], c[3]};
    for (int ks = 0; ks < 2; ks++) {
        const int k0 = ks * 8;
        float af[4] = {A[g * 16 + k0 + t], A[(g + 8) * 16 + k0 + t], A[g * 16 + k0 + t + 4],
                       A[(g + 8) * 16 + k0 + t + 4]};
        float bf[2] = {B[(k0 + t) * 8 + g], B[(k0 + t + 4) * 8 + g]};
        unsigned a[4], b[2];
        for (int i = 0; i < 4; i++) a[i] = cg_to_tf32(af[i]);
        for (int i = 0; i < 2; i++) b[i] = cg_to_tf32(bf[i]);
        cg_mma_tf32_16x8x8(d, a, b, d);
        cg_mma_3xtf32_16x8x8_f(d3, af, bf, d3);
    }
    float *D = p.D + tile * 128, *D3 = p.D3 + tile * 128;
    D[g * 8 + 2 * t] = d[0];
    D[g * 8 + 2 * t + 1] = d[1];
    D[(g + 8) * 8 + 2 * t] = d[2];
    D[(g + 8) * 8 + 2 * t + 1] = d[3];
    D3[g * 8 + 2 * t] = d3[0];
    D3[g * 8 + 2 * t + 1] = d3[1];
    D3[(g + 8) * 8 + 2 * t] = d3[2];
    D3[(g + 8) * 8 + 2 * t + 1] = d3[3];
}

extern "C" __global__ void emu_cvt(emu_mma_params p) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.ncvt) p.cvt_out[i] = cg_to_tf32(p.cvt_in[i]);
}

// 64 threads stage 256 floats with every cp.async size and kind, then the zfill
// forms: 16 bytes with 0..16 source bytes, 8 with 4, 4 with 0.
extern "C" __global__ void emu_cp_async(emu_mma_params p) {
    __shared__ __align__(16) float s[256 + 64];
    const int t = threadIdx.x;
    const float *src = p.src + p.misalign;
    if (t < 16) cg_cp_async_ca16(&s[t * 4], src + t * 4);           // [0, 64)
    else if (t < 32) cg_cp_async_cg16(&s[t * 4], src + t * 4);      // [64, 128)
    else if (t < 48) {
        cg_cp_async_ca8(&s[128 + (t - 32) * 4], src + 128 + (t - 32) * 4);   // pairs
        cg_cp_async_ca8(&s[130 + (t - 32) * 4], src + 130 + (t - 32) * 4);
    } else {
        for (int k = 0; k < 4; k++) cg_cp_async_ca4(&s[192 + (t - 48) * 4 + k], src + 192 + (t - 48) * 4 + k);
    }
    cg_cp_async_commit();
    if (t < 16) cg_cp_async_ca16_zfill(&s[256 + t * 4], src + t * 4, t > 4 ? 16 : t * 4);
    cg_cp_async_commit();
    cg_cp_async_wait<1>();
    cg_cp_async_wait_all();
    __syncthreads();
    for (int k = t; k < 256 + 64; k += blockDim.x) p.dst[k] = s[k];
}
