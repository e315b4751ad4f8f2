#!/usr/bin/env python3
"""The device check's decode phase (issue 36 item 6, GPU part): chunkgen's step ops on the
GPU at batch 1, 16 and 256 with the states out of the L2, their bytes per call over the time
against a device-to-device copy measured in the same run (torch's copy_ of a 1 GiB tensor,
bytes read plus written), beside mamba's Triton selective_state_update. The cells are
bench/decode.c's (bench/decode_peers.py's), one token per entry, float32 states and inputs:

  ssd_step    Mamba-2 H 64, G 1, d_state (dk) 128, headdim (dv) 64; mamba's
              selective_state_update with heads (state [S, H, headdim, d_state], dt, A and
              D = dt_bias = 0 tied over headdim, as Mamba-2's step calls it) on the same
              math (dt x = v, dt A = log_alpha, B = k, C = q)
  sscan_step  Mamba-1 D 5120, N 16, dt bias, softplus, D and z; mamba's without heads
  gdr_step    Qwen3-Next G 16, H 32, dk = dv = 128, L2 norm on (no mamba peer). Until it
              has a CUDA kernel, chunkgen's `auto` runs it on the CPU through host copies or
              refuses it: the row says which (its `dispatch`), and is not timed.

Each entry reads slot state_indices[b] of a cache of S = B x sets slots; call i of a run
uses the i-th of `sets` disjoint slot sets (enough sets that they span at least 4 x the L2
and 256 MiB), so no call finds its states in the L2. The calls of one pass over the sets are
captured in a CUDA graph and replayed (launch gaps out of the numbers; eagerly where the
capture fails: the row's timer says which); time per call = a replay's CUDA-event time /
sets, median over replays. Bytes per call: each state read and written once, plus the
inputs, outputs and indices. Correctness before timing: the outputs and the written slots
against float64 (mamba's selective_state_update_ref, pinned in tests/python/refs; for
gdr_step the op's float64 reference, chunkgen.torch.gdr on float64 tensors) by
max |x - ref| / max |ref| (limit 1e-4: float32 math).

Without a GPU (the CI rehearsal) the same code runs on the CPU at batch 1 and 2 with 2 sets
(mamba's Triton kernel absent: its rows say why).

Exit status: 0; 1 when an ssd_step / sscan_step row errs, misses the limit or does not
run on the GPU; 77 when nothing ran.

usage: gpu_decode.py --out FILE [--detail FILE] [--batches 1,16,256] [--min-time S]
"""
import argparse
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "python"))
import gpu_common as gc  # noqa: E402  (first: it skips the phase when torch is missing)
import torch  # noqa: E402

LIMIT = 1e-4
# the inputs each impl reads (the bytes a call moves besides the states)
READS = {("chunkgen", "ssd_step"): ("q", "k", "v", "la"), ("mamba", "ssd_step"): ("x", "dt", "A", "Bm", "Cm", "zeros", "zeros"),
         ("chunkgen", "sscan_step"): ("x", "d", "z", "A", "Bm", "Cm", "Dv", "bias"),
         ("mamba", "sscan_step"): ("x", "d", "z", "A", "Bm", "Cm", "Dv", "bias"),
         ("chunkgen", "gdr_step"): ("q", "k", "v", "g", "beta")}
TARGET = 0.8  # issue 36 item 6: >= 80% of the copy bandwidth at batch 256


def rel_err(x, ref):
    x, ref = x.detach().double(), ref.detach().double().to(x.device)
    if tuple(x.shape) != tuple(ref.shape) or not torch.isfinite(x).all():
        return math.inf
    m = ref.abs().max().item()
    return (x - ref).abs().max().item() / (m if m > 0 else 1.0)


