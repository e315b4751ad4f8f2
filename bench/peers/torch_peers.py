#!/usr/bin/env python3
"""PyTorch peers for `chunkgen bench`, measured on the same cells and threads.

Reads the JSON that `chunkgen bench` wrote (its config block and the cells of its
results) and times, on the same shapes and thread count:
  torch_chunked  SSD by the chunked algorithm in plain PyTorch, written after the
                 minimal SSD listing of the Mamba-2 paper (q and k repeated per head,
                 decay given as log_alpha), with autograd for fwd_bwd;
  torch_scan     the selective scan as a plain sequential PyTorch loop over time (per-step
                 tensors from unbind), with autograd;
  fla_naive_chunk  SSD by fla-core's own naive chunk implementation on torch
                 (fla.ops.simple_gla.naive.naive_chunk_simple_gla: scalar decay per head,
                 scale 1, q and k repeated per head), with autograd.
Rows follow the seeds' schema (the same fields as chunkgen's rows). rel_err is taken
against chunkgen's float64 sequential-scan reference (`chunkgen run --backend ref`) on
the SAME inputs: batch element 0 and the first ref_seq tokens, the peer rerun on that cut.
A peer that cannot run says why in its row (error or skipped).

usage: torch_peers.py --matrix CHUNKGEN.json --out PEERS.json [--chunkgen PATH]
                      [--device cpu|cuda] [--threads N] [--impls torch_chunked,torch_scan,fla_naive_chunk]
"""
import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

# --------------------------------------------------------------------------- the peers


def segsum(x):
    """[..., n] -> [..., n, n]: out[i, j] = x[j+1] + ... + x[i] for i >= j, -inf above.

    Differences of one cumulative sum; exp() of it is the decay mask, taken after the
    difference so long chunks with strong decay neither under- nor overflow."""
    n = x.size(-1)
    cs = torch.cumsum(x, dim=-1)
    out = cs[..., :, None] - cs[..., None, :]
    keep = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
    return out.masked_fill(~keep, -math.inf)


def ssd_chunked(q, k, v, log_alpha, h0, chunk):
    """Chunked SSD. q, k [B, T, G, dk]; v [B, T, H, dv]; log_alpha [B, T, H];
    h0 [B, H, dk, dv] or None. Returns o [B, T, H, dv] and the final state [B, H, dk, dv].
    Per (b, h): S_t = exp(log_alpha_t) S_{t-1} + k_t^T v_t, o_t = q_t S_t."""
    Bsz, T, G, dk = q.shape
    H, dv = v.shape[2], v.shape[3]
    rep = H // G
    q = q.repeat_interleave(rep, dim=2)  # [B, T, H, dk]
    k = k.repeat_interleave(rep, dim=2)
    pad = (-T) % chunk
    if pad:  # zero tokens: decay 1, no contribution, output dropped
        q = F.pad(q, (0, 0, 0, 0, 0, pad))
        k = F.pad(k, (0, 0, 0, 0, 0, pad))
        v = F.pad(v, (0, 0, 0, 0, 0, pad))
        log_alpha = F.pad(log_alpha, (0, 0, 0, pad))
    nc = (T + pad) // chunk
    q = q.reshape(Bsz, nc, chunk, H, dk)
    k = k.reshape(Bsz, nc, chunk, H, dk)
    v = v.reshape(Bsz, nc, chunk, H, dv)
    a = log_alpha.reshape(Bsz, nc, chunk, H).permute(0, 3, 1, 2)  # [B, H, c, l]
    a_cs = torch.cumsum(a, dim=-1)

    # 1. intra-chunk: (Q K^T masked by the decay) V
    L = torch.exp(segsum(a))  # [B, H, c, l, s]
    o_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", q, k, L, v)
    # 2. each chunk's own state: (K scaled by the decay to the chunk's end)^T V
    w = torch.exp(a_cs[..., -1:] - a_cs)  # [B, H, c, l]
    states = torch.einsum("bclhn,bhcl,bclhp->bchnp", k, w, v)  # [B, c, H, dk, dv]
    # 3. state passing across chunks, from h0
    if h0 is None:
        h0 = torch.zeros(Bsz, H, dk, dv, dtype=q.dtype, device=q.device)
    states = torch.cat([h0[:, None], states], dim=1)  # [B, c+1, H, dk, dv]
    chunk_decay = torch.exp(segsum(F.pad(a_cs[..., -1], (1, 0))))  # [B, H, c+1, c+1]
    passed = torch.einsum("bhzc,bchnp->bzhnp", chunk_decay, states)
    entering, final = passed[:, :-1], passed[:, -1]
    # 4. inter-chunk: the entering state read by Q, decayed to each token
    o_off = torch.einsum("bclhn,bchnp,bhcl->bclhp", q, entering, torch.exp(a_cs))
    o = (o_diag + o_off).reshape(Bsz, nc * chunk, H, dv)[:, :T]
    return o, final


