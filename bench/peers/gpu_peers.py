#!/usr/bin/env python3
"""GPU peers for `chunkgen bench --backend cuda`: fla and mamba's Triton SSD kernels.

  fla_chunk_simple_gla          fla.ops.simple_gla.chunk_simple_gla with q and k repeated
                                per head (it has no groups), g = log_alpha, scale 1
  mamba_chunk_scan_combined     mamba_ssm's mamba_chunk_scan_combined with A = -1,
                                dt = -log_alpha, x = v / dt (so dt x = v), B = k, C = q,
                                ngroups = G, chunk 256

Both are pure Python plus Triton. They run only if importable; a row says why not
otherwise. Neither is downloaded here: docs/bench.md says how to carry their sources
to the GPU machine (PYTHONPATH or wheels). Same cells, schema, timing and rel_err rules
as torch_peers.py, whose helpers this reuses.

usage: gpu_peers.py --matrix CHUNKGEN.json --out PEERS.json [--chunkgen PATH]
"""
import argparse
import inspect
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import gpu_common as gc  # noqa: E402
import torch_peers as tp  # noqa: E402


def load_fla():
    from fla.ops.simple_gla import chunk_simple_gla  # noqa: F401
    return chunk_simple_gla


def load_mamba():
    return gc.import_skipping_init("mamba_ssm", "ops.triton.ssd_combined").mamba_chunk_scan_combined


