/* cg_emu.h -- the SIMT emulator's CUDA layer: prepended to a rendered kernel source,
 * which the host C++ compiler then builds into a shared object (-DCG_EMULATE).
 *
 * Model. A block's threads are fibers on one OS thread (runtime/emu/emu_rt.c), run
 * until they block at __syncthreads, a warp collective or exit; blocks of a grid run
 * in turn on the worker threads of the context's pool. Each fiber's stack sits in a
 * region aligned to CG_EMU_STACK_REGION whose first bytes hold the fiber's public
 * record, so threadIdx is the stack pointer masked down: no TLS, no call.
 *   __shared__              static thread_local (one copy per worker = per block)
 *   extern __shared__ T a[] rewritten by the loader into a pointer to the block's
 *                           dynamic shared memory (or use CG_DYN_SMEM, cg_device.cuh)
 *   warp collectives        each lane deposits a pointer to its operands; the last
 *                           lane of the group to arrive computes every lane's result
 * The part between CG_EMU_ABI_BEGIN/END is plain C, shared with the runtime
 * (included there with CG_EMU_ABI_ONLY); changing it means bumping
 * CG_EMU_ABI_VERSION. The whole text of this file is part of every module's cache key.
 */
#ifndef CG_EMU_H
#define CG_EMU_H

/* ---------------------------------------------------------------- CG_EMU_ABI_BEGIN */
#include <stddef.h>

#define CG_EMU_ABI_VERSION 2
/* Fiber stack regions: 256 KiB, aligned to their size. The first page holds the
 * fiber record, the second is a guard page, the rest is stack. */
#define CG_EMU_STACK_REGION (256u * 1024u)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cg_emu_uint3 {
    unsigned x, y, z;
} cg_emu_uint3;

typedef struct cg_emu_block {
    cg_emu_uint3 blockIdx, blockDim, gridDim;
    unsigned char *dyn_smem; /* dynamic shared memory of the launch */
    size_t dyn_smem_bytes;
    int nthreads;
    int racecheck; /* shared-memory race checking on for this launch */
    int stats;     /* access statistics (runtime/emu/emu_stats.c) on for this launch */
} cg_emu_block;

/* The public head of a fiber; the runtime's fiber record starts with it. */
typedef struct cg_emu_thread {
    cg_emu_uint3 threadIdx;
    int tid; /* linear thread index in the block */
    int lane, warp;
    const cg_emu_block *blk;
    unsigned nsync_warp; /* warp barriers this thread passed (race checking) */
} cg_emu_thread;

/* A warp collective: args[l] is lane l's operand record (NULL when l is not in the
 * group); fn computes every member's result into its record. */
typedef void (*cg_emu_warp_fn)(void *const *args, unsigned group);

/* Services of the runtime, bound into each module at load (cg_emu_bind). */
typedef struct cg_emu_api {
    int abi_version;
    void (*syncthreads)(const cg_emu_thread *t, const char *what, int line);
    /* __syncthreads_count/and/or: op 0 count, 1 and, 2 or */
    int (*syncthreads_red)(const cg_emu_thread *t, const char *what, int line, int op, int pred);
    void (*warp_sync)(const cg_emu_thread *t, unsigned mask, const char *what, int line, void *arg, cg_emu_warp_fn fn);
    unsigned (*activemask)(const cg_emu_thread *t);
    /* Let the other threads of the block run (spin loops with __nanosleep). */
    void (*yield)(const cg_emu_thread *t);
    /* Stop the launch with an error; never returns. */
    void (*fail)(const cg_emu_thread *t, const char *msg);
    /* A load or store of n bytes at p by the instruction before pc (only called when
     * blk->racecheck or blk->stats): race checking and access statistics. */
    void (*access)(const cg_emu_thread *t, const void *p, size_t n, int is_write, const void *pc);
    /* cp.async, modelled asynchronously: issue copies src_bytes from src (zeros up to size)
     * into the thread's current group and poisons dst; the bytes land in dst only at
     * cp_async_wait. commit closes the current group; wait(n) lands every committed group
     * but the n most recent, wait(-1) commits and lands all (cp.async.wait_all). */
    void (*cp_async)(const cg_emu_thread *t, void *dst, const void *src, int size, int src_bytes, const void *pc);
    void (*cp_async_commit)(const cg_emu_thread *t);
    void (*cp_async_wait)(const cg_emu_thread *t, int n);
} cg_emu_api;

