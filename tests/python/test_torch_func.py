"""chunkgen.torch beyond plain eager autograd (issue #39 items 4, 5, 6, 7): second-order
gradients are refused by name (never a silent None or zero), cu_seqlens that is empty or
on the meta device is refused as numpy and JAX refuse it, meta tensors give meta outputs,
and the torch.func transforms either work (grad, vjp, jacrev, vmap) or are refused by name
(forward mode: jvp, jacfwd, hessian, torch.autograd.forward_ad)."""
import warnings

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import chunkgen
import chunkgen.torch as ct

NOT_DIFF = "chunkgen's backward is not differentiable"
NO_FWD = "forward-mode AD .* is not supported"


def ssd_in(B=2, T=9, G=1, H=2, dk=4, dv=3, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    return r(B, T, G, dk), r(B, T, G, dk), r(B, T, H, dv), -torch.rand(B, T, H, generator=g, dtype=dtype)


def sscan_in(B=2, L=9, D=3, N=2, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    return (r(B, L, D), torch.rand(B, L, D, generator=g, dtype=dtype), -torch.rand(D, N, generator=g, dtype=dtype),
            r(B, L, N), r(B, L, N))


# ------------------------------------------------------------ item 4

def _ssd_loss(q, k, v, la):
    return ct.ssd(q, k, v, la)[0].square().sum()


def _sscan_loss(x, delta, A, B, C):
    return ct.sscan(x, delta, A, B, C)[0].square().sum()


@pytest.mark.parametrize("op", ["ssd", "sscan"])
@pytest.mark.parametrize("path", ["function", "op"])
def test_second_order_refused(op, path):
    ins = [t.requires_grad_() for t in (ssd_in() if op == "ssd" else sscan_in())]
    loss = _ssd_loss if op == "ssd" else _sscan_loss
    if path == "op":  # the registered op (what torch.compile and dispatch modes call)
        if op == "ssd":
            loss = lambda q, k, v, la: ct.ssd_fwd(q, k, v, la, None, "token")[0].square().sum()  # noqa: E731
        else:
            loss = lambda *a: ct.sscan_fwd(*a, None, None, None, None, False)[0].square().sum()  # noqa: E731
    g = torch.autograd.grad(loss(*ins), ins[0], create_graph=True)[0]  # first order with a graph: fine
    assert g.requires_grad
    # differentiating it again: refused by name, whichever input is asked for (before: None
    # with allow_unused=True)
    for wrt in (ins[0], ins[2]):
        with pytest.raises(RuntimeError, match=NOT_DIFF):
            torch.autograd.grad(g.sum(), wrt, allow_unused=True)
    # the input also feeds another differentiable op (before: zeros, the chunkgen term lost)
    g = torch.autograd.grad(loss(*ins) + (ins[0] ** 3).sum(), ins[0], create_graph=True)[0]
    with pytest.raises(RuntimeError, match=NOT_DIFF):
        torch.autograd.grad(g.sum(), ins[0])


def test_first_order_with_create_graph_unchanged():
    ins = [t.requires_grad_() for t in ssd_in()]
    g1 = torch.autograd.grad(_ssd_loss(*ins), ins)
    g2 = torch.autograd.grad(_ssd_loss(*ins), ins, create_graph=True)
    for a, b in zip(g1, g2):
        assert torch.equal(a, b.detach())


# ------------------------------------------------------------ item 5

@pytest.mark.parametrize("op", ["ssd", "sscan"])
def test_cu_seqlens_empty_refused_like_numpy(op):
    ins = [t.float()[:1] if t.dim() > 2 else t.float() for t in (ssd_in() if op == "ssd" else sscan_in())]
    empty = np.zeros(0, np.int32)
    with pytest.raises(ValueError) as np_err:
        getattr(chunkgen, op)(*(t.numpy() for t in ins), cu_seqlens=empty)
    for dt in (torch.int32, torch.int64):
        with pytest.raises(ValueError) as t_err:  # before: run as if no cu_seqlens were given
            getattr(ct, op)(*ins, cu_seqlens=torch.zeros(0, dtype=dt))
        assert str(t_err.value) == str(np_err.value)
        assert "cu_seqlens: shape (0) but expected at least 2 offsets" in str(t_err.value)
    # traced (fake tensors): the same message
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(t) for t in ins]
        with pytest.raises(ValueError, match=r"cu_seqlens: shape \(0\) but expected at least 2 offsets"):
            getattr(ct, op)(*fake, cu_seqlens=mode.from_tensor(torch.zeros(0, dtype=torch.int32)))


def test_cu_seqlens_on_meta_refused():
    q, k, v, la = (t.float()[:1] for t in ssd_in())
    with pytest.raises(ValueError, match="cu_seqlens: on meta, without data"):
        ct.ssd(q, k, v, la, cu_seqlens=torch.tensor([0, 4, 9], dtype=torch.int32, device="meta"))
    with pytest.raises(ValueError, match="cu_seqlens: on meta, without data"):
        ct.ssd(q, k, v, la, cu_seqlens=torch.tensor([0, 4, 9], dtype=torch.int32, device="meta").expand(3))


# ------------------------------------------------------------ item 6

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_meta_tensors_eager(dtype):
    q, k, v, la = (t.to("meta") for t in ssd_in(dtype=torch.float32))
    o, hT = ct.ssd(q.to(dtype), k, v.to(dtype), la)  # before: "q: null data pointer"
    assert o.device.type == hT.device.type == "meta"
    assert o.shape == v.shape and o.dtype == dtype and hT.shape == (2, 2, 4, 3) and hT.dtype == torch.float32
    with pytest.raises(ValueError, match=r"k: shape \(2, 3, 1, 4\) but expected \(2, 9, 1, 4\)"):
        ct.ssd(q, k[:, :3], v, la)
    # gradients of meta tensors: meta, with their inputs' shapes
    qg = q.clone().requires_grad_()
    (g,) = torch.autograd.grad(ct.ssd(qg, k, v, la)[0].sum(), qg)
    assert g.device.type == "meta" and g.shape == q.shape
    x, d, A, B, C = (t.to("meta") for t in sscan_in(dtype=torch.float32))
    y, hT = ct.sscan(x, d, A, B, C, cu_seqlens=None)
    assert y.device.type == "meta" and y.shape == x.shape and hT.shape == (2, 3, 2)


# ------------------------------------------------------------ item 7

def test_func_grad_vjp_jacrev_match_autograd():
    q, k, v, la = ssd_in()
    qr = q.clone().requires_grad_()
    (want,) = torch.autograd.grad(_ssd_loss(qr, k, v, la), qr)
    f = lambda q: _ssd_loss(q, k, v, la)  # noqa: E731
    assert torch.equal(torch.func.grad(f)(q), want)  # before: no setup_context / no storage
    o, pull = torch.func.vjp(lambda q: ct.ssd(q, k, v, la)[0], q)
    assert torch.equal(pull(2 * o)[0], want)
    jac = torch.func.jacrev(lambda q: ct.ssd(q, k, v, la)[0].sum(dim=(0, 1)))(q)
    assert jac.shape == (2, 3) + q.shape


def test_vmap_folds_into_batch(monkeypatch):
    q, k, v, la = ssd_in()
    Q = torch.randn(3, *q.shape, dtype=q.dtype)
    want = [ct.ssd(Q[i], k, v, la) for i in range(3)]
    calls = []
    run = ct._run
    monkeypatch.setattr(ct, "_run", lambda *a: calls.append(a[0]) or run(*a))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (torch warns when it falls back to a loop)
        o, hT = torch.vmap(ct.ssd, in_dims=(0, None, None, None))(Q, k, v, la)
    assert calls == ["ssd_fwd"], calls  # one call for the whole mapped batch
    assert torch.equal(o, torch.stack([w[0] for w in want])) and torch.equal(hT, torch.stack([w[1] for w in want]))
    # head-major views, a mapped axis that is not the first, h0 mapped too
    h0 = torch.randn(2, 3, 2, 4, 3, dtype=q.dtype)
    o, hT = torch.vmap(lambda q, h0: ct.ssd(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                            la.transpose(1, 2), h0, layout="head"), in_dims=(0, 1))(Q, h0)
    for i in range(3):
        wo, whT = ct.ssd(Q[i], k, v, la, h0[:, i])
        assert torch.allclose(o[i].transpose(1, 2), wo, rtol=0, atol=1e-12) and torch.allclose(hT[i], whT, rtol=0,
                                                                                                 atol=1e-12)


def test_vmap_of_grad_and_unfoldable_cases():
    q, k, v, la = ssd_in()
    Q = torch.randn(3, *q.shape, dtype=q.dtype)
    g = torch.vmap(torch.func.grad(lambda q: _ssd_loss(q, k, v, la)))(Q)
    for i in range(3):
        qi = Q[i].clone().requires_grad_()
        assert torch.allclose(g[i], torch.autograd.grad(_ssd_loss(qi, k, v, la), qi)[0], rtol=0, atol=1e-12)
    # cu_seqlens (B = 1): one call per mapped element
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    o = torch.vmap(lambda q: ct.ssd(q[:1], k[:1], v[:1], la[:1], cu_seqlens=cu)[0])(Q)
    for i in range(3):
        assert torch.equal(o[i], ct.ssd(Q[i][:1], k[:1], v[:1], la[:1], cu_seqlens=cu)[0])
    # the selective scan with a mapped A (no batch axis): per element; and its gradient
    x, d, A, B, C = sscan_in()
    AA = -torch.rand(3, *A.shape, dtype=A.dtype)
    y = torch.vmap(lambda A: ct.sscan(x, d, A, B, C)[0])(AA)
    gA = torch.vmap(torch.func.grad(lambda A: _sscan_loss(x, d, A, B, C)))(AA)
    for i in range(3):
        assert torch.equal(y[i], ct.sscan(x, d, AA[i], B, C)[0])
        Ai = AA[i].clone().requires_grad_()
        assert torch.allclose(gA[i], torch.autograd.grad(_sscan_loss(x, d, Ai, B, C), Ai)[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("op", ["ssd", "sscan"])
def test_forward_mode_refused(op):
    ins = ssd_in() if op == "ssd" else sscan_in()
    f = (lambda t: ct.ssd(t, *ins[1:])[0]) if op == "ssd" else (lambda t: ct.sscan(t, *ins[1:])[0])
    t0 = ins[0]
    with pytest.raises(RuntimeError, match=f"chunkgen.torch.{op}: " + NO_FWD):  # before: no storage
        torch.func.jvp(f, (t0,), (torch.ones_like(t0),))
    with pytest.raises(RuntimeError, match=NO_FWD):
        torch.func.jacfwd(lambda t: f(t).sum())(t0)
    with pytest.raises(RuntimeError, match=NO_FWD):
        torch.func.hessian(lambda t: f(t).sum())(t0)
    with fwAD.dual_level():  # before: the tangent silently dropped (None)
        with pytest.raises(RuntimeError, match=NO_FWD):
            f(fwAD.make_dual(t0, torch.ones_like(t0)))
        assert f(t0).shape  # no tangent given: runs
    with pytest.raises(RuntimeError, match=NOT_DIFF):  # a grad of a grad under torch.func
        torch.func.grad(lambda t: torch.func.grad(lambda u: f(u).square().sum())(t).sum())(t0)
