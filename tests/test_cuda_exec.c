/* test_cuda_exec.c -- the cuda executor's host side running the four ops: on a GPU,
 * captured into a CUDA graph after cg_prepare (skips without a device); without a GPU,
 * against a mock driver (tests/cuda_mock/libcuda_mock.c). */
#include "cg_test.h"
#include "cuda/cg_cuda.h"
#include "cuda_testlib.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

/* --------------------------------------------- on a GPU: CUDA graph capture */

/* A float tensor on the device with a host copy (inputs random, outputs zero). */
typedef struct gtens {
    float *host;
    void *dev;
    size_t n;
    int output;
    cg_tensor t;
} gtens;

static void gt_new(cg_context *ctx, gtens *g, int ndim, const int64_t *shape, cg_rng *rng, double lo, double hi,
                   int output) {
    memset(g, 0, sizeof *g);
    g->n = 1;
    for (int i = 0; i < ndim; i++) g->n *= (size_t)shape[i];
    g->output = output;
    g->host = calloc(g->n, sizeof(float));
    for (size_t i = 0; !output && g->host && i < g->n; i++) g->host[i] = (float)cg_rng_uniform(rng, lo, hi);
    CG_CHECK_OK(ctx, cg__kexec_cuda.alloc(ctx, g->n * sizeof(float), &g->dev));
    CG_CHECK_OK(ctx, cg__kexec_cuda.copy(ctx, g->dev, g->host, g->n * sizeof(float), 0, NULL));
    g->t = cg_tensor_contiguous(g->dev, CG_F32, ndim, shape);
}

static void gt_free(cg_context *ctx, gtens *g) {
    cg__kexec_cuda.free(ctx, g->dev);
    free(g->host);
}

/* The driver calls the test needs beyond the library's (dlsym from the same libcuda). */
typedef struct graph_api {
    CUresult (*stream_create)(CUstream *s, unsigned flags);
    CUresult (*stream_destroy)(CUstream s);
    CUresult (*begin_capture)(CUstream s, int mode);
    CUresult (*end_capture)(CUstream s, void **graph);
    CUresult (*instantiate)(void **exec, void *graph, unsigned long long flags);
    CUresult (*graph_launch)(void *exec, CUstream s);
    CUresult (*exec_destroy)(void *exec);
    CUresult (*graph_destroy)(void *graph);
} graph_api;

static int graph_api_load(graph_api *g) {
    const char *path = getenv("CHUNKGEN_LIBCUDA"); /* the mock driver, or another libcuda */
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    struct { const char *name; void *fp; } t[] = {
        {"cuStreamCreate", &g->stream_create},          {"cuStreamDestroy_v2", &g->stream_destroy},
        {"cuStreamBeginCapture_v2", &g->begin_capture}, {"cuStreamEndCapture", &g->end_capture},
        {"cuGraphInstantiateWithFlags", &g->instantiate}, {"cuGraphLaunch", &g->graph_launch},
        {"cuGraphExecDestroy", &g->exec_destroy},       {"cuGraphDestroy", &g->graph_destroy},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        void *p = dlsym(lib, t[i].name);
        if (!p) return 0;
        memcpy(t[i].fp, &p, sizeof p);
    }
    return 1; /* the handle stays open: libcuda is never unloaded anyway */
}

enum { GT_Q, GT_K, GT_V, GT_LA, GT_H0, GT_O, GT_HT, GT_DOUT, GT_DHT, GT_DQ, GT_DK, GT_DV, GT_DLA, GT_DH0,
       ST_X, ST_DELTA, ST_A, ST_B, ST_C, ST_D, ST_Z, ST_BIAS, ST_H0, ST_Y, ST_HT, ST_DY, ST_DHT, ST_DX, ST_DDELTA,
       ST_DA, ST_DB, ST_DC, ST_DD, ST_DZ, ST_DBIAS, ST_DH0, GT_COUNT };

/* The four ops, in order, on ex->stream. */
/* The four ops' args over g. */
typedef struct four_args {
    cg_ssd_fwd_args f;
    cg_ssd_bwd_args b;
    cg_sscan_fwd_args sf;
    cg_sscan_bwd_args sb;
} four_args;

