// errors.cu -- kernels the emulator must reject with a message (never hang), for
// tests/test_emu.c.

struct emu_err_params {
    float *out;
};

// Half the block returns before a barrier the other half waits at.
extern "C" __global__ void emu_div_exit(emu_err_params p) {
    __shared__ float s[64];
    if (threadIdx.x >= 16) return;
    s[threadIdx.x] = 1.f;
    __syncthreads();
    p.out[threadIdx.x] = s[threadIdx.x ^ 1];
}

// Two warps wait at two different barriers.
extern "C" __global__ void emu_div_lines(emu_err_params p) {
    if (threadIdx.x < 32) {
        __syncthreads();
        p.out[threadIdx.x] = 1.f;
    } else {
        __syncthreads();
        p.out[threadIdx.x] = 2.f;
    }
}

// Lane 0 waits for its warp at __syncwarp while lanes 1..31 wait at __syncthreads.
extern "C" __global__ void emu_deadlock(emu_err_params p) {
    if ((threadIdx.x & 31) == 0) __syncwarp();
    else __syncthreads();
    p.out[threadIdx.x] = 3.f;
}

extern "C" __global__ void emu_trap(emu_err_params p) {
    if (threadIdx.x == 5) __trap();
    p.out[threadIdx.x] = 4.f;
}