def copy_gbs(dev, nbytes):
    """A device-to-device copy's GB/s (bytes read plus written), median of 20 after 3 warm."""
    src = torch.rand(nbytes // 4, device=dev)
    dst = torch.empty_like(src)
    call = lambda: dst.copy_(src)  # noqa: E731
    m = gc.timed(call, dev, repeats=20, min_time=0.05)
    return 2 * src.numel() * 4 / (m["median_ms"] * 1e-3) * 1e-9, m


# per op: the state of one slot in chunkgen's layout and in mamba's (None: no mamba peer)
SLOT = {"ssd_step": ((64, 128, 64), (64, 64, 128)), "sscan_step": ((5120, 16), (5120, 16)),
        "gdr_step": ((32, 128, 128), None)}


def slot_bytes(op):
    return 4 * math.prod(SLOT[op][0])


def cell_tensors(op, B, S, dev, gen, mamba):
    """(inputs common to every call, a state cache of S slots in chunkgen's layout or, with
    mamba, in mamba's), drawn on the device by its own generator."""
    r = lambda *s: torch.rand(*s, generator=gen, device=dev) * 2 - 1  # noqa: E731
    p = lambda *s: torch.rand(*s, generator=gen, device=dev)  # noqa: E731
    cache = r(S, *SLOT[op][1 if mamba else 0])
    if op == "ssd_step":
        H, N, P = SLOT[op][0]
        x, dt, A = r(B, H, P), p(B, H), -p(H) - 0.5
        Bm, Cm = r(B, 1, N), r(B, 1, N)
        return dict(x=x, dt=dt, A=A, Bm=Bm, Cm=Cm, zeros=torch.zeros(H, device=dev),
                    v=(x * dt[..., None])[:, None].contiguous(), la=(dt * A)[:, None].contiguous(),
                    q=Cm[:, None], k=Bm[:, None]), cache
    if op == "sscan_step":
        D, N = SLOT[op][0]
        return dict(x=r(B, D), d=r(B, D), z=r(B, D), A=-p(D, N) * 1.9 - 0.1, Bm=r(B, N), Cm=r(B, N), Dv=r(D),
                    bias=-p(D)), cache
    G, (H, K, V) = 16, SLOT[op][0]
    return dict(q=r(B, 1, G, K), k=r(B, 1, G, K), v=r(B, 1, H, V), g=-0.3 * p(B, 1, H), beta=p(B, 1, H)), cache


def chunkgen_call(cgt, op, t, cache, idx):
    if op == "ssd_step":
        return lambda: cgt.ssd_step(t["q"], t["k"], t["v"], t["la"], cache, idx)
    if op == "sscan_step":
        return lambda: cgt.sscan_step(t["x"][:, None], t["d"][:, None], t["A"], t["Bm"][:, None], t["Cm"][:, None],
                                      cache, idx, D=t["Dv"], z=t["z"][:, None], delta_bias=t["bias"],
                                      delta_softplus=True)
    return lambda: cgt.gdr_step(t["q"], t["k"], t["v"], t["g"], t["beta"], cache, idx, use_qk_l2norm=True)


def mamba_call(ssu, op, t, state, idx):
    if op == "ssd_step":
        H, P, N = state.shape[1:]
        # dt, A, dt_bias and D tied over headdim (stride 0): mamba's TIE_HDIM path, as Mamba-2's
        # step calls it. mamba_ssm 2.3.2 reads dt_bias's and D's strides unconditionally (None
        # raises), so both are given, as zeros: the same math as chunkgen's call
        dt = t["dt"][..., None].expand(-1, H, P)
        A = t["A"][:, None, None].expand(H, P, N)
        zero = t["zeros"][:, None].expand(H, P)
        return lambda: ssu(state, t["x"], dt, A, t["Bm"], t["Cm"], D=zero, dt_bias=zero, state_batch_indices=idx)
    return lambda: ssu(state, t["x"], t["d"], t["A"], t["Bm"], t["Cm"], D=t["Dv"], z=t["z"], dt_bias=t["bias"],
                       dt_softplus=True, state_batch_indices=idx)


def reference(op, t, slots, impl):
    """float64 (out, new slots in the impl's layout) from the slots the call read, on the
    call's device (chunkgen's float64 gdr runs its `ref` backend on host copies)."""
    from refs.mamba_ref import selective_state_update_ref as ref_ssu
    d = {n: x.detach().double() for n, x in t.items()}
    s = slots.detach().double()
    if op == "gdr_step":  # the op's float64 reference (chunkgen.torch.gdr on float64 CPU tensors: backend ref)
        import chunkgen.torch as cgt
        return cgt.gdr(d["q"], d["k"], d["v"], d["g"], d["beta"], s, use_qk_l2norm=True)
    if op == "ssd_step":
        mamba_layout = impl.startswith("mamba")
        st = s if mamba_layout else s.transpose(-1, -2).contiguous()  # mamba's [B, H, P, N]
        H, P, N = st.shape[1:]
        out = ref_ssu(st, d["x"], d["dt"][..., None].expand(-1, H, P), d["A"][:, None, None].expand(H, P, N),
                      d["Bm"], d["Cm"])
        return (out if mamba_layout else out[:, None]), (st if mamba_layout else st.transpose(-1, -2))
    out = ref_ssu(s, d["x"], d["d"], d["A"], d["Bm"], d["Cm"], D=d["Dv"], z=d["z"], dt_bias=d["bias"],
                  dt_softplus=True)
    return (out if impl.startswith("mamba") else out[:, None]), s


def graph_time(calls, dev, min_time):
    """Per-call ms of one pass over calls: a CUDA graph's replays (else eager passes) between
    CUDA events, median over passes; on the CPU the wall clock of eager passes."""
    def one_pass():
        for c in calls:
            c()
    timer = "eager passes, wall clock"
    run = one_pass
    if dev.type == "cuda":
        timer = "CUDA graph of one pass over the slot sets, replays between CUDA events"
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                one_pass()
            torch.cuda.current_stream().wait_stream(s)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                one_pass()
            run = graph.replay
        except Exception as e:
            torch.cuda.synchronize()
            timer = "eager passes between CUDA events (the capture failed: %s)" % gc.why_not(e)
    if dev.type != "cuda":
        m = gc.timed(run, dev, repeats=5, min_time=min_time)
    else:  # no L2 flush: the slot sets' span already exceeds it
        run()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        v, start = [], time.perf_counter()
        while len(v) < 100 and (len(v) < 5 or time.perf_counter() - start < min_time):
            e0.record()
            run()
            e1.record()
            e1.synchronize()
            v.append(e0.elapsed_time(e1))
        v.sort()
        m = {"samples": len(v), "median_ms": v[len(v) // 2], "q1_ms": v[len(v) // 4], "q3_ms": v[(3 * len(v)) // 4]}
    n = len(calls)
    return {"median_ms": m["median_ms"] / n, "q1_ms": m["q1_ms"] / n, "q3_ms": m["q3_ms"] / n,
            "samples": m["samples"], "calls_per_sample": n, "timer": timer}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--detail")
    ap.add_argument("--batches")
    ap.add_argument("--min-time", type=float, default=0.2)
    a = ap.parse_args()
    chunkgen, cgt = gc.need_chunkgen()
    dev = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    gpu = dev.type == "cuda"
    batches = [int(b) for b in (a.batches or ("1,16,256" if gpu else "1,2")).split(",")]
    ssu, why_mamba = None, None
    try:
        ssu = gc.import_skipping_init("mamba_ssm", "ops.triton.selective_state_update").selective_state_update
    except Exception as e:
        why_mamba = "mamba_ssm not importable: " + gc.why_not(e)
    if not gpu:
        why_mamba = "no GPU: mamba's Triton kernel needs one" + ("; " + why_mamba if why_mamba else "")
    l2 = (getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or (64 << 20)) if gpu else 0
    span = max(4 * l2, 256 << 20) if gpu else 0
    cbw, cm = copy_gbs(dev, (1 << 30) if gpu else (32 << 20))
    tag = "chunkgen_cuda" if gpu else "chunkgen_cpu"
    dblock = gc.device_block(dev)
    dblock.update(copy_gbs=cbw, copy_note="torch copy_ of a %d MiB float32 tensor, bytes read + written, median of %d"
                  % (((1 << 30) if gpu else (32 << 20)) >> 20, cm["samples"]))
    doc = gc.Doc(a.out, dblock, {
        "batches": batches, "tokens_per_entry": 1, "dtype": "f32 states and inputs", "limit_rel_err": LIMIT,
        "target_frac_copy_b256": TARGET, "states": "slot sets spanning >= max(4 x L2, 256 MiB), one set per call"
        if gpu else "2 slot sets (CPU rehearsal)",
        "bytes": "states read + written once, plus inputs, outputs and indices",
        "cells": {"ssd_step": "mamba2_h64_dk128_dv64", "sscan_step": "mamba1_d5120_n16",
                  "gdr_step": "qwen3next_g16_h32_d128"}})
    chunkgen.set_threads(0)
    gen = torch.Generator(device=dev).manual_seed(36)
    bad, ran, summary = [], 0, []
    for B in batches:
        for op, cell in doc.doc["config"]["cells"].items():
            impls = [tag] + (["mamba_selective_state_update"] if SLOT[op][1] else [])
            for impl in impls:
                row = doc.add({"impl": impl, "op": op, "mode": "step", "config": "%s_b%d" % (cell, B), "cell": cell,
                               "batch": B, "seq": 1, "copy_gbs": cbw})
                print("gpu_decode: %s %s B=%d" % (impl, op, B), file=sys.stderr, flush=True)
                if impl.startswith("mamba") and why_mamba:
                    row["skipped"] = why_mamba
                    doc.flush()
                    continue
                try:
                    slot = slot_bytes(op)
                    sets = max(2, min(512, math.ceil(span / (B * slot)))) if gpu else 2
                    t, state = cell_tensors(op, B, B * sets, dev, gen, impl.startswith("mamba"))
                    idx = [torch.arange(i * B, (i + 1) * B, dtype=torch.int32, device=dev) for i in range(sets)]
                    if impl.startswith("mamba"):
                        calls = [mamba_call(ssu, op, t, state, ix) for ix in idx]
                    else:
                        calls = [chunkgen_call(cgt, op, t, state, ix) for ix in idx]
                    before = state[:B].clone()
                    out, row["first_call_s"] = gc.first_call(calls[0], dev)
                    if not impl.startswith("mamba"):
                        row["dispatch"] = chunkgen.last_dispatch()
                    ro, rs = reference(op, t, before, impl)
                    row["rel_err_outputs"] = {"o": rel_err(out, ro), "states": rel_err(state[:B], rs)}
                    row["rel_err"] = max(row["rel_err_outputs"].values())
                    row["within_limit"] = row["rel_err"] <= LIMIT
                    if gpu and not impl.startswith("mamba") and "backend=cuda" not in row["dispatch"]:
                        row["skipped"] = "not run on the GPU (no CUDA kernel): %s" % row["dispatch"]
                        if op != "gdr_step":
                            bad.append("%s B=%d not on the GPU" % (op, B))
                    else:
                        row.update(graph_time(calls, dev, a.min_time))
                        io = sum(t[n].numel() * t[n].element_size() for n in READS[impl.split("_")[0], op])
                        io += out.numel() * out.element_size()
                        row.update(sets=sets, slots=B * sets, state_bytes=B * slot, bytes=2 * B * slot + io + 4 * B)
                        row["gbs"] = row["bytes"] / (row["median_ms"] * 1e-3) * 1e-9
                        row["frac_copy"] = row["gbs"] / cbw
                        if B == 256:
                            row["meets_target"] = row["frac_copy"] >= TARGET
                        ran += 1
                        summary.append("%s %s B%d %.0f%%" % (impl.split("_")[0], op.split("_")[0], B, 100 * row["frac_copy"]))
                    del t, state, idx, calls, out
                except Exception as e:
                    row["error"] = gc.why_not(e)
                if not impl.startswith("mamba") and op != "gdr_step" and (row.get("error") or not row.get("within_limit")):
                    bad.append("%s B=%d %s" % (op, B, row.get("error") or "rel_err %.2g" % row.get("rel_err")))
                print("gpu_decode:   %s" % {k: row.get(k) for k in ("median_ms", "frac_copy", "rel_err", "skipped", "error")
                                            if k in row}, file=sys.stderr, flush=True)
                doc.flush()
                if gpu:
                    torch.cuda.empty_cache()
    doc.flush()
    line = "%scopy %.0f GB/s; %d rows timed, %d not; of the copy: %s%s" % (
        "" if gpu else "no GPU: CPU rehearsal (batch %s): " % ", ".join(map(str, batches)), cbw, ran, len(doc.doc["results"]) - ran,
        ", ".join(summary), ("; FAILED: " + ", ".join(bad)) if bad else "")
    if a.detail:
        open(a.detail, "w").write(line[:390])
    print(line)
    sys.exit(1 if bad else (77 if ran == 0 else 0))


if __name__ == "__main__":
    main()
