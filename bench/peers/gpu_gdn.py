#!/usr/bin/env python3
"""The device check's GDN phase (issue 35 item 5): the gated delta rule in bf16 on the GPU,
forward and forward + backward, on the issue's cells [B, T, G, H, dk, dv] (fla's H is our G,
fla's HV our H): [1, 4096, 16, 32, 128, 128] (Qwen3-Next's layer), [4, 2048, 4, 4, 128, 128],
[2, 1000, 2, 6, 48, 40].

  chunkgen_cuda               chunkgen.torch.gdr on CUDA tensors (the generated kernels;
                              the row's `dispatch` is the library's line for the forward)
  fla_chunk_gated_delta_rule  fla's chunk_gated_delta_rule (fla-core, Triton), when
                              importable (device-check.sh --prepare stages fla-core 0.6.0);
                              its first call compiles and autotunes: first_call_s

Inputs as the CPU rows of bench/gdr_peers.py: q, k, v, h0, dout ~ U(-1, 1), g ~ U(-0.5,
-0.01), beta ~ U(0, 1); q, k, v, beta, dout in bf16, g and h0 float32; use_qk_l2norm on, h0
given, hT returned, dhT absent; scale dk^-1/2. Correctness: every output and gradient against
chunkgen's float32 CPU path on the same bf16-rounded inputs (itself within 1e-5 / 1e-4 of the
float64 reference: tests/test_gdr.c), by fla's own measure and tolerances (fla's
get_err_ratio, rms(x - ref) / rms(ref): 5e-3 on o and hT, 8e-3 on dq, dk, dv, dh0, 2e-2 on
dg, dbeta); NaN fails. Timing: CUDA events around each call, the L2 flushed before each
(gpu_common.timed); FLOPs by MATH_GDN.md's dense count (chunk 64).

Without a GPU (the CI rehearsal) the same code runs on the CPU at small sizes (impl
chunkgen_cpu_bf16; fla absent: its rows say why), so that a typo fails here.

Exit status: 0; 1 when a chunkgen row errs or misses a tolerance; 77 when no impl could run.

usage: gpu_gdn.py --out FILE [--impls chunkgen,fla] [--detail FILE] [--min-time S] [--deadline-s S]
"""
import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as gc  # noqa: E402  (first: it skips the phase when torch is missing)
import torch  # noqa: E402

# name, B, T, G (fla's H), H (fla's HV), dk, dv: the names of bench/gdr_peers.py's rows
CELLS = [("qwen3next_h16_hv32_d128", 1, 4096, 16, 32, 128, 128), ("b4_h4_d128", 4, 2048, 4, 4, 128, 128),
         ("b2_h2_hv6_dk48_dv40", 2, 1000, 2, 6, 48, 40)]
# the rehearsal's: the same ratios and odd sizes, seconds on a shared CPU
SMALL = [("qwen3next_h16_hv32_d128", 1, 130, 2, 4, 32, 32), ("b4_h4_d128", 2, 64, 1, 1, 32, 32),
         ("b2_h2_hv6_dk48_dv40", 2, 50, 2, 6, 48, 40)]
TOL = {"o": 5e-3, "hT": 5e-3, "dq": 8e-3, "dk": 8e-3, "dv": 8e-3, "dh0": 8e-3, "dg": 2e-2, "dbeta": 2e-2}
LEAVES = ("q", "k", "v", "g", "beta", "h0")
C = 64


def flops(B, T, H, dk, dv, bwd):
    """MATH_GDN.md's dense count per chunk and value head, C = 64 (bench/gdr_peers.py's)."""
    f = 6 * C * dk * dv + 6 * C * C * dk + 4 * C * C * dv + C ** 3 / 3
    if bwd:
        f += 16 * C * dk * dv + 18 * C * C * dk + 10 * C * C * dv + 4 * C ** 3
    return f * B * H * math.ceil(T / C)


