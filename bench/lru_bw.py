#!/usr/bin/env python3
"""The LRU's CPU path (runtime/cpu/lru_cpu.c) against this machine's memory bandwidth: the
op is memory bound (3 flops per element), so its yardstick is bytes per second, not flops.

For [B, L, D] float32 tensors far larger than the caches, times (median of --repeats):
  lru_fwd   the forward's C call, outputs reused across calls (the binding's one C
            crossing, chunkgen._C.call, with an allocator that hands back the same
            tensors): reads a, b, x, writes y (16 bytes per element);
  lru_bwd   the backward's, likewise: reads a, b, x, dy, writes da, db, dx (28 bytes per
            element; the recompute of the states reads a, b, x again, from L2 per
            segment, not counted);
  torch_lru chunkgen.torch.lru as a user calls it: y and hT are new tensors each call
            (first touch of fresh pages: glibc maps allocations this large anew);
  triad     torch.addcmul(c, a, b, out=y): the same 16 bytes per element as lru_fwd, the
            machine's attainable streaming rate for that pattern (STREAM's triad);
  copy      y.copy_(x): 8 bytes per element;
and each rate in GB/s (1e9 bytes) and lru's fraction of triad's, per thread count.

usage: lru_bw.py --out OUT.json [--threads 1,2] [--shape 8,4096,1024] [--repeats 7]"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import time

import torch

import chunkgen
import chunkgen.torch as ct
from chunkgen import _C
from chunkgen._ops import OPS


def timed(f, repeats):
    f()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shape", default="8,4096,1024")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    B, L, D = (int(v) for v in args.shape.split(","))
    n = B * L * D
    g = torch.Generator().manual_seed(0)
    a = torch.rand(B, L, D, generator=g) * 0.5 + 0.5
    b, x, dy = (torch.randn(B, L, D, generator=g) for _ in range(3))
    y = torch.empty_like(x)
    kept = {}

    def c_call(op, ins):
        outs = []

        def alloc(shape, dtype=torch.float32):
            t = kept.get((op, len(outs)))
            if t is None:
                t = kept[(op, len(outs))] = torch.empty(shape, dtype=dtype)
            outs.append(t)
            return t
        return _C.call(OPS[op].index, ins, -1, 0, 0, None, False, alloc, ct._DTYPES, None, None)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((ln.split(":", 1)[1].strip() for ln in cpu.splitlines() if ln.startswith("Model name")), "")
    out = {"device": {"cpu": model, "machine": platform.machine(), "cpus": os.cpu_count(),
                      "torch": torch.__version__},
           "config": {"shape": [B, L, D], "dtype": "float32", "repeats": args.repeats}, "results": []}
    for th in (int(t) for t in args.threads.split(",")):
        chunkgen.set_threads(th)
        torch.set_num_threads(th)
        rows = {
            "lru_fwd": (16, lambda: c_call("lru_fwd", (a, b, x, None))),
            "lru_bwd": (28, lambda: c_call("lru_bwd", (a, b, x, None, dy, None))),
            "torch_lru": (16, lambda: ct.lru(a, b, x)),
            "triad": (16, lambda: torch.addcmul(x, a, b, out=y)),
            "copy": (8, lambda: y.copy_(x)),
        }
        res = {}
        for name, (per, f) in rows.items():
            s = timed(f, args.repeats)
            res[name] = {"median_ms": s * 1e3, "gb_s": per * n / s / 1e9, "bytes_per_elem": per}
        for name in ("lru_fwd", "lru_bwd", "torch_lru"):
            res[name]["of_triad"] = res[name]["gb_s"] / res["triad"]["gb_s"]
        out["results"].append({"threads": th, **res})
        print(th, {k: round(v["gb_s"], 2) for k, v in res.items()}, flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
