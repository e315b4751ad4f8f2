#!/usr/bin/env python3
"""cp_gdr_cost.py -- what context parallelism adds to the gated delta rule's local pass,
measured on this machine's CPU (chunkgen.torch.gdr, the cpu backend, one thread) against
the FLOP counts of MATH_GDN.md 2.5 / 3.2 (docs/context_parallel.md, "The gated delta rule").

Each device runs the op once with dv + dk value columns (v padded with zeros, the state's
extra columns starting at the identity): that one call gives the outputs, the segment's
state N_r, its transition M_r and the correction's P_t. Timed here, forward and forward +
backward, at dv and at dv + dk, and the alternatives:
  correction (implemented): op(dv + dk) + o_t += P_t S  (2 dk dv per token fwd, 4 dk dv bwd)
  rerun:                    op(dv + dk) for (M, N), then op(dv) again from S (fwd and bwd)

usage: python bench/cp_gdr_cost.py [--T 8192] [--d 128] [--reps 5] [--out FILE]
Writes bench/results/cp-gdr-cost-<date>.json and prints the ratios.
"""
import argparse
import datetime
import json
import os
import time


def flops(K, V, C, fwd_only):
    f = 6 * K * V + 6 * C * K + 4 * C * V + C * C / 3  # MATH_GDN 2.5, per token and value head
    b = 16 * K * V + 18 * C * K + 10 * C * V + 4 * C * C  # 3.2
    return f if fwd_only else f + b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=8192)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--H", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out")
    a = ap.parse_args()
    import torch

    import chunkgen
    import chunkgen.torch as cgt

    chunkgen.set_threads(1)
    torch.set_num_threads(1)
    T, K, H = a.T, a.d, a.H
    V = K
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, T, 1, K, generator=gen)
    k = torch.randn(1, T, 1, K, generator=gen)
    g = -torch.rand(1, T, H, generator=gen) * 0.05
    beta = torch.rand(1, T, H, generator=gen)

    def run(dv, backward):
        v = torch.randn(1, T, H, dv, generator=gen)
        h0 = torch.zeros(1, H, K, dv)
        ins = [t.clone().requires_grad_(backward) for t in (q, k, v, g, beta, h0)]
        t0 = time.perf_counter()
        o, hT = cgt.gdr(*ins, use_qk_l2norm=True)
        if backward:
            (o.sum() + hT.sum()).backward()
        return time.perf_counter() - t0

    def corr(backward):
        P = torch.randn(1, T, H, K, generator=gen, requires_grad=backward)
        S = torch.randn(1, H, K, V, generator=gen, requires_grad=backward)
        t0 = time.perf_counter()
        c = torch.einsum("bthk,bhkv->bthv", P, S)
        if backward:
            c.sum().backward()
        return time.perf_counter() - t0

    cases = {"op_dv": lambda b: run(V, b), "op_dv_plus_dk": lambda b: run(V + K, b), "correction": corr}
    best = {}
    for bwd in (False, True):
        for _ in range(a.reps):  # interleaved, best of reps (the machine is shared)
            for name, fn in cases.items():
                t = fn(bwd)
                key = f"{name}_{'fwd_bwd' if bwd else 'fwd'}_s"
                best[key] = min(best.get(key, t), t)
    res = {"date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
           "shape": {"B": 1, "T": T, "G": 1, "H": H, "dk": K, "dv": V, "chunk": 64}, "threads": 1,
           "machine_note": "shared 2-core machine under load: best of interleaved reps", "seconds": best}
    for w in ("fwd", "fwd_bwd"):
        base = best[f"op_dv_{w}_s"]
        ext = best[f"op_dv_plus_dk_{w}_s"]
        res[f"{w}_ratio_correction_scheme"] = (ext + best[f"correction_{w}_s"]) / base
        res[f"{w}_ratio_rerun_scheme"] = (ext + base) / base
        res[f"{w}_ratio_extended_call_flops"] = flops(K, 2 * V, 64, w == "fwd") / flops(K, V, 64, w == "fwd")
        res[f"{w}_ratio_extended_call_measured"] = ext / base
    day = datetime.date.today().strftime("%Y%m%d")
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"cp-gdr-cost-{day}.json")
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    for k, v in res.items():
        if "ratio" in k:
            print(f"{k}: {v:.2f}")
    print("wrote", out)


if __name__ == "__main__":
    main()