def inputs(B, T, G, H, dk, dv, seed):
    gen = torch.Generator().manual_seed(seed)
    u = lambda *s: torch.rand(*s, generator=gen) * 2 - 1  # noqa: E731
    bf = torch.bfloat16
    return {"q": u(B, T, G, dk).to(bf), "k": u(B, T, G, dk).to(bf), "v": u(B, T, H, dv).to(bf),
            "g": -0.01 - 0.49 * torch.rand(B, T, H, generator=gen), "beta": torch.rand(B, T, H, generator=gen).to(bf),
            "h0": u(B, H, dk, dv), "do": u(B, T, H, dv).to(bf)}


def make_call(fn, ins, bwd):
    """A call of fn(leaves) -> (o, hT) on leaves made once (no copy inside the timed call);
    with bwd o.backward(dout). The call returns ({o, hT}, {dq, dk, dv, dg, dbeta, dh0})."""
    leaves = {n: ins[n].detach().clone().requires_grad_(bwd) for n in LEAVES}

    def call():
        for t in leaves.values():
            t.grad = None
        with torch.set_grad_enabled(bwd):
            o, hT = fn(leaves)
            if bwd:
                o.backward(ins["do"])
        return {"o": o, "hT": hT}, ({"d" + n: leaves[n].grad for n in LEAVES} if bwd else {})

    return call


def err_ratio(x, ref):
    """fla's get_err_ratio: rms(x - ref) / rms(ref), in float64; NaN or a missing tensor: inf."""
    if x is None or tuple(x.shape) != tuple(ref.shape):
        return math.inf
    x = x.detach().double().cpu()
    if not torch.isfinite(x).all():
        return math.inf
    d = (x - ref).square().mean().sqrt().item()
    return d / (ref.square().mean().sqrt().item() + 1e-8)


def chunkgen_fn(cgt):
    return lambda L: cgt.gdr(L["q"], L["k"], L["v"], L["g"], L["beta"], L["h0"], use_qk_l2norm=True)


