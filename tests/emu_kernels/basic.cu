// basic.cu -- block-level kernels of tests/test_emu.c (compiled after
// templates/cg_device.cuh): static and dynamic shared memory, barriers, 3-D
// indices, a multi-block grid and atomics.

struct emu_basic_params {
    const float *x;
    float *out;
    int *cnt;
    long long n;
};

// Tree sum of one 2-D block (blockDim.x * blockDim.y a power of two, <= 256) through
// static shared memory; one sum and one __syncthreads_count per block of a 2-D grid.
extern "C" __global__ void emu_block_sum(emu_basic_params p) {
    __shared__ float s[256];
    const int t = threadIdx.x + threadIdx.y * blockDim.x;
    const int nt = blockDim.x * blockDim.y;
    const long long b = blockIdx.x + (long long)gridDim.x * blockIdx.y;
    const long long i = b * nt + t;
    s[t] = i < p.n ? p.x[i] : 0.f;
    __syncthreads();
    for (int h = nt / 2; h > 0; h /= 2) {
        if (t < h) s[t] += s[t + h];
        __syncthreads();
    }
    if (t == 0) p.out[b] = s[0];
    const int c = __syncthreads_count(i < p.n && p.x[i] > 0.f);
    if (t == 0) p.cnt[b] = c;
}

// Reverse each block's slice through dynamic shared memory declared both ways; the
// buffer is larger than 48 KiB and its tail is written and read back too.
extern "C" __global__ void emu_dyn_reverse(emu_basic_params p) {
    extern __shared__ float dyn[];
    CG_DYN_SMEM(float, same);
    const int t = threadIdx.x, nt = blockDim.x;
    const long long base = (long long)blockIdx.x * nt;
    dyn[t] = p.x[base + t];
    same[16384 + t] = (float)t; // bytes 64 KiB.. of the buffer
    __syncthreads();
    p.out[base + t] = same[nt - 1 - t] + dyn[16384 + nt - 1 - t] - (float)(nt - 1 - t);
}

// Every index variable of a 3-D grid of 3-D blocks, one record of 12 ints per thread.
extern "C" __global__ void emu_indices(emu_basic_params p) {
    const long long tb = threadIdx.x + blockDim.x * (threadIdx.y + (long long)blockDim.y * threadIdx.z);
    const long long bb = blockIdx.x + gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z);
    const long long g = bb * (blockDim.x * blockDim.y * blockDim.z) + tb;
    int *r = p.cnt + g * 12;
    r[0] = threadIdx.x; r[1] = threadIdx.y; r[2] = threadIdx.z;
    r[3] = blockIdx.x;  r[4] = blockIdx.y;  r[5] = blockIdx.z;
    r[6] = blockDim.x;  r[7] = blockDim.y;  r[8] = blockDim.z;
    r[9] = gridDim.x;   r[10] = gridDim.y;  r[11] = gridDim.z;
}

// Atomics across blocks (which the emulator may run on several OS threads at once).
extern "C" __global__ void emu_atomics(emu_basic_params p) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    atomicAdd(&p.cnt[0], 1);
    atomicMax(&p.cnt[1], (int)(i * 7 % 1000));
    atomicMin(&p.cnt[2], (int)(i * 7 % 1000) - 500);
    int old = atomicCAS(&p.cnt[3], 0, (int)i + 1); // exactly one thread wins
    if (old == 0) atomicAdd(&p.cnt[4], 1);
    atomicAdd(&p.out[0], 0.5f); // exact in float up to 2^24 / 2 adds
}
