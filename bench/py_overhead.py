#!/usr/bin/env python3
"""py_overhead.py -- per-call overhead of the Python binding over the bare C call.

Times chunkgen.ssd (numpy: allocation of o and hT, argument checks, the C call with the
GIL released), chunkgen.torch.ssd without grad (the eager path: the op's implementation
directly), with inputs requiring grad (through an autograd.Function: the graph node is
built, the backward not run) and torch.ops.chunkgen.ssd_fwd (the registered custom op
through the dispatcher: what torch.compile'd graphs call) on
a T=1, d=8 SSD problem (B=1, G=H=1, dk=dv=8, one CPU thread), against the same C call
timed inside the extension (chunkgen._C.bench: a C loop around cg_ssd_fwd on the same
arrays). overhead = binding time - C time; target: at most 15 us.
Each figure is the best of several rounds (a shared machine only ever makes a round
slower), by the wall clock and by the process CPU-time clock (the time this process
itself spent; the fairer figure on a loaded machine). Writes JSON to bench/results/py-overhead-<cpu>-<date>.json (or --out).

usage: python bench/py_overhead.py [--rounds 7] [--calls 2000] [--out FILE]
"""
import argparse
import datetime
import json
import os
import platform
import re
import time

import numpy as np

import chunkgen
from chunkgen import _C
from chunkgen._ops import OPS


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def best_per_call(fn, calls, rounds):
    """(wall, cpu) seconds per call: the best round of each clock."""
    fn()
    wall = cpu = float("inf")
    for _ in range(rounds):
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            fn()
        wall = min(wall, (time.perf_counter() - w0) / calls)
        cpu = min(cpu, (time.process_time() - c0) / calls)
    return wall, cpu


def best_c(calls, rounds, run_args):
    r = [_C.bench(calls, *run_args) for _ in range(rounds)]
    return min(x[0] for x in r), min(x[1] for x in r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    chunkgen.set_threads(1)
    rng = np.random.default_rng(0)
    B, T, G, H, d = 1, 1, 1, 1, 8
    q, k = (rng.standard_normal((B, T, G, d)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((B, T, H, d)).astype(np.float32)
    la = -np.abs(rng.standard_normal((B, T, H))).astype(np.float32)
    o, hT = np.empty_like(v), np.empty((B, H, d, d), np.float32)

    info = OPS["ssd_fwd"]
    arrays = dict(q=q, k=k, v=v, log_alpha=la, h0=None, o=o, hT=hT)
    tensors = tuple(arrays[n] for n in info.fields)
    run_args = (info.index, tensors, 0, 0, None, None, None, 0, False)
    c = best_c(a.calls, a.rounds, run_args)
    rows = {}

    def record(name, t):
        for clock, i in (("wall", 0), ("cpu", 1)):
            rows[f"{name}_call_us_{clock}"] = t[i] * 1e6
            rows[f"{name}_overhead_us_{clock}"] = (t[i] - c[i]) * 1e6

    rows.update(c_call_us_wall=c[0] * 1e6, c_call_us_cpu=c[1] * 1e6)
    record("numpy", best_per_call(lambda: chunkgen.ssd(q, k, v, la), a.calls, a.rounds))
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        import torch

        import chunkgen.torch as ct

        torch.set_num_threads(1)
        tq, tk, tv, tla = (torch.from_numpy(x) for x in (q, k, v, la))
        with torch.no_grad():
            record("torch", best_per_call(lambda: ct.ssd(tq, tk, tv, tla), a.calls, a.rounds))
            # the registered custom op through the dispatcher (what torch.compile'd code runs)
            record("torch_op", best_per_call(lambda: torch.ops.chunkgen.ssd_fwd(tq, tk, tv, tla, None, "token"),
                                             max(1, a.calls // 4), a.rounds))
        # with autograd: the forward of a training step (the graph is built, not run)
        gq, gk, gv, gla = (x.clone().requires_grad_() for x in (tq, tk, tv, tla))
        record("torch_grad", best_per_call(lambda: ct.ssd(gq, gk, gv, gla), a.calls, a.rounds))
        versions["torch"] = torch.__version__
    except ImportError:
        pass

    doc = {
        "schema": 1,
        "kind": "chunkgen-py-overhead",
        "device": {"backend": "cpu", "cpu": cpu_model(), "cores": os.cpu_count(), "threads": 1,
                   "os": f"{platform.system()} {platform.release()} {platform.machine()}",
                   "chunkgen": chunkgen.__version__, **versions},
        "problem": {"op": "ssd_fwd", "B": B, "T": T, "G": G, "H": H, "dk": d, "dv": d, "dtype": "float32"},
        "method": f"best of {a.rounds} rounds of {a.calls} calls, wall clock and process CPU time; C time from "
                  "chunkgen._C.bench (a C loop around cg_ssd_fwd on the same arrays); overhead = binding time - C time",
        "dispatch": chunkgen.last_dispatch(),
        "loadavg_1min": os.getloadavg()[0],
        "target_overhead_us": 15.0,
        "results": {k: round(v, 3) for k, v in rows.items()},
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    out = a.out
    if out is None:
        tag = re.sub(r"[^A-Za-z0-9]+", "-", doc["device"]["cpu"]).strip("-")
        day = datetime.date.today().strftime("%Y%m%d")
        out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"py-overhead-{tag}-{day}.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(json.dumps(doc["results"]), "->", out)


if __name__ == "__main__":
    main()
