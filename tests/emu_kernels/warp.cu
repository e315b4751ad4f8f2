// warp.cu -- warp collectives of tests/test_emu.c: shuffles (all four kinds, with
// widths), votes, reductions, and two disjoint masks in divergent branches.

struct emu_warp_params {
    const int *x;
    int *out; // [threads][EMU_WARP_K]
    float *fout; // [threads]
};
#define EMU_WARP_K 16

extern "C" __global__ void emu_warp(emu_warp_params p) {
    const unsigned full = 0xFFFFFFFFu;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31;
    const int v = p.x[i];
    int *o = p.out + (long long)i * EMU_WARP_K;
    o[0] = __shfl_xor_sync(full, v, 5);
    o[1] = __shfl_down_sync(full, v, 3);
    o[2] = __shfl_up_sync(full, v, 2);
    o[3] = __shfl_sync(full, v, (lane * 7) % 32);
    o[4] = __shfl_xor_sync(full, v, 1, 8);
    o[5] = __shfl_down_sync(full, v, 3, 16);
    o[6] = __shfl_up_sync(full, v, 2, 8);
    o[7] = __shfl_sync(full, v, 3, 8);
    o[8] = (int)__ballot_sync(full, v & 1);
    o[9] = __any_sync(full, v == 7);
    o[10] = __all_sync(full, v >= 0);
    o[11] = (int)__reduce_add_sync(full, (unsigned)v);
    if (lane < 16) o[12] = __shfl_xor_sync(0x0000FFFFu, v, 4);
    else o[12] = __shfl_down_sync(0xFFFF0000u, v, 2, 16);
    o[13] = __shfl_xor_sync(full, v, 12); // crosses 8-lane segments at width 32
    __syncwarp();
    o[14] = (int)__activemask();
    o[15] = __shfl_sync(full, v, lane + 40); // srcLane taken modulo the width
    // float butterfly sum: every lane ends with the same, order-fixed sum
    float f = (float)v * 0.25f;
    for (int m = 16; m > 0; m >>= 1) f += __shfl_xor_sync(full, f, m);
    p.fout[i] = f;
}
