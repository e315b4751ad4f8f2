#!/usr/bin/env python3
"""varlen.py -- packed (cu_seqlens) against padded batches on the CPU backend (issue #16).

A realistic length mix: lengths drawn uniformly in [64, 4096] (fixed seed) until they sum to
about 16k tokens (the last one cut so that the total is --tokens exactly, at least 64). The
same sequences run
  - packed: one call, B = 1, T = sum of the lengths, cu_seqlens (states per sequence);
  - padded: one call, B = N, T = the longest length, the tail of each row zero.
(The padded call's hT is not each sequence's final state for the shorter rows: padding with
log_alpha = 0 keeps the state but still costs the tail's work; what is timed is the work.)
Ops: SSD forward and forward + backward (H, dk, dv as given; G = 1), selective-scan forward
and forward + backward (D, N as given, G = 1).
Each repetition times the packed call then the padded call (alternating which goes first),
by the wall clock and by the process CPU-time clock; medians over --reps. Memory: the bytes
of every tensor of the call(s) (inputs and outputs, float32: what the call moves at least
once), and cg_workspace_size of the call (the library's scratch; 0 on the CPU path when it
needs none).

usage: python bench/varlen.py [--tokens 16384] [--reps 5] [--threads 1] [--out FILE]
Writes bench/results/varlen-<cpu>-<isa>-<threads>t-<date>-<commit>.json (or --out).
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import time

import sys

import numpy as np

import chunkgen
from chunkgen import _C
from chunkgen._ops import OPS, backend_index

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_overhead import cpu_model  # noqa: E402


def draw_lengths(tokens, lo, hi, seed):
    rng = np.random.default_rng(seed)
    lens = []
    while sum(lens) < tokens:
        lens.append(int(rng.integers(lo, hi + 1)))
    excess = sum(lens) - tokens
    if lens[-1] - excess >= lo:
        lens[-1] -= excess
    else:  # the last one would be too short: spread the cut over the others
        lens.pop()
        short = tokens - sum(lens)
        lens[-1] += short
    return lens


def ssd_inputs(B, T, H, dk, dv, N, rng, lens=None):
    f = lambda *s: rng.standard_normal(s, dtype=np.float32)  # noqa: E731
    t = dict(q=f(B, T, 1, dk) / np.float32(dk ** 0.5), k=f(B, T, 1, dk) / np.float32(dk ** 0.5), v=f(B, T, H, dv),
             log_alpha=-rng.random((B, T, H), dtype=np.float32) * np.float32(0.5), h0=f(N, H, dk, dv))
    if lens is not None:  # padded rows: zero tail
        for b, L in enumerate(lens):
            for n in ("q", "k", "v", "log_alpha"):
                t[n][b, L:] = 0
    return t


def sscan_inputs(B, L, D, Ns, N, rng, lens=None):
    f = lambda *s: rng.standard_normal(s, dtype=np.float32)  # noqa: E731
    u = lambda *s: rng.random(s, dtype=np.float32)  # noqa: E731
    t = dict(x=f(B, L, D), delta=u(B, L, D) * np.float32(0.5), A=-u(D, Ns) - np.float32(0.2), B=f(B, L, Ns),
             C=f(B, L, Ns), D=f(D), z=f(B, L, D), delta_bias=u(D) * np.float32(0.2), h0=f(N, D, Ns))
    if lens is not None:
        for b, n_ in enumerate(lens):
            for n in ("x", "delta", "B", "C", "z"):
                t[n][b, n_:] = 0
    return t


def nbytes(arrays):
    return int(sum(a.nbytes for a in arrays if a is not None))


def workspace(op, given, outs, flag, cu):
    """cg_workspace_size of the call on the CPU backend (the library's scratch)."""
    info = OPS[op]
    arrays = dict(given)
    arrays.update(zip(info.outputs, outs))
    tensors = tuple(arrays.get(n) for n in info.fields)
    return int(_C.workspace_size(info.index, tensors, 0 if op.startswith("sscan") else flag,
                                 backend_index("cpu"), None, None, None, 0, False, cu))


def make_calls(op, lens, args):
    """(packed, padded): each a list of (op, inputs, flag, cu) calls, the forward (and the
    backward, with mode fwd_bwd)."""
    N, T, Tmax = len(lens), sum(lens), max(lens)
    rng = np.random.default_rng(7)
    cu = np.array([0] + list(np.cumsum(lens)), dtype=np.int64)
    fam, mode = op.split(":")
    if fam == "ssd":
        p = ssd_inputs(1, T, args.H, args.dk, args.dv, N, rng)
        q = ssd_inputs(N, Tmax, args.H, args.dk, args.dv, N, rng, lens)
        douts = (rng.standard_normal(p["v"].shape, dtype=np.float32), rng.standard_normal(q["v"].shape, dtype=np.float32))
        extra = lambda t, do: dict(t, dout=do, dhT=t["h0"])  # noqa: E731
    else:
        p = sscan_inputs(1, T, args.D, args.N, N, rng)
        q = sscan_inputs(N, Tmax, args.D, args.N, N, rng, lens)
        douts = (rng.standard_normal(p["x"].shape, dtype=np.float32), rng.standard_normal(q["x"].shape, dtype=np.float32))
        extra = lambda t, do: dict(t, dy=do, dhT=t["h0"])  # noqa: E731
    calls = []
    for t, do, c in ((p, douts[0], cu), (q, douts[1], None)):
        seq = [(f"{fam}_fwd", t, c)]
        if mode == "fwd_bwd":
            seq.append((f"{fam}_bwd", extra(t, do), c))
        calls.append(seq)
    return calls


def run_calls(seq):
    outs = []
    for op, given, cu in seq:
        outs.append(chunkgen._numpy.run(op, given, 0, "cpu", None, False, cu))
    return outs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--lo", type=int, default=64)
    ap.add_argument("--hi", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--H", type=int, default=8)
    ap.add_argument("--dk", type=int, default=64)
    ap.add_argument("--dv", type=int, default=64)
    ap.add_argument("--D", type=int, default=256)
    ap.add_argument("--N", type=int, default=16)
    ap.add_argument("--ops", default="ssd:fwd,ssd:fwd_bwd,sscan:fwd,sscan:fwd_bwd")
    ap.add_argument("--out")
    args = ap.parse_args()
    chunkgen.set_threads(args.threads)
    lens = draw_lengths(args.tokens, args.lo, args.hi, args.seed)
    load0 = os.getloadavg()
    rows = []
    isa = _C.cpu_isa()
    for op in args.ops.split(","):
        packed, padded = make_calls(op, lens, args)
        run_calls(packed)  # warm up
        run_calls(padded)
        wall = {"packed": [], "padded": []}
        cpu = {"packed": [], "padded": []}
        for r in range(args.reps):
            order = (("packed", packed), ("padded", padded)) if r % 2 == 0 else (("padded", padded), ("packed", packed))
            for name, seq in order:
                w0, c0 = time.perf_counter(), time.process_time()
                run_calls(seq)
                wall[name].append(time.perf_counter() - w0)
                cpu[name].append(time.process_time() - c0)
        res = {}
        for name, seq in (("packed", packed), ("padded", padded)):
            outs = run_calls(seq)
            moved = sum(nbytes(list(g.values())) + nbytes(o) for (_, g, _), o in zip(seq, outs))
            ws = max(workspace(o_, g, out, 0, c) for (o_, g, c), out in zip(seq, outs))
            res[name] = dict(median_ms=1e3 * statistics.median(wall[name]), cpu_ms=1e3 * statistics.median(cpu[name]),
                             bytes=moved, workspace_bytes=ws)
        fam, mode = op.split(":")
        for name in ("packed", "padded"):
            T = sum(lens) if name == "packed" else max(lens)
            B = 1 if name == "packed" else len(lens)
            row = dict(impl="chunkgen_cpu", op=fam, mode=mode, batch=name, B=B, T=T, tokens=B * T,
                       reps=args.reps, **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in res[name].items()})
            for k in ("median_ms", "cpu_ms", "bytes"):
                row[f"{k.split('_')[0]}_ratio_vs_packed"] = round(res[name][k] / res["packed"][k], 3)
            rows.append(row)
            print(json.dumps(row))
    dev = dict(cpu_model=cpu_model(), cpu_isa=isa, threads=args.threads, cores=os.cpu_count(),
               loadavg_start=[round(x, 2) for x in load0], loadavg_end=[round(x, 2) for x in os.getloadavg()],
               os=f"{platform.system()} {platform.release()} {platform.machine()}", chunkgen=chunkgen._C.version)
    problem = dict(lengths=lens, n_seq=len(lens), tokens=sum(lens), max_len=max(lens), seed=args.seed,
                   lo=args.lo, hi=args.hi, ssd=dict(G=1, H=args.H, dk=args.dk, dv=args.dv),
                   sscan=dict(G=1, D=args.D, N=args.N), dtype="float32")
    doc = dict(schema=1, kind="chunkgen-varlen", device=dev, problem=problem,
               method=("per repetition the packed call(s) then the padded call(s), order alternating; medians of "
                       f"{args.reps} by wall clock and process CPU time; bytes: every input and output tensor of the "
                       "call(s) (float32); workspace_bytes: cg_workspace_size (the library's scratch)"),
               rows=rows)
    out = args.out
    if not out:
        tag = re.sub(r"[^A-Za-z0-9]+", "-", dev["cpu_model"]).strip("-")[:24]
        here = os.path.dirname(os.path.abspath(__file__))
        try:
            commit = "-" + subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True,
                                          text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = ""
        out = os.path.join(here, "results", f"varlen-{tag}-{isa}-{args.threads}t-{datetime.date.today():%Y%m%d}"
                           f"{commit}.json")
    with open(out, "w") as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
