#!/usr/bin/env python3
"""cp_model.py -- the context-parallel step-time model (docs/context_parallel.md, "Model"):
one SSD layer's (and one gated-delta-rule layer's: the "gdr" rows) forward + backward over
T tokens split over P GPUs, from a kernel rate, the
correction's roofline (bench/perf_model.py's sm_90 compute ceilings) and link bandwidths.

  t_local   = (T / P) x rate_fb                      the local chunked pass, fwd + bwd
  t_corr    = (T / P) x max(6 H dk dv / fp32 peak, bytes_tok / HBM)   SSD's correction, fwd + bwd
  m         = B H (dk dv + 1) x 4 bytes               one device's (transition, state) pair
  t_x       = (P - 1) (alpha + m / BW)                ring all-gather (forward) and reduce-scatter
                                                      (backward) of the pairs, each
  t_combine = P x 2 B H dk dv / fp32 peak              folding the gathered pairs (Horner)
  t_x2      = (g - 1)(alpha_nv + m / BW_nv) + (P / g - 1)(alpha_ib + m / BW_ib)   a two-level
              exchange (g GPUs per node; not implemented: the model's answer to large P)
  step (as implemented: exchange between the local pass and the correction, not overlapped)
            = t_local + t_corr + 2 (t_x + t_combine)
  step (overlapped: a states-first local pass, the exchange flying while the outputs and the
        dhT-free backward run) = t_local + t_corr + 2 t_combine + 2 max(0, t_x - t_hide),
        t_hide = (T / P) x rate_f x (1 - states_fraction) for the forward, the same for the
        backward with its rate: communication stops hiding where t_x > t_hide.

Every rate and bandwidth below is an ASSUMPTION (no GPU was measured for this model; the
CPU has no NVLink): the kernel rate is fla's published chunk_simple_gla on H100 (bf16,
B = 4, T = 8192, H = 32, d = 128: forward 2.30 ms, forward + backward 8.78 ms; the same
numbers docs/perf-model.md compares with), the links NCCL-typical H100 figures. Pass
--rates FILE (JSON with any of the ASSUMED keys) to use measured ones instead.

The gdr rows: the local pass is the op at dv + dk value columns (its rate scaled by the
FLOP ratio of MATH_GDN 2.5 / 3.2, 1.69 at d = 128; bench/cp_gdr_cost.py measured 1.83 on
the CPU), m = B H dk (dk + dv) x 4, the correction P_t S (6 H dk dv per token fwd + bwd),
the fold 2 B H dk^2 dv per pair; the kernel rate and the overlap shares are ASSUMED (see
ASSUMED's gdr_* keys).

usage: python bench/cp_model.py [--tokens 1048576] [--rates FILE] [--out FILE]
Writes bench/results/cp-model-<date>.json and prints the table.
"""
import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_model import LIMITS  # noqa: E402  (sm_90 compute ceilings: H100 SXM and H200 share them)

ASSUMED = {
    "shape": {"B": 1, "H": 32, "dk": 128, "dv": 128},
    # fla chunk_simple_gla on H100, bf16 (published; B=4, T=8192, H=32, d=128): per token, all heads
    "rate_f_s_per_token": 2.30e-3 / (4 * 8192),
    "rate_fb_s_per_token": 8.78e-3 / (4 * 8192),
    "states_fraction": 0.33,  # share of the forward that produces the segment's state (3phase: states + scan)
    "hbm_Bps": 3.35e12,  # H100 SXM HBM3
    # NVLink 4 within a node of 8 H100 SXM: NCCL all-gather bus bandwidth and per-step latency
    "nvlink_Bps": 360e9, "nvlink_alpha_s": 3e-6,
    # InfiniBand NDR 400 Gb/s, one NIC per GPU, across nodes: bus bandwidth and per-step latency
    "ib_Bps": 40e9, "ib_alpha_s": 8e-6,
    "gpus_per_node": 8,
    # The gated delta rule (the "gdr" rows). ASSUMED: fla's chunk_gated_delta_rule runs at the
    # same fraction of peak as chunk_simple_gla, so its rate is simple GLA's times the ratio
    # of their forward FLOPs per token and head at d = 128, C = 64 (MATH_GDN 2.5: 6KV + 6CK +
    # 4CV + C^2/3 = 181.6k; simple GLA 4KV + 2CK + 2CV = 98.3k: 1.85).
    "gdr_rate_factor": 181589 / 98304,
    "gdr_chunk": 64,
    # ASSUMED shares of the pass that must precede the exchange (MATH_GDN 2.5 / 3.2 FLOPs):
    # forward, all but the outputs' 2KV + 2CK + 2CV (0.64); backward, all but the w, u
    # recompute and dVloc, 4C(K + V) (0.87; the dh pass needs dhT from its start)
    "gdr_states_fraction_f": 0.64, "gdr_states_fraction_b": 0.87,
}


def gdr_flops(K, V, C):
    """(forward, backward) FLOPs per token and value head, MATH_GDN 2.5 and 3.2."""
    return 6 * K * V + 6 * C * K + 4 * C * V + C * C / 3, 16 * K * V + 18 * C * K + 10 * C * V + 4 * C * C