def make_call(impl, fn, cell, ins):
    bwd = cell["mode"] == "fwd_bwd"
    names = tp.SSD_GRADS
    leaves = {n: ins[n].clone().requires_grad_(bwd) for n in names}
    H, G = cell["heads"], cell["groups"]
    if impl == "fla_chunk_simple_gla":
        params = inspect.signature(fn).parameters
        extra = {"head_first": False} if "head_first" in params else {}

        def run(L):
            q = L["q"].repeat_interleave(H // G, dim=2)
            k = L["k"].repeat_interleave(H // G, dim=2)
            o, ht = fn(q=q, k=k, v=L["v"], g=L["log_alpha"], scale=1.0, initial_state=L["h0"],
                       output_final_state=True, **extra)
            return {"o": o, "hT": ht}
    else:
        def run(L):
            dt = -L["log_alpha"]  # [B, T, H] > 0
            x = L["v"] / dt[..., None]
            A = -torch.ones(H, device=dt.device, dtype=torch.float32)
            h0 = L["h0"].transpose(-1, -2).contiguous()  # mamba's states are [B, H, headdim=dv, dstate=dk]
            y, fs = fn(x, dt, A, L["k"], L["q"], chunk_size=256, initial_states=h0, return_final_states=True)
            return {"o": y, "hT": fs.transpose(-1, -2)}

    def call():
        for t in leaves.values():
            t.grad = None
        with torch.set_grad_enabled(bwd):
            outs = run(leaves)
            if bwd:
                outs["o"].backward(ins["do"])
        return outs, ({n: leaves[n].grad for n in names} if bwd else {})

    return call


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--matrix", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--chunkgen")
    ap.add_argument("--impls", default="fla_chunk_simple_gla,mamba_chunk_scan_combined")
    ap.add_argument("--max-call-s", type=float, default=60.0)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    doc = json.load(open(args.matrix))
    cfg, ddev = doc.get("config", {}), doc.get("device", {})
    repeats, min_time = cfg.get("repeats", 5), cfg.get("min_time_s", 1.0)
    warmup, ref_seq = cfg.get("warmup", 1), cfg.get("ref_seq", 2048)
    peak, bw = ddev.get("gpu_fp32_peak_gflops"), ddev.get("gpu_bw_gbs")
    out = {"device": {"backend": "cuda", "torch": torch.__version__}, "config": {"impls": args.impls.split(",")},
           "results": []}
    loaders = {"fla_chunk_simple_gla": load_fla, "mamba_chunk_scan_combined": load_mamba}
    fns, why = {}, {}
    if not torch.cuda.is_available():
        for i in loaders:
            why[i] = "torch sees no CUDA device (torch %s)" % torch.__version__
    else:
        out["device"]["gpu"] = torch.cuda.get_device_name(0)
        for i, ld in loaders.items():
            try:
                fns[i] = ld()
                mod = sys.modules.get(fns[i].__module__)
                out["device"][i] = getattr(mod, "__file__", "?")
            except Exception as e:
                why[i] = "not importable: %s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    for pkg in ("fla", "mamba_ssm", "triton"):
        mod = sys.modules.get(pkg)
        out["device"][pkg + "_version"] = getattr(mod, "__version__", None) if mod else None
    work = tempfile.mkdtemp(prefix="chunkgen-gpu-peers-")
    gen = torch.Generator().manual_seed(1234)
    dev = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")

    def flush():
        with open(args.out + ".tmp", "w") as f:
            json.dump(out, f, indent=2)
        os.replace(args.out + ".tmp", args.out)

    try:
        for cell in tp.cells_of(doc):
            if cell["op"] != "ssd":
                continue
            for impl in args.impls.split(","):
                row = {"impl": impl, "op": "ssd", "mode": cell["mode"], "config": cell["config"]}
                row.update({k: cell[k] for k in ("batch", "groups", "heads", "seq", "dk", "dv")})
                row["layout"] = "token"
                out["results"].append(row)
                print("gpu_peers: %s %s seq %d %s" % (impl, cell["config"], cell["seq"], cell["mode"]),
                      file=sys.stderr, flush=True)
                if impl in why:
                    row["skipped"] = why[impl]
                    flush()
                    continue
                bwd = cell["mode"] == "fwd_bwd"
                try:
                    ins = tp.make_inputs(cell, gen, dev)
                    call = make_call(impl, fns[impl], cell, ins)
                    m = tp.measure_cold(call, repeats, min_time, warmup, args.max_call_s)
                    row.update(m)
                    row["peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
                    row["peak_mb_note"] = "torch.cuda.max_memory_allocated over the process so far"
                    sec = row["median_ms"] * 1e-3
                    flops = tp.ssd_flops(row, 256 if impl.startswith("mamba") else 64, bwd)
                    byts = tp.cell_bytes(row, bwd)
                    row.update(flops=flops, bytes=byts, gflops=flops / sec * 1e-9, gbs=byts / sec * 1e-9)
                    if peak and bw:
                        gf, ai = flops / sec * 1e-9, flops / byts
                        row.update(frac_flops=gf / peak, frac_bw=byts / sec * 1e-9 / bw,
                                   frac_roofline=gf / min(peak, ai * bw),
                                   bound="bandwidth" if ai * bw < peak else "flops")
                    if not args.no_check:
                        tc = min(cell["seq"], ref_seq)
                        cut = tp.cut_inputs(cell, ins, tc)
                        ref, why_ref = tp.reference(args.chunkgen, cell, cut, os.path.join(work, "ref"))
                        if ref is None:
                            row["rel_err"], row["rel_err_note"] = None, why_ref
                        else:
                            co, cgr = make_call(impl, fns[impl], cell, cut)()
                            ro = {k: tp.rel_err(v, ref[k]) for k, v in co.items() if k in ref and v is not None}
                            rg = {k: tp.rel_err(v, ref["d" + k]) for k, v in cgr.items()
                                  if v is not None and "d" + k in ref}
                            tp.set_rel_err(row, ro, rg if bwd else None, tc, cell["seq"])
                except Exception as e:
                    row["error"] = tp.row_error(e)
                    torch.cuda.empty_cache()
                print("gpu_peers:   %s" % (row.get("median_ms") or row.get("error") or row.get("skipped")),
                      file=sys.stderr, flush=True)
                flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    flush()


if __name__ == "__main__":
    main()