_fla_chunk = None


def fla_chunk(q, k, v, log_alpha, h0, chunk):
    """fla-core's naive chunk SSD (PyPI fla-core), same arguments as ssd_chunked."""
    global _fla_chunk
    if _fla_chunk is None:
        from fla.ops.simple_gla.naive import naive_chunk_simple_gla
        _fla_chunk = naive_chunk_simple_gla
    rep = v.shape[2] // q.shape[2]
    q = q.repeat_interleave(rep, dim=2)
    k = k.repeat_interleave(rep, dim=2)
    return _fla_chunk(q, k, v, log_alpha, initial_state=h0, output_final_state=True, chunk_size=chunk, scale=1.0)


def sscan_plain(x, delta, A, Bm, Cm, D, z, delta_bias):
    """Selective scan as a sequential loop over time. x, delta, z [B, L, D]; A [D, N];
    Bm, Cm [B, L, N]; D, delta_bias [D]; delta_softplus on. Returns y [B, L, D], hT [B, D, N]."""
    Bsz, L, Dd = x.shape
    N = A.shape[1]
    dt = F.softplus(delta + delta_bias)  # [B, L, D]
    h = x.new_zeros(Bsz, Dd, N)
    ys = []
    # unbind, not x[:, t]: autograd then stacks the per-step gradients once, where indexing
    # would scatter each step's gradient into a zero tensor of the whole sequence (O(L^2)).
    for dt_t, B_t, C_t, x_t in zip(dt.unbind(1), Bm.unbind(1), Cm.unbind(1), x.unbind(1)):
        dt_t = dt_t[:, :, None]  # [B, D, 1]
        h = torch.exp(dt_t * A) * h + (dt_t * x_t[:, :, None]) * B_t[:, None, :]
        ys.append((h * C_t[:, None, :]).sum(-1))
    y = torch.stack(ys, dim=1) + D * x
    return y * F.silu(z), h


# --------------------------------------------------------------------------- cells and inputs


def cell_key(r):
    if r.get("op") == "sscan" or "shape" in r:
        s = r["shape"]
        return ("sscan", r.get("config"), s["seq"], r["mode"])
    return ("ssd", r["config"], r["seq"], r["mode"])