def predict(T, P, a, op="ssd"):
    s = a["shape"]
    B, H, dk, dv = s["B"], s["H"], s["dk"], s["dv"]
    fp32 = LIMITS[90]["fp32_flops"]
    tl = T / P
    intra = P <= a["gpus_per_node"]
    bw, alpha = (a["nvlink_Bps"], a["nvlink_alpha_s"]) if intra else (a["ib_Bps"], a["ib_alpha_s"])
    rate_f, rate_fb, sf_f, sf_b = a["rate_f_s_per_token"], a["rate_fb_s_per_token"], a["states_fraction"], None
    one = T * rate_fb
    corr_flops = 6 * B * H * dk * dv  # forward q S (2), backward dq and dS (4), per token
    if op == "ssd":
        m = B * H * (dk * dv + 1) * 4
        corr_bytes = 4 * B * (dk + 3 * H * dv + H) * 2  # q, o (read + write), dout, log_alpha; fwd and bwd
        comb_flops = 2 * B * H * dk * dv
    else:  # gdr: the op runs with dv + dk value columns; the correction reads P_t [H, dk]
        f1, b1 = gdr_flops(dk, dv, a["gdr_chunk"])
        f2, b2 = gdr_flops(dk, dv + dk, a["gdr_chunk"])
        rate_f, rate_fb = rate_f * a["gdr_rate_factor"], rate_fb * a["gdr_rate_factor"]
        one = T * rate_fb
        rate_f, rate_fb = rate_f * f2 / f1, rate_fb * (f2 + b2) / (f1 + b1)
        sf_f, sf_b = a["gdr_states_fraction_f"], a["gdr_states_fraction_b"]
        m = B * H * dk * (dk + dv) * 4
        corr_bytes = 4 * B * (2 * H * dk + 3 * H * dv) * 2  # P, dP, o (read + write), dout; fwd and bwd
        comb_flops = 2 * B * H * dk * dk * dv
    t_local = tl * rate_fb
    t_corr = tl * max(corr_flops / fp32, corr_bytes / a["hbm_Bps"])
    t_x = (P - 1) * (alpha + m / bw)
    t_comb = P * comb_flops / fp32
    # (not implemented) a two-level exchange: all-gather within each node over NVLink, fold the
    # node's pairs into one (the pairs compose associatively), all-gather the node pairs over IB
    g = min(P, a["gpus_per_node"])
    t_x2 = (g - 1) * (a["nvlink_alpha_s"] + m / a["nvlink_Bps"]) + (P // g - 1) * (a["ib_alpha_s"] + m / a["ib_Bps"])
    t_hide_f = tl * rate_f * (1 - sf_f)
    t_hide_b = tl * (rate_fb - rate_f) * (1 - (sf_f if sf_b is None else sf_b))
    step = t_local + t_corr + 2 * (t_x + t_comb)
    over = t_local + t_corr + 2 * t_comb + max(0.0, t_x - t_hide_f) + max(0.0, t_x - t_hide_b)
    return {"op": op, "P": P, "link": "NVLink" if intra else "InfiniBand", "tokens_per_gpu": tl, "pair_bytes": m,
            "wire_bytes_per_direction": (P - 1) * m, "t_local_ms": t_local * 1e3, "t_correction_ms": t_corr * 1e3,
            "t_exchange_ms": t_x * 1e3, "t_combine_ms": t_comb * 1e3, "step_ms": step * 1e3,
            "step_overlapped_ms": over * 1e3, "comm_hidden_forward": t_x <= t_hide_f,
            "comm_hidden_backward": t_x <= t_hide_b, "exposed_comm_fraction": 2 * t_x / step,
            "speedup_vs_one_gpu": one / step, "efficiency": one / step / P,
            "t_exchange_two_level_ms": t_x2 * 1e3, "two_level_hidden_forward": t_x2 <= t_hide_f}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=1 << 20)
    ap.add_argument("--rates")
    ap.add_argument("--out")
    a = ap.parse_args()
    rates = dict(ASSUMED)
    if a.rates:
        with open(a.rates) as f:
            rates.update(json.load(f))
    rows = [predict(a.tokens, P, rates, op) for op in ("ssd", "gdr") for P in (2, 4, 8, 16, 32, 64, 128)]
    first_exposed = next((r["P"] for r in rows if r["op"] == "ssd" and not r["comm_hidden_forward"]), None)
    gdr_first_exposed = next((r["P"] for r in rows if r["op"] == "gdr" and not r["comm_hidden_forward"]), None)
    res = {"date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z", "tokens": a.tokens,
           "assumptions": rates, "assumptions_note": "no GPU measured: every rate and bandwidth is assumed",
           "fp32_flops": LIMITS[90]["fp32_flops"], "rows": rows,
           "forward_exchange_first_exposed_at_P": first_exposed,
           "gdr_forward_exchange_first_exposed_at_P": gdr_first_exposed}
    day = datetime.date.today().strftime("%Y%m%d")
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"cp-model-{day}.json")
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"{'op':>4} {'P':>4} {'link':>10} {'local':>8} {'corr':>7} {'xchg':>7} {'step':>8} {'overlap':>8} {'hidden f/b':>10} "
          f"{'eff':>5} {'2-level':>8}")
    for r in rows:
        print(f"{r['op']:>4} {r['P']:>4} {r['link']:>10} {r['t_local_ms']:8.2f} {r['t_correction_ms']:7.2f} "
              f"{r['t_exchange_ms']:7.3f} "
              f"{r['step_ms']:8.2f} {r['step_overlapped_ms']:8.2f} {str(r['comm_hidden_forward'])[0]}/"
              f"{str(r['comm_hidden_backward'])[0]:>8} {r['efficiency']:5.2f} {r['t_exchange_two_level_ms']:8.3f}")
    print("wrote", out)


if __name__ == "__main__":
    main()