/* Symbols of a module (visibility default; everything else is hidden):
 *   int cg_emu_bind(const cg_emu_api *api)  -> CG_EMU_ABI_VERSION
 *   void *cg_emu_tls_touch(void)            (race checking) allocates this thread's TLS
 *   const char cg_emu_key[]                 cache key the module was built for
 *   void cg_emu_k_<entry>(const void *params), size_t cg_emu_s_<entry>(void) */

#ifdef __cplusplus
}
#endif
/* ------------------------------------------------------------------ CG_EMU_ABI_END */

#if defined(__cplusplus) && !defined(CG_EMU_ABI_ONLY)

#ifndef CG_EMULATE
#define CG_EMULATE 1
#endif
#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 800 /* the architecture whose instructions are emulated */
#endif

/* Only compiler headers: C++'s <math.h> and <stdio.h> would double the compile time
 * of a kernel. The C library functions that CUDA device code may call without an
 * include are declared here as glibc declares them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
int printf(const char *__restrict fmt, ...);
int vsnprintf(char *__restrict s, size_t n, const char *__restrict fmt, va_list ap) noexcept;
void *memcpy(void *__restrict d, const void *__restrict s, size_t n) noexcept;
void *memmove(void *d, const void *s, size_t n) noexcept;
void *memset(void *d, int c, size_t n) noexcept;
void abort(void) noexcept __attribute__((noreturn));
int abs(int x) noexcept;
long long llabs(long long x) noexcept;
}

/* CUDA's math functions: the C library's float and double ones, and float overloads
 * of the double names, as CUDA's math API has them. */
