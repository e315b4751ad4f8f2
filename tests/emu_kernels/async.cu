// async.cu -- cp.async modelled asynchronously (tests/test_emu.c): the data lands at
// the issuing thread's wait, so a kernel that reads the destination too early fails.
// Each block stages p.n floats of p.x in chunks of blockDim.x through two stages and
// writes out[i] = x[i] + x[neighbour of i in its chunk].

struct emu_async_params {
    const float *x;
    float *out;
    int n;    // a multiple of blockDim.x
    int mode; // emu_async_early
};

// Correct: two stages, the next chunk in flight while this one is read.
extern "C" __global__ void emu_async_pipe(emu_async_params p) {
    extern __shared__ __align__(16) float s[];
    const int t = threadIdx.x, nt = blockDim.x, nc = p.n / nt;
    cg_cp_async_ca4(&s[t], &p.x[t]);
    cg_cp_async_commit();
    for (int c = 0; c < nc; c++) {
        if (c + 1 < nc) cg_cp_async_ca4(&s[((c + 1) & 1) * nt + t], &p.x[(c + 1) * nt + t]);
        cg_cp_async_commit();
        cg_cp_async_wait<1>(); // chunk c has landed
        __syncthreads();
        const float *st = s + (c & 1) * nt;
        p.out[c * nt + t] = st[t] + st[(t + 1) % nt];
        __syncthreads(); // the stage is refilled next
    }
}

// Reads the copies too early: mode 0 does not wait at all (the barrier alone does not
// make them land), mode 1 waits with wait<1> while its only group is the most recent.
extern "C" __global__ void emu_async_early(emu_async_params p) {
    extern __shared__ __align__(16) float s[];
    const int t = threadIdx.x, nt = blockDim.x;
    cg_cp_async_ca4(&s[t], &p.x[t]);
    cg_cp_async_commit();
    if (p.mode == 1) cg_cp_async_wait<1>();
    __syncthreads();
    p.out[t] = s[t] + s[(t + 1) % nt];
}

// Waits, but reads another thread's copy without a __syncthreads after the wait.
extern "C" __global__ void emu_async_nobar(emu_async_params p) {
    extern __shared__ __align__(16) float s[];
    const int t = threadIdx.x, nt = blockDim.x;
    cg_cp_async_ca4(&s[t], &p.x[t]);
    cg_cp_async_wait_all();
    p.out[t] = s[t] + s[(t + nt - 1) % nt];
}
