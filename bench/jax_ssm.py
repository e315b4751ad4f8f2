#!/usr/bin/env python3
"""The seeds' `ssm` suite `ssd` cell in JAX (the cell probjax's Pallas SSD refused): a
small Mamba-2 style model (chunkgen.jax_nn: G = 1, H = 1, dk = dv = 128 as that cell) at
batch 8, model_dim 128, tokens 1024 and 4096, `forward` and `train_step` (loss, grads and
an SGD update), float32, jit-compiled, with

  chunkgen_jax  the SSD as chunkgen.jax.ssd (XLA FFI custom call, chunkgen's backward);
  jax_chunked   the same model on the pure-JAX chunked SSD (bench/peers/jax_ssd_impls.py).

One process, the same threads for both (XLA's CPU thread pool is fixed when jax is
imported: --threads 1 turns off multi-threaded Eigen and pins the process to one CPU).
Rows in the seeds' schema: trace_s, compile_s (lower + compile), first_call_s, the
median and quartiles, XLA's temp/argument/output memory (chunkgen's own CPU scratch is
not XLA memory), params, finite.

usage: jax_ssm.py --out OUT.json [--threads 1] [--tokens 1024,4096] [--layers 2] [--cell ssd|lru]

--cell lru: the suite's `lru` cell instead (bench/jax_lru_model.py: RG-LRU style mixers,
d = model_dim channels), impls chunkgen_jax (chunkgen.jax.lru), jax_assoc
(jax.lax.associative_scan) and jax_scan (jax.lax.scan).
"""
import argparse
import json
import os
import platform
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tokens", default="1024,4096")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--model-dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=64, help="jax_chunked chunk size")
    ap.add_argument("--impls", default=None, help="default: every impl of the cell")
    ap.add_argument("--cell", default="ssd", choices=("ssd", "lru"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--max-call-s", type=float, default=30.0)
    ap.add_argument("--note", default="")
    args = ap.parse_args()

    if args.threads < os.cpu_count():  # before jax is imported
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=%s" %
                                   ("false" if args.threads == 1 else "true")).strip()
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:args.threads]))
    import jax
    import jax.numpy as jnp

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "peers"))
    sys.path.insert(0, here)
    import torch_peers as tp
    from jax_ssd_impls import ssd_chunk

    import chunkgen.jax as cj
    from chunkgen import jax_nn

    cj.set_threads(args.threads)
    cfg = jax_nn.Config(d_model=args.model_dim, heads=1, groups=1, dk=128, dv=128, layers=args.layers)

    def pure(q, k, v, la):
        B, _, H, dv = v.shape
        return ssd_chunk(q, k, v, la, jnp.zeros((B, H, q.shape[-1], dv), v.dtype), args.chunk)

    ssds = {"chunkgen_jax": None, "jax_chunked": pure}  # None: jax_nn's default, chunkgen.jax.ssd
    init, apply = (lambda key: jax_nn.init(key, cfg)), (lambda p, x, impl: jax_nn.apply(p, x, cfg, impl))
    if args.cell == "lru":
        import jax_lru_model as lm

        ssds = {"chunkgen_jax": None, "jax_assoc": lm.jax_assoc_lru, "jax_scan": lm.jax_scan_lru}
        init = lambda key: lm.init(key, args.model_dim, args.layers)  # noqa: E731
        apply = lm.apply
    args.impls = args.impls or ",".join(ssds)
    out = {"device": {"backend": "cpu", "python": platform.python_version(), "jax": jax.__version__,
                      "threads": args.threads, "xla_flags": os.environ.get("XLA_FLAGS", ""),
                      "cpus": sorted(os.sched_getaffinity(0)), "cpu": platform.processor() or platform.machine()},
           "config": {"suite": "ssm", "cell": args.cell, "batch": args.batch, "model_dim": args.model_dim,
                      "layers": args.layers, "groups": 1, "heads": 1, "dk": 128, "dv": 128, "chunk": args.chunk,
                      "tokens": [int(t) for t in args.tokens.split(",")], "impls": args.impls.split(","),
                      "repeats": args.repeats, "min_time_s": args.min_time, "note": args.note},
           "results": []}
    params = init(jax.random.key(0))
    n_params = sum(int(a.size) for a in jax.tree.leaves(params))
    for T in out["config"]["tokens"]:
        kx, kt = jax.random.split(jax.random.key(T))
        x = jax.random.normal(kx, (args.batch, T, args.model_dim), jnp.float32)
        target = jax.random.normal(kt, (args.batch, T, args.model_dim), jnp.float32)
        for impl in out["config"]["impls"]:
            ssd = ssds[impl]
            fwd = lambda p, x, t: apply(p, x, ssd)  # noqa: E731

            def train_step(p, x, t):
                loss, g = jax.value_and_grad(lambda p: jnp.mean((apply(p, x, ssd) - t) ** 2))(p)
                return jax.tree.map(lambda a, b: a - 1e-3 * b, p, g), loss

            for op, f in (("forward", fwd), ("train_step", train_step)):
                row = {"suite": "ssm", "cell": args.cell, "impl": impl, "dtype": "float32", "tokens": T,
                       "batch": args.batch, "model_dim": args.model_dim, "layers": args.layers, "op": op,
                       "params": n_params, "threads": args.threads}
                out["results"].append(row)
                print("jax ssm: %s %s tokens %d" % (impl, op, T), file=sys.stderr, flush=True)
                try:
                    t0 = time.perf_counter()
                    traced = jax.jit(f).trace(params, x, target)
                    row["trace_s"] = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    compiled = traced.lower().compile()
                    row["compile_s"] = time.perf_counter() - t0
                    m = compiled.memory_analysis()
                    if m is not None:
                        row.update(xla_temp_mb=m.temp_size_in_bytes / 2**20, xla_arg_mb=m.argument_size_in_bytes / 2**20,
                                   xla_out_mb=m.output_size_in_bytes / 2**20)
                    res = {}

                    def call():
                        res["r"] = jax.block_until_ready(compiled(params, x, target))

                    meas = tp.measure(call, lambda: None, args.repeats, args.min_time, 1, args.max_call_s)
                    meas["first_call_s"] = meas.pop("compile_s")  # compiled above: the first call is a run
                    row.update(meas)
                    row["finite"] = all(bool(jnp.isfinite(a).all()) for a in jax.tree.leaves(res["r"]))
                    print("jax ssm:   median %.1f ms" % row["median_ms"], file=sys.stderr, flush=True)
                except Exception as e:  # a row that cannot run says why
                    row["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
                    print("jax ssm:   %s" % row["error"], file=sys.stderr, flush=True)
                tp.write_json(args.out, out)
    tp.write_json(args.out, out)


if __name__ == "__main__":
    main()