def fla_fn(fn):
    return lambda L: fn(q=L["q"], k=L["k"], v=L["v"], g=L["g"], beta=L["beta"], initial_state=L["h0"],
                        output_final_state=True, use_qk_l2norm_in_kernel=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--impls", default="chunkgen,fla")
    ap.add_argument("--detail", help="file for the phase's one-line summary")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--deadline-s", type=float, default=1e9, help="start no (impl, cell) after this many seconds")
    a = ap.parse_args()
    t_start = time.perf_counter()
    chunkgen, cgt = gc.need_chunkgen()
    dev = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    cells = CELLS if dev.type == "cuda" else SMALL
    tag = "cuda" if dev.type == "cuda" else "cpu_bf16"
    impls, fns, why = [], {}, {}
    for i in a.impls.split(","):
        if i == "chunkgen":
            impls.append("chunkgen_" + tag)
            fns[impls[-1]] = chunkgen_fn(cgt)
        elif i == "fla":
            impls.append("fla_chunk_gated_delta_rule")
            try:
                from fla.ops.gated_delta_rule import chunk_gated_delta_rule
                fns[impls[-1]] = fla_fn(chunk_gated_delta_rule)
            except Exception as e:
                why[impls[-1]] = "fla not importable: " + gc.why_not(e)
            if dev.type != "cuda":
                why[impls[-1]] = "no GPU: fla's Triton kernels need one" + ("; " + why[impls[-1]] if impls[-1] in why else "")
        else:
            ap.error("--impls: '%s' but expected chunkgen and/or fla" % i)
    chunkgen.set_threads(0)
    doc = gc.Doc(a.out, gc.device_block(dev), {
        "op": "gdr", "dtype": "bf16", "impls": impls, "cells": {c[0]: list(c[1:]) for c in cells},
        "cell_order": "B, T, G (fla's H), H (fla's HV), dk, dv",
        "inputs": "q, k, v, h0, dout ~ U(-1, 1), g ~ U(-0.5, -0.01), beta ~ U(0, 1); q, k, v, beta, dout bf16, "
                  "g and h0 float32; use_qk_l2norm on, h0 given, hT returned, dhT absent; scale dk^-1/2",
        "reference": "chunkgen.torch.gdr on the CPU in float32 on the same bf16-rounded inputs",
        "rel_err": "fla's get_err_ratio rms(x - ref) / rms(ref), the largest over o, hT and every gradient",
        "tolerances": TOL, "flops": "MATH_GDN.md dense count per chunk and value head, C = 64",
        "timer": "CUDA events per call, L2 flushed before each" if dev.type == "cuda" else "wall clock"})
    bad, ran, summary = [], 0, []
    for ci, (name, B, T, G, H, dk, dv) in enumerate(cells):
        ins = inputs(B, T, G, H, dk, dv, seed=35 + ci)
        ref = None
        for impl in impls:
            for mode in ("fwd", "fwd_bwd"):
                bwd = mode == "fwd_bwd"
                row = doc.add({"impl": impl, "op": "gdr", "mode": mode, "config": name, "batch": B, "groups": G,
                               "heads": H, "seq": T, "dk": dk, "dv": dv, "layout": "token", "dtype": "bf16"})
                print("gpu_gdn: %s %s %s" % (impl, name, mode), file=sys.stderr, flush=True)
                if impl in why:
                    row["skipped"] = why[impl]
                elif time.perf_counter() - t_start > a.deadline_s:
                    row["skipped"] = "out of time (--deadline-s %g)" % a.deadline_s
                else:
                    try:
                        if ref is None:  # the float32 CPU path, forward and backward, once per cell
                            t0 = time.perf_counter()
                            f32 = {n: t.float() for n, t in ins.items()}
                            ro, rg = make_call(chunkgen_fn(cgt), f32, True)()
                            ref = {n: t.detach().double() for n, t in list(ro.items()) + list(rg.items())}
                            doc.doc["config"].setdefault("reference_s", {})[name] = time.perf_counter() - t0
                        d_ins = {n: t.to(dev) for n, t in ins.items()}
                        call = make_call(fns[impl], d_ins, bwd)
                        (outs, grads), row["first_call_s"] = gc.first_call(call, dev)
                        if impl.startswith("chunkgen"):
                            row["dispatch"] = chunkgen.last_dispatch()
                            if dev.type == "cuda" and "backend=cuda" not in row["dispatch"]:
                                raise RuntimeError("not run on the GPU: " + row["dispatch"])
                        errs = {n: err_ratio(x, ref[n]) for n, x in list(outs.items()) + list(grads.items())}
                        row["rel_rms"] = errs
                        row["rel_err"] = max(errs.values())
                        row["within_tol"] = all(e <= TOL[n] for n, e in errs.items())
                        del outs, grads
                        row.update(gc.timed(call, dev, min_time=a.min_time))
                        row["flops"] = flops(B, T, H, dk, dv, bwd)
                        row["gflops"] = row["flops"] / row["median_ms"] * 1e-6
                        ran += 1
                        summary.append("%s %s %.3g ms" % (name.split("_")[0], mode, row["median_ms"]))
                    except Exception as e:
                        row["error"] = gc.why_not(e)
                    if impl.startswith("chunkgen") and (row.get("error") or not row.get("within_tol")):
                        bad.append("%s %s %s" % (impl, name, mode))
                print("gpu_gdn:   %s" % {k: row.get(k) for k in ("median_ms", "rel_err", "skipped", "error") if k in row},
                      file=sys.stderr, flush=True)
                doc.flush()
        del ins, ref
    doc.flush()
    ok = [r for r in doc.doc["results"] if "median_ms" in r]
    worst = max((r["rel_err"] for r in ok), default=float("nan"))
    line = "%s%d rows timed (%s), %d not: worst rel-RMS %.2g%s; %s" % (
        "" if dev.type == "cuda" else "no GPU: CPU rehearsal at small sizes: ", ran, ", ".join(impls),
        len(doc.doc["results"]) - ran, worst, ("; FAILED: " + ", ".join(bad)) if bad else "", "; ".join(summary[:6]))
    if a.detail:
        open(a.detail, "w").write(line)
    print(line)
    sys.exit(1 if bad else (77 if ran == 0 else 0))


if __name__ == "__main__":
    main()