static void four_args_of(gtens *g, four_args *a) {
    a->f = (cg_ssd_fwd_args){.layout = CG_LAYOUT_TOKEN_MAJOR, .q = g[GT_Q].t, .k = g[GT_K].t, .v = g[GT_V].t,
                             .log_alpha = g[GT_LA].t, .h0 = g[GT_H0].t, .o = g[GT_O].t, .hT = g[GT_HT].t};
    a->b = (cg_ssd_bwd_args){.layout = CG_LAYOUT_TOKEN_MAJOR, .q = g[GT_Q].t, .k = g[GT_K].t, .v = g[GT_V].t,
                             .log_alpha = g[GT_LA].t, .h0 = g[GT_H0].t, .dout = g[GT_DOUT].t, .dhT = g[GT_DHT].t,
                             .dq = g[GT_DQ].t, .dk = g[GT_DK].t, .dv = g[GT_DV].t, .dlog_alpha = g[GT_DLA].t,
                             .dh0 = g[GT_DH0].t};
    a->sf = (cg_sscan_fwd_args){.x = g[ST_X].t, .delta = g[ST_DELTA].t, .A = g[ST_A].t, .B = g[ST_B].t,
                                .C = g[ST_C].t, .D = g[ST_D].t, .z = g[ST_Z].t, .delta_bias = g[ST_BIAS].t,
                                .h0 = g[ST_H0].t, .delta_softplus = 1, .y = g[ST_Y].t, .hT = g[ST_HT].t};
    a->sb = (cg_sscan_bwd_args){.x = g[ST_X].t, .delta = g[ST_DELTA].t, .A = g[ST_A].t, .B = g[ST_B].t,
                                .C = g[ST_C].t, .D = g[ST_D].t, .z = g[ST_Z].t, .delta_bias = g[ST_BIAS].t,
                                .h0 = g[ST_H0].t, .dy = g[ST_DY].t, .dhT = g[ST_DHT].t, .delta_softplus = 1,
                                .dx = g[ST_DX].t, .ddelta = g[ST_DDELTA].t, .dA = g[ST_DA].t, .dB = g[ST_DB].t,
                                .dC = g[ST_DC].t, .dD = g[ST_DD].t, .dz = g[ST_DZ].t, .ddelta_bias = g[ST_DBIAS].t,
                                .dh0 = g[ST_DH0].t};
}

static cg_status run_four(cg_context *ctx, gtens *g, const cg_exec *ex) {
    four_args a;
    four_args_of(g, &a);
    cg_status st;
    if ((st = cg_ssd_fwd(ctx, &a.f, ex)) || (st = cg_ssd_bwd(ctx, &a.b, ex)) || (st = cg_sscan_fwd(ctx, &a.sf, ex)))
        return st;
    return cg_sscan_bwd(ctx, &a.sb, ex);
}

/* cg_prepare of the four calls of run_four. */
static cg_status prepare_four(cg_context *ctx, gtens *g, const cg_exec *ex) {
    four_args a;
    four_args_of(g, &a);
    cg_status st;
    if ((st = cg_prepare(ctx, CG_OP_SSD_FWD, &a.f, ex, NULL)) || (st = cg_prepare(ctx, CG_OP_SSD_BWD, &a.b, ex, NULL)) ||
        (st = cg_prepare(ctx, CG_OP_SSCAN_FWD, &a.sf, ex, NULL)))
        return st;
    return cg_prepare(ctx, CG_OP_SSCAN_BWD, &a.sb, ex, NULL);
}

/* Outputs back to the host copies (synchronizing the stream). */
static void fetch_outputs(cg_context *ctx, gtens *g, CUstream s) {
    for (int i = 0; i < GT_COUNT; i++)
        if (g[i].output) CG_CHECK_OK(ctx, cg__kexec_cuda.copy(ctx, g[i].host, g[i].dev, g[i].n * 4, 1, s));
    CG_CHECK_OK(ctx, cg__kexec_cuda.sync(ctx, s));
}

/* After first use, the four ops capture into a CUDA graph (global capture mode, the
 * strictest: any allocation, host synchronization or use of another stream during
 * capture fails the capture), the capture itself runs nothing, and replays of the
 * graph give bit for bit what the direct calls gave, also replayed over their own
 * results (outputs are written, never accumulated into). */
