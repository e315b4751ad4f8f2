"""perf_model.py -- the static report's machine limits, occupancy, waves and roofline
model (docs/perf-model.md writes out every formula here; keep the two in step).

Inputs are the plan (`chunkgen gen --plan --json`: config and launches) and the shape;
nothing here re-derives launch geometry."""
import math

KB = 1024
# Per-SM limits (CUDA C Programming Guide, "Compute capabilities" table) and the
# H200 / A100 ceilings used by the roofline.
LIMITS = {
    90: {"name": "H200 (sm_90)", "sms": 132, "regs_per_sm": 65536, "regs_per_thread": 255, "reg_unit": 256,
         "subpartitions": 4, "max_warps": 64, "max_ctas": 32, "smem_per_sm": 228 * KB, "smem_per_block": 227 * KB,
         "smem_reserved_per_cta": 1 * KB, "smem_unit": 128,
         "hbm_Bps": 4.8e12, "tf32_flops": 495e12, "fp32_flops": 67e12},
    80: {"name": "A100 (sm_80)", "sms": 108, "regs_per_sm": 65536, "regs_per_thread": 255, "reg_unit": 256,
         "subpartitions": 4, "max_warps": 64, "max_ctas": 32, "smem_per_sm": 164 * KB, "smem_per_block": 163 * KB,
         "smem_reserved_per_cta": 1 * KB, "smem_unit": 128,
         "hbm_Bps": 2.0e12, "tf32_flops": 156e12, "fp32_flops": 19.5e12},
}


def ceil_to(x, m):
    return (x + m - 1) // m * m


