// ssd_bwd_grads.cuh -- launch 3 of the SSD backward (ssd_bwd.cu): the chunk gradients.
//
// Not a header of its own: ssd_bwd.cu includes it after its traits, loads and launches
// 1 and 2 (namespace ssdb, the params, the workspace Ws), which this text uses. It is a
// file of its own so that each launch reads in one place; the generator inlines it
// (generator/core.lua) as it does every template include.

// ------------------------------------------------------- 3: chunk gradients
// REC > 1: carry the [DKP, BDV] tile St (swizzled: sd_at) through chunk ci of head h, columns
// [j0, j0 + BDV): St <- gamma St + X^T diag(s) Y with (X, s, Y) = (K, w, V) forward
// (the state) or (Q, exp(A), dO) backward (its gradient). The chunk is loaded over the
// CTA's own Q/K, V/dO, la and cumsum buffers; the caller reloads its own afterwards.
namespace ssdb {
__device__ __forceinline__ void carry_chunk(const cg_ssd_bwd_params &p, float *sm, float *St, bool fwd, i64 b, i64 g,
                                            i64 h, i64 ci, i64 j0) {
    typedef TileU T;
    const int warp = threadIdx.x >> 5;
    const i64 t0 = ci * CHUNK;
    const int n = chunk_len(p, ci);
    __syncthreads(); // the readers of the buffers (and the writers of St) are done
    load_qk(p, sm, b, g, t0, n, fwd ? LD_SECOND : LD_FIRST);      // K or Q
    load_vdo(p, sm, b, h, t0, n, j0, fwd ? LD_FIRST : LD_SECOND); // V or dO
    load_la(p, sm, b, h, t0, n);
    ssdc::landed();
    __syncthreads();
    chunk_cumsum(sm);
    __syncthreads();
    float *X = sm + (fwd ? OFF_K : OFF_Q), *Y = sm + (fwd ? OFF_V : OFF_DO);
    const float *sc = sm + (fwd ? OFF_W : OFF_EA);
    if (fwd) outer_operands<TV>(X, sc, Y); // over the loaded chunk's buffers (the caller reloads its own)
    else outer_operands<TDO>(X, sc, Y);
    __syncthreads();
    const float gamma = sm[OFF_EA + CHUNK - 1];
    for (int tile = warp; tile < T::TILES; tile += WARPS) {
        const int m0 = tile / T::TILES_N * T::TM, n0 = tile % T::TILES_N * T::TN;
        float acc[T::MM][T::NN][4];
        tile_zero(acc);
        chunk_outer(acc, X, Y, m0, n0);
        tile_foreach(acc, [&](int r, int cc, float &x) {
            float &st = St[sd_at(m0 + r, n0 + cc)]; // padding: X, Y zero there, so st stays 0
            st = fmaf(gamma, st, x);
        });
    }
}
} // namespace ssdb