CG_TEST(cuda_gpu_graph_capture) {
    const cg_cu_api *cu = cg__cu_api(NULL);
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_devinfo dev;
    if (cg__kexec_cuda.device(ctx, &dev) != CG_OK || !cu) {
        static char why[600];
        snprintf(why, sizeof why, "no GPU: %s", cg_errmsg(ctx));
        cg_test_skip(why);
        cg_context_free(ctx);
        return;
    }
    graph_api ga;
    CG_CHECK(graph_api_load(&ga), "graph entry points of libcuda");
    /* The caller's side, as PyTorch has it: the device's primary context current on
     * this thread, a non-blocking stream of its own. */
    CUdevice d0 = 0;
    CUcontext pctx = NULL, popped;
    CG_CHECK(cu->cuDeviceGet(&d0, 0) == CUDA_SUCCESS && cu->cuDevicePrimaryCtxRetain(&pctx, d0) == CUDA_SUCCESS &&
                 cu->cuCtxPushCurrent(pctx) == CUDA_SUCCESS,
             "primary context of device 0 current");
    cg_context_free(ctx); /* a fresh context that finds device 0's context current */
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    CG_CHECK_OK(ctx, cg_context_set_tune_on_miss(ctx, 0)); /* no tuning inside this test */
    char *dir = tmpdir();
    CG_CHECK_OK(ctx, cg_context_set_cache_dir(ctx, dir));
    CUstream stream = NULL;
    CG_CHECK(ga.stream_create(&stream, 1 /* CU_STREAM_NON_BLOCKING */) == CUDA_SUCCESS, "stream");

    const int64_t B = 2, T = 67, G = 1, H = 2, DK = 40, DV = 48, L = 300, D = 24, N = 16;
    cg_rng rng = {7};
    gtens g[GT_COUNT];
    const int64_t qk[4] = {B, T, G, DK}, vo[4] = {B, T, H, DV}, la[3] = {B, T, H}, st[4] = {B, H, DK, DV};
    const int64_t bld[3] = {B, L, D}, dn[2] = {D, N}, bln[3] = {B, L, N}, dd[1] = {D}, bdn[3] = {B, D, N};
    struct { int id, ndim; const int64_t *shape; double lo, hi; int out; } spec[GT_COUNT] = {
        {GT_Q, 4, qk, -1, 1, 0},     {GT_K, 4, qk, -1, 1, 0},      {GT_V, 4, vo, -1, 1, 0},
        {GT_LA, 3, la, -0.5, 0, 0},  {GT_H0, 4, st, -1, 1, 0},     {GT_O, 4, vo, 0, 0, 1},
        {GT_HT, 4, st, 0, 0, 1},     {GT_DOUT, 4, vo, -1, 1, 0},   {GT_DHT, 4, st, -1, 1, 0},
        {GT_DQ, 4, qk, 0, 0, 1},     {GT_DK, 4, qk, 0, 0, 1},      {GT_DV, 4, vo, 0, 0, 1},
        {GT_DLA, 3, la, 0, 0, 1},    {GT_DH0, 4, st, 0, 0, 1},     {ST_X, 3, bld, -1, 1, 0},
        {ST_DELTA, 3, bld, -1, 1, 0}, {ST_A, 2, dn, -1, -0.1, 0},  {ST_B, 3, bln, -1, 1, 0},
        {ST_C, 3, bln, -1, 1, 0},    {ST_D, 1, dd, -1, 1, 0},      {ST_Z, 3, bld, -1, 1, 0},
        {ST_BIAS, 1, dd, -1, 1, 0},  {ST_H0, 3, bdn, -1, 1, 0},    {ST_Y, 3, bld, 0, 0, 1},
        {ST_HT, 3, bdn, 0, 0, 1},    {ST_DY, 3, bld, -1, 1, 0},    {ST_DHT, 3, bdn, -1, 1, 0},
        {ST_DX, 3, bld, 0, 0, 1},    {ST_DDELTA, 3, bld, 0, 0, 1}, {ST_DA, 2, dn, 0, 0, 1},
        {ST_DB, 3, bln, 0, 0, 1},    {ST_DC, 3, bln, 0, 0, 1},     {ST_DD, 1, dd, 0, 0, 1},
        {ST_DZ, 3, bld, 0, 0, 1},    {ST_DBIAS, 1, dd, 0, 0, 1},   {ST_DH0, 3, bdn, 0, 0, 1},
    };
    for (int i = 0; i < GT_COUNT; i++)
        gt_new(ctx, &g[spec[i].id], spec[i].ndim, spec[i].shape, &rng, spec[i].lo, spec[i].hi, spec[i].out);
    CG_CHECK_OK(ctx, cg__kexec_cuda.sync(ctx, NULL));
    cg_exec ex = {.backend = CG_BACKEND_CUDA, .stream = stream};

    /* first use: compiles, loads, sizes the workspace */
    CG_CHECK_OK(ctx, run_four(ctx, g, &ex));
    CG_CHECK(!strstr(cg_last_dispatch(ctx), "staged"), "device pointers are used in place: %s", cg_last_dispatch(ctx));
    fetch_outputs(ctx, g, stream);
    float *ref[GT_COUNT] = {0};
    for (int i = 0; i < GT_COUNT; i++) {
        if (!g[i].output) continue;
        ref[i] = malloc(g[i].n * 4);
        if (ref[i]) memcpy(ref[i], g[i].host, g[i].n * 4);
        double mx = 0;
        for (size_t j = 0; j < g[i].n; j++) mx = fmax(mx, fabs(g[i].host[j]));
        CG_CHECK(mx > 0 && isfinite(mx), "output %d written by the direct call (max |x| %g)", i, mx);
    }

    /* zero the outputs, then capture: nothing may run while capturing */
    for (int i = 0; i < GT_COUNT; i++)
        if (g[i].output)
            CG_CHECK(cu->cuMemsetD8Async((CUdeviceptr)(uintptr_t)g[i].dev, 0, g[i].n * 4, stream) == CUDA_SUCCESS,
                     "memset");
    CG_CHECK_OK(ctx, cg__kexec_cuda.sync(ctx, stream));
    void *graph = NULL, *gexec = NULL;
    CG_CHECK(ga.begin_capture(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */) == CUDA_SUCCESS, "begin capture");
    cg_status cst = run_four(ctx, g, &ex);
    CUresult er = ga.end_capture(stream, &graph); /* always ends the capture */
    CG_CHECK(cst == CG_OK, "the ops under capture: %s: %s", cg_status_str(cst), cg_errmsg(ctx));
    CG_CHECK(er == CUDA_SUCCESS && graph, "end capture: CUresult %d (901 = the capture was invalidated)", (int)er);
    fetch_outputs(ctx, g, stream);
    for (int i = 0; i < GT_COUNT; i++) {
        if (!g[i].output) continue;
        int zero = 1;
        for (size_t j = 0; j < g[i].n; j++) zero &= g[i].host[j] == 0.0f;
        CG_CHECK(zero, "output %d: capturing ran kernels", i);
    }
    if (graph) CG_CHECK(ga.instantiate(&gexec, graph, 0) == CUDA_SUCCESS && gexec, "instantiate the graph");
    for (int rep = 0; rep < 2 && gexec; rep++) {
        CG_CHECK(ga.graph_launch(gexec, stream) == CUDA_SUCCESS, "graph launch %d", rep);
        fetch_outputs(ctx, g, stream);
        for (int i = 0; i < GT_COUNT; i++)
            if (g[i].output && ref[i])
                CG_CHECK(!memcmp(ref[i], g[i].host, g[i].n * 4), "replay %d: output %d differs from the direct call",
                         rep, i);
    }
    if (gexec) ga.exec_destroy(gexec);
    if (graph) ga.graph_destroy(graph);
    for (int i = 0; i < GT_COUNT; i++) {
        free(ref[i]);
        gt_free(ctx, &g[i]);
    }
    ga.stream_destroy(stream);
    cg_context_free(ctx);
    cu->cuCtxPopCurrent(&popped);
    cu->cuDevicePrimaryCtxRelease(d0);
    rm_rf(dir);
    free(dir);
}

