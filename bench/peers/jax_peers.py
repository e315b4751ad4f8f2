#!/usr/bin/env python3
"""JAX peers for `chunkgen bench` (CPU), measured on the same SSD cells and threads.

  jax_scan     SSD as a plain jax.lax.scan over the tokens (state [B, H, dk, dv] carried,
               S_t = a_t S_{t-1} + k_t^T v_t, o_t = q_t S_t), jit-compiled;
  jax_chunked  SSD by the chunked algorithm in jax.numpy: per chunk the masked Q K^T times
               V, plus the entering state read by Q; a lax.scan over the chunks passes the
               state. jit-compiled.
  chunkgen_jax chunkgen.jax.ssd (the XLA FFI custom call; its backward is chunkgen's),
               jit-compiled like the others; opt-in (--impls), it needs the chunkgen package
               with chunkgen._jax_ffi importable (PYTHONPATH or the venv). Its threads are
               set to --threads (chunkgen.jax.set_threads).
On selective-scan cells (--sscan-impls, bench/peers/jax_sscan_impls.py):
  jax_sscan_scan     a plain lax.scan over the tokens;
  jax_sscan_chunked  the chunked CPU form of seed 004 (probjax's chunked CPU path; chunk
                     --sscan-chunk), written here as the issue allows.
Each row also gets XLA's compiled-memory figures (xla_temp_mb, xla_arg_mb, xla_out_mb from
memory_analysis(); chunkgen's own CPU scratch is not XLA memory and is not in them).
fwd_bwd is jax.vjp of the forward with the output gradient do (as the torch peers'
o.backward(do)), jit-compiled together. Inputs, timing rules, rel_err against chunkgen's
float64 reference and the roofline fields are torch_peers.py's (imported from it).

XLA's CPU thread pool is set when jax is imported, so one process measures one thread
count: --threads 1 turns off XLA's multi-threaded Eigen and pins the process to one CPU.

usage: jax_peers.py --matrix CHUNKGEN.json --out PEERS.json [--chunkgen PATH] [--threads N]
                    [--impls jax_scan,jax_chunked] [--chunk 64]
"""
import argparse
import json
import os
import platform
import shutil
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--matrix", required=True, help="JSON written by chunkgen bench")
    ap.add_argument("--out", required=True)
    ap.add_argument("--chunkgen", help="chunkgen binary, for the float64 reference")
    ap.add_argument("--threads", type=int, help="default: the matrix's")
    ap.add_argument("--impls", default="jax_scan,jax_chunked")
    ap.add_argument("--chunk", type=int, default=64, help="jax_chunked chunk size")
    ap.add_argument("--sscan-impls", default="jax_sscan_scan,jax_sscan_chunked", help="on selective-scan cells")
    ap.add_argument("--sscan-chunk", type=int, default=16, help="jax_sscan_chunked chunk size")
    ap.add_argument("--suffix", default="", help="appended to the impl names (e.g. _1t)")
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--min-time", type=float)
    ap.add_argument("--ref-seq", type=int)
    ap.add_argument("--max-call-s", type=float, default=30.0)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()

    doc = json.load(open(args.matrix))
    cfg = doc.get("config", {})
    threads = args.threads or cfg.get("threads") or os.cpu_count()
    if threads < os.cpu_count():  # before jax is imported
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=%s" % ("false" if threads == 1 else "true")).strip()
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:threads]))
    import numpy as np
    import torch
    import jax
    import jax.numpy as jnp

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_peers as tp

    jax.config.update("jax_enable_x64", False)

    from jax_ssd_impls import ssd_chunk, ssd_scan
    from jax_sscan_impls import sscan_chunked, sscan_scan

    def make_fn(impl, bwd, chunk):
        if impl in ("jax_sscan_scan", "jax_sscan_chunked"):
            fwd = sscan_scan if impl == "jax_sscan_scan" else (
                lambda *a: sscan_chunked(*a, chunk=args.sscan_chunk))  # noqa: E731
            if not bwd:
                return jax.jit(fwd)

            def fbs(*a):
                (y, hT), vjp = jax.vjp(fwd, *a[:-1])
                return (y, hT), vjp((a[-1], jnp.zeros_like(hT)))

            return jax.jit(fbs)
        if impl == "chunkgen_jax":
            import chunkgen.jax as cj

            cj.set_threads(threads)
            fwd = lambda q, k, v, la, h0: cj.ssd(q, k, v, la, h0, layout="token")  # noqa: E731
        elif impl == "jax_scan":
            fwd = ssd_scan
        else:
            fwd = lambda q, k, v, la, h0: ssd_chunk(q, k, v, la, h0, chunk)  # noqa: E731
        if not bwd:
            return jax.jit(fwd)

        def fb(q, k, v, la, h0, do):
            (o, hT), vjp = jax.vjp(fwd, q, k, v, la, h0)
            g = vjp((do, jnp.zeros_like(hT)))
            return (o, hT), g

        return jax.jit(fb)

    def arg_names(op, bwd):
        if op == "sscan":
            return tp.SSCAN_GRADS + (["dy"] if bwd else [])
        return ["q", "k", "v", "log_alpha", "h0"] + (["do"] if bwd else [])

    def call_of(fn, ins, bwd, op="ssd"):
        names = arg_names(op, bwd)
        xs = [jnp.asarray(ins[n].detach().cpu().numpy()) for n in names]

        def call():
            r = fn(*xs)
            jax.block_until_ready(r)
            return r

        call.xs = xs
        return call

    def xla_memory(fn, xs):
        m = fn.lower(*xs).compile().memory_analysis()
        if m is None:
            return {}
        return {"xla_temp_mb": m.temp_size_in_bytes / 2**20, "xla_arg_mb": m.argument_size_in_bytes / 2**20,
                "xla_out_mb": m.output_size_in_bytes / 2**20}

    repeats = args.repeats or cfg.get("repeats", 5)
    min_time = args.min_time if args.min_time is not None else cfg.get("min_time_s", 1.0)
    warmup = cfg.get("warmup", 1)
    ref_seq = args.ref_seq or cfg.get("ref_seq", 2048)
    impls = [i for i in args.impls.split(",") if i]
    ddev = doc.get("device", {})
    peak = max([x for x in (ddev.get("fma_peak_gflops_measured"), ddev.get("fma_peak_gflops_nominal")) if x] or [0])
    bw = ddev.get("mem_bw_gbs_measured")
    device = {"backend": "cpu", "python": platform.python_version(), "jax": jax.__version__, "threads": threads,
              "xla_flags": os.environ.get("XLA_FLAGS", ""), "cpus": sorted(os.sched_getaffinity(0))}
    note = ("jax_scan: lax.scan over the tokens; jax_chunked: chunked SSD in jax.numpy with a lax.scan over the "
            "chunks; chunkgen_jax: chunkgen.jax.ssd (XLA FFI); all jit-compiled (compile_s is the first call), "
            "fwd_bwd by jax.vjp; inputs drawn as torch_peers.py draws them")
    out, work, gen = tp.begin_run(device, impls, args, threads, repeats, min_time, ref_seq, note, "chunkgen-jax-peers-")

    def flush():
        tp.write_json(args.out, out)

    def set_rel_err(row, ref, outs, grads, tc, seq):
        """rel_err of the outputs (and of the named grads, when given) against the reference."""
        T = lambda x: torch.from_numpy(np.asarray(x))  # noqa: E731
        ro = {n: tp.rel_err(T(x), ref[n]) for n, x in outs.items()}
        rg = None if grads is None else {n: tp.rel_err(T(g), ref["d" + n]) for n, g in grads if "d" + n in ref}
        tp.set_rel_err(row, ro, rg, tc, seq)

    def sscan_row(impl, cell, ins, bwd):
        name = impl + args.suffix
        row = {"impl": name, "op": "sscan", "mode": cell["mode"], "config": cell["config"],
               "shape": {k: cell[k] for k in ("batch", "seq", "dim", "state")}, "threads": threads}
        if impl == "jax_sscan_chunked":
            row["chunk"] = args.sscan_chunk
        out["results"].append(row)
        print("jax peers: %s sscan %s seq %d %s" % (name, cell["config"], cell["seq"], cell["mode"]),
              file=sys.stderr, flush=True)
        try:
            fn = make_fn(impl, bwd, args.chunk)
            call = call_of(fn, ins, bwd, "sscan")
            m = tp.measure(call, lambda: None, repeats, min_time, warmup, args.max_call_s)
            row.update(m)
            row.update(xla_memory(fn, call.xs))
            e = cell["batch"] * cell["seq"] * cell["dim"]
            row["ns_per_element"] = m["median_ms"] * 1e6 / e
            row["peak_mb"] = tp.tensor_bytes(row["shape"], bwd) / 2**20
            tp.add_roofline(row, tp.sscan_flops(row["shape"], bwd), tp.cell_bytes(row["shape"], bwd), peak, bw)
            if args.no_check:
                return
            tc = min(cell["seq"], ref_seq)
            cut = tp.cut_inputs(cell, ins, tc)
            ref, why = tp.reference(args.chunkgen, cell, cut, os.path.join(work, "ref"))
            if ref is None:
                row.update(rel_err=None, rel_err_note=why)
                return
            r = make_fn(impl, bwd, args.chunk)(*[jnp.asarray(cut[n].numpy()) for n in arg_names("sscan", bwd)])
            (y, hT), grads = (r if bwd else (r, None))
            set_rel_err(row, ref, {"y": y, "hT": hT}, zip(tp.SSCAN_GRADS, grads) if bwd else None, tc, cell["seq"])
        except Exception as ex:  # a peer that cannot run says why in its row
            row["error"] = tp.row_error(ex)
        finally:
            tp.log_row("jax peers", row)
            flush()

    try:
        sscan_impls = [i for i in args.sscan_impls.split(",") if i]
        for cell in tp.cells_of(doc):
            bwd = cell["mode"] == "fwd_bwd"
            ins = tp.make_inputs(cell, gen, torch.device("cpu"))
            if cell["op"] == "sscan":
                for impl in sscan_impls:
                    sscan_row(impl, cell, ins, bwd)
                del ins
                continue
            ref_cache = {}
            for impl in impls:
                name = impl + args.suffix
                row = {"impl": name, "op": "ssd", "mode": cell["mode"], "config": cell["config"]}
                row.update({k: cell[k] for k in ("batch", "groups", "heads", "seq", "dk", "dv")})
                row.update(layout="token", chunk=args.chunk, threads=threads)
                out["results"].append(row)
                print("jax peers: %s ssd %s seq %d %s" % (name, cell["config"], cell["seq"], cell["mode"]),
                      file=sys.stderr, flush=True)
                try:
                    fn = make_fn(impl, bwd, args.chunk)
                    call = call_of(fn, ins, bwd)
                    m = tp.measure(call, lambda: None, repeats, min_time, warmup, args.max_call_s)
                    row.update(m)
                    row.update(xla_memory(fn, call.xs))
                    row["peak_mb"] = tp.tensor_bytes(row, bwd) / 2**20 + (m.get("workspace_mb") or 0)
                    tp.add_roofline(row, tp.ssd_flops(row, args.chunk, bwd), tp.cell_bytes(row, bwd), peak, bw)
                    if args.no_check:
                        continue
                    tc = min(cell["seq"], ref_seq)
                    cut = tp.cut_inputs(cell, ins, tc)
                    if "ref" not in ref_cache:
                        ref_cache["ref"] = tp.reference(args.chunkgen, cell, cut, os.path.join(work, "ref"))
                    ref, why = ref_cache["ref"]
                    if ref is None:
                        row.update(rel_err=None, rel_err_note=why)
                        continue
                    r = make_fn(impl, bwd, args.chunk)(*[jnp.asarray(cut[n].numpy()) for n in
                                                        ["q", "k", "v", "log_alpha", "h0"] + (["do"] if bwd else [])])
                    (o, hT), grads = (r if bwd else (r, None))
                    set_rel_err(row, ref, {"o": o, "hT": hT},
                                zip(["q", "k", "v", "log_alpha", "h0"], grads) if bwd else None, tc, cell["seq"])
                except Exception as e:  # a peer that cannot run says why in its row
                    row["error"] = tp.row_error(e)
                finally:
                    tp.log_row("jax peers", row)
                    flush()
            del ins
    finally:
        shutil.rmtree(work, ignore_errors=True)
    flush()


if __name__ == "__main__":
    main()
