"""Run by test_cp_torch.py: 4 gloo processes (torch.multiprocessing.spawn) run
chunkgen.torch_cp on their pieces of a sequence and compare with one process's
chunkgen.torch call on the whole: float32, forward, final state and every gradient within
1e-5 relative, odd shapes (dk 48, dv 40, T = 203 neither a multiple of the chunk nor of
4, uneven splits, a sequence spanning three ranks, varlen, grouped heads, both layouts).
Then: the exchanged state perturbed (forward) and its gradient perturbed (backward) must
fail; ranks that disagree (shape, dtype, version, options) must raise on every rank,
after which the group still works. Prints ALL OK from rank 0."""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 4
TOL = 1e-5


def rel(a, b):
    return float((a - b).abs().max() / (b.abs().max() + 1e-30))


def gen(seed, *shape, scale=0.5):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale


def bounds(split):
    s = [0]
    for n in split:
        s.append(s[-1] + n)
    return s


def compare(name, rank, pairs, expect_fail=False):
    """pairs: (what, got, want); raise unless all within TOL (or, expect_fail, unless one
    is not). The verdict is the same on every rank (all_reduce of the worst error)."""
    errs = {w: rel(a, b) for w, a, b in pairs}
    worst = torch.tensor([max(errs.values())], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    ok = worst.item() < TOL
    if rank == 0:
        print(f"{name}: worst {worst.item():.2e}", flush=True)
    if expect_fail:
        assert not ok, (name, "the perturbation went unnoticed", errs)
    else:
        assert ok, (name, rank, errs)
    return errs


def summed(t, like=None):
    """The sum over ranks (a rank whose copy got no gradient: None, counts as 0)."""
    t = torch.zeros_like(like) if t is None else t.detach().clone()
    dist.all_reduce(t)
    return t


def shapes(layout, B, T, G, H, dk, dv, cu):
    """(head-major?, T's axis, q/k shape, v shape, per-head gate shape, number of states)"""
    head = layout == "head"
    qs = (B, G, T, dk) if head else (B, T, G, dk)
    vs = (B, H, T, dv) if head else (B, T, H, dv)
    ls = (B, H, T) if head else (B, T, H)
    return head, 2 if head else 1, qs, vs, ls, len(cu) - 1 if cu is not None else B


def ssd_case(name, rank, layout, B, T, G, H, dk, dv, split, h0=True, cu=None, expect_fail=False):
    import chunkgen.torch as cgt
    import chunkgen.torch_cp as cp

    head, tax, qs, vs, ls, nst = shapes(layout, B, T, G, H, dk, dv, cu)
    q, k, v = gen(1, *qs), gen(2, *qs), gen(3, *vs)
    la = -gen(4, *ls, scale=0.01).abs()
    hh = gen(5, nst, H, dk, dv) if h0 else None
    wo, wh = gen(6, *vs), gen(7, nst, H, dk, dv)
    cut = torch.tensor(cu, dtype=torch.int32) if cu is not None else None
    full = [t.clone().requires_grad_() if t is not None else None for t in (q, k, v, la, hh)]
    o, hT = cgt.ssd(*full, layout=layout, cu_seqlens=cut)
    ((o * wo).sum() + (hT * wh).sum()).backward()
    b = bounds(split)
    sl = lambda t: t.narrow(tax, b[rank], split[rank])  # noqa: E731
    mine = [sl(t).clone().requires_grad_() for t in (q, k, v, la)] + [hh.clone().requires_grad_() if h0 else None]
    o_r, hT_r = cp.ssd(*mine, layout=layout, cu_seqlens=cut)
    last = cu is not None or rank == WORLD - 1
    loss = (o_r * sl(wo)).sum() + ((hT_r * wh).sum() if last else 0.0)
    loss.backward()
    hT_all = summed(hT_r) if cu is not None else hT_r
    pairs = [("o", o_r.detach(), sl(o.detach()))]
    if last:
        pairs.append(("hT", hT_all.detach(), hT.detach()))
    pairs += [(f"d{n}", sl_t.grad, sl(f.grad)) for n, sl_t, f in zip(("q", "k", "v", "log_alpha"), mine, full)]
    if h0:
        pairs.append(("dh0", summed(mine[4].grad, mine[4]), full[4].grad))
    compare(name, rank, pairs, expect_fail)


def gdr_case(name, rank, layout, B, T, G, H, dk, dv, split, h0=True, cu=None, l2=True, scale=None,
             expect_fail=False):
    import chunkgen.torch as cgt
    import chunkgen.torch_cp as cp

    head, tax, qs, vs, ls, nst = shapes(layout, B, T, G, H, dk, dv, cu)
    ins = [gen(31, *qs), gen(32, *qs), gen(33, *vs), -gen(34, *ls, scale=0.02).abs(), gen(35, *ls, scale=1.0).sigmoid(),
           gen(36, nst, H, dk, dv) if h0 else None]
    wo, wh = gen(37, *vs), gen(38, nst, H, dk, dv)
    cut = torch.tensor(cu, dtype=torch.int32) if cu is not None else None
    opts = dict(scale=scale, use_qk_l2norm=l2, layout=layout)
    full = [t.clone().requires_grad_() if t is not None else None for t in ins]
    o, hT = cgt.gdr(*full, cu_seqlens=cut, **opts)
    ((o * wo).sum() + (hT * wh).sum()).backward()
    b = bounds(split)
    sl = lambda t: t.narrow(tax, b[rank], split[rank])  # noqa: E731
    mine = [sl(t).clone().requires_grad_() for t in ins[:5]] + [ins[5].clone().requires_grad_() if h0 else None]
    o_r, hT_r = cp.gdr(*mine, cu_seqlens=cut, **opts)
    last = cu is not None or rank == WORLD - 1
    ((o_r * sl(wo)).sum() + ((hT_r * wh).sum() if last else 0.0)).backward()
    pairs = [("o", o_r.detach(), sl(o.detach()))]
    if last:
        pairs.append(("hT", summed(hT_r) if cu is not None else hT_r.detach(), hT.detach()))
    pairs += [(f"d{n}", m.grad, sl(f.grad)) for n, m, f in zip(("q", "k", "v", "g", "beta"), mine, full)]
    if h0:
        pairs.append(("dh0", summed(mine[5].grad, mine[5]), full[5].grad))
    compare(name, rank, pairs, expect_fail)


def sscan_case(name, rank, B, L, D, N, split, G=None, cu=None, softplus=True):
    import chunkgen.torch as cgt
    import chunkgen.torch_cp as cp

    bc = (B, L, G, N) if G else (B, L, N)
    nst = len(cu) - 1 if cu is not None else B
    ins = dict(x=gen(11, B, L, D), delta=gen(12, B, L, D, scale=0.3), A=-0.02 * gen(13, D, N).exp(),
               B=gen(14, *bc), C=gen(15, *bc), D=gen(16, D), z=gen(17, B, L, D), delta_bias=gen(18, D, scale=0.2),
               h0=gen(19, nst, D, N))
    wy, wh = gen(20, B, L, D), gen(21, nst, D, N)
    cut = torch.tensor(cu, dtype=torch.int32) if cu is not None else None
    full = {n: t.clone().requires_grad_() for n, t in ins.items()}
    y, hT = cgt.sscan(**full, delta_softplus=softplus, cu_seqlens=cut)
    ((y * wy).sum() + (hT * wh).sum()).backward()
    b = bounds(split)
    seqd = ("x", "delta", "B", "C", "z")
    sl = lambda t: t.narrow(1, b[rank], split[rank])  # noqa: E731
    mine = {n: (sl(t) if n in seqd else t).clone().requires_grad_() for n, t in ins.items()}
    y_r, hT_r = cp.sscan(**mine, delta_softplus=softplus, cu_seqlens=cut)
    last = cu is not None or rank == WORLD - 1
    ((y_r * sl(wy)).sum() + ((hT_r * wh).sum() if last else 0.0)).backward()
    pairs = [("y", y_r.detach(), sl(y.detach()))]
    if last:
        pairs.append(("hT", summed(hT_r) if cu is not None else hT_r.detach(), hT.detach()))
    for n in ins:
        g = mine[n].grad
        pairs.append((f"d{n}", g if n in seqd else summed(g, mine[n]), sl(full[n].grad) if n in seqd else full[n].grad))
    compare(name, rank, pairs)


def nan_isolation(rank, split, op="ssd"):
    """A NaN in sequence 0 (crossing rank 0 -> 1, where sequence 1 starts) must not reach
    sequence 1 on the later ranks, as in the one-process call (SSD or the gated delta
    rule: its transition is a matrix, cut when all zero)."""
    import chunkgen.torch as cgt
    import chunkgen.torch_cp as cp

    T = 203
    q, v, la = gen(1, 1, T, 1, 48), gen(3, 1, T, 2, 40), -gen(4, 1, T, 2, scale=0.01).abs()
    v[0, 5] = float("nan")
    cu = torch.tensor([0, 60, 203], dtype=torch.int32)
    extra = (la.sigmoid(),) if op == "gdr" else ()  # (beta)
    kw = dict(use_qk_l2norm=True) if op == "gdr" else {}
    o, hT = getattr(cgt, op)(q, q, v, la, *extra, cu_seqlens=cu, **kw)
    assert torch.isnan(o[0, 5:60]).any() and torch.isnan(hT[0]).any()  # (the NaN does spread in sequence 0)
    b = bounds(split)
    sl = lambda t: t.narrow(1, b[rank], split[rank])  # noqa: E731
    o_r, hT_r = getattr(cp, op)(sl(q), sl(q), sl(v), sl(la), *map(sl, extra), cu_seqlens=cu, **kw)
    keep = torch.arange(b[rank], b[rank + 1]) >= 60
    assert not torch.isnan(o_r[0, keep]).any(), (op, rank, "the NaN crossed into the next sequence")
    if keep.any():
        assert rel(o_r[0, keep], sl(o)[0, keep]) < TOL
    if rank == WORLD - 1:
        assert rel(hT_r[1], hT[1]) < TOL
        print(f"{op} varlen, a NaN in the sequence before: isolated", flush=True)


def expect_error(name, rank, fn, *words):
    try:
        fn()
    except ValueError as e:
        msg = str(e)
        assert all(w in msg for w in words), (name, rank, msg)
        if rank == 0:
            print(f"{name}: every rank raised: {msg}", flush=True)
        return
    raise AssertionError(f"{name}: rank {rank} raised nothing")


def faults(rank):
    import chunkgen._cp as cpc
    import chunkgen.torch_cp as cp

    def call(dk=48, dtype=torch.float32, layout="token", T=10):
        q = gen(1, 1, T, 1, dk).to(dtype)
        v = gen(3, 1, T, 2, 40).to(dtype)
        return cp.ssd(q, q, v, -gen(4, 1, T, 2).abs(), layout=layout)

    expect_error("one rank with another dk", rank, lambda: call(dk=40 if rank == 2 else 48),
                 "rank 2 has q float32 shape (1, T_local, 1, 40) but rank 0 has q float32 shape (1, T_local, 1, 48)")
    expect_error("one rank with another dtype", rank, lambda: call(dtype=torch.float64 if rank == 1 else torch.float32),
                 "rank 1 has q float64")
    expect_error("one rank with other options", rank, lambda: call(layout="head" if rank == 3 else "token"),
                 "rank 3 has option layout (0 token, 1 head) = 1 but rank 0 has option layout (0 token, 1 head) = 0")
    real = cpc._version_number
    if rank == 3:
        cpc._version_number = lambda: real() + 1
    expect_error("one rank with another chunkgen version", rank, call, "rank 3 has chunkgen version")
    cpc._version_number = real
    expect_error("one rank with a bad layout", rank, lambda: call(layout="tokens" if rank == 1 else "token"),
                 "could not describe" if rank != 1 else "layout: 'tokens'")
    expect_error("an empty rank", rank, lambda: call(T=0 if rank == 1 else 10), "local token counts [10, 0, 10, 10]")
    def call_gdr(scale=None, l2=True):
        q = gen(1, 1, 10, 1, 48)
        v = gen(3, 1, 10, 2, 40)
        g = -gen(4, 1, 10, 2).abs()
        return cp.gdr(q, q, v, g, g.sigmoid(), scale=scale, use_qk_l2norm=l2)

    expect_error("gdr: one rank with another scale", rank, lambda: call_gdr(scale=0.5 if rank == 1 else None),
                 "rank 1 has option scale = 0.5 but rank 0 has option scale = the default")
    expect_error("gdr: one rank without the L2 norm", rank, lambda: call_gdr(l2=rank != 2),
                 "rank 2 has option use_qk_l2norm = 0 but rank 0 has option use_qk_l2norm = 1")
    expect_error("gdr: one rank with a bad scale", rank, lambda: call_gdr(scale=-1.0 if rank == 3 else None),
                 "could not describe" if rank != 3 else "scale: -1.0")
    call_gdr()
    call()  # the group still works after the errors (no rank is left waiting)


def in_group(rank, path, body, timeout=None):
    """body() on this rank of a gloo group of WORLD processes (rendezvous in the file path;
    timeout: one collective's, None: gloo's), one thread a rank; then a barrier, ALL OK
    printed by rank 0, and the group closed."""
    kw = {"timeout": timeout} if timeout is not None else {}
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=WORLD, **kw)
    torch.set_num_threads(1)
    body()
    dist.barrier()
    if rank == 0:
        print("ALL OK", flush=True)
    dist.destroy_process_group()