/* ------------------------------------------------ without a GPU: a mock driver */

/* tests/cuda_mock/libcuda_mock.c's counters (the same struct). */
typedef struct mock_stats {
    long long violations;
    char last_violation[512];
    long long launches, captured, smem_optins, param_checks, syncs, alloc_calls;
    int allocs_live, modules_live, events_live, streams_live, graphs_live;
    int primary_refs;
    int max_ctx_depth;
} mock_stats;

/* The child half of cuda_mock_driver: this process loaded the mock as its libcuda. */
static void mock_driver_child(void) {
    const char *lib = getenv("CHUNKGEN_LIBCUDA");
    const cg_cu_api *cu = cg__cu_api(NULL); /* loads it */
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
    CG_CHECK(cu != NULL, "the mock driver loads as libcuda");
    void *fp = h ? dlsym(h, "mock_stats_get") : NULL;
    CG_CHECK(fp != NULL, "mock_stats_get");
    if (!cu || !fp) return;
    const mock_stats *(*stats_get)(void);
    memcpy(&stats_get, &fp, sizeof fp);
    const mock_stats *ms = stats_get();
    const cg_kexec *x = &cg__kexec_cuda;
    char *dir = tmpdir();

    /* A. owns_ptr on a thread with no current context (the mock then refuses the query) */
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    CG_CHECK_OK(ctx, cg_context_set_cache_dir(ctx, dir));
    CG_CHECK_OK(ctx, cg_context_set_tune_on_miss(ctx, 0));
    cg_devinfo dev;
    CG_CHECK_OK(ctx, x->device(ctx, &dev));
    CG_CHECK(dev.arch == 90 && dev.smem_per_block == 232448, "device: sm_%d, %lld", dev.arch,
             (long long)dev.smem_per_block);
    void *p = NULL;
    float host[8];
    CG_CHECK_OK(ctx, x->alloc(ctx, 256, &p));
    CUcontext cur = (CUcontext)1;
    CG_CHECK(cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == NULL, "calls leave no context current");
    CG_CHECK(x->owns_ptr(ctx, p) == 1, "device pointer, no current context");
    CG_CHECK(x->owns_ptr(ctx, host) == 0, "host pointer, no current context");
    cg_context *ctx2;
    CG_CHECK_OK(NULL, cg_context_create(&ctx2));
    CG_CHECK(x->owns_ptr(ctx2, p) == 1, "device pointer seen from a context that never used the device");
    cg_context_free(ctx2);
    x->free(ctx, p);

    /* B. the caller's side, as PyTorch has it */
    graph_api ga;
    CG_CHECK(graph_api_load(&ga), "graph entry points of the mock");
    CUdevice d0 = 0;
    CUcontext pctx = NULL, popped;
    CG_CHECK(cu->cuDevicePrimaryCtxRetain(&pctx, d0) == CUDA_SUCCESS && cu->cuCtxPushCurrent(pctx) == CUDA_SUCCESS,
             "primary context current");
    CUstream stream = NULL;
    CG_CHECK(ga.stream_create(&stream, 1) == CUDA_SUCCESS, "stream");

    /* C. first use of the four ops on that stream */
    const int64_t B = 2, T = 67, G = 1, H = 2, DK = 40, DV = 48, L = 300, D = 24, N = 16;
    cg_rng rng = {11};
    gtens g[GT_COUNT];
    const int64_t qk[4] = {B, T, G, DK}, vo[4] = {B, T, H, DV}, la[3] = {B, T, H}, st[4] = {B, H, DK, DV};
    const int64_t bld[3] = {B, L, D}, dn[2] = {D, N}, bln[3] = {B, L, N}, dd[1] = {D}, bdn[3] = {B, D, N};
    struct { int id, ndim; const int64_t *shape; int out; } spec[GT_COUNT] = {
        {GT_Q, 4, qk, 0},     {GT_K, 4, qk, 0},      {GT_V, 4, vo, 0},      {GT_LA, 3, la, 0},
        {GT_H0, 4, st, 0},    {GT_O, 4, vo, 1},      {GT_HT, 4, st, 1},     {GT_DOUT, 4, vo, 0},
        {GT_DHT, 4, st, 0},   {GT_DQ, 4, qk, 1},     {GT_DK, 4, qk, 1},     {GT_DV, 4, vo, 1},
        {GT_DLA, 3, la, 1},   {GT_DH0, 4, st, 1},    {ST_X, 3, bld, 0},     {ST_DELTA, 3, bld, 0},
        {ST_A, 2, dn, 0},     {ST_B, 3, bln, 0},     {ST_C, 3, bln, 0},     {ST_D, 1, dd, 0},
        {ST_Z, 3, bld, 0},    {ST_BIAS, 1, dd, 0},   {ST_H0, 3, bdn, 0},    {ST_Y, 3, bld, 1},
        {ST_HT, 3, bdn, 1},   {ST_DY, 3, bld, 0},    {ST_DHT, 3, bdn, 0},   {ST_DX, 3, bld, 1},
        {ST_DDELTA, 3, bld, 1}, {ST_DA, 2, dn, 1},   {ST_DB, 3, bln, 1},    {ST_DC, 3, bln, 1},
        {ST_DD, 1, dd, 1},    {ST_DZ, 3, bld, 1},    {ST_DBIAS, 1, dd, 1},  {ST_DH0, 3, bdn, 1},
    };
    for (int i = 0; i < GT_COUNT; i++)
        gt_new(ctx, &g[spec[i].id], spec[i].ndim, spec[i].shape, &rng, -0.5, -0.1, spec[i].out);
    cg_exec ex = {.backend = CG_BACKEND_CUDA, .stream = stream};
    CG_CHECK_OK(ctx, run_four(ctx, g, &ex));
    long long eager = ms->launches;
    CG_CHECK(eager >= 4 && ms->param_checks > 0, "%lld launches, %lld parameter checks", eager, ms->param_checks);
    CG_CHECK(ms->violations == 0, "first use breaks no driver rule: %s", ms->last_violation);
    /* the same calls again: nothing new is loaded, allocated or synchronized */
    long long allocs0 = ms->alloc_calls, syncs0 = ms->syncs;
    int mods0 = ms->modules_live;
    CG_CHECK_OK(ctx, run_four(ctx, g, &ex));
    CG_CHECK(ms->launches == 2 * eager && ms->alloc_calls == allocs0 && ms->syncs == syncs0 &&
                 ms->modules_live == mods0,
             "repeat: %lld launches, %lld allocations, %lld syncs, %d modules", ms->launches - eager,
             ms->alloc_calls - allocs0, ms->syncs - syncs0, ms->modules_live - mods0);

    /* D. captured: no allocation, copy or synchronization may happen */
    void *graph = NULL, *gexec = NULL;
    CG_CHECK(ga.begin_capture(stream, 0) == CUDA_SUCCESS, "begin capture");
    cg_status cst = run_four(ctx, g, &ex);
    CUresult er = ga.end_capture(stream, &graph);
    CG_CHECK(cst == CG_OK, "the ops under capture: %s", cg_errmsg(ctx));
    CG_CHECK(er == CUDA_SUCCESS && graph, "end capture: %d (%s)", (int)er, ms->last_violation);
    CG_CHECK(ms->captured == eager, "%lld launches captured, %lld expected", ms->captured, eager);
    if (graph) CG_CHECK(ga.instantiate(&gexec, graph, 0) == CUDA_SUCCESS, "instantiate");
    if (gexec) CG_CHECK(ga.graph_launch(gexec, stream) == CUDA_SUCCESS, "graph launch");
    CG_CHECK(ms->launches == 3 * eager, "graph replay launches %lld", ms->launches - 2 * eager);
    if (gexec) ga.exec_destroy(gexec);
    if (graph) ga.graph_destroy(graph);

    /* E. host pointers: staged through device memory, all of it freed again */
    int live0 = ms->allocs_live;
    cg_ssd_fwd_args f = {.layout = CG_LAYOUT_TOKEN_MAJOR};
    cg_tensor *ft[7] = {&f.q, &f.k, &f.v, &f.log_alpha, &f.h0, &f.o, &f.hT};
    const int ids[7] = {GT_Q, GT_K, GT_V, GT_LA, GT_H0, GT_O, GT_HT};
    for (int i = 0; i < 7; i++) {
        *ft[i] = g[ids[i]].t;
        ft[i]->data = g[ids[i]].host;
    }
    CG_CHECK_OK(ctx, cg_ssd_fwd(ctx, &f, &ex));
    CG_CHECK(strstr(cg_last_dispatch(ctx), "staged") != NULL, "staged: %s", cg_last_dispatch(ctx));
    CG_CHECK(ms->allocs_live == live0, "staging frees what it allocates (%d -> %d)", live0, ms->allocs_live);

    /* F. timing and the L2 flush */
    void *token = NULL;
    double msec = 0;
    CG_CHECK_OK(ctx, x->timer_start(ctx, stream, &token));
    CG_CHECK_OK(ctx, x->flush_l2(ctx, stream));
    CG_CHECK_OK(ctx, x->timer_stop(ctx, stream, token, &msec));
    CG_CHECK(msec == 0.5, "elapsed %g ms (the mock says 0.5)", msec);
    CG_CHECK(ms->violations == 0, "no driver rule broken: %s", ms->last_violation);

    /* F2. cg_prepare instead of a first use: a fresh context's very first calls capture
     * (nothing compiles, loads, allocates or synchronizes under capture); a context not
     * prepared refuses under capture with a status that says so, and the capture holds. */
    for (int prepared = 1; prepared >= 0; prepared--) {
        cg_context *pc;
        CG_CHECK_OK(NULL, cg_context_create(&pc));
        CG_CHECK_OK(pc, cg_context_set_cache_dir(pc, dir));
        CG_CHECK_OK(pc, cg_context_set_tune_on_miss(pc, 0));
        if (prepared) CG_CHECK_OK(pc, prepare_four(pc, g, &ex));
        const long long cap0 = ms->captured, viol0 = ms->violations;
        void *pgraph = NULL;
        CG_CHECK(ga.begin_capture(stream, 0) == CUDA_SUCCESS, "begin capture (prepared %d)", prepared);
        cg_status pst = run_four(pc, g, &ex);
        CUresult per = ga.end_capture(stream, &pgraph);
        if (prepared) {
            CG_CHECK(pst == CG_OK, "prepared, captured: %s: %s", cg_status_str(pst), cg_errmsg(pc));
            CG_CHECK(ms->captured - cap0 == eager, "%lld launches captured, %lld expected", ms->captured - cap0, eager);
        } else {
            CG_CHECK(pst == CG_EUNSUPPORTED && strstr(cg_errmsg(pc), "cg_prepare"), "not prepared, captured: %s: %s",
                     cg_status_str(pst), cg_errmsg(pc));
        }
        CG_CHECK(per == CUDA_SUCCESS && ms->violations == viol0, "the capture holds (prepared %d): %d, %s", prepared,
                 (int)per, ms->last_violation);
        if (pgraph) ga.graph_destroy(pgraph);
        cg_context_free(pc);
    }

    /* G. teardown: everything the context made is gone, the caller's context stays */
    for (int i = 0; i < GT_COUNT; i++) gt_free(ctx, &g[i]);
    cg_context_free(ctx);
    CG_CHECK(ms->modules_live == 0 && ms->events_live == 0 && ms->allocs_live == 0,
             "after cg_context_free: %d modules, %d events, %d allocations live", ms->modules_live, ms->events_live,
             ms->allocs_live);
    CG_CHECK(ms->primary_refs == 1, "the primary context is retained by the caller only (%d)", ms->primary_refs);
    ga.stream_destroy(stream);
    cu->cuCtxPopCurrent(&popped);
    cu->cuDevicePrimaryCtxRelease(d0);
    CG_CHECK(ms->violations == 0 && ms->max_ctx_depth <= 2, "%lld violations (%s), context depth %d",
             ms->violations, ms->last_violation, ms->max_ctx_depth);
    fprintf(stderr, "  mock driver: %lld launches per pass, %lld shared-memory opt-ins, %lld syncs\n", eager,
            ms->smem_optins, ms->syncs);
    rm_rf(dir);
    free(dir);
}

/* The whole host side of the cuda executor against tests/cuda_mock/libcuda_mock.c, a
 * driver that runs no kernel but refuses what the real one refuses (no context,
 * shared memory not opted into, allocation or synchronization while capturing,
 * copies out of bounds, leaks at teardown). Runs in a fresh process (the driver is
 * loaded once per process), this binary again with CHUNKGEN_LIBCUDA set. */
CG_TEST(cuda_mock_driver) {
    if (getenv("CG_MOCK_CHILD")) {
        mock_driver_child();
        return;
    }
    if (mock_driver_skip()) return;
    char *dir = tmpdir();
    CG_CHECK(dir != NULL, "mkdtemp");
    if (!dir) return;
    char so[600];
    snprintf(so, sizeof so, "%s/libcuda_mock.so", dir);
    int rc = mock_driver_build(so);
    if (rc == 0) {
        const int status = mock_driver_run(so, "cuda_mock_driver", "CG_MOCK_CHILD", "1");
        CG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the mock-driver run failed (status %d; see above)",
                 status);
    }
    rm_rf(dir);
    free(dir);
}
