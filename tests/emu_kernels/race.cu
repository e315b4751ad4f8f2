// race.cu -- shared-memory races for the emulator's race checker (tests/test_emu.c).

struct emu_race_params {
    const float *x;
    float *out;
};

// Every thread stages x[t] in s[t]; after a barrier, the slot k ahead (mod the block).
__device__ float staged_neighbour(float *s, const float *x, int k) {
    const int t = threadIdx.x;
    s[t] = x[t];
    __syncthreads();
    return s[(t + k) % blockDim.x];
}

// Race free: barriers between phases, and a warp-synchronous tail with __syncwarp.
extern "C" __global__ void emu_race_free(emu_race_params p) {
    extern __shared__ float s[];
    const int t = threadIdx.x;
    float v = staged_neighbour(s, p.x, 1);
    __syncthreads();
    s[t] = v;
    __syncthreads();
    if (t < 32) {
        for (int h = 16; h > 0; h >>= 1) {
            float o = s[t + h];
            __syncwarp();
            s[t] = s[t] + o;
            __syncwarp();
        }
    }
    __syncthreads();
    p.out[t] = s[t] + s[0];
}

// Reads its neighbour's slot with no barrier after the writes (read after write).
extern "C" __global__ void emu_race_raw(emu_race_params p) {
    extern __shared__ float s[];
    const int t = threadIdx.x;
    s[t] = p.x[t];
    p.out[t] = s[(t + 33) % blockDim.x];
}

// Threads of one parity write the same word of a static __shared__ array. (Accesses
// at constant offsets of a static __shared__ variable are not checked: the compiler's
// instrumentation leaves them out.)
extern "C" __global__ void emu_race_ww(emu_race_params p) {
    __shared__ float acc[4];
    acc[threadIdx.x % 2] = p.x[threadIdx.x];
    __syncthreads();
    p.out[threadIdx.x] = acc[threadIdx.x % 2];
}

// Overwrites a slot other threads read in the same interval (write after read).
extern "C" __global__ void emu_race_war(emu_race_params p) {
    extern __shared__ float s[];
    const int t = threadIdx.x;
    float v = staged_neighbour(s, p.x, 40);
    s[t] = v * 2.f;
    p.out[t] = v;
}
