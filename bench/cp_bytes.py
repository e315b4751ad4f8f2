#!/usr/bin/env python3
"""cp_bytes.py -- the bytes context parallelism passes to the collectives, measured, against
the formula of docs/context_parallel.md.

- PyTorch (chunkgen.torch_cp over P gloo processes): chunkgen.torch_cp.STATS counts, per
  collective call, the bytes of the tensor a rank passes in and of what it gets back; one
  forward + backward of SSD, the selective scan and the gated delta rule, at two sequence lengths (the
  exchange must not depend on T).
- JAX (chunkgen.jax_cp.shard_ssd / shard_sscan / shard_gdr on P simulated CPU devices): the collectives
  of the compiled forward and gradient programs, read from XLA's optimized HLO (operand and
  result shapes).
Formula per device and exchange: payload m = B x (transition + state) floats x 4 bytes
(SSD: H + H dk dv per row; selective scan: 2 D N; gated delta rule: H dk (dk + dv)); the all-gather passes m in and gets
P m back, the reverse exchange (reduce-scatter) passes P m in and gets m back; on the wire
a ring moves (P - 1) m per device per direction. The descriptor (torch) is 128 int64s.

usage: python bench/cp_bytes.py [--out FILE]   (runs its own subprocesses; ~1 min)
Writes bench/results/cp-bytes-<date>.json.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

SHAPES = {"ssd": dict(B=1, G=1, H=4, dk=48, dv=40), "sscan": dict(B=1, D=40, N=12),
          "gdr": dict(B=1, G=1, H=4, dk=48, dv=40)}
LENGTHS = (256, 2048)


def payload(op, s):
    if op == "ssd":
        return s["B"] * (s["H"] + s["H"] * s["dk"] * s["dv"]) * 4
    if op == "gdr":
        return s["B"] * s["H"] * s["dk"] * (s["dk"] + s["dv"]) * 4
    return s["B"] * 2 * s["D"] * s["N"] * 4


def formula(op, s, P):
    m = payload(op, s)
    return {"payload_bytes": m, "all_gather": {"in": m, "out": P * m},
            "reduce_scatter": {"in": P * m, "out": m}, "wire_per_direction_ring": (P - 1) * m}


# ------------------------------------------------------------------ torch

def torch_worker(rank, world, path, q):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    import chunkgen.torch_cp as cp

    out = []
    for op, s in SHAPES.items():
        for T in LENGTHS:
            tl = cp.split_sizes(T, world)[rank]
            for k in cp.STATS:
                cp.STATS[k] = 0
            if op == "ssd":
                q_ = torch.randn(s["B"], tl, s["G"], s["dk"], requires_grad=True)
                v = torch.randn(s["B"], tl, s["H"], s["dv"], requires_grad=True)
                la = (-torch.rand(s["B"], tl, s["H"]) * 0.01).requires_grad_()
                o, hT = cp.ssd(q_, q_, v, la, group=None)
            elif op == "gdr":
                q_ = torch.randn(s["B"], tl, s["G"], s["dk"], requires_grad=True)
                v = torch.randn(s["B"], tl, s["H"], s["dv"], requires_grad=True)
                g = (-torch.rand(s["B"], tl, s["H"]) * 0.01).requires_grad_()
                o, hT = cp.gdr(q_, q_, v, g, g.detach().sigmoid(), group=None, use_qk_l2norm=True)
            else:
                x = torch.randn(s["B"], tl, s["D"], requires_grad=True)
                A = (-torch.rand(s["D"], s["N"])).requires_grad_()
                Bm = torch.randn(s["B"], tl, s["N"], requires_grad=True)
                o, hT = cp.sscan(x, x.detach().abs(), A, Bm, Bm, group=None)
            fwd = dict(cp.STATS)
            (o.sum() + hT.sum()).backward()
            tot = dict(cp.STATS)
            out.append({"op": op, "T": T, "P": world, "rank": rank, "forward": fwd,
                        "backward": {k: tot[k] - fwd[k] for k in tot}})
    q.put(out)
    dist.destroy_process_group()


def run_torch(world):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with tempfile.TemporaryDirectory() as d:
        pc = mp.spawn(torch_worker, args=(world, os.path.join(d, "rdv"), q), nprocs=world, join=False)
        rows = [r for _ in range(world) for r in q.get(timeout=300)]
        pc.join()
    return [r for r in rows if r["rank"] == 1]  # (every rank passes the same bytes)


# -------------------------------------------------------------------- JAX

JAX_SCRIPT = r'''
import json, re, sys
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh
import chunkgen.jax_cp as cp
shapes, lengths = json.loads(sys.argv[1]), json.loads(sys.argv[2])
mesh = Mesh(np.array(jax.devices()), ("sp",))
P = jax.device_count()
pat = re.compile(r"= (\w+)\[([\d,]*)\]\S* (all-gather|reduce-scatter|all-reduce|collective-permute|all-to-all)"
                 r"(?:-start)?\((?:\w+\[([\d,]*)\])?")
size = {"f32": 4, "s32": 4, "f64": 8, "s64": 8}
def colls(hlo):
    out = []
    for line in hlo.splitlines():
        m = pat.search(line)
        if m:
            dt, res, kind = m.group(1), m.group(2), m.group(3)
            n = int(np.prod([int(x) for x in res.split(",") if x] or [1])) * size.get(dt, 4)
            out.append({"kind": kind, "result_bytes": n, "shape": f"{dt}[{res}]"})
    return out
rows = []
for op, s in shapes.items():
    for T in lengths:
        if op == "ssd":
            f = cp.shard_ssd(mesh, "sp")
            args = (jnp.ones((s["B"], s["G"], T, s["dk"])), jnp.ones((s["B"], s["G"], T, s["dk"])),
                    jnp.ones((s["B"], s["H"], T, s["dv"])), -0.01 * jnp.ones((s["B"], s["H"], T)))
        elif op == "gdr":
            f = cp.shard_gdr(mesh, "sp", use_qk_l2norm=True)
            args = (jnp.ones((s["B"], T, s["G"], s["dk"])), jnp.ones((s["B"], T, s["G"], s["dk"])),
                    jnp.ones((s["B"], T, s["H"], s["dv"])), -0.01 * jnp.ones((s["B"], T, s["H"])),
                    0.5 * jnp.ones((s["B"], T, s["H"])))
        else:
            f = cp.shard_sscan(mesh, "sp")
            args = (jnp.ones((s["B"], T, s["D"])), 0.1 * jnp.ones((s["B"], T, s["D"])), -jnp.ones((s["D"], s["N"])),
                    jnp.ones((s["B"], T, s["N"])), jnp.ones((s["B"], T, s["N"])))
        loss = lambda *a: sum(jnp.sum(o) for o in f(*a))
        g = jax.grad(loss, argnums=tuple(range(len(args))))
        rows.append({"op": op, "T": T, "P": P,
                     "forward": colls(jax.jit(f).lower(*args).compile().as_text()),
                     "gradient": colls(jax.jit(g).lower(*args).compile().as_text())})
print("JSON" + json.dumps(rows))
'''


def run_jax(world):
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={world}")
    p = subprocess.run([sys.executable, "-c", JAX_SCRIPT, json.dumps(SHAPES), json.dumps(LENGTHS)], env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise RuntimeError(p.stderr[-3000:])
    return json.loads(p.stdout.split("JSON", 1)[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--worlds", default="2,4")
    a = ap.parse_args()
    worlds = [int(w) for w in a.worlds.split(",")]
    res = {"date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z", "shapes": SHAPES,
           "formula": {f"{op}-P{P}": formula(op, s, P) for op, s in SHAPES.items() for P in worlds},
           "torch_gloo": [r for P in worlds for r in run_torch(P)],
           "jax_cpu": [r for P in worlds for r in run_jax(P)]}
    # the check: every exchange's bytes match the formula and do not depend on T
    for r in res["torch_gloo"]:
        m, P = payload(r["op"], SHAPES[r["op"]]), r["P"]
        desc = 128 * 8
        f, b = r["forward"], r["backward"]
        # (gloo: the reverse exchange is an all-reduce of the P m cotangent; NCCL's
        # reduce-scatter gets m back)
        r["matches_formula"] = (f["gather_in"] == desc + m and f["gather_out"] == P * (desc + m)
                                and b["reverse_in"] == P * m and b["reverse_out"] == P * m
                                and f["exchange_calls"] == 1 and b["reverse_calls"] == 1)
    for r in res["jax_cpu"]:
        m, P = payload(r["op"], SHAPES[r["op"]]), r["P"]
        ag = [c["result_bytes"] for c in r["forward"] if c["kind"] == "all-gather"]
        rs = [c["result_bytes"] for c in r["gradient"] if c["kind"] == "reduce-scatter"]
        r["matches_formula"] = ag == [P * m] and rs == [m]
    day = datetime.date.today().strftime("%Y%m%d")
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"cp-bytes-{day}.json")
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)
    for r in res["torch_gloo"] + res["jax_cpu"]:
        print(r["op"], "P", r["P"], "T", r["T"], "matches formula:", r["matches_formula"])
    print("wrote", out)
    return 0 if all(r["matches_formula"] for r in res["torch_gloo"] + res["jax_cpu"]) else 1


if __name__ == "__main__":
    sys.exit(main())
