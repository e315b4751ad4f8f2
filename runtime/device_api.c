/* device_api.c -- the public calls of include/chunkgen.h's "kernels: device memory and
 * timers": memory the kernels of the cuda backend (or of its stand-in, the emulator)
 * address, copies, waits and timers on a stream, through the backend's executor
 * (gen.h: cg_kexec), for tools that run kernels on buffers of their own. */
#include "gen.h"

/* The executor of backend, or NULL with the reason on ctx. */
static const cg_kexec *exec_of(cg_context *ctx, const char *fn, cg_backend backend) {
    if (backend == CG_BACKEND_CUDA) return &cg__kexec_cuda;
    if (backend == CG_BACKEND_EMULATE) return &cg__kexec_emu;
    cg__err(ctx, CG_EINVAL, "%s: backend: expected cuda or emulate (the backends with device memory), got %s", fn,
            cg_backend_name(backend));
    return NULL;
}

/* Enter ctx, find the executor (kx) and check that it has `what`; st is the outcome. */
#define ENTER(fn, what)                                                                                                \
    if (!ctx || cg__ctx_enter(ctx, fn) != CG_OK) return CG_EINVAL;                                                     \
    const cg_kexec *kx = exec_of(ctx, fn, backend);                                                                    \
    cg_status st = !kx         ? CG_EINVAL                                                                             \
                   : !kx->what ? cg__err(ctx, CG_EUNSUPPORTED, "%s: the %s executor has no " #what, fn, kx->name)      \
                               : CG_OK

#define LEAVE()                                                                                                        \
    cg__ctx_leave(ctx);                                                                                                \
    return st

cg_status cg_device_alloc(cg_context *ctx, cg_backend backend, size_t bytes, void **ptr) {
    ENTER("cg_device_alloc", alloc);
    if (ptr) *ptr = NULL;
    if (st == CG_OK && !ptr)
        st = cg__err(ctx, CG_EINVAL, "cg_device_alloc: ptr is NULL (expected where to write the pointer)");
    if (st == CG_OK) st = kx->alloc(ctx, bytes, ptr);
    LEAVE();
}

void cg_device_free(cg_context *ctx, cg_backend backend, void *ptr) {
    if (!ptr || !ctx || cg__ctx_enter(ctx, "cg_device_free") != CG_OK) return;
    const cg_kexec *kx = exec_of(ctx, "cg_device_free", backend);
    if (kx && kx->free) kx->free(ctx, ptr);
    cg__ctx_leave(ctx);
}

cg_status cg_device_copy(cg_context *ctx, cg_backend backend, void *dst, const void *src, size_t bytes, int to_host,
                         void *stream) {
    ENTER("cg_device_copy", copy);
    if (st == CG_OK && bytes && (!dst || !src))
        st = cg__err(ctx, CG_EINVAL, "cg_device_copy: %s is NULL (expected %zu bytes of memory)", !dst ? "dst" : "src",
                     bytes);
    if (st == CG_OK && bytes) st = kx->copy(ctx, dst, src, bytes, to_host ? 1 : 0, stream);
    LEAVE();
}

cg_status cg_device_sync(cg_context *ctx, cg_backend backend, void *stream) {
    ENTER("cg_device_sync", sync);
    if (st == CG_OK) st = kx->sync(ctx, stream);
    LEAVE();
}

cg_status cg_device_timer_start(cg_context *ctx, cg_backend backend, void *stream, void **token) {
    ENTER("cg_device_timer_start", timer_start);
    if (st == CG_OK && !token)
        st = cg__err(ctx, CG_EINVAL, "cg_device_timer_start: token is NULL (expected where to write the token)");
    if (st == CG_OK) st = kx->timer_start(ctx, stream, token);
    LEAVE();
}

cg_status cg_device_timer_stop(cg_context *ctx, cg_backend backend, void *stream, void *token, double *ms) {
    ENTER("cg_device_timer_stop", timer_stop);
    double dummy;
    if (st == CG_OK) st = kx->timer_stop(ctx, stream, token, ms ? ms : &dummy);
    LEAVE();
}

cg_status cg_device_flush_l2(cg_context *ctx, cg_backend backend, void *stream) {
    ENTER("cg_device_flush_l2", flush_l2);
    if (st == CG_OK) st = kx->flush_l2(ctx, stream);
    LEAVE();
}