def make_inputs(cell, gen, device):
    """Inputs with the value ranges chunkgen bench uses (docs/bench.md)."""
    def U(shape, lo, hi):
        return (torch.rand(shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo).to(device)

    if cell["op"] == "ssd":
        B, T, G, H, dk, dv = (cell[x] for x in ("batch", "seq", "groups", "heads", "dk", "dv"))
        ins = {
            "q": U((B, T, G, dk), -1, 1), "k": U((B, T, G, dk), -1, 1), "v": U((B, T, H, dv), -1, 1),
            "log_alpha": U((B, T, H), -0.5, -0.001), "h0": U((B, H, dk, dv), -1, 1),
        }
        if cell["mode"] == "fwd_bwd":
            ins["do"] = U((B, T, H, dv), -1, 1)
        return ins
    B, L, Dd, N = (cell[x] for x in ("batch", "seq", "dim", "state"))
    ins = {
        "x": U((B, L, Dd), -1, 1), "delta": U((B, L, Dd), -4, -1),
        "A": (-(torch.arange(N, dtype=torch.float32) + 1)).repeat(Dd, 1).to(device),
        "B": U((B, L, N), -1, 1), "C": U((B, L, N), -1, 1), "D": U((Dd,), -1, 1),
        "z": U((B, L, Dd), -1, 1), "delta_bias": U((Dd,), -0.5, 0.5),
    }
    if cell["mode"] == "fwd_bwd":
        ins["dy"] = U((B, L, Dd), -1, 1)
    return ins


SSD_GRADS = ["q", "k", "v", "log_alpha", "h0"]
SSCAN_GRADS = ["x", "delta", "A", "B", "C", "D", "z", "delta_bias"]


def make_call(impl, cell, ins, chunk):
    """A closure running one call (fwd, or fwd + bwd) and returning the outputs and grads."""
    bwd = cell["mode"] == "fwd_bwd"
    names = SSD_GRADS if cell["op"] == "ssd" else SSCAN_GRADS
    leaves = {n: ins[n].clone().requires_grad_(bwd) for n in names}

    def call():
        for t in leaves.values():
            t.grad = None
        with torch.set_grad_enabled(bwd):
            if impl in ("torch_chunked", "fla_naive_chunk"):
                f = ssd_chunked if impl == "torch_chunked" else fla_chunk
                o, hT = f(leaves["q"], leaves["k"], leaves["v"], leaves["log_alpha"], leaves["h0"], chunk)
                outs = {"o": o, "hT": hT}
                if bwd:
                    o.backward(ins["do"])
            else:
                y, hT = sscan_plain(leaves["x"], leaves["delta"], leaves["A"], leaves["B"], leaves["C"],
                                    leaves["D"], leaves["z"], leaves["delta_bias"])
                outs = {"y": y, "hT": hT}
                if bwd:
                    y.backward(ins["dy"])
        grads = {n: leaves[n].grad for n in names} if bwd else {}
        return outs, grads

    return call


# --------------------------------------------------------------------------- measuring


def rss_kb(key):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def hwm_reset():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measure(call, sync, repeats, min_time, warmup, max_call_s):
    """Same rules as chunkgen bench: warm-up (first call = compile_s), then samples of
    `inner` calls until `repeats` samples and `min_time` seconds; a call slower than
    2 * min_time takes at most 3 samples of one call; slower than max_call_s: one."""
    hwm_ok = hwm_reset()
    rss0 = rss_kb("VmRSS")
    t0 = time.perf_counter()
    call()
    sync()
    compile_s = time.perf_counter() - t0
    res = {"compile_s": compile_s}
    if compile_s > max_call_s:
        res.update(inner=1, samples=1, median_ms=compile_s * 1e3, q1_ms=compile_s * 1e3, q3_ms=compile_s * 1e3,
                   timing_note="one call only: slower than --max-call-s %g" % max_call_s)
    else:
        for _ in range(warmup - 1):
            call()
            sync()
        t0 = time.perf_counter()
        call()
        sync()
        t1 = time.perf_counter() - t0
        v, vc, inner, want, total = [], [], 1, repeats, 0.0
        slow = t1 > 2 * min_time
        if slow:
            want = min(repeats, 3)
            v.append(t1)
        else:
            inner = max(1, min(100000, int(min_time / repeats / t1))) if t1 > 0 else 1000
        while len(v) < 200 and (len(v) < want or (total < min_time and not slow)):
            c0 = time.process_time()
            t0 = time.perf_counter()
            for _ in range(inner):
                call()
            sync()
            dt = time.perf_counter() - t0
            vc.append((time.process_time() - c0) / inner)
            total += dt
            v.append(dt / inner)
        q1, med, q3 = np.percentile(np.array(v), [25, 50, 75])
        res.update(inner=inner, samples=len(v), median_ms=med * 1e3, q1_ms=q1 * 1e3, q3_ms=q3 * 1e3)
        if vc:
            res["cpu_ms"] = float(np.median(np.array(vc))) * 1e3
    hwm = rss_kb("VmHWM")
    if hwm_ok and rss0 is not None and hwm is not None:
        res["workspace_mb"] = max(0, hwm - rss0) / 1024.0
    return res


def measure_cold(call, repeats, min_time, warmup, max_call_s):
    """As chunkgen bench times its cuda rows: after the warm-up, every sample is one call
    timed by CUDA events, with the L2 flushed (a write of twice its size) just before."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20) or (64 << 20)
    scratch = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
    t0 = time.perf_counter()
    call()
    torch.cuda.synchronize()
    res = {"compile_s": time.perf_counter() - t0}
    for _ in range(max(0, warmup - 1)):
        call()
    torch.cuda.synchronize()
    v, total = [], 0.0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while len(v) < 200 and (len(v) < repeats or total < min_time):
        scratch.zero_()
        start.record()
        call()
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end)
        v.append(ms)
        total += ms * 1e-3
        if ms * 1e-3 > max_call_s:
            break
    q1, med, q3 = np.percentile(np.array(v), [25, 50, 75])
    res.update(inner=1, samples=len(v), median_ms=float(med), q1_ms=float(q1), q3_ms=float(q3), l2="cold",
               timer="device events")
    return res


# --------------------------------------------------------------------------- the reference (chunkgen run --backend ref)


def cut_inputs(cell, ins, tc):
    out = {}
    for n, t in ins.items():
        if n == "A" or n in ("D", "delta_bias"):
            out[n] = t
        elif n == "h0":
            out[n] = t[0:1]
        else:
            out[n] = t[0:1, :tc]
    return out


def reference(chunkgen, cell, cut, workdir):
    """Outputs and grads of the float64 scan reference on the cut inputs, or an error string."""
    if not chunkgen:
        return None, "no chunkgen binary given (--chunkgen)"
    ind = os.path.join(workdir, "in")
    outd = os.path.join(workdir, "out")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(ind)
    for n, t in cut.items():
        np.save(os.path.join(ind, n + ".npy"), t.detach().cpu().numpy().astype(np.float32))
    args = [chunkgen, "run", cell["op"], "--backend", "ref", "--in", ind, "--out", outd]
    if cell["mode"] == "fwd_bwd":
        args.append("--grad")
    if cell["op"] == "sscan":
        args.append("--delta-softplus")
    p = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        return None, "chunkgen run --backend ref failed: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    res = {}
    for f in os.listdir(outd):
        if f.endswith(".npy"):
            res[f[:-4]] = np.load(os.path.join(outd, f)).astype(np.float64)
    return res, None


def rel_err(a, ref):
    a = a.detach().cpu().double().numpy()
    if a.shape != ref.shape:
        return float("nan")
    if np.isnan(a).any():
        return float("nan")
    m = np.abs(ref).max()
    e = np.abs(a - ref).max()
    return float(e / m) if m > 0 else float(e)


# --------------------------------------------------------------------------- roofline (same formulas as chunkgen bench)


def add_roofline(row, flops, byts, peak, bw):
    """flops, bytes, GFLOP/s, GB/s and, with the machine's peaks, the fractions of them."""
    sec = row["median_ms"] * 1e-3
    gf, gb = flops / sec * 1e-9, byts / sec * 1e-9
    row.update(flops=flops, bytes=byts, gflops=gf, gbs=gb)
    if peak and bw:
        ai = flops / byts
        row.update(frac_flops=gf / peak, frac_bw=gb / bw, frac_roofline=gf / min(peak, ai * bw),
                   bound="bandwidth" if ai * bw < peak else "flops")


def begin_run(device, impls, args, threads, repeats, min_time, ref_seq, note, prefix):
    """A peers run's start, the same in torch_peers.py and jax_peers.py: its JSON document
    before the rows (the device facts, the run's config, an empty results list), a scratch
    folder (prefix), and the generator the inputs are drawn by (one seed: both scripts draw
    the same inputs)."""
    doc = {"device": device,
           "config": {"impls": impls, "chunk": args.chunk, "threads": threads, "repeats": repeats,
                      "min_time_s": min_time, "ref_seq": ref_seq, "matrix": os.path.abspath(args.matrix),
                      "layout": "token", "note": note},
           "results": []}
    return doc, tempfile.mkdtemp(prefix=prefix), torch.Generator().manual_seed(1234)


def set_rel_err(row, ro, rg, tc, seq):
    """The row's accuracy against chunkgen's float64 scan on the cut batch[0:1], seq[0:tc]
    of seq: ro, rg the rel_err of each output and each gradient (rg None: forward only)."""
    vals = list(ro.values()) + list((rg or {}).values())
    row["rel_err"] = None if any(math.isnan(x) for x in vals) else max(vals)
    row["rel_err_outputs"] = ro
    if rg is not None:
        row["rel_err_grads"] = rg
    row["rel_err_note"] = ("reference (chunkgen's float64 scan) on batch[0:1], seq[0:%d] of %d; the peer rerun "
                           "on that cut" % (tc, seq))


def row_error(e):
    """An exception as a row's error: its type and first line."""
    return "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def log_row(tag, row):
    """A row's line on stderr: its median (ns per element where it has one) and rel_err, or
    why it has none."""
    if "median_ms" in row:
        per = "  %.2f ns/element" % row["ns_per_element"] if "ns_per_element" in row else ""
        print("%s:   median %.3f ms%s  rel_err %s" % (tag, row["median_ms"], per, row.get("rel_err")),
              file=sys.stderr, flush=True)
    elif "error" in row or "skipped" in row:
        print("%s:   %s" % (tag, row.get("error", row.get("skipped"))), file=sys.stderr, flush=True)


def write_json(path, obj):
    """Atomically: a reader never sees half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
    os.replace(tmp, path)


def ssd_flops(c, chunk, bwd):
    dk, dv, T = c["dk"], c["dv"], c["seq"]
    tot = 0.0
    for cl, n in ((chunk, T // chunk), (T % chunk, 1 if T % chunk else 0)):
        if n == 0:
            continue
        fw = cl * (cl + 1) * (dk + dv) + 4 * cl * dk * dv
        bw = cl * (cl + 1) * (3 * dk + 2 * dv) + 10 * cl * dk * dv + 4 * cl * dk
        tot += n * (fw + (bw if bwd else 0))
    return tot * c["batch"] * c["heads"]


def sscan_flops(c, bwd):
    e = c["batch"] * c["seq"] * c["dim"]
    return e * (7.0 * c["state"] + 11) + (e * (24.0 * c["state"] + 20) if bwd else 0)


def tensor_bytes(c, bwd):
    """Bytes of the call's tensors: inputs (and the output gradient), outputs, gradients."""
    if "dk" in c:
        B, T, G, H, dk, dv = c["batch"], c["seq"], c["groups"], c["heads"], c["dk"], c["dv"]
        ins = 2 * B * T * G * dk + B * T * H * dv + B * T * H + B * H * dk * dv
        outs = B * T * H * dv + B * H * dk * dv
        dout = B * T * H * dv
    else:
        B, L, D, N = c["batch"], c["seq"], c["dim"], c["state"]
        ins = 3 * B * L * D + 2 * B * L * N + D * N + 2 * D
        outs = B * L * D + B * D * N
        dout = B * L * D
    return 4.0 * (ins + outs + ((dout + ins) if bwd else 0))


def cell_bytes(c, bwd):
    """Bytes a call must move at least, as chunkgen bench counts them: each input read
    once and each output written once, per forward and per backward call."""
    if "dk" in c:
        B, T, G, H, dk, dv = c["batch"], c["seq"], c["groups"], c["heads"], c["dk"], c["dv"]
        ins = 2 * B * T * G * dk + B * T * H * dv + B * T * H + B * H * dk * dv
        fwd = ins + B * T * H * dv + B * H * dk * dv
        bw = ins + B * T * H * dv + ins
    else:
        B, L, D, N = c["batch"], c["seq"], c["dim"], c["state"]
        ins = 3 * B * L * D + 2 * B * L * N + D * N + 2 * D
        fwd = ins + B * L * D + B * D * N
        bw = ins + B * L * D + ins
    return 4.0 * (fwd + (bw if bwd else 0))


# --------------------------------------------------------------------------- main


def cells_of(doc):
    seen, cells = set(), []
    for r in doc.get("results", []):
        if r.get("impl", "").startswith("torch") or "mode" not in r:
            continue
        key = cell_key(r)
        if key in seen:
            continue
        seen.add(key)
        if key[0] == "ssd":
            c = {k: r[k] for k in ("config", "batch", "groups", "heads", "seq", "dk", "dv", "mode")}
        else:
            c = dict(config=r.get("config"), mode=r["mode"], **r["shape"])
        c["op"] = key[0]
        cells.append(c)
    return cells


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--matrix", required=True, help="JSON written by chunkgen bench")
    ap.add_argument("--out", required=True)
    ap.add_argument("--chunkgen", help="chunkgen binary, for the float64 reference")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, help="default: the matrix's")
    ap.add_argument("--impls", default="torch_chunked,torch_scan,fla_naive_chunk")
    ap.add_argument("--chunk", type=int, default=64, help="torch_chunked chunk size")
    ap.add_argument("--repeats", type=int)
    ap.add_argument("--min-time", type=float)
    ap.add_argument("--ref-seq", type=int)
    ap.add_argument("--max-call-s", type=float, default=30.0)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--also-threads", default="",
                    help="comma list: also time each peer at these thread counts (rows named IMPL_<N>t); a thread "
                         "pool that spins on a busy machine can make the same-threads row look worse than it is")
    args = ap.parse_args()

    doc = json.load(open(args.matrix))
    cfg = doc.get("config", {})
    threads = args.threads or cfg.get("threads") or os.cpu_count()
    repeats = args.repeats or cfg.get("repeats", 5)
    min_time = args.min_time if args.min_time is not None else cfg.get("min_time_s", 1.0)
    warmup = cfg.get("warmup", 1)
    ref_seq = args.ref_seq or cfg.get("ref_seq", 2048)
    impls = set(args.impls.split(","))
    also = [int(t) for t in args.also_threads.split(",") if t and int(t) != (args.threads or cfg.get("threads"))]
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    dev = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)
    ddev = doc.get("device", {})
    if dev.type == "cpu":  # as chunkgen bench: the larger of the measured and the nominal peak
        peak = max([x for x in (ddev.get("fma_peak_gflops_measured"), ddev.get("fma_peak_gflops_nominal")) if x] or [0])
    else:
        peak = ddev.get("gpu_fp32_peak_gflops")
    bw = ddev.get("mem_bw_gbs_measured") if dev.type == "cpu" else ddev.get("gpu_bw_gbs")

    device = {"backend": dev.type, "python": platform.python_version(), "torch": torch.__version__,
              "threads": threads, "numpy": np.__version__,
              "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None}
    note = ("torch_chunked: chunked SSD after the Mamba-2 paper's minimal listing, autograd for fwd_bwd; "
            "fla_naive_chunk: fla-core's naive_chunk_simple_gla (scale 1), autograd; torch_scan: sequential "
            "selective-scan loop, autograd for fwd_bwd; inputs drawn with chunkgen bench's value ranges by torch's "
            "generator")
    out, work, gen = begin_run(device, sorted(impls), args, threads, repeats, min_time, ref_seq, note,
                               "chunkgen-peers-")

    def flush():
        write_json(args.out, out)

    def run_row(cell, impl, name, nthreads, ins, ref_cache):
        row = {"impl": name, "op": cell["op"], "mode": cell["mode"], "config": cell["config"]}
        if cell["op"] == "ssd":
            row.update({k: cell[k] for k in ("batch", "groups", "heads", "seq", "dk", "dv")})
            row["layout"] = "token"
            row["chunk"] = args.chunk
        else:
            row["shape"] = {k: cell[k] for k in ("batch", "seq", "dim", "state")}
        row["threads"] = nthreads
        out["results"].append(row)
        print("peers: %s %s %s seq %d %s" % (name, cell["op"], cell["config"], cell["seq"], cell["mode"]),
              file=sys.stderr, flush=True)
        bwd = cell["mode"] == "fwd_bwd"
        torch.set_num_threads(nthreads)
        try:
            if impl == "torch_scan" and bwd and dev.type == "cpu":
                need = 10 * 4.0 * cell["batch"] * cell["seq"] * cell["dim"] * cell["state"]
                avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
                if need > 0.6 * avail:
                    row["skipped"] = "autograd of the sequential loop would keep about %.1f GB (%.1f GB free)" % (
                        need / 1e9, avail / 1e9)
                    return
            call = make_call(impl, cell, ins, args.chunk)
            if dev.type == "cuda":
                m = measure_cold(call, repeats, min_time, warmup, args.max_call_s)
            else:
                m = measure(call, sync, repeats, min_time, warmup, args.max_call_s)
            del call
            row.update(m)
            shape = row if cell["op"] == "ssd" else row["shape"]
            row["peak_mb"] = tensor_bytes(shape, bwd) / 2**20 + (m.get("workspace_mb") or 0)
            flops = ssd_flops(row, args.chunk, bwd) if cell["op"] == "ssd" else sscan_flops(shape, bwd)
            add_roofline(row, flops, cell_bytes(shape, bwd), peak, bw)
            if args.no_check:
                return
            T = cell["seq"]
            tc = min(T, ref_seq)
            cut = cut_inputs(cell, ins, tc)
            if "ref" not in ref_cache:
                ref_cache["ref"] = reference(args.chunkgen, cell, cut, os.path.join(work, "ref"))
            ref, why = ref_cache["ref"]
            if ref is None:
                row["rel_err"] = None
                row["rel_err_note"] = why
                return
            co, cg = make_call(impl, cell, cut, args.chunk)()
            ro = {k: rel_err(v, ref[k]) for k, v in co.items() if k in ref}
            rg = {k: rel_err(v, ref["d" + k]) for k, v in cg.items() if v is not None and "d" + k in ref}
            set_rel_err(row, ro, rg if bwd else None, tc, T)
        except Exception as e:  # a peer that cannot run says why in its row
            row["error"] = row_error(e)
        finally:
            log_row("peers", row)
            flush()

    try:
        for cell in cells_of(doc):
            mine = [i for i in (("torch_chunked", "fla_naive_chunk") if cell["op"] == "ssd" else ("torch_scan",))
                    if i in impls]
            if not mine:
                continue
            ins = make_inputs(cell, gen, dev)
            ref_cache = {}
            for impl in mine:
                run_row(cell, impl, impl, threads, ins, ref_cache)
                for t in also:
                    run_row(cell, impl, "%s_%dt" % (impl, t), t, ins, ref_cache)
            del ins
    finally:
        torch.set_num_threads(threads)
        shutil.rmtree(work, ignore_errors=True)
    flush()

if __name__ == "__main__":
    main()