def worker(rank, path, which):
    in_group(rank, path, lambda: checks(rank, which))


def checks(rank, which):
    import chunkgen.torch_cp as cp

    bal = cp.split_sizes(203, WORLD)  # [51, 51, 51, 50]
    if which in ("all", "exact", "ssd"):
        ssd_case("ssd token h0 balanced", rank, "token", 2, 203, 1, 2, 48, 40, bal)
        ssd_case("ssd head uneven split", rank, "head", 1, 203, 2, 4, 48, 40, [60, 10, 100, 33], h0=False)
        # sequence [17, 150) spans ranks 0, 1, 2; an empty sequence
        ssd_case("ssd varlen", rank, "token", 1, 203, 1, 2, 48, 40, bal, cu=[0, 17, 17, 150, 203])
        nan_isolation(rank, bal)
    if which in ("all", "exact", "sscan"):
        sscan_case("sscan balanced", rank, 2, 203, 40, 12, bal)
        sscan_case("sscan varlen grouped", rank, 1, 203, 40, 12, [70, 3, 100, 30], G=2, cu=[0, 17, 17, 150, 203])
    if which in ("all", "exact", "gdr"):
        # dk 48, dv 40, T = 203, L2 norm; varlen: sequence [17, 150) spans ranks 0, 1, 2
        gdr_case("gdr token h0 l2norm balanced", rank, "token", 2, 203, 1, 2, 48, 40, bal, scale=0.3)
        gdr_case("gdr head grouped uneven", rank, "head", 1, 203, 2, 4, 48, 40, [60, 10, 100, 33], h0=False)
        gdr_case("gdr varlen", rank, "token", 1, 203, 1, 2, 48, 40, bal, cu=[0, 17, 17, 150, 203])
        nan_isolation(rank, bal, "gdr")
    if which in ("all", "faults", "perturb"):
        cp._PERTURB = lambda g: g * (1 + 1e-3)
        ssd_case("ssd, exchanged state perturbed", rank, "token", 2, 203, 1, 2, 48, 40, bal, expect_fail=True)
        cp._PERTURB, cp._PERTURB_GRAD = None, (lambda g: g * (1 + 1e-3))
        ssd_case("ssd, the exchange's gradient perturbed", rank, "token", 2, 203, 1, 2, 48, 40, bal, expect_fail=True)
        cp._PERTURB_GRAD = None
        cp._PERTURB = lambda g: g * (1 + 1e-3)
        gdr_case("gdr, exchanged state perturbed", rank, "token", 1, 203, 1, 2, 48, 40, bal, cu=[0, 17, 17, 150, 203],
                 expect_fail=True)
        cp._PERTURB = None
    if which in ("all", "faults"):
        faults(rank)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(os.path.join(d, "rendezvous"), which), nprocs=WORLD, join=True)