#define CG_EMU_M1(n)                                                                                                   \
    extern "C" float n##f(float) noexcept;                                                                             \
    extern "C" double n(double) noexcept;                                                                              \
    static inline float n(float x) noexcept { return n##f(x); }
#define CG_EMU_M2(n)                                                                                                   \
    extern "C" float n##f(float, float) noexcept;                                                                      \
    extern "C" double n(double, double) noexcept;                                                                      \
    static inline float n(float x, float y) noexcept { return n##f(x, y); }
/* the table of functions and the C library's declarations (clang-format would run the calls
 * together, not idempotently, and indent the extern "C" block after them) */
// clang-format off
CG_EMU_M1(acos) CG_EMU_M1(acosh) CG_EMU_M1(asin) CG_EMU_M1(asinh) CG_EMU_M1(atan) CG_EMU_M1(atanh)
CG_EMU_M1(cbrt) CG_EMU_M1(ceil) CG_EMU_M1(cos) CG_EMU_M1(cosh) CG_EMU_M1(erf) CG_EMU_M1(erfc)
CG_EMU_M1(exp) CG_EMU_M1(exp2) CG_EMU_M1(exp10) CG_EMU_M1(expm1) CG_EMU_M1(fabs) CG_EMU_M1(floor)
CG_EMU_M1(lgamma) CG_EMU_M1(log) CG_EMU_M1(log10) CG_EMU_M1(log1p) CG_EMU_M1(log2) CG_EMU_M1(logb)
CG_EMU_M1(nearbyint) CG_EMU_M1(rint) CG_EMU_M1(round) CG_EMU_M1(sin) CG_EMU_M1(sinh) CG_EMU_M1(sqrt)
CG_EMU_M1(tan) CG_EMU_M1(tanh) CG_EMU_M1(tgamma) CG_EMU_M1(trunc)
CG_EMU_M2(atan2) CG_EMU_M2(copysign) CG_EMU_M2(fdim) CG_EMU_M2(fmax) CG_EMU_M2(fmin) CG_EMU_M2(fmod)
CG_EMU_M2(hypot) CG_EMU_M2(nextafter) CG_EMU_M2(pow) CG_EMU_M2(remainder)
#undef CG_EMU_M1
#undef CG_EMU_M2
extern "C" {
float fmaf(float, float, float) noexcept;
double fma(double, double, double) noexcept;
float frexpf(float, int *) noexcept;
double frexp(double, int *) noexcept;
float ldexpf(float, int) noexcept;
double ldexp(double, int) noexcept;
float scalbnf(float, int) noexcept;
double scalbn(double, int) noexcept;
float modff(float, float *) noexcept;
double modf(double, double *) noexcept;
void sincosf(float, float *, float *) noexcept;
void sincos(double, double *, double *) noexcept;
int ilogbf(float) noexcept;
long lrintf(float) noexcept;
long lroundf(float) noexcept;
long long llrintf(float) noexcept;
long long llroundf(float) noexcept;
}
// clang-format on
static inline float fma(float a, float b, float c) noexcept { return fmaf(a, b, c); }
static inline float ldexp(float x, int e) noexcept { return ldexpf(x, e); }
static inline float frexp(float x, int *e) noexcept { return frexpf(x, e); }
static inline bool isnan(float x) { return __builtin_isnan(x); }
static inline bool isnan(double x) { return __builtin_isnan(x); }
static inline bool isinf(float x) { return __builtin_isinf(x); }
static inline bool isinf(double x) { return __builtin_isinf(x); }
static inline bool isfinite(float x) { return __builtin_isfinite(x); }
static inline bool isfinite(double x) { return __builtin_isfinite(x); }
static inline bool signbit(float x) { return __builtin_signbit(x); }
static inline bool signbit(double x) { return __builtin_signbit(x); }

/* ------------------------------------------------------------------- keywords */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __shared__ static thread_local
#define __constant__ static
#define __managed__
#define __grid_constant__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define CG_EMU_EXPORT extern "C" __attribute__((visibility("default")))
#ifdef CG_EMU_RACECHECK
#define CG_EMU_NOSAN __attribute__((no_sanitize_address))
#else
#define CG_EMU_NOSAN
#endif

namespace cg_emu {

static const cg_emu_api *g_api;

/* The running fiber: the stack pointer rounded down to its region. */
__attribute__((always_inline)) static inline const cg_emu_thread *self() {
    uintptr_t sp;
#if defined(__x86_64__)
    __asm__("movq %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
    __asm__("mov %0, sp" : "=r"(sp));
#else
    sp = (uintptr_t)__builtin_frame_address(0);
#endif
    return (const cg_emu_thread *)(sp & ~(uintptr_t)(CG_EMU_STACK_REGION - 1));
}

__attribute__((noreturn, unused, format(printf, 1, 2))) static void fail(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g_api->fail(self(), msg);
    __builtin_unreachable();
}

static inline unsigned char *dyn_smem() { return self()->blk->dyn_smem; }

} // namespace cg_emu

CG_EMU_EXPORT CG_EMU_NOSAN int cg_emu_bind(const cg_emu_api *api) {
    cg_emu::g_api = api;
    return CG_EMU_ABI_VERSION;
}

/* ------------------------------------------------------------------ vector types */
#define CG_EMU_VEC(T, N, A, ...)                                                                                       \
    struct __attribute__((aligned(A))) N##1 {                                                                          \
        T x;                                                                                                           \
    };                                                                                                                 \
    struct __attribute__((aligned(A * 2))) N##2 {                                                                      \
        T x, y;                                                                                                        \
    };                                                                                                                 \
    struct N##3 {                                                                                                      \
        T x, y, z;                                                                                                     \
    };                                                                                                                 \
    struct __attribute__((aligned(A * 4 > 16 ? 16 : A * 4))) N##4 {                                                    \
        T x, y, z, w;                                                                                                  \
    };                                                                                                                 \
    static inline N##1 make_##N##1(T x) { return N##1 {x}; }                                                           \
    static inline N##2 make_##N##2(T x, T y) { return N##2 {x, y}; }                                                   \
    static inline N##3 make_##N##3(T x, T y, T z) { return N##3 {x, y, z}; }                                           \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4 {x, y, z, w}; }
CG_EMU_VEC(float, float, 4)
CG_EMU_VEC(int, int, 4)
CG_EMU_VEC(unsigned, uint, 4)
CG_EMU_VEC(signed char, char, 1)
CG_EMU_VEC(unsigned char, uchar, 1)
CG_EMU_VEC(short, short, 2)
CG_EMU_VEC(unsigned short, ushort, 2)
CG_EMU_VEC(long long, longlong, 8)
CG_EMU_VEC(unsigned long long, ulonglong, 8)
CG_EMU_VEC(double, double, 8)
#undef CG_EMU_VEC

