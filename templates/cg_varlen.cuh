// cg_varlen.cuh -- the device side of a variable-length batch (docs/varlen.md): reading
// cu_seqlens, clamped, and finding a sequence. Shared by the generated kernels that take
// the offsets (the selective scan, sscan_fwd.cu; the SSD, ssd_common.cuh), included under
// CG_VARLEN only.
#ifndef CG_VARLEN_CUH
#define CG_VARLEN_CUH
#include "cg_kernel_params.h" // cg_kcu, cg_i64

namespace cgvl {

typedef cg_i64 i64;

// Offset i (0 <= i <= nseq) of cu_seqlens, clamped to [0, T]: whatever the values, the
// kernels address only inside the tensors (the results of offsets that break the
// contract are unspecified).
__device__ __forceinline__ i64 cu_at(const cg_kcu &c, i64 i, i64 T) {
    const i64 v = c.wide ? reinterpret_cast<const i64 *>(c.p)[i * c.s0] : (i64)reinterpret_cast<const int *>(c.p)[i * c.s0];
    return v < 0 ? 0 : (v > T ? T : v);
}
// Starts cu[0 .. nseq - 1] that are <= t (a binary search over the clamped offsets): the
// sequence holding step t is this minus 1 (the last of repeated offsets, so never a
// 0-length one); any values give an index in [0, nseq].
__device__ __forceinline__ i64 cu_upper(const cg_kcu &c, i64 nseq, i64 T, i64 t) {
    i64 lo = 0, hi = nseq;
    while (lo < hi) {
        const i64 m = (lo + hi) >> 1;
        if (cu_at(c, m, T) <= t) lo = m + 1;
        else hi = m;
    }
    return lo;
}
// Sequence n's steps [*ta, *tb), the end clamped to [start, T].
__device__ __forceinline__ void seq_range(const cg_kcu &c, i64 n, i64 T, i64 *ta, i64 *tb) {
    *ta = cu_at(c, n, T);
    const i64 e = cu_at(c, n + 1, T);
    *tb = e < *ta ? *ta : e;
}

} // namespace cgvl

#endif // CG_VARLEN_CUH
