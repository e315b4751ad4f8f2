"""Run by test_cp_torch.py: chunkgen.torch_cp over 4 gloo processes when only some inputs
require grad (the backward collective must run on every rank, or every rank must raise).

- SSD, the selective scan and the gated delta rule with the gates not requiring grad (only
  q, k, v / x, B, C, ...; only h0), with and without varlen, where a sequence ends inside
  a rank's piece, one ends at a rank's edge and the last rank has no outgoing pair: the
  forward and the gradients that exist must equal one process's within 1e-5 (a rank
  that skipped the backward collective would leave the others waiting: a hang).
- One rank whose inputs do not require grad while the others' do (or one rank under
  torch.no_grad): every rank raises at the forward call, naming the rank, and the group
  works afterwards.
- Every rank under torch.no_grad: the forward works.

A hang fails fast: the collectives time out (init_process_group's timeout) and the
spawning process kills the ranks after DEADLINE seconds. Prints ALL OK from rank 0."""
import datetime
import os
import sys
import tempfile
import time

import torch
import torch.multiprocessing as mp

from torch_cp_check import WORLD, bounds, compare, expect_error, gen, in_group, summed

DEADLINE = float(os.environ.get("CG_CP_GRAD_DEADLINE", "150"))  # seconds, the whole spawn
COLLECTIVE_TIMEOUT = 30  # seconds, one collective (a rank left waiting raises)
T, SPLIT = 40, [10, 10, 10, 10]
# sequence 0 crosses ranks 0 -> 1, sequence 1 ends inside rank 1's piece at its edge (20),
# sequence 2 spans ranks 2 and 3; rank 1 and rank 3 have no outgoing pair
CU = [0, 15, 20, 40]
SEQ = {"ssd": ("q", "k", "v", "log_alpha"), "gdr": ("q", "k", "v", "g", "beta"),
       "sscan": ("x", "delta", "B", "C", "z")}


def inputs(op, cu):
    """(inputs by name, T's axis, output weights); float32, small odd-ish shapes."""
    nst = len(cu) - 1 if cu is not None else 1
    if op == "sscan":
        ins = dict(x=gen(11, 1, T, 6), delta=gen(12, 1, T, 6, scale=0.3), A=-0.05 * gen(13, 6, 4).exp(),
                   B=gen(14, 1, T, 4), C=gen(15, 1, T, 4), D=gen(16, 6), z=gen(17, 1, T, 6),
                   delta_bias=gen(18, 6, scale=0.2), h0=gen(19, nst, 6, 4))
        return ins, 1, (gen(20, 1, T, 6), gen(21, nst, 6, 4))
    q, k, v = gen(1, 1, T, 1, 12), gen(2, 1, T, 1, 12), gen(3, 1, T, 2, 10)
    la = -gen(4, 1, T, 2, scale=0.05).abs()
    h0 = gen(5, nst, 2, 12, 10)
    ws = (gen(6, 1, T, 2, 10), gen(7, nst, 2, 12, 10))
    if op == "ssd":
        return dict(q=q, k=k, v=v, log_alpha=la, h0=h0), 1, ws
    return dict(q=q, k=k, v=v, g=la, beta=gen(8, 1, T, 2).sigmoid(), h0=h0), 1, ws


def call(op, ins, cu, cp=True):
    import chunkgen.torch as cgt
    import chunkgen.torch_cp as tcp

    mod = tcp if cp else cgt
    cut = torch.tensor(cu, dtype=torch.int32) if cu is not None else None
    if op == "sscan":
        return mod.sscan(**ins, delta_softplus=True, cu_seqlens=cut)
    kw = dict(use_qk_l2norm=True) if op == "gdr" else {}
    return getattr(mod, op)(**ins, cu_seqlens=cut, **kw)


