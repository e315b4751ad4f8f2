"""decode_peers.py -- the decode steps side by side with PyTorch references on the CPU
(issue #36 item 6), one token per entry at batch 1, 16 and 256, on bench/decode.c's cells:
  ssd_step   (Mamba-2 H 64, G 1, d_state 128, headdim 64) against mamba_ssm's
             selective_state_update_ref (the pinned copy, tests/python/refs/mamba_ref.py)
             on the same state [B, H, headdim, d_state];
  sscan_step (Mamba-1 D 5120, N 16) against selective_state_update_ref without heads;
  gdr_step   (Qwen3-Next G 16, H 32, dk = dv = 128) against a pure-PyTorch step of fla's
             recurrence (naive_recurrent_gated_delta_rule's loop body, L2 norm in, state
             gathered from and scattered back to the cache as vLLM's decode does; fla's
             reference is not pinned here).
chunkgen runs through chunkgen.torch.*_step (the custom-op path a model takes) on a cache
of B slots, slot b for entry b; the references on the batch's states. Bytes: each state
read and written once; the GB/s of each row and chunkgen's speedup over the reference.
Both at the same thread count (default 1: torch.set_num_threads, chunkgen.set_threads).
Wall and process CPU time per call (the machine may be shared).
Usage: python bench/decode_peers.py [--out FILE] [--threads N] [--min-time S] [--batches 1,16,256]"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from refs.mamba_ref import selective_state_update_ref  # noqa: E402

import chunkgen  # noqa: E402
import chunkgen.torch as cgt  # noqa: E402


def gdn_step_torch(q, k, v, g, beta, cache, idx, scale):
    """fla's recurrence, one token (q, k [B, 1, G, K]; v [B, 1, H, V]; g, beta [B, 1, H]):
    S = exp(g) S; u = beta (v - S^T k); S += k u^T; o = S^T (scale q); q, k L2-normalised."""
    H, G = v.shape[2], q.shape[2]
    q = F.normalize(q[:, 0].float(), dim=-1, eps=1e-3).repeat_interleave(H // G, 1) * scale  # [B, H, K]
    k = F.normalize(k[:, 0].float(), dim=-1, eps=1e-3).repeat_interleave(H // G, 1)
    S = cache[idx] * g[:, 0, :, None, None].exp()  # [B, H, K, V]
    u = beta[:, 0, :, None] * (v[:, 0] - torch.einsum("bhkv,bhk->bhv", S, k))
    S = S + k[..., None] * u[..., None, :]
    cache[idx] = S
    return torch.einsum("bhkv,bhk->bhv", S, q)[:, None]


def timed(fn, min_time):
    fn()  # warm
    walls, cpus, start = [], [], time.perf_counter()
    while len(walls) < 3 or time.perf_counter() - start < min_time:
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    walls.sort()
    return walls[len(walls) // 2], sum(cpus) / len(cpus)


def cells(B):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.rand(*s, generator=g) * 2 - 1  # noqa: E731
    idx = torch.arange(B, dtype=torch.int32)
    # ssd: Mamba-2, state [B, H, P, N] for mamba's ref, [B, H, N, P] (dk = N, dv = P) for chunkgen
    H, P, N = 64, 64, 128
    x, dt = r(B, H, P), torch.rand(B, H, generator=g)
    A = -torch.rand(H, generator=g) - 0.5
    Bm, Cm = r(B, 1, N), r(B, 1, N)
    st_m, st_c = r(B, H, P, N), r(B, H, N, P)
    A_full, dt_full = A[:, None, None].expand(H, P, N), dt[..., None].expand(B, H, P)
    yield ("ssd_step", "mamba2_h64_dk128_dv64", 4.0 * B * H * P * N,
           lambda: selective_state_update_ref(st_m, x, dt_full, A_full, Bm, Cm),
           lambda: cgt.ssd_step(Cm[:, None], Bm[:, None], (x * dt[..., None])[:, None], (dt * A)[:, None], st_c, idx))
    del st_m, st_c
    # sscan: Mamba-1, state [B, D, N]
    D, N1 = 5120, 16
    x1, d1, z1 = r(B, D), r(B, D), r(B, D)
    A1 = -torch.rand(D, N1, generator=g) * 1.9 - 0.1
    B1, C1, Dv, bias = r(B, N1), r(B, N1), r(D), -torch.rand(D, generator=g)
    s_m, s_c = r(B, D, N1), r(B, D, N1)
    yield ("sscan_step", "mamba1_d5120_n16", 4.0 * B * D * N1,
           lambda: selective_state_update_ref(s_m, x1, d1, A1, B1, C1, D=Dv, z=z1, dt_bias=bias, dt_softplus=True),
           lambda: cgt.sscan_step(x1[:, None], d1[:, None], A1, B1[:, None], C1[:, None], s_c, idx, D=Dv,
                                  z=z1[:, None], delta_bias=bias, delta_softplus=True))
    del s_m, s_c
    # gdr: Qwen3-Next's layer
    G, Hv, K, V = 16, 32, 128, 128
    q, k, v = r(B, 1, G, K), r(B, 1, G, K), r(B, 1, Hv, V)
    gg, beta = -0.3 * torch.rand(B, 1, Hv, generator=g), torch.rand(B, 1, Hv, generator=g)
    c_t, c_c = r(B, Hv, K, V), r(B, Hv, K, V)
    idx64 = idx.long()
    yield ("gdr_step", "qwen3next_g16_h32_d128", 4.0 * B * Hv * K * V,
           lambda: gdn_step_torch(q, k, v, gg, beta, c_t, idx64, K ** -0.5),
           lambda: cgt.gdr_step(q, k, v, gg, beta, c_c, idx, use_qk_l2norm=True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--batches", default="1,16,256")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    chunkgen.set_threads(a.threads)
    rows = []
    with torch.no_grad():
        for B in (int(b) for b in a.batches.split(",")):
            for op, cell, state, ref, ours in cells(B):
                row = {"op": op, "cell": cell, "batch": B, "threads": a.threads, "state_bytes": state}
                for name, fn in (("reference", ref), ("chunkgen", ours)):
                    wall, cpu = timed(fn, a.min_time)
                    row[name] = {"median_us": wall * 1e6, "cpu_us": cpu * 1e6, "gbs": 2 * state / wall / 1e9}
                row["speedup"] = row["reference"]["median_us"] / row["chunkgen"]["median_us"]
                rows.append(row)
                print(f"{op:10} B={B:<4} reference {row['reference']['median_us']:10.1f} us "
                      f"({row['reference']['gbs']:6.2f} GB/s)  chunkgen {row['chunkgen']['median_us']:10.1f} us "
                      f"({row['chunkgen']['gbs']:6.2f} GB/s)  x{row['speedup']:.1f}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"kind": "chunkgen-decode-peers", "chunkgen": chunkgen.__version__ if hasattr(chunkgen, "__version__")
                       else "", "torch": torch.__version__, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
