"""chunkgen.torch.ssd: forward and every gradient vs the float64 PyTorch recurrence."""
import itertools

import pytest
import torch

import chunkgen.torch as ct
from conftest import cuda
from ref import TOL_BWD, TOL_FWD, rel_err, ssd_ref


def make(B, T, G, H, dk, dv, h0, dtype=torch.float32, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    t = dict(q=r(B, T, G, dk) / dk ** 0.5, k=r(B, T, G, dk) / dk ** 0.5, v=r(B, T, H, dv),
             log_alpha=-torch.rand(B, T, H, generator=g, dtype=torch.float64) * 0.5,
             h0=r(B, H, dk, dv) if h0 else None)
    return {n: (x.to(dtype=dtype, device=device).requires_grad_() if x is not None else None) for n, x in t.items()}


def grads_of(loss, tensors):
    names = [n for n, x in tensors.items() if x is not None]
    gs = torch.autograd.grad(loss, [tensors[n] for n in names])
    return dict(zip(names, gs))


def run_case(T, dk, layout, h0, dhT, device="cpu"):
    B, G, H, dv = 2, 2, 4, 40
    x = make(B, T, G, H, dk, dv, h0, device=device)
    x64 = {n: (t.detach().double().cpu().requires_grad_() if t is not None else None) for n, t in x.items()}
    gen = torch.Generator().manual_seed(1)
    w_o = torch.randn(B, T, H, dv, generator=gen, dtype=torch.float64)
    w_h = torch.randn(B, H, dk, dv, generator=gen, dtype=torch.float64)

    # chunkgen, float32; head-major given as permuted views of the token-major leaves
    if layout == "head":
        args = [x[n].transpose(1, 2) for n in ("q", "k", "v")] + [x["log_alpha"].transpose(1, 2)]
        o, hT = ct.ssd(*args, x["h0"], layout="head")
        assert o.shape == (B, H, T, dv)
        o = o.transpose(1, 2)
    else:
        o, hT = ct.ssd(x["q"], x["k"], x["v"], x["log_alpha"], x["h0"])
    assert o.dtype == torch.float32 and hT.shape == (B, H, dk, dv)
    loss = (o.double() * w_o.to(device)).sum() + ((hT.double() * w_h.to(device)).sum() if dhT else 0)
    g = grads_of(loss, x)

    o_r, hT_r = ssd_ref(x64["q"], x64["k"], x64["v"], x64["log_alpha"], x64["h0"])
    loss_r = (o_r * w_o).sum() + ((hT_r * w_h).sum() if dhT else 0)
    g_r = grads_of(loss_r, x64)

    assert rel_err(o, o_r) < TOL_FWD
    assert rel_err(hT, hT_r) < TOL_FWD
    assert set(g) == set(g_r)
    for n in g:
        assert rel_err(g[n], g_r[n]) < TOL_BWD, n


@pytest.mark.parametrize("T,dk,layout,h0,dhT",
                         list(itertools.product([1, 37], [7, 48], ["token", "head"], [False, True], [False, True])))
def test_ssd_matches_reference(T, dk, layout, h0, dhT):
    run_case(T, dk, layout, h0, dhT)


@cuda
@pytest.mark.parametrize("T,layout,h0", [(1, "token", True), (37, "head", False), (37, "token", True)])
def test_ssd_cuda_matches_reference(T, layout, h0):
    run_case(T, 48, layout, h0, True, device="cuda")


def test_ssd_gradcheck_float64_ref():
    x = make(1, 5, 1, 2, 3, 2, True, dtype=torch.float64)
    f = lambda q, k, v, la, h0: ct.ssd(q, k, v, la, h0)  # noqa: E731
    assert torch.autograd.gradcheck(f, tuple(x.values()), eps=1e-6, atol=1e-7)
    xh = make(1, 4, 2, 4, 2, 3, False, dtype=torch.float64)
    fh = lambda q, k, v, la: ct.ssd(q, k, v, la, layout="head")  # noqa: E731
    assert torch.autograd.gradcheck(fh, tuple(t.transpose(1, 2) for n, t in xh.items() if t is not None))


def test_ssd_opcheck():
    x = make(1, 5, 2, 4, 3, 5, True)
    args = (x["q"], x["k"], x["v"], x["log_alpha"], x["h0"], "token")
    torch.library.opcheck(torch.ops.chunkgen.ssd_fwd.default, args)
    torch.library.opcheck(torch.ops.chunkgen.ssd_fwd.default, args[:4] + (None, "token"))
    d = {n: t.detach() for n, t in x.items()}
    do = torch.randn(1, 5, 4, 5)
    torch.library.opcheck(torch.ops.chunkgen.ssd_bwd.default,
                          (d["q"], d["k"], d["v"], d["log_alpha"], d["h0"], do, torch.randn(1, 4, 3, 5), "token"))
    torch.library.opcheck(torch.ops.chunkgen.ssd_bwd.default,
                          (d["q"], d["k"], d["v"], d["log_alpha"], None, do, None, "token"))


def test_ssd_noncontiguous_inputs():
    # Outer-dim strides (slices of larger tensors) run without a copy; an innermost
    # stride != 1 is copied by the binding. Both must give the contiguous result.
    x = make(1, 9, 2, 4, 6, 5, True)
    d = {n: t.detach() for n, t in x.items()}
    big_v = torch.zeros(1, 9, 7, 5)
    big_v[:, :, 1:5] = d["v"]
    v_outer = big_v[:, :, 1:5]                       # stride on the heads axis only
    q_inner = torch.stack([d["q"], d["q"]], -1)[..., 0]  # innermost stride 2
    la_inner = torch.stack([d["log_alpha"]] * 3, -1)[..., 1]
    assert not v_outer.is_contiguous() and q_inner.stride(-1) == 2
    o, hT = ct.ssd(q_inner, d["k"], v_outer, la_inner, d["h0"])
    o_c, hT_c = ct.ssd(d["q"], d["k"], d["v"], d["log_alpha"], d["h0"])
    torch.testing.assert_close(o, o_c, rtol=0, atol=0)
    torch.testing.assert_close(hT, hT_c, rtol=0, atol=0)
    # a broadcast log_alpha (stride 0 over T)
    la_b = d["log_alpha"][:, :1].expand(1, 9, 4)
    o_b, _ = ct.ssd(d["q"], d["k"], d["v"], la_b, d["h0"])
    o_bc, _ = ct.ssd(d["q"], d["k"], d["v"], la_b.contiguous(), d["h0"])
    torch.testing.assert_close(o_b, o_bc, rtol=0, atol=0)


def test_ssd_grouped_gradients_summed_per_group():
    # G = 1 < H = 4: the q/k gradient is the sum over the group's heads, so it equals
    # the gradient through repeating q/k per head.
    x = make(1, 6, 1, 4, 3, 2, False)
    o, _ = ct.ssd(x["q"], x["k"], x["v"], x["log_alpha"])
    gq, gk = torch.autograd.grad(o.sum(), [x["q"], x["k"]])
    qr = x["q"].detach().repeat(1, 1, 4, 1).requires_grad_()
    kr = x["k"].detach().repeat(1, 1, 4, 1).requires_grad_()
    o2, _ = ct.ssd(qr, kr, x["v"], x["log_alpha"])
    gq2, gk2 = torch.autograd.grad(o2.sum(), [qr, kr])
    torch.testing.assert_close(gq, gq2.sum(2, keepdim=True), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gk, gk2.sum(2, keepdim=True), rtol=1e-5, atol=1e-5)



def test_inference_fast_path_matches_op():
    # Eager calls with nothing requiring grad skip the dispatcher; the result must be
    # the registered op's, and fake tensors / grad / dispatch modes must take the op.
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    x = make(1, 6, 2, 4, 3, 5, True)
    d = tuple(x[n].detach() for n in ("q", "k", "v", "log_alpha", "h0"))
    assert ct._eager_direct(d) and not ct._eager_direct(tuple(x.values()))
    with torch.no_grad():
        assert ct._eager_direct(tuple(x.values()))
        o, hT = ct.ssd(*d)
        with FlopCounterMode(display=False):
            assert not ct._eager_direct(d)
    o_op, hT_op = torch.ops.chunkgen.ssd_fwd(*d, "token")
    torch.testing.assert_close(o, o_op, rtol=0, atol=0)
    torch.testing.assert_close(hT, hT_op, rtol=0, atol=0)
    with FakeTensorMode() as mode:
        f = tuple(mode.from_tensor(t) for t in d)
        assert not ct._eager_direct(f)
        o_f, hT_f = ct.ssd(*f)
        assert o_f.shape == o.shape and hT_f.shape == hT.shape


@pytest.mark.parametrize("h0", [False, True])
def test_eager_autograd_function_matches_registered_op(h0):
    # Eager calls with gradients take an autograd.Function (no dispatcher); its forward and
    # gradients must be the registered op's (torch.compile and opcheck take that one), bit
    # for bit (deterministic, the same C calls).
    x = make(2, 37, 2, 4, 7, 5, h0)
    ins = tuple(x[n] for n in ("q", "k", "v", "log_alpha", "h0"))
    assert ct._path(ins) == "function"
    assert ct._path(tuple(torch.nn.Parameter(t.detach()) if t is not None else None for t in ins)) == "function"
    o, hT = ct.ssd(*ins)
    assert type(o.grad_fn).__name__.startswith("SsdFwdFunction")
    o_op, hT_op = torch.ops.chunkgen.ssd_fwd(*ins, "token")
    assert "SsdFwdFunction" not in type(o_op.grad_fn).__name__
    w = torch.randn(o.shape, generator=torch.Generator().manual_seed(2))
    leaves = [t for t in ins if t is not None]
    g = torch.autograd.grad((o * w).sum() + hT.sum(), leaves)
    g_op = torch.autograd.grad((o_op * w).sum() + hT_op.sum(), leaves)
    torch.testing.assert_close(o, o_op, rtol=0, atol=0)
    for a, b in zip(g, g_op):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