/* ------------------------------------------------------------- index variables */
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
static constexpr int warpSize = 32;

#define threadIdx (reinterpret_cast<const uint3 &>(::cg_emu::self()->threadIdx))
#define blockIdx (reinterpret_cast<const uint3 &>(::cg_emu::self()->blk->blockIdx))
#define blockDim (reinterpret_cast<const dim3 &>(::cg_emu::self()->blk->blockDim))
#define gridDim (reinterpret_cast<const dim3 &>(::cg_emu::self()->blk->gridDim))

/* ------------------------------------------------------------------------ math */
/* The fast intrinsics compute the accurate functions (glibc declares these names,
 * so they are macros). */
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __exp10f(x) exp10f(x)
#define __powf(x, y) powf((x), (y))
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) sincosf((x), (s), (c))
static inline float __fdividef(float a, float b) { return a / b; }
static inline float fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.f / cbrtf(x); }
static inline float __frsqrt_rn(float x) { return 1.f / sqrtf(x); }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __frcp_rn(float x) { return 1.f / x; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : (x == x ? x : 0.f)); }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
/* the bit casts, one a line (clang-format would give each statement a line) */
// clang-format off
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
static inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
static inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
// clang-format on
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
    return __builtin_bswap32(x);
}
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline int __mul24(int a, int b) { return (int)((long long)((a << 8) >> 8) * ((b << 8) >> 8)); }
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xFFFFFFu) * (b & 0xFFFFFFu); }

/* min/max as CUDA overloads them (floats through fminf/fmaxf: NaN-ignoring). */
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
template <class A, class B> static inline auto min(A a, B b) -> decltype(a + b) {
    return b < a ? (decltype(a + b))b : (decltype(a + b))a;
}
template <class A, class B> static inline auto max(A a, B b) -> decltype(a + b) {
    return a < b ? (decltype(a + b))b : (decltype(a + b))a;
}
static inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned umax(unsigned a, unsigned b) { return a < b ? b : a; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a < b ? b : a; }

template <class T> static inline T __ldg(const T *p) { return *p; }
template <class T> static inline T __ldcg(const T *p) { return *p; }
template <class T> static inline T __ldca(const T *p) { return *p; }
template <class T> static inline T __ldcs(const T *p) { return *p; }
template <class T> static inline T __ldlu(const T *p) { return *p; }
template <class T> static inline void __stcg(T *p, T v) { *p = v; }
template <class T> static inline void __stcs(T *p, T v) { *p = v; }
template <class T> static inline void __stwt(T *p, T v) { *p = v; }

/* -------------------------------------------------------------------- atomics
 * Blocks may run in parallel on OS threads: global-memory atomics are real ones. */
#define CG_EMU_ATOMIC_INT(T)                                                                                           \
    static inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }                        \
    static inline T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }                        \
    static inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }                        \
    static inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }                          \
    static inline T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }                        \
    static inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }                      \
    static inline T atomicCAS(T *p, T cmp, T v) {                                                                      \
        __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);                            \
        return cmp;                                                                                                    \
    }                                                                                                                  \
    static inline T atomicMax(T *p, T v) {                                                                             \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                                  \
        while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}       \
        return old;                                                                                                    \
    }                                                                                                                  \
    static inline T atomicMin(T *p, T v) {                                                                             \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                                  \
        while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}       \
        return old;                                                                                                    \
    }
CG_EMU_ATOMIC_INT(int)
CG_EMU_ATOMIC_INT(unsigned)
CG_EMU_ATOMIC_INT(long long)
CG_EMU_ATOMIC_INT(unsigned long long)
#undef CG_EMU_ATOMIC_INT
#define CG_EMU_ATOMIC_FP(T, U)                                                                                         \
    static inline T atomicAdd(T *p, T v) {                                                                             \
        U *q = reinterpret_cast<U *>(p);                                                                               \
        U old = __atomic_load_n(q, __ATOMIC_RELAXED), nv;                                                              \
        T o;                                                                                                           \
        do {                                                                                                           \
            memcpy(&o, &old, sizeof o);                                                                                \
            T n = o + v;                                                                                               \
            memcpy(&nv, &n, sizeof nv);                                                                                \
        } while (!__atomic_compare_exchange_n(q, &old, nv, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));                 \
        return o;                                                                                                      \
    }                                                                                                                  \
    static inline T atomicExch(T *p, T v) {                                                                            \
        U nv, old;                                                                                                     \
        memcpy(&nv, &v, sizeof nv);                                                                                    \
        old = __atomic_exchange_n(reinterpret_cast<U *>(p), nv, __ATOMIC_RELAXED);                                     \
        T o;                                                                                                           \
        memcpy(&o, &old, sizeof o);                                                                                    \
        return o;                                                                                                      \
    }
