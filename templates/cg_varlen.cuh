// cg_varlen.cuh -- the device side of a variable-length batch (docs/varlen.md): reading
// cu_seqlens, clamped, finding a sequence, and the chunk slots of the chunked kernels. Shared by the generated kernels that take
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
    const i64 v =
        c.wide ? reinterpret_cast<const i64 *>(c.p)[i * c.s0] : (i64) reinterpret_cast<const int *>(c.p)[i * c.s0];
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

// ------------------------------------------------------- varlen chunk slots
// Chunk slots of a varlen call (docs/varlen.md; the SSD and the gated delta rule): B = 1
// and nseq sequences packed along T, cu_seqlens read here on the device (clamped: cu_at), so no host read of the offsets. Chunks
// start at every sequence start (none straddles one) and are numbered by slots: chunk
// k of sequence n (tokens [start_n + k CHUNK, ...) of [start_n, end_n)) is slot
//   slot_base(n) + k,   slot_base(n) = floor(start_n / CHUNK) + n.
// The slots are distinct and in sequence order (slot_base(n) + ceil(len_n / CHUNK) <=
// slot_base(n + 1)) and all below ceil(T / CHUNK) + nseq, a bound known on the host (the
// plan's grid and workspace); for any clamped offsets too, every slot a sequence's chunks
// get stays below it. A CTA finds its chunk from its slot alone by a binary search over
// cu (slot_chunk), so no table and no extra launch; unused slots (about nseq of them)
// have length 0 and exit at once.
template <int CHUNK> __device__ __forceinline__ i64 slot_base(const cg_kcu &cu, i64 n, i64 T) {
    return cu_at(cu, n, T) / CHUNK + n;
}

// Sequence n's chunk count and first slot.
struct VSeq {
    i64 start, end, base, nch;
};
template <int CHUNK> __device__ __forceinline__ VSeq seq_chunks(const cg_kcu &cu, i64 n, i64 T) {
    VSeq s;
    seq_range(cu, n, T, &s.start, &s.end);
    s.base = s.start / CHUNK + n;
    s.nch = (s.end - s.start + CHUNK - 1) / CHUNK;
    return s;
}

// The chunk of slot: its sequence n, first token t0, length len (0: an unused slot, the
// rest then meaningless) and the sequence's last slot. Tokens [t0, t0 + len) lie inside
// [0, T) and slot <= last < ceil(T / CHUNK) + nseq whatever the offsets.
struct VChunk {
    i64 n, t0, last;
    int len;
};
template <int CHUNK> __device__ __forceinline__ VChunk slot_chunk(const cg_kcu &cu, i64 nseq, i64 T, i64 slot) {
    i64 lo = 0, hi = nseq; // the first n with slot_base(n) > slot (slot_base(lo - 1) <= slot)
    while (lo < hi) {
        const i64 m = (lo + hi) >> 1;
        if (slot_base<CHUNK>(cu, m, T) <= slot) lo = m + 1;
        else hi = m;
    }
    VChunk v = {lo - 1, 0, 0, 0};
    if (v.n < 0) return v;
    const VSeq s = seq_chunks<CHUNK>(cu, v.n, T);
    const i64 t0 = s.start + (slot - s.base) * CHUNK;
    if (t0 < s.end) {
        v.t0 = t0;
        v.last = s.base + s.nch - 1;
        v.len = s.end - t0 < CHUNK ? (int)(s.end - t0) : CHUNK;
    }
    return v;
}

} // namespace cgvl

#endif // CG_VARLEN_CUH