def occupancy(lim, regs, threads, smem_static, smem_dynamic):
    """CTAs and warps per SM (docs/perf-model.md, "Occupancy")."""
    warps_cta = (threads + 31) // 32
    by_warps = lim["max_warps"] // warps_cta
    regs_warp = ceil_to(max(regs, 1) * 32, lim["reg_unit"])
    warps_per_sub = (lim["regs_per_sm"] // lim["subpartitions"]) // regs_warp
    by_regs = (warps_per_sub * lim["subpartitions"]) // warps_cta
    smem_cta = ceil_to(smem_static + smem_dynamic + lim["smem_reserved_per_cta"], lim["smem_unit"])
    if smem_static + smem_dynamic > lim["smem_per_block"]:
        by_smem = 0
    else:
        by_smem = lim["smem_per_sm"] // smem_cta
    lims = {"ctas": lim["max_ctas"], "warps": by_warps, "registers": by_regs, "shared memory": by_smem}
    ctas = min(lims.values())
    limiter = min(lims, key=lambda k: (lims[k], k))
    return {"ctas_per_sm": ctas, "warps_per_sm": ctas * warps_cta, "warps_per_cta": warps_cta,
            "limiter": limiter, "by": lims, "regs_per_warp_alloc": regs_warp, "smem_per_cta_alloc": smem_cta}


def waves(ctas, ctas_per_sm, sms):
    """Grid in waves: CTAs over (CTAs per SM x SMs); the last wave's fill."""
    if ctas_per_sm <= 0:
        return {"waves": None, "full_waves": 0, "last_wave_fill": 0.0, "slots": 0}
    slots = ctas_per_sm * sms
    w = ctas / slots
    full = ctas // slots
    rem = ctas - full * slots
    return {"waves": round(w, 3), "full_waves": full, "last_wave_fill": round(rem / slots, 3) if rem else 1.0,
            "slots": slots}


def mma_per_product(cfg):
    p = cfg.get("precision")
    return {"3xtf32": 3, "tf32": 1}.get(p, 0)


def cdiv(a, b):
    return -(-a // b)


# ------------------------------------------------------------------ FLOPs and bytes
F = 4  # float32 bytes


def _launch(tensor=0.0, fp32=0.0, nbytes=0.0):
    return {"mma_flops": float(tensor), "fp32_flops": float(fp32), "bytes": float(nbytes)}


def ssd_fwd(shape, cfg, entries):
    B, T, G, H, dk, dv = (shape[k] for k in ("B", "T", "G", "H", "dk", "dv"))
    C, bv = cfg["chunk"], cfg["block_dv"]
    nc, ndv = cdiv(T, C), cdiv(dv, bv)
    dkp = ceil_to(dk, 16)
    BH = B * H
    tiles = BH * nc * ndv                      # (b, h, chunk, dv tile)
    m = mma_per_product(cfg) or 1
    mm = (lambda f: (f * m, 0.0)) if mma_per_product(cfg) else (lambda f: (0.0, f))
    qk = 2.0 * C * C * dkp                     # Q K^T per chunk (per dv tile: recomputed)
    pv = 2.0 * C * C * bv                      # P V per dv tile
    qs = 2.0 * C * dkp * bv                    # Q S0 per dv tile
    st = 2.0 * C * dkp * bv                    # (K .* w)^T V per dv tile
    io_tile = F * (2 * C * dk + 2 * C * bv + C)  # q, k, v, o, log_alpha of one (chunk, tile)
    state = F * dk * dv * BH * nc              # one workspace of chunk states
    out = {}
    if "cg_ssd_fwd_seq" in entries:
        t, f = mm(tiles * (qk + pv + qs + st))
        out["cg_ssd_fwd_seq"] = _launch(t, f, tiles * io_tile)
    if "cg_ssd_fwd_states" in entries:
        t, f = mm(tiles * st)
        out["cg_ssd_fwd_states"] = _launch(t, f, tiles * F * (C * dk + C * bv + C) + state)
        out["cg_ssd_fwd_scan"] = _launch(0, 2.0 * BH * nc * dk * dv, 2 * state)
        t, f = mm(tiles * (qk + pv + qs))
        out["cg_ssd_fwd_out"] = _launch(t, f, tiles * io_tile + state)
    useful = BH * nc * (2.0 * C * C * dk + 2.0 * C * C * dv + 4.0 * C * dk * dv)
    unique = F * (B * T * G * 2 * dk + B * T * H * (2 * dv + 1))
    return out, useful, unique


def ssd_bwd(shape, cfg, entries):
    B, T, G, H, dk, dv = (shape[k] for k in ("B", "T", "G", "H", "dk", "dv"))
    C, bv = cfg["chunk"], cfg["block_dv"]
    r = cfg.get("recompute", 1)
    nc, ndv = cdiv(T, C), cdiv(dv, bv)
    dkp, dvp = ceil_to(dk, 16), ndv * bv
    BH = B * H
    m = mma_per_product(cfg) or 1
    mm = (lambda f: (f * m, 0.0)) if mma_per_product(cfg) else (lambda f: (0.0, f))
    nbound = cdiv(nc, r)
    state = F * dk * dv * BH * nbound          # one buffer of boundary states
    out = {}
    # states: U = (K .* w)^T V and R = (Q .* eA)^T dO per (chunk, dv tile)
    t, f = mm(BH * nc * ndv * 2 * (2.0 * C * dkp * bv))
    out["cg_ssd_bwd_states"] = _launch(t, f, BH * nc * ndv * F * (2 * C * dk + 2 * C * bv + C) + 2 * state)
    out["cg_ssd_bwd_scan"] = _launch(0, 2 * 2.0 * BH * nbound * dk * dv, 4 * state)
    # grads per (b, h, chunk): P = Q K^T, dP = dO V^T (over the dv tiles), dV = P^T dO,
    # dQ = dP K + eA dO S0^T, dK = dP^T Q + w V dS^T, dV += w K dS; recompute > 1 adds
    # the carries through the other chunks of the super-chunk (about (r-1)/2 U and R each).
    g = 3 * 2.0 * C * C * dkp + 2 * 2.0 * C * C * dvp + 3 * 2.0 * C * dkp * dvp
    g += (r - 1) / 2.0 * 2 * 2.0 * C * dkp * dvp * 2
    t, f = mm(BH * nc * g)
    split = cfg.get("heads") == "split"
    grads_io = F * (2 * C * dk + 2 * C * dv + 2 * C) + 2 * F * dk * dv + F * (2 * C * dk + C * dv)
    out["cg_ssd_bwd_grads"] = _launch(t, f, BH * nc * grads_io)
    if split:  # the finish: per-head dq, dk partials read, sums written (heads=loop has none)
        out["cg_ssd_bwd_finish"] = _launch(0, 0, B * nc * F * C * dk * 2 * (H + G))
    useful = BH * nc * (3 * 2.0 * C * C * dk + 2 * 2.0 * C * C * dv + 3 * 2.0 * C * dk * dv + 2 * 2.0 * C * dk * dv)
    unique = F * (B * T * G * 4 * dk + B * T * H * (4 * dv + 2))
    return {k: v for k, v in out.items() if k in entries}, useful, unique


def sscan_fwd(shape, cfg, entries):
    B, L, D, N, G = tuple(shape[k] for k in ("B", "L", "D", "N")) + (shape.get("G", 1),)
    bd = cfg["dim_block"]
    el = float(B) * L * D * N
    ctas_per_group = cdiv(D // max(G, 1), bd)
    # per (b, t, d, n): dt*A, exp, dt*B, *x, h = a h + bx (FMA), y += C h (FMA): 8 flops
    fp = 8.0 * el
    nbytes = F * (3.0 * B * L * D + 2.0 * B * L * G * N * ctas_per_group + D * N)  # x, delta, y; B, C per CTA; A
    # seq: one launch; par: the pieces from zero (local), the carries across pieces (carry:
    # B D N per piece, not modeled), then the fix-up of y (out: y += C . (decay * carry),
    # about 4 flops per element; y read and written, C per CTA)
    fix = _launch(0, 4.0 * el, F * (2.0 * B * L * D + B * L * G * N * ctas_per_group))
    out = {"cg_sscan_fwd": _launch(0, fp, nbytes), "cg_sscan_fwd_local": _launch(0, fp, nbytes),
           "cg_sscan_fwd_out": fix}
    unique = F * (3.0 * B * L * D + 2.0 * B * L * G * N + D * N)
    return {k: v for k, v in out.items() if k in entries}, fp, unique


def sscan_bwd(shape, cfg, entries):
    B, L, D, N, G = tuple(shape[k] for k in ("B", "L", "D", "N")) + (shape.get("G", 1),)
    bd, seg = cfg["dim_block"], cfg["segment"]
    el = float(B) * L * D * N
    per = cdiv(D // max(G, 1), bd)
    ckpt = F * B * D * N * cdiv(L, seg)
    out = {}
    # states: the forward recurrence without y (6 flops per element); checkpoints written
    out["cg_sscan_bwd_states"] = _launch(0, 6.0 * el, F * (2.0 * B * L * D + B * L * G * N * per) + 2 * ckpt)
    out["cg_sscan_bwd_local"] = out["cg_sscan_bwd_states"]  # par: per segment from zero (carry: not modeled)
    # grads: the segment's forward again (6) and the reverse step (about 18 flops)
    gio = F * (4.0 * B * L * D + 2.0 * B * L * G * N * per + 2.0 * B * L * G * N * min(per, 8)) + 3 * ckpt
    out["cg_sscan_bwd_grads"] = _launch(0, 24.0 * el, gio)
    out["cg_sscan_bwd_reduce"] = _launch(0, 0, F * 2.0 * B * L * G * N * min(per, 8))
    unique = F * (6.0 * B * L * D + 4.0 * B * L * G * N + 2 * D * N)
    return {k: v for k, v in out.items() if k in entries}, 24.0 * el, unique


MODELS = {"ssd_fwd": ssd_fwd, "ssd_bwd": ssd_bwd, "sscan_fwd": sscan_fwd, "sscan_bwd": sscan_bwd}


def model(kernel, shape, cfg, launches):
    """Roofline time per launch: max(mma FLOPs / TF32 peak, fp32 FLOPs / FP32 peak,
    bytes / HBM bandwidth); the op's time is the sum over its launches (no overlap
    between launches, no launch latency). Always against the H200 ceilings."""
    lim = LIMITS[90]
    entries = [l["entry"] for l in launches]
    per, useful, unique = MODELS[kernel](shape, cfg, entries)
    res = {}
    tot = {"mma_flops": 0.0, "fp32_flops": 0.0, "bytes": 0.0, "time_ms": 0.0}
    bound_t = {"tensor": 0.0, "fp32": 0.0, "memory": 0.0, "not modeled": 0.0}
    for e in entries:
        l = per.get(e, _launch())
        times = {"tensor": l["mma_flops"] / lim["tf32_flops"], "fp32": l["fp32_flops"] / lim["fp32_flops"],
                 "memory": l["bytes"] / lim["hbm_Bps"]}
        b = max(times, key=times.get) if e in per else "not modeled"
        t = times[b] if e in per else 0.0
        res[e] = dict(l, time_ms=t * 1e3, bound=b, modeled=e in per)
        for k in ("mma_flops", "fp32_flops", "bytes"):
            tot[k] += l[k]
        tot["time_ms"] += t * 1e3
        bound_t[b] += t
    tot["bound"] = max(bound_t, key=bound_t.get)
    tot["useful_flops"] = useful
    tot["unique_bytes"] = unique
    tot["ideal_ms"] = max(useful / (lim["tf32_flops"] if mma_per_product(cfg) else lim["fp32_flops"]),
                          unique / lim["hbm_Bps"]) * 1e3
    tot["launches"] = res
    return tot


def describe():
    return {"doc": "docs/perf-model.md", "ceilings": {k: LIMITS[90][k] for k in ("hbm_Bps", "tf32_flops",
                                                                                   "fp32_flops", "sms")},
            "limits": LIMITS}