CG_EMU_ATOMIC_FP(float, unsigned)
CG_EMU_ATOMIC_FP(double, unsigned long long)
#undef CG_EMU_ATOMIC_FP
static inline unsigned atomicInc(unsigned *p, unsigned lim) {
    unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, old >= lim ? 0u : old + 1, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
static inline unsigned atomicDec(unsigned *p, unsigned lim) {
    unsigned old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, (old == 0 || old > lim) ? lim : old - 1, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {}
    return old;
}
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicMax_block atomicMax
#define atomicCAS_block atomicCAS
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* ------------------------------------------------------------------ barriers */
#define __syncthreads() (::cg_emu::g_api->syncthreads(::cg_emu::self(), "__syncthreads", __LINE__))
#define __syncthreads_count(p)                                                                                         \
    (::cg_emu::g_api->syncthreads_red(::cg_emu::self(), "__syncthreads_count", __LINE__, 0, (p) != 0))
#define __syncthreads_and(p)                                                                                           \
    (::cg_emu::g_api->syncthreads_red(::cg_emu::self(), "__syncthreads_and", __LINE__, 1, (p) != 0))
#define __syncthreads_or(p)                                                                                            \
    (::cg_emu::g_api->syncthreads_red(::cg_emu::self(), "__syncthreads_or", __LINE__, 2, (p) != 0))
#define __trap() (::cg_emu::fail("__trap() in line %d", __LINE__))
#define __brkpt() (::cg_emu::fail("__brkpt() in line %d", __LINE__))
#define __nanosleep(ns) (::cg_emu::g_api->yield(::cg_emu::self()))
#define __activemask() (::cg_emu::g_api->activemask(::cg_emu::self()))
static inline long long clock64() {
#if defined(__x86_64__)
    return (long long)__builtin_ia32_rdtsc();
#else
    return 0;
#endif
}

/* ------------------------------------------------------------ warp collectives */
namespace cg_emu {

__attribute__((unused)) static void sync_fn(void *const *, unsigned) {}

/* shfl.sync as PTX defines it: c = ((32 - width) << 8) | clamp. */
enum { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_BFLY };
template <class T> struct shfl_rec {
    T v;
    int mode, b, width;
    T r;
};
template <class T> static void shfl_fn(void *const *args, unsigned group) {
    for (int l = 0; l < 32; l++) {
        if (!(group >> l & 1)) continue;
        shfl_rec<T> *me = static_cast<shfl_rec<T> *>(args[l]);
        const int w = me->width;
        const int segmask = (32 - w) & 31;
        const int clamp = me->mode == SHFL_UP ? 0 : 31;
        const int minlane = l & segmask;
        const int maxlane = minlane | (clamp & ~segmask);
        int j;
        bool ok;
        switch (me->mode) {
        case SHFL_UP:
            j = l - me->b;
            ok = j >= maxlane;
            break;
        case SHFL_DOWN:
            j = l + me->b;
            ok = j <= maxlane;
            break;
        case SHFL_BFLY:
            j = l ^ me->b;
            ok = j <= maxlane;
            break;
        default:
            j = minlane | (me->b & ~segmask & 31);
            ok = j <= maxlane;
            break;
        }
        if (!ok || j < 0 || j > 31 || !(group >> j & 1)) j = l; /* inactive source: own value */
        me->r = static_cast<shfl_rec<T> *>(args[j])->v;
    }
}
template <class T> static inline T shfl(int line, const char *what, unsigned mask, T v, int b, int width, int mode) {
    if (width < 1 || width > 32 || (width & (width - 1)))
        fail("%s in line %d: width %d is not a power of two in [1, 32]", what, line, width);
    shfl_rec<T> rec{v, mode, b, width, v};
    g_api->warp_sync(self(), mask, what, line, &rec, &shfl_fn<T>);
    return rec.r;
}

struct vote_rec {
    int pred;
    unsigned r;
};
__attribute__((unused)) static void ballot_fn(void *const *args, unsigned group) {
    unsigned bits = 0;
    for (int l = 0; l < 32; l++)
        if (group >> l & 1 && static_cast<vote_rec *>(args[l])->pred) bits |= 1u << l;
    for (int l = 0; l < 32; l++)
        if (group >> l & 1) static_cast<vote_rec *>(args[l])->r = bits;
}
static inline unsigned ballot(int line, const char *what, unsigned mask, int pred) {
    vote_rec rec{pred != 0, 0};
    g_api->warp_sync(self(), mask, what, line, &rec, &ballot_fn);
    return rec.r;
}

template <class T> struct red_rec {
    T v;
    int op;
    T r;
};
template <class T> static void red_fn(void *const *args, unsigned group) {
    T acc = 0;
    bool first = true;
    int op = 0;
    for (int l = 0; l < 32; l++) {
        if (!(group >> l & 1)) continue;
        red_rec<T> *me = static_cast<red_rec<T> *>(args[l]);
        op = me->op;
        if (first) {
            acc = me->v;
            first = false;
            continue;
        }
        switch (op) {
        case 0: acc += me->v; break;
        case 1: acc = me->v < acc ? me->v : acc; break;
        case 2: acc = me->v > acc ? me->v : acc; break;
        case 3: acc &= me->v; break;
        case 4: acc |= me->v; break;
        default: acc ^= me->v; break;
        }
    }
    for (int l = 0; l < 32; l++)
        if (group >> l & 1) static_cast<red_rec<T> *>(args[l])->r = acc;
}
template <class T> static inline T reduce(int line, const char *what, unsigned mask, T v, int op) {
    red_rec<T> rec{v, op, v};
    g_api->warp_sync(self(), mask, what, line, &rec, &red_fn<T>);
    return rec.r;
}

} // namespace cg_emu

#define __syncwarp(...)                                                                                                \
    (::cg_emu::g_api->warp_sync(::cg_emu::self(), ::cg_emu::warp_mask_(__VA_ARGS__), "__syncwarp", __LINE__,           \
                                (void *)0, &::cg_emu::sync_fn))
namespace cg_emu {
static inline unsigned warp_mask_() { return 0xFFFFFFFFu; }
static inline unsigned warp_mask_(unsigned m) { return m; }
static inline int width_(int w = 32) { return w; }
} // namespace cg_emu
#define __shfl_sync(mask, v, lane, ...)                                                                                \
    (::cg_emu::shfl(__LINE__, "__shfl_sync", (mask), (v), (lane), ::cg_emu::width_(__VA_ARGS__), ::cg_emu::SHFL_IDX))
#define __shfl_up_sync(mask, v, d, ...)                                                                                \
    (::cg_emu::shfl(__LINE__, "__shfl_up_sync", (mask), (v), (int)(d), ::cg_emu::width_(__VA_ARGS__),                  \
                    ::cg_emu::SHFL_UP))
#define __shfl_down_sync(mask, v, d, ...)                                                                              \
    (::cg_emu::shfl(__LINE__, "__shfl_down_sync", (mask), (v), (int)(d), ::cg_emu::width_(__VA_ARGS__),                \
                    ::cg_emu::SHFL_DOWN))
#define __shfl_xor_sync(mask, v, m, ...)                                                                               \
    (::cg_emu::shfl(__LINE__, "__shfl_xor_sync", (mask), (v), (m), ::cg_emu::width_(__VA_ARGS__), ::cg_emu::SHFL_BFLY))
#define __ballot_sync(mask, p) (::cg_emu::ballot(__LINE__, "__ballot_sync", (mask), (p) != 0))
#define __any_sync(mask, p) (::cg_emu::ballot(__LINE__, "__any_sync", (mask), (p) != 0) != 0u)
#define __all_sync(mask, p) (::cg_emu::ballot(__LINE__, "__all_sync", (mask), (p) == 0) == 0u)
#define __reduce_add_sync(mask, v) (::cg_emu::reduce(__LINE__, "__reduce_add_sync", (mask), (v), 0))
#define __reduce_min_sync(mask, v) (::cg_emu::reduce(__LINE__, "__reduce_min_sync", (mask), (v), 1))
#define __reduce_max_sync(mask, v) (::cg_emu::reduce(__LINE__, "__reduce_max_sync", (mask), (v), 2))
#define __reduce_and_sync(mask, v) (::cg_emu::reduce(__LINE__, "__reduce_and_sync", (mask), (unsigned)(v), 3))
#define __reduce_or_sync(mask, v) (::cg_emu::reduce(__LINE__, "__reduce_or_sync", (mask), (unsigned)(v), 4))
#define __reduce_xor_sync(mask, v) (::cg_emu::reduce(__LINE__, "__reduce_xor_sync", (mask), (unsigned)(v), 5))

/* ------------------------------------------ shared-memory races, access statistics
 * With CG_EMU_RACECHECK (an instrumented module: race checking or statistics) the module
 * is built with -fsanitize=kernel-address, which makes the compiler call these for every
 * load and store; they go to the runtime (shadow map of shared memory, access logs). */
#ifdef CG_EMU_RACECHECK
namespace cg_emu {
/* Set by the entry wrappers: this OS thread runs fibers of this module. Host-side
 * calls into the module (cg_emu_bind ...) run on ordinary stacks and are not checked. */
static thread_local int tls_in_kernel;
CG_EMU_NOSAN __attribute__((noinline)) static void access(const void *p, size_t n, int w, const void *pc) {
    if (!tls_in_kernel) return;
    const cg_emu_thread *t = self();
    if (t->blk->racecheck | t->blk->stats) g_api->access(t, p, n, w, pc);
}
} // namespace cg_emu
#define CG_EMU_SAN_FN(n, w)                                                                                            \
    extern "C" __attribute__((visibility("hidden"))) CG_EMU_NOSAN void __asan_##w##n##_noabort(void *p) {              \
        ::cg_emu::access(p, n, #w[0] == 's', __builtin_return_address(0));                                             \
    }
/* one load and one store hook a size (clang-format would not format these calls idempotently) */
// clang-format off
CG_EMU_SAN_FN(1, load) CG_EMU_SAN_FN(2, load) CG_EMU_SAN_FN(4, load) CG_EMU_SAN_FN(8, load) CG_EMU_SAN_FN(16, load)
CG_EMU_SAN_FN(1, store) CG_EMU_SAN_FN(2, store) CG_EMU_SAN_FN(4, store) CG_EMU_SAN_FN(8, store) CG_EMU_SAN_FN(16, store)
// clang-format on
#undef CG_EMU_SAN_FN
        extern "C" __attribute__((visibility("hidden"))) CG_EMU_NOSAN void __asan_loadN_noabort(void *p, size_t n) {
    ::cg_emu::access(p, n, 0, __builtin_return_address(0));
}
extern "C" __attribute__((visibility("hidden"))) CG_EMU_NOSAN void __asan_storeN_noabort(void *p, size_t n) {
    ::cg_emu::access(p, n, 1, __builtin_return_address(0));
}
extern "C" __attribute__((visibility("hidden"))) CG_EMU_NOSAN void __asan_handle_no_return(void) {}
/* Allocates this thread's TLS block of the module (the __shared__ statics live there). */
CG_EMU_EXPORT CG_EMU_NOSAN void *cg_emu_tls_touch(void) { return &cg_emu::tls_in_kernel; }
#define CG_EMU_ENTER_KERNEL() (::cg_emu::tls_in_kernel = 1)
#else
#define CG_EMU_ENTER_KERNEL() ((void)0)
#endif

/* ------------------------------------------------------------- entry wrappers
 * The loader appends, per __global__ entry E (which takes one params struct):
 *   CG_EMU_EXPORT void cg_emu_k_E(const void *p) { ::cg_emu::invoke(E, p); }
 *   CG_EMU_EXPORT size_t cg_emu_s_E(void) { return ::cg_emu::param_size(E); } */
namespace cg_emu {
template <class P> inline void invoke(void (*k)(P), const void *params) {
    CG_EMU_ENTER_KERNEL();
    k(*static_cast<const P *>(params));
}
template <class P> CG_EMU_NOSAN inline size_t param_size(void (*)(P)) { return sizeof(P); }
} // namespace cg_emu

#endif /* __cplusplus && !CG_EMU_ABI_ONLY */
#endif /* CG_EMU_H */