// heads=loop:  grid nchunks * B * G, blockIdx.x = (b*G + g) * nchunks + c;
// heads=split: grid nchunks * B * H, blockIdx.x = (b*H + h) * nchunks + c.
SSDB_ENTRY cg_ssd_bwd_grads(cg_ssd_bwd_params p) {
    using namespace ssdb;
    CG_DYN_SMEM(float, sm);
    const i64 ci = blockIdx.x % p.nchunks, rest = blockIdx.x / p.nchunks;
#ifdef CG_VARLEN
    const i64 hpg = p.H / p.G;
    i64 t0; // of slot ci
    const int n = ssdc::slot_tokens<CHUNK>(p, ci, &t0);
    if (n == 0) return; // an unused slot
#else
    const i64 hpg = p.H / p.G, t0 = ci * CHUNK;
#endif
    const i64 b = SPLIT ? rest / p.H : rest / p.G;
    const i64 h_begin = SPLIT ? rest % p.H : rest % p.G * hpg, h_end = SPLIT ? h_begin + 1 : h_begin + hpg;
    const i64 g = h_begin / hpg;
#ifndef CG_VARLEN
    const int n = chunk_len(p, ci);
#endif
    const int warp = threadIdx.x >> 5, tg = threadIdx.x & 3;
    // The swizzle of dS (sd_at) in dV's read on the mma path: rows step + 2 (lane%4) (+1),
    // step a multiple of 8, so the XOR is bit 1 of lane%4 (the FFMA path uses sd_at itself).
    const int xs_rows = ((tg >> 1) & 1) << 3;
    const Ws w = ws_of(p);
    // super-chunk of ci, its stored states and its chunks [c_first, c_last]
    const i64 ns = nsuper(p), si = ci / REC, c_first = si * REC;
    const i64 c_last = c_first + REC - 1 < p.nchunks - 1 ? c_first + REC - 1 : p.nchunks - 1;
    const bool carry = REC > 1 && c_first < c_last;
    float *Q = sm + OFF_Q, *K = sm + OFF_K, *V = sm + OFF_V, *DO = sm + OFF_DO;
    float *A = sm + OFF_A, *EA = sm + OFF_EA, *W = sm + OFF_W, *LO = sm + OFF_LA; // LO: the cumsum's low parts
    float *DQ = sm + OFF_DQ, *DKs = sm + OFF_DK, *P = sm + OFF_P, *DP = sm + OFF_DP;
    float *S = sm + OFF_S, *DS = sm + OFF_DS, *DT = sm + OFF_DT;
    load_qk<ssdc::MMA16>(p, sm, b, g, t0, n);
    for (i64 h = h_begin; h < h_end; ++h) {
        const i64 bh = b * p.H + h;
        const i64 sslot = bh * ns + si;
        load_la(p, sm, b, h, t0, n);
        // The block-wide element loops stay rolled (#pragma unroll 1): unrolled, their
        // constant trip counts made a third of this entry's compile time.
#pragma unroll 1
        for (int e = threadIdx.x; e < CHUNK * LDQ; e += NTHREADS) DQ[e] = DKs[e] = 0.f;
#pragma unroll 1
        for (int e = threadIdx.x; e < CHUNK * LDDP; e += NTHREADS) DP[e] = 0.f;
        ssdc::landed(); // la (and the first head's Q, K)
        __syncthreads();
        chunk_cumsum(sm);
        __syncthreads();
        // P = (Q K^T) .* M (zero above the diagonal: readers' k ranges end at their own
        // tiles' edges), Q and K read as 64-bit k pairs
        for (int tile = warp; tile < TileP::TILES; tile += WARPS) {
            typedef TileP T;
            const int m0 = tile / T::TILES_N * T::TM, n0 = tile % T::TILES_N * T::TN;
            float acc[T::MM][T::NN][4];
            tile_zero(acc);
#if defined(CG_P_PRECISION_MMA16) // the raw 16-bit q, k by m16n8k16, ldmatrix fragments
            if (n0 < m0 + T::TM)
                ssdc::warp_mma16_abt<TQ, LDQ16, LDQ16>(acc, raw16<TQ>(sm, OFF_Q16) + m0 * LDQ16,
                                                       raw16<TK>(sm, OFF_K16) + n0 * LDQ16, 0, DKP);
#else
            if (n0 < m0 + T::TM)
                warp_mma<true>(
                    acc, 0, DKP, [&](int m, int k) { return ld_pair(Q + (m0 + m) * LDQ + k); },
                    [&](int k, int nn) { return ld_pair(K + (n0 + nn) * LDQ + k); });
#endif
            tile_foreach2(acc, [&](int r, int cc, float &x0, float &x1) {
                const int i = m0 + r, j = n0 + cc; // selects: above the diagonal exp(positive) may be Inf
                f2(P + i * LDP + j) =
                    make_float2(j <= i ? ssdc::mma_store(x0 * expf(ssdc::seg_sum(A, LO, i, j))) : 0.f,
                                j + 1 <= i ? ssdc::mma_store(x1 * expf(ssdc::seg_sum(A, LO, i, j + 1)))
                                           : 0.f); // read by dV (and the dla pairs) only
            });
        }
        float sdot = 0.f; // this thread's share of <S0, dS> over the dv tiles (dlog_alpha's chunk term)
        for (int dvt = 0; dvt < NDVT; ++dvt) {
            const i64 j0 = (i64)dvt * BDV;
            __syncthreads(); // the previous tile's readers are done (and P is complete)
            const float *s0 = w.S + sslot * DKDV + j0, *ds = w.D + sslot * DKDV + j0;
#pragma unroll 1
            for (int e = threadIdx.x; e < DKP * BDV; e += NTHREADS) {
                const int i = e / BDV, j = e - i * BDV;
                const bool in = i < DK && j0 + j < DV;
                const float x = in ? s0[(i64)i * DV + j] : 0.f, y = in ? ds[(i64)i * DV + j] : 0.f;
                S[sd_at(i, j)] = carry ? x : ssdc::mma_store(x); // read by the mma only (carry: rounded after it)
                DS[sd_at(i, j)] = carry ? y : ssdc::mma_store(y);
                if (!carry) sdot = fmaf(x, y, sdot);
            }
            if (carry) { // S0^ci from S0 of the super-chunk, dS^ci from its dS (one call site: less code)
                for (i64 k = c_first; k < c_last; ++k) {
                    const bool fwd = k < ci; // forward over [c_first, ci), then backward from c_last down to ci + 1
                    carry_chunk(p, sm, fwd ? S : DS, fwd, b, g, h, fwd ? k : c_last - (k - ci), j0);
                }
                __syncthreads();         // back to this chunk's own Q, K, la, A, exp(A), w
                sdot += tile_dot(S, DS); // the elements round_tile gives this thread, before it rounds them
                ssdc::round_tile<DKP, BDV / 4, LDS, NTHREADS>(S); // the carried S0, dS: read by the mma only now
                ssdc::round_tile<DKP, BDV / 4, LDS, NTHREADS>(DS);
                load_qk<ssdc::MMA16>(p, sm, b, g, t0, n);
                load_la(p, sm, b, h, t0, n);
                ssdc::landed();
                __syncthreads();
                chunk_cumsum(sm);
            }
            load_vdo<ssdc::MMA16>(p, sm, b, h, t0, n, j0);
            ssdc::landed();
            __syncthreads();
            ssdc::round_tile<CHUNK, BDV / 4, LDV, NTHREADS, TV>(V); // V, dO: read by the mma only here
            ssdc::round_tile<CHUNK, BDV / 4, LDV, NTHREADS, TDO>(DO);
            if (PREC == 1) __syncthreads();
            // Four tile lists, each tile owned by one warp: dV, dP, dQ (state term), dK (state term).
            constexpr int N_DV = TileV::TILES, N_DP = TileDP::TILES, N_DQ = TileQ::TILES;
            constexpr int N_ALL = N_DV + N_DP + 2 * N_DQ;
            for (int tile = warp; tile < N_ALL; tile += WARPS) {
                if (tile < N_DV) { // dV = diag(w) K dS + P^T dO   [CHUNK, BDV]
                    typedef TileV T;
                    const int m0 = tile / T::TILES_N * T::TM, n0 = tile % T::TILES_N * T::TN;
                    if (m0 >= n) continue; // only padding rows
                    float acc[T::MM][T::NN][4];
                    tile_zero(acc);
                    // K (64-bit k pairs) dS (rows k, k+1)
                    warp_mma<true, RND_B>(
                        acc, 0, DKP, [&](int m, int k) { return ld_pair(K + (m0 + m) * LDQ + k); },
                        [&](int k, int nn) {
                            if (PREC == 0) return make_float2(DS[sd_at(k, n0 + nn)], DS[sd_at(k + 1, n0 + nn)]);
                            return ld_rows(DS + k * LDS + ((n0 + nn) ^ xs_rows), LDS, 1);
                        });
                    tile_foreach(acc, [&](int r, int, float &x) { x *= W[m0 + r]; });
                    // P^T dO, both k-strided in the mma's k order
                    warp_mma<false, RND_AB>(
                        acc, m0, CHUNK, [&](int m, int k) { return ld_rows(P + k * LDP + m0 + m, LDP, 4); },
                        [&](int k, int nn) { return ld_rows(DO + k * LDV + n0 + nn, LDV, 4); });
                    TDV *dvb = tp<TDV>(p.dv) + b * p.dv.s0 + t0 * p.dv.s1 + h * p.dv.s2 + j0;
                    const int nr = n - m0; // as fwd's chunk_output: compile-time column test when DV % BDV == 0
                    bool bad = false;      // an element came out Inf or NaN
                    tile_foreach(acc, [&](int r, int cc, float &x) {
                        const int j = n0 + cc;
                        if (r < nr && (DV % BDV == 0 || j0 + j < DV)) {
                            dvb[(m0 + r) * p.dv.s1 + j] = cg_round<TDV>(x); // rounded once
                            bad |= !ssdc::finite(x);
                        }
                    });
                    if (bad) { // rare: the lane's non-finite elements again, exactly (dv_exact)
                        const int lane = threadIdx.x & 31;
#pragma unroll 1
                        for (int e = 0; e < T::MM * T::NN * 4; ++e) {
                            const int r = e / (T::NN * 4) * 16 + (lane >> 2) + (e >> 1 & 1) * 8;
                            const int j = n0 + e / 4 % T::NN * 8 + 2 * (lane & 3) + (e & 1);
                            if (r >= nr || j0 + j >= DV) continue;
                            TDV &o = dvb[(m0 + r) * p.dv.s1 + j];
                            if (!ssdc::finite(cg_f32(o))) o = cg_round<TDV>(dv_exact(K, DS, W, P, DO, m0 + r, j));
                        }
                    }
                } else if (tile < N_DV + N_DP) { // dP += dO V^T   [CHUNK, CHUNK], tiles touching the lower triangle
                    typedef TileDP T;
                    const int t2 = tile - N_DV;
                    const int m0 = t2 / T::TILES_N * T::TM, n0 = t2 % T::TILES_N * T::TN;
                    if (n0 >= m0 + T::TM) continue;
                    float acc[T::MM][T::NN][4];
                    tile_zero(acc);
#if defined(CG_P_PRECISION_MMA16) // the raw 16-bit dout, v by m16n8k16
                    ssdc::warp_mma16_abt<TDO, LDV16, LDV16>(acc, raw16<TDO>(sm, OFF_DO16) + m0 * LDV16,
                                                            raw16<TV>(sm, OFF_V16) + n0 * LDV16, 0, BDV);
#else
                    warp_mma<true, RND_AB>(
                        acc, 0, BDV, [&](int m, int k) { return ld_pair(DO + (m0 + m) * LDV + k); },
                        [&](int k, int nn) { return ld_pair(V + (n0 + nn) * LDV + k); });
#endif
                    tile_foreach2(acc, [&](int r, int cc, float &x0, float &x1) {
                        float2 &d = f2(DP + dp_at(m0 + r, n0 + cc)); // cc even: the swizzle keeps the pair
                        const float2 o = d;                  // one 64-bit load and store (d.x += .. reads as two 32-bit
                        d = make_float2(o.x + x0, o.y + x1); // accesses in the emulator's counts)
                    });
                } else { // dQ += diag(eA) dO S0^T or dK += diag(w) V dS^T   [CHUNK, DKP] (one call site, runtime
                         // operands: less code)
                    typedef TileQ T;
                    const int t2 = tile - N_DV - N_DP, is_dk = t2 >= N_DQ, t3 = t2 - is_dk * N_DQ;
                    const int m0 = t3 / T::TILES_N * T::TM, n0 = t3 % T::TILES_N * T::TN;
                    const float *X = is_dk ? V : DO, *Y = is_dk ? DS : S, *sc = is_dk ? W : EA;
                    float *dst = is_dk ? DKs : DQ;
                    float acc[T::MM][T::NN][4];
                    tile_zero(acc);
                    warp_mma<true, RND_AB>(
                        acc, 0, BDV, [&](int m, int k) { return ld_pair(X + (m0 + m) * LDV + k); },
                        [&](int k, int nn) { return ld_pair(Y + sd_at(n0 + nn, k)); });
                    // sc read once per row (ssd_common.cuh: tile_foreach2_row)
                    ssdc::tile_foreach2_row(
                        acc, [&](int r) { return sc[m0 + r]; },
                        [&](int r, int cc, float x0, float x1, float s) {
                            float2 &d = f2(dst + (m0 + r) * LDQ + n0 + cc);
                            const float2 o = d; // 64-bit, as above
                            d = make_float2(fmaf(s, x0, o.x), fmaf(s, x1, o.y));
                        });
                }
            }
        }
        // dlog_alpha, per token t of the chunk, without per-token states and without a sum
        // over the sequence (issue #39): exp(la_t) <G_t, S_{t-1}> (G_t the gradient of the
        // state after t) expands over the chunk's own terms into
        //   dla_t = gamma <dS, S0> + sum_{i >= t} x_i + sum_{j < t} y_j + sum_{i >= t > j} Z_ij
        // with gamma = exp(A_last), x_i = q_i . dQs_i and y_j = k_j . dKs_j (dQs, dKs: the state
        // terms of dq and dk, which DQ and DKs hold now), Z_ij = P_ij (dO V^T)_ij (the pairs
        // whose decay spans t). Every term is a sum of products, no difference of sums: a
        // reset (log_alpha -inf) makes each term 0 exactly where it should (dla_t = 0 at it),
        // and a non-finite input reaches exactly the tokens whose exact gradient it reaches
        // (the telescoping sum over s >= t of q_s . dq_s - k_s . dk_s it replaces spread a
        // NaN at token s to every t <= s).
        const float gam = EA[CHUNK - 1]; // (EA is reused below)
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) sdot += __shfl_xor_sync(0xffffffffu, sdot, off);
        if ((threadIdx.x & 31) == 0) DT[warp] = sdot; // the warps' partials (DT: no other use now)
        __syncthreads();
        // P (dV, its reader, is done) becomes Z = P .* dP (lower triangle), dP becomes dP .* M
        // (zero above the diagonal, where the dP tiles may have written): selects, not products
        // (above the diagonal exp(A_i - A_j) may be Inf, and dP there NaN).
#pragma unroll 1
        for (int e = threadIdx.x; e < CHUNK * CHUNK; e += NTHREADS) {
            const int i = e / CHUNK, j = e - i * CHUNK;
            float &d = DP[dp_at(i, j)];
            const float dpv = d;
            if (j <= i) P[i * LDP + j] *= dpv;
            d = j <= i ? ssdc::mma_store(dpv * expf(ssdc::seg_sum(A, LO, i, j))) : 0.f; // read by the mma only
        }
        // x_t, y_t into EA, W (their readers, the dv tiles, are done). Token t starts at column
        // (t/4) % 8 and wraps (a fixed order per token): rows t of pitch == 8 mod 32 then hit 32
        // distinct banks instead of 4. A non-finite x or y flags a non-finite q or k row (or
        // state term) for dQ += dP K, dK += dP^T Q below.
        bool nonfin = false;
        for (int t = threadIdx.x; t < CHUNK; t += NTHREADS) {
            float a = 0.f, c = 0.f;
            const float *q = Q + t * LDQ, *dq = DQ + t * LDQ, *k = K + t * LDQ, *dk = DKs + t * LDQ;
            const int rot = (t >> 2) & 7;
#pragma unroll 4
            for (int ii = 0; ii < DKP; ++ii) {
                const int i = ii + rot < DKP ? ii + rot : ii + rot - DKP;
                a = fmaf(q[i], dq[i], a);
                c = fmaf(k[i], dk[i], c);
            }
            EA[t] = a;
            W[t] = c;
            nonfin |= !(ssdc::finite(a) && ssdc::finite(c));
        }
        // dQ += dP K and dK += dP^T Q multiply dP's zeros above the diagonal with K's rows
        // after a row of dQ and Q's rows before a row of dK: with a non-finite q or k in the
        // chunk (rare) they run as selects by FFMA instead of the mma (0 x Inf is NaN).
        const bool exact = __syncthreads_or(nonfin);
        // Z's column sums from the bottom: Z_ij <- sum_{i' >= i} Z_i'j for i > j (column j:
        // CHUNK - 1 - j steps), and in place the suffix sums of x and the prefix sums of y
        // (sum_{j < t}), in a fixed order, by the threads of the two shortest columns
        // (NTHREADS >= 64 >= CHUNK), so no thread runs more than about CHUNK steps
#pragma unroll 1
        for (int j = threadIdx.x; j < CHUNK; j += NTHREADS) {
            float run = 0.f;
#pragma unroll 1
            for (int i = CHUNK - 1; i > j; --i) run = P[i * LDP + j] += run;
        }
        static_assert(NTHREADS >= CHUNK, "the x, y scans' threads");
        if (threadIdx.x == CHUNK - 1) {
            float run = 0.f;
#pragma unroll 1
            for (int t = CHUNK - 1; t >= 0; --t) run = EA[t] += run;
        } else if (threadIdx.x == CHUNK - 2) {
            float run = 0.f;
#pragma unroll 1
            for (int t = 0; t < CHUNK; ++t) {
                const float y = W[t];
                W[t] = run;
                run += y;
            }
        }
        if (exact) {
#pragma unroll 1
            for (int e = threadIdx.x; e < CHUNK * DKP; e += NTHREADS) {
                const int r = e / DKP, c = e - r * DKP;
                float xq = DQ[r * LDQ + c], xk = DKs[r * LDQ + c];
#pragma unroll 1
                for (int j = 0; j <= r; ++j) xq = fmaf(DP[dp_at(r, j)], K[j * LDQ + c], xq);
#pragma unroll 1
                for (int i = r; i < CHUNK; ++i) xk = fmaf(DP[dp_at(i, r)], Q[i * LDQ + c], xk);
                DQ[r * LDQ + c] = xq;
                DKs[r * LDQ + c] = xk;
            }
        } else {
            // dQ += dP K, dK += dP^T Q   [CHUNK, DKP] each, the mma's k order
            for (int tile = warp; tile < 2 * TileQ::TILES; tile += WARPS) {
                typedef TileQ T;
                const int which = tile / T::TILES, t2 = tile - which * T::TILES;
                const int m0 = t2 / T::TILES_N * T::TM, n0 = t2 % T::TILES_N * T::TN;
                float *dst = which == 0 ? DQ : DKs;
                // dQ: dP [m, k] (row m, k-contiguous), k < m0 + TM, times K; dK: dP^T [m, k] = dP [k, m]
                // (k-strided), k >= m0, times Q. One call site with the dP strides and operands
                // at run time (less code). The lane's k slots are step + lane%4 and + 4 (step a
                // multiple of 8, which moves neither the swizzle's row bit nor its columns), so
                // the two elements sit at o0, o1 (fixed per m) plus step * ks.
                const int ks = which == 0 ? 1 : LDDP;
                const float *Y = which == 0 ? K : Q;
                float acc[T::MM][T::NN][4];
                tile_foreach2(acc, [&](int r, int cc, float &x0, float &x1) {
                    const float2 d = f2(dst + (m0 + r) * LDQ + n0 + cc);
                    x0 = d.x;
                    x1 = d.y;
                });
                warp_mma<false, RND_A>(
                    acc, which == 0 ? 0 : m0, which == 0 ? m0 + T::TM : CHUNK,
                    [&](int m, int k) {
                        const int r = m0 + m, step = k - tg;
                        if (PREC == 0) // FFMA: k is any slot (ssdc::warp_mma), the pair (k, k + 4)
                            return which == 0 ? make_float2(DP[dp_at(r, k)], DP[dp_at(r, k + 4)])
                                              : make_float2(DP[dp_at(k, r)], DP[dp_at(k + 4, r)]);
                        const int o0 = which == 0 ? dp_at(r, tg) : dp_at(tg, r);
                        const int o1 = which == 0 ? dp_at(r, tg + 4) : dp_at(tg + 4, r);
                        return make_float2(DP[o0 + step * ks], DP[o1 + step * ks]);
                    },
                    [&](int k, int nn) { return ld_rows(Y + k * LDQ + n0 + nn, LDQ, 4); });
                tile_foreach2(acc, [&](int r, int cc, float &x0, float &x1) {
                    f2(dst + (m0 + r) * LDQ + n0 + cc) = make_float2(x0, x1);
                });
            }
        }
        __syncthreads();
        // dla_t = gamma <dS, S0> + (x's suffix sum) + (y's prefix sum) + sum_{j < t} (the column
        // sums of Z at row t: the pairs spanning t). Row t starts at column (t/4) % 8 (mod t)
        // and wraps, a fixed order per token, so a warp's rows (pitch == 8 mod 32) hit 32
        // distinct banks instead of 4.
        float *dlb = p.dla.p + b * p.dla.s0 + t0 * p.dla.s1 + h * p.dla.s2;
        for (int t = threadIdx.x; t < n; t += NTHREADS) {
            float sd = 0.f, z = 0.f;
            for (int k = 0; k < WARPS; ++k) sd += DT[k];
            const float *zr = P + t * LDP;
            int j = t > 0 ? ((t >> 2) & 7) % t : 0;
#pragma unroll 1
            for (int jj = 0; jj < t; ++jj) {
                z += zr[j];
                j = j + 1 == t ? 0 : j + 1;
            }
            dlb[t * p.dla.s1] = gam * sd + EA[t] + W[t] + z;
        }
        if (SPLIT) { // head h's own dq, dk; launch 4 sums the heads
            float *dqb = w.dqp + (bh * p.T + t0) * DK, *dkb = w.dkp + (bh * p.T + t0) * DK;
#pragma unroll 1
            for (int e = threadIdx.x; e < CHUNK * DKP; e += NTHREADS) {
                const int r = e / DKP, i = e - r * DKP;
                if (r >= n || i >= DK) continue;
                dqb[(i64)r * DK + i] = DQ[r * LDQ + i];
                dkb[(i64)r * DK + i] = DKs[r * LDQ + i];
            }
        } else { // dq, dk of the group: the heads in order (this thread wrote the element for the previous head;
                 // a 16-bit dq, dk: one head per group, ssd_bwd.lua, so rounded once)
            TDQ *dqb = tp<TDQ>(p.dq) + b * p.dq.s0 + t0 * p.dq.s1 + g * p.dq.s2;
            TDK *dkb = tp<TDK>(p.dk) + b * p.dk.s0 + t0 * p.dk.s1 + g * p.dk.s2;
            const bool first = h == h_begin;
#pragma unroll 1
            for (int e = threadIdx.x; e < CHUNK * DKP; e += NTHREADS) {
                const int r = e / DKP, i = e - r * DKP;
                if (r >= n || i >= DK) continue;
                TDQ *oq = dqb + r * p.dq.s1 + i;
                TDK *ok = dkb + r * p.dk.s1 + i;
                *oq = cg_round<TDQ>((first ? 0.f : cg_f32(*oq)) + DQ[r * LDQ + i]);
                *ok = cg_round<TDK>((first ? 0.f : cg_f32(*ok)) + DKs[r * LDQ + i]);
            }
        }
        __syncthreads(); // before the next head overwrites the buffers
    }
}
