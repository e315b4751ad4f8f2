#!/usr/bin/env python3
"""The gated delta rule's peers benchmark (issue 35 item 5): chunkgen's CPU path at 1 and
all threads beside fla's PyTorch references and a chunked JAX implementation, in one run,
with the FMA peak measured in the same run.

  chunkgen_cpu      tests/perf/gdr_cpu.c (cg_bench_gdr_cpu, run first by this script): the
                    chunked CPU path on the cells, 1 and all threads, and the bench's FMA
                    probe (tools/bench_probe.c) before and after; its device block and rows
                    are this file's.
  fla_naive_chunk   fla-core 0.6.0's naive_chunk_gated_delta_rule (pinned in
                    tests/python/refs/fla_gdr_ref.py), PyTorch, autograd for fwd_bwd;
  fla_naive_recurrent  its naive_recurrent_gated_delta_rule, the same way;
  jax_chunked       bench/gdr_jax_chunked.py (the chunked WY form in jnp, jitted; jax.grad).
The peers get q and k L2-normalised by the same formula as the op (autograd through it) and
repeated to the value heads (fla's naive references take one head count); they run on all
the threads (torch.set_num_threads, XLA's CPU client), and each row records wall and
process CPU time per call, since the machine is shared (gflops_cpu: FLOPs per CPU-second
times the threads, against the probe's per-CPU-second peak times the threads, as
cg_bench_gdr_cpu reports its own rows). rel_err: the peer's o against
chunkgen.torch.gdr's (float32) on the same inputs.

With --peer-heads N a cell with more value heads runs the peers on N of them (q/k heads
in the same ratio) and scales their times by HV / N (the work is linear in the heads):
the row says so (heads_run, scaled_by).

usage: bench/gdr_peers.py [--build DIR] [--out FILE] [--min-time S] [--peer-heads N] [--quick]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

CELLS = [(1, 4096, 16, 32, 128, 128), (4, 2048, 4, 4, 128, 128), (2, 1000, 2, 6, 48, 40)]


def timed(fn, min_time, max_reps=20):
    """Median wall and CPU ms per call of fn() (one warm-up call first; a first call longer
    than 2 min_time is the one sample: no compile to warm up is that long)."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    first = (1e3 * (time.perf_counter() - w), 1e3 * (time.process_time() - c))
    if first[0] > 2e3 * min_time:
        return first[0], first[1], 1
    walls, cpus, start = [], [], time.perf_counter()
    while len(walls) < max_reps and (not walls or time.perf_counter() - start < min_time):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(1e3 * (time.perf_counter() - w))
        cpus.append(1e3 * (time.process_time() - c))
    walls.sort(), cpus.sort()
    return walls[len(walls) // 2], cpus[len(cpus) // 2], len(walls)


def inputs(B, T, G, H, dk, dv, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    u = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)  # noqa: E731
    return dict(q=u(B, T, G, dk), k=u(B, T, G, dk), v=u(B, T, H, dv),
                g=rng.uniform(-0.5, -0.01, (B, T, H)).astype(np.float32),
                beta=rng.uniform(0, 1, (B, T, H)).astype(np.float32), h0=u(B, H, dk, dv))


def torch_peer(name, x, scale):
    import torch
    from refs.fla_gdr_ref import naive_chunk_gated_delta_rule, naive_recurrent_gated_delta_rule
    r = x["v"].shape[2] // x["q"].shape[2]

    def run(grad):
        t = {n: torch.from_numpy(a).requires_grad_(grad) for n, a in x.items()}
        q, k = (a / torch.sqrt((a * a).sum(-1, keepdim=True) + 1e-6) for a in (t["q"], t["k"]))
        q, k = q.repeat_interleave(r, 2), k.repeat_interleave(r, 2)
        if name == "fla_naive_chunk":
            o, hT = naive_chunk_gated_delta_rule(q, k, t["v"], t["g"], t["beta"], 64, scale, t["h0"], True)
        else:
            o, hT = naive_recurrent_gated_delta_rule(q, k, t["v"], t["beta"], t["g"], scale, t["h0"], True)
        if grad:
            ((o * o).sum() + hT.sum()).backward()
        return o

    return run


def jax_peer(x, scale):
    import jax
    import jax.numpy as jnp
    from gdr_jax_chunked import gdr_chunked
    r = x["v"].shape[2] // x["q"].shape[2]

    def f(q, k, v, g, beta, h0):
        q, k = (jnp.repeat(a / jnp.sqrt((a * a).sum(-1, keepdims=True) + 1e-6), r, axis=2) for a in (q, k))
        return gdr_chunked(q, k, v, g, beta, h0, scale)

    fwd = jax.jit(f)
    bwd = jax.jit(jax.grad(lambda *a: (f(*a)[0] ** 2).sum() + f(*a)[1].sum(), argnums=tuple(range(6))))
    args = [jnp.asarray(x[n]) for n in ("q", "k", "v", "g", "beta", "h0")]
    jax.block_until_ready((fwd(*args), bwd(*args)))  # compiled here: timed() may keep its first call

    def run(grad):
        if grad:
            out = bwd(*args)
            jax.block_until_ready(out)
            return None
        o = fwd(*args)[0]
        return jax.block_until_ready(o)

    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--peer-heads", type=int, default=4, help="value heads the peers run at most (times scaled)")
    ap.add_argument("--quick", action="store_true", help="T / 4 for every cell and the chunkgen bench's --quick")
    a = ap.parse_args()
    nproc = os.cpu_count() or 1

    # 1. chunkgen's rows and the FMA probe (the same run)
    with tempfile.TemporaryDirectory() as d:
        cg_json = os.path.join(d, "cg.json")
        cmd = [os.path.join(a.build, "cg_bench_gdr_cpu"), "--threads", f"1,{nproc}" if nproc > 1 else "1",
               "--out", cg_json] + (["--quick"] if a.quick else ["--min-time", str(a.min_time)])
        subprocess.run(cmd, check=True)
        doc = json.load(open(cg_json))
    peaks = doc["device"]["peaks_by_threads"][str(nproc)]
    peak = max(peaks["fma_peak_gflops_measured"], peaks.get("fma_peak_gflops_measured_after", 0))
    peak_cpu = max(peaks["fma_peak_gflops_measured_cpu"], peaks.get("fma_peak_gflops_measured_cpu_after", 0))

    import numpy as np
    import torch
    import chunkgen.torch as ct
    torch.set_num_threads(nproc)
    rows = []
    for (B, T, Gf, HV, dk, dv) in CELLS:
        cg = [r for r in doc["results"] if r["impl"] == "chunkgen_cpu" and r["dk"] == dk and r["dv"] == dv
              and r["batch"] == B and r["heads"] == HV and r["groups"] == Gf]
        if not cg:
            continue
        seq = cg[0]["seq"]  # (--quick: the bench's shorter T)
        hr = min(HV, a.peer_heads)
        gr = max(1, Gf * hr // HV)
        scaled = HV / hr
        x = inputs(B, seq, gr, hr, dk, dv)
        scale = dk ** -0.5
        o_ref = ct.gdr(*(torch.from_numpy(x[n]) for n in ("q", "k", "v", "g", "beta", "h0")),
                       use_qk_l2norm=True)[0].numpy()
        peers = {"fla_naive_chunk": torch_peer("fla_naive_chunk", x, scale),
                 "fla_naive_recurrent": torch_peer("fla_naive_recurrent", x, scale), "jax_chunked": jax_peer(x, scale)}
        for impl, run in peers.items():
            o = run(False)
            o = o.detach().numpy() if hasattr(o, "detach") else np.asarray(o)
            err = float(np.abs(o - o_ref).max() / np.abs(o_ref).max())
            for mode in ("fwd", "fwd_bwd"):
                flops = next(r["flops"] for r in cg if r["mode"] == mode)
                wall, cpu, n = timed((lambda: run(False)) if mode == "fwd" else (lambda: run(True)), a.min_time)
                wall, cpu = wall * scaled, cpu * scaled
                row = dict(cg[0], impl=impl, mode=mode, threads=nproc, samples=n, median_ms=wall, cpu_ms=cpu,
                           flops=flops, gflops=flops / wall / 1e6, gflops_cpu=flops / cpu / 1e6 * nproc,
                           frac_flops=flops / wall / 1e6 / peak, frac_flops_cpu=flops / cpu / 1e6 * nproc / peak_cpu,
                           rel_err=err, heads_run=hr, groups_run=gr, scaled_by=scaled, dispatch="")
                for f in ("q1_ms", "q3_ms", "inner", "frac_flops_nominal"):
                    row.pop(f, None)
                rows.append(row)
                print(f"{impl:20s} {mode:8s} [{B},{seq},{Gf},{HV},{dk},{dv}] {wall:10.1f} ms wall {cpu:10.1f} ms cpu"
                      f"  rel_err {err:.1e}" + (f"  (run on {hr} heads, x{scaled:g})" if scaled != 1 else ""),
                      flush=True)
    doc["results"] += rows
    doc["config"]["peers"] = ("fla-core 0.6.0 naive_chunk / naive_recurrent (tests/python/refs/fla_gdr_ref.py, "
                              "torch %s, %d threads) and bench/gdr_jax_chunked.py (jax %s, jit), q/k L2-normalised "
                              "and repeated to the value heads; fwd_bwd by autograd of sum(o^2) + sum(hT); peers on "
                              "at most %d value heads, times scaled by HV / heads_run") % (
        torch.__version__, nproc, __import__("jax").__version__, a.peer_heads)
    out = a.out or os.path.join(ROOT, "bench", "results", "gdr-peers.json")
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(out)


if __name__ == "__main__":
    main()