def case(name, rank, op, grad, cu):
    """Only the inputs named in `grad` require grad (on every rank); compare with one
    process: the outputs, hT and those inputs' gradients."""
    import chunkgen.torch_cp as tcp

    ins, tax, (wo, wh) = inputs(op, cu)
    full = {n: t.clone().requires_grad_(n in grad) for n, t in ins.items()}
    o, hT = call(op, full, cu, cp=False)
    ((o * wo).sum() + (hT * wh).sum()).backward()
    b = bounds(SPLIT)
    sl = lambda t: t.narrow(tax, b[rank], SPLIT[rank])  # noqa: E731
    mine = {n: (sl(t) if n in SEQ[op] else t).clone().requires_grad_(n in grad) for n, t in ins.items()}
    before = dict(tcp.STATS)
    o_r, hT_r = call(op, mine, cu)
    last = cu is not None or rank == WORLD - 1
    assert o_r.requires_grad, (name, rank, "the output does not require grad")
    ((o_r * sl(wo)).sum() + ((hT_r * wh).sum() if last else 0.0)).backward()
    # one forward exchange, one backward collective, on this rank (and so on every rank)
    calls = [tcp.STATS[k] - before[k] for k in ("exchange_calls", "reverse_calls")]
    assert calls == [1, 1], (name, rank, "exchange and reverse calls", calls)
    pairs = [("o", o_r.detach(), sl(o.detach()))]
    if last:
        pairs.append(("hT", summed(hT_r) if cu is not None else hT_r.detach(), hT.detach()))
    for n in grad:
        g = mine[n].grad
        pairs.append((f"d{n}", g if n in SEQ[op] else summed(g, mine[n]),
                      sl(full[n].grad) if n in SEQ[op] else full[n].grad))
    compare(name, rank, pairs)


def mixed(rank):
    """One rank's inputs do not require grad (or it runs under no_grad): every rank raises."""
    for op in ("ssd", "sscan", "gdr"):
        ins, tax, _ = inputs(op, CU)
        b = bounds(SPLIT)

        def run(off=2, no_grad=False):
            mine = {n: (t.narrow(tax, b[rank], SPLIT[rank]) if n in SEQ[op] else t).clone() for n, t in ins.items()}
            for n in SEQ[op][:3]:
                mine[n].requires_grad_(rank != off)
            if no_grad and rank == off:
                with torch.no_grad():
                    return call(op, mine, CU)
            return call(op, mine, CU)

        want = "rank 2 has no input that requires grad (or grad mode off) but rank 0 has inputs that require grad"
        expect_error(f"{op}: rank 2's inputs do not require grad", rank, run, want)
        expect_error(f"{op}: rank 2 under torch.no_grad", rank, lambda: run(no_grad=True), want)
        want0 = ("rank 1 has inputs that require grad but rank 0 has no input that requires grad (or grad mode off)")
        expect_error(f"{op}: rank 0's inputs do not require grad", rank, lambda: run(off=0), want0)
        with torch.no_grad():  # every rank without grad: the forward works
            o, _ = run(off=-1)
        assert not o.requires_grad
        o, _ = run(off=-1)  # and with it (the group still works after the errors)
        o.sum().backward()


def worker(rank, path, which):
    in_group(rank, path, lambda: checks(rank, which), timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT))


def checks(rank, which):
    for cu in (CU, None):
        tag = "varlen" if cu else "one sequence"
        for op, grad in (("ssd", ("q", "k", "v")), ("sscan", ("x", "B", "C", "D", "z")), ("gdr", ("q", "k", "v"))):
            if which in ("all", op):
                case(f"{op} {tag}, only {' '.join(grad)} need grad", rank, op, grad, cu)
    for op in ("ssd", "sscan", "gdr"):
        if which in ("all", op, "h0"):
            case(f"{op} one sequence, only h0 needs grad", rank, op, ("h0",), None)
            case(f"{op} varlen, only h0 needs grad", rank, op, ("h0",), CU)
    if which in ("all", "mixed"):
        mixed(rank)


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    with tempfile.TemporaryDirectory() as d:
        ctx = mp.start_processes(worker, args=(os.path.join(d, "rendezvous"), which), nprocs=WORLD, join=False,
                                 start_method="spawn")
        end = time.monotonic() + DEADLINE
        try:
            while not ctx.join(timeout=max(1.0, min(5.0, end - time.monotonic()))):
                if time.monotonic() > end:
                    raise SystemExit(f"FAILED: the ranks did not finish in {DEADLINE:.0f} s (a hang)")
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
                    p.join()


if __name__ == "__main__":
    sys.exit(main())
