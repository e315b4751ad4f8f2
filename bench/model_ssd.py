#!/usr/bin/env python3
"""model_ssd.py -- model-level benchmark: a Mamba-2 style SSD mixer in PyTorch, its scan by
chunkgen against the same mixer with the scan in plain PyTorch.

The model is chunkgen.nn.Mamba2Mixer (one residual block: in_proj, softplus dt, the SSD
scan, D skip, silu(z) gate, LayerNorm, out_proj) with model_dim 128, and the `ssm` suite's
cells of the seeds (batch 8, tokens 1024 and 4096; ops forward and train_step). Only the
scan differs between the rows, on the same initial weights and inputs:
  chunkgen         chunkgen.torch.ssd (CPU path / generated CUDA kernels, its own backward);
  torch_chunked    chunked SSD in plain PyTorch after the Mamba-2 paper's minimal listing
                   (bench/peers/torch_peers.py: ssd_chunked), autograd backward;
  fla_naive_chunk  fla-core's naive chunk implementation (naive_chunk_simple_gla, scale 1;
                   bench/peers/torch_peers.py: fla_chunk), autograd backward.
forward: the model's output under torch.no_grad(); train_step: forward, mean-square loss,
backward, AdamW step. Timing and peak memory by bench/peers/torch_peers.py's `measure`
(median and quartiles of samples; peak = the rise of the process's resident high-water
mark during the timed calls on CPU, torch.cuda.max_memory_allocated on CUDA; each row runs
in a process of its own). Each row also has rel_diff: max |out - ref| / max |ref| of the
model's forward output (initial weights) against the first impl's.

usage: python bench/model_ssd.py [--device cpu|cuda] [--tokens 1024,4096] [--impls ...]
                                 [--threads N] [--repeats 3] [--min-time 1] [--out FILE]
Writes JSON in the seeds' schema (device, config, results) to
bench/results/model-ssd-<device>-<cpu or gpu>-<date>.json (or --out).
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

import torch

import chunkgen
import chunkgen.torch as ct
from chunkgen.nn import Mamba2Mixer

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.join(_HERE, "peers")]
from py_overhead import cpu_model  # noqa: E402
from torch_peers import fla_chunk, measure, ssd_chunked  # noqa: E402

CHUNK = 64  # the plain-PyTorch scans' chunk length


def scans():
    return {
        "chunkgen": lambda q, k, v, la: ct.ssd(q, k, v, la),
        "torch_chunked": lambda q, k, v, la: ssd_chunked(q, k, v, la, None, CHUNK),
        "fla_naive_chunk": lambda q, k, v, la: fla_chunk(q, k, v, la, None, CHUNK),
    }


def make_model(impl, args, dev):
    torch.manual_seed(0)  # the same weights for every impl
    m = Mamba2Mixer(args.model_dim, heads=args.heads, groups=args.groups, d_state=args.d_state,
                    scan=scans()[impl]).to(dev)
    return m


def run_cell(impl, tokens, op, args, dev, sync, ref_file):
    """One row, in a process of its own (the peak memory is this cell's alone)."""
    if impl == "fla_naive_chunk":  # its import (hundreds of MB) before the measured calls
        import fla.ops.simple_gla.naive  # noqa: F401
    model = make_model(impl, args, dev)
    gen = torch.Generator(device="cpu").manual_seed(1)
    u = torch.randn(args.batch, tokens, args.model_dim, generator=gen).to(dev)
    row = {"suite": "ssm", "cell": "ssd", "impl": impl, "dtype": "float32", "tokens": tokens, "batch": args.batch,
           "model_dim": args.model_dim, "heads": args.heads, "groups": args.groups, "d_state": args.d_state,
           "head_dim": model.p, "op": op, "params": sum(p.numel() for p in model.parameters())}
    if op == "forward":
        def call():
            with torch.no_grad():
                return model(u)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def call():
            loss = model(u).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    res = measure(call, sync, args.repeats, args.min_time, 1, args.max_call_s)
    res["first_call_s"] = res.pop("compile_s")
    if dev.type == "cuda":
        res.pop("workspace_mb", None)
        res["peak_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
    elif "workspace_mb" in res:
        res["peak_mb"] = res.pop("workspace_mb")
    res["cell_s"] = time.perf_counter() - t0
    row.update(res)
    if impl == "chunkgen":
        row["dispatch"] = chunkgen.last_dispatch()
    # the forward output of the initial weights (train_step rows: of the same fresh model)
    model = make_model(impl, args, dev)
    with torch.no_grad():
        out = model(u).cpu()
    row["finite"] = bool(torch.isfinite(out).all())
    if os.path.exists(ref_file):
        ref = torch.load(ref_file)
        row["rel_diff"] = float((out - ref).abs().max() / ref.abs().max())
    else:
        torch.save(out, ref_file)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tokens", default="1024,4096")
    ap.add_argument("--ops", default="forward,train_step")
    ap.add_argument("--impls", default="torch_chunked,chunkgen,fla_naive_chunk")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--model-dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--d-state", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--max-call-s", type=float, default=20.0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--cell", help=argparse.SUPPRESS)  # IMPL:TOKENS:OP, one row (the child process)
    ap.add_argument("--ref-file", help=argparse.SUPPRESS)
    a = ap.parse_args()

    dev = torch.device(a.device)
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)
    torch.set_num_threads(a.threads)
    chunkgen.set_threads(a.threads)
    if a.cell:
        impl, tokens, op = a.cell.split(":")
        print(json.dumps(run_cell(impl, int(tokens), op, a, dev, sync, a.ref_file)))
        return
    impls = [x for x in a.impls.split(",") if x]
    doc = {
        "device": {"backend": dev.type, "cpu": cpu_model(), "cores": os.cpu_count(), "threads": a.threads,
                   "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
                   "os": f"{platform.system()} {platform.release()} {platform.machine()}",
                   "python": platform.python_version(), "torch": torch.__version__, "chunkgen": chunkgen.__version__},
        "config": {"suite": "ssm", "batch": a.batch, "model_dim": a.model_dim, "ssm_tokens": [int(t) for t in
                   a.tokens.split(",")], "ops": a.ops.split(","), "impls": impls, "chunk": CHUNK,
                   "repeats": a.repeats, "min_time_s": a.min_time, "dtype": "float32",
                   "model": "chunkgen.nn.Mamba2Mixer (one residual block), AdamW for train_step",
                   "loadavg_1min_start": os.getloadavg()[0]},
        "results": [],
    }
    out_path = a.out
    if out_path is None:
        tag = re.sub(r"[^A-Za-z0-9]+", "-", doc["device"]["gpu"] or doc["device"]["cpu"]).strip("-")
        day = datetime.date.today().strftime("%Y%m%d")
        out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                f"model-ssd-{dev.type}-{tag}-{a.threads}t-{day}.json")
    work = tempfile.mkdtemp(prefix="chunkgen-model-bench-")
    for tokens in doc["config"]["ssm_tokens"]:
        for op in doc["config"]["ops"]:
            for impl in impls:
                ref = os.path.join(work, f"ref-{tokens}-{op}.pt")
                cmd = [sys.executable, os.path.abspath(__file__), "--cell", f"{impl}:{tokens}:{op}", "--ref-file", ref]
                cmd += sum(([f"--{k.replace('_', '-')}", str(v)] for k, v in vars(a).items()
                            if k not in ("cell", "ref_file", "out", "tokens", "impls", "ops")), [])
                p = subprocess.run(cmd, capture_output=True, text=True)
                lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
                if p.returncode == 0 and lines:
                    row = json.loads(lines[-1])
                else:  # a peer that cannot run says why in its row
                    row = {"suite": "ssm", "cell": "ssd", "impl": impl, "tokens": tokens, "op": op,
                           "error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
                doc["results"].append(row)
                print(json.dumps({k: row.get(k) for k in ("impl", "tokens", "op", "median_ms", "peak_mb",
                                                          "rel_diff", "error") if k in row}), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    doc["config"]["loadavg_1min_end"] = os.getloadavg()[0]
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print("->", out_path)


if __name__ == "__main__":
    main()
