"""chunkgen.torch.sscan: forward and every gradient vs the float64 PyTorch recurrence."""
import itertools

import pytest
import torch

import chunkgen.torch as ct
from conftest import cuda
from ref import TOL_BWD, TOL_FWD, rel_err, sscan_ref

NAMES = ("x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0")


def make(Bsz, L, D, N, G, opt, h0, dtype=torch.float32, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    u = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)  # noqa: E731
    bc = (Bsz, L, G, N) if G else (Bsz, L, N)
    t = dict(x=r(Bsz, L, D), delta=u(Bsz, L, D) * 0.5, A=-u(D, N) - 0.2, B=r(*bc), C=r(*bc),
             D=r(D) if opt else None, z=r(Bsz, L, D) if opt else None, delta_bias=u(D) * 0.2 if opt else None,
             h0=r(Bsz, D, N) if h0 else None)
    return {n: (x.to(dtype=dtype, device=device).requires_grad_() if x is not None else None) for n, x in t.items()}


def run_case(L, G, opt, softplus, h0, dhT, device="cpu"):
    Bsz, D, N = 2, 6, 5
    x = make(Bsz, L, D, N, G, opt, h0, device=device)
    x64 = {n: (t.detach().double().cpu().requires_grad_() if t is not None else None) for n, t in x.items()}
    gen = torch.Generator().manual_seed(1)
    w_y = torch.randn(Bsz, L, D, generator=gen, dtype=torch.float64)
    w_h = torch.randn(Bsz, D, N, generator=gen, dtype=torch.float64)

    y, hT = ct.sscan(*(x[n] for n in NAMES), delta_softplus=softplus)
    loss = (y.double() * w_y.to(device)).sum() + ((hT.double() * w_h.to(device)).sum() if dhT else 0)
    y_r, hT_r = sscan_ref(*(x64[n] for n in NAMES), delta_softplus=softplus)
    loss_r = (y_r * w_y).sum() + ((hT_r * w_h).sum() if dhT else 0)
    assert y.shape == (Bsz, L, D) and hT.shape == (Bsz, D, N)
    assert rel_err(y, y_r) < TOL_FWD
    assert rel_err(hT, hT_r) < TOL_FWD
    names = [n for n in NAMES if x[n] is not None]
    g = torch.autograd.grad(loss, [x[n] for n in names])
    g_r = torch.autograd.grad(loss_r, [x64[n] for n in names])
    for n, a, b in zip(names, g, g_r):
        assert rel_err(a, b) < TOL_BWD, n


@pytest.mark.parametrize("L,G,opt,softplus,h0,dhT",
                         [(L, G, opt, opt, h0, dhT) for L, G, opt, h0, dhT in
                          itertools.product([1, 37], [0, 2], [False, True], [False, True], [False, True])])
def test_sscan_matches_reference(L, G, opt, softplus, h0, dhT):
    run_case(L, G, opt, softplus, h0, dhT)


@cuda
@pytest.mark.parametrize("L,G,opt", [(1, 0, True), (37, 2, True), (37, 0, False)])
def test_sscan_cuda_matches_reference(L, G, opt):
    run_case(L, G, opt, opt, True, True, device="cuda")


def test_sscan_gradcheck_float64_ref():
    x = make(1, 4, 2, 3, 0, True, True, dtype=torch.float64)
    f = lambda *a: ct.sscan(*a, delta_softplus=True)  # noqa: E731
    assert torch.autograd.gradcheck(f, tuple(x[n] for n in NAMES))
    xg = make(1, 3, 4, 2, 2, False, False, dtype=torch.float64)
    assert torch.autograd.gradcheck(ct.sscan, tuple(xg[n] for n in NAMES[:5]))


def test_sscan_opcheck():
    x = make(1, 5, 4, 3, 2, True, True)
    args = tuple(x[n] for n in NAMES) + (True,)
    torch.library.opcheck(torch.ops.chunkgen.sscan_fwd.default, args)
    torch.library.opcheck(torch.ops.chunkgen.sscan_fwd.default, args[:5] + (None,) * 4 + (False,))
    d = [t.detach() for t in args[:-1]]
    dy, dhT = torch.randn(1, 5, 4), torch.randn(1, 4, 3)
    torch.library.opcheck(torch.ops.chunkgen.sscan_bwd.default, tuple(d) + (dy, dhT, True))
    torch.library.opcheck(torch.ops.chunkgen.sscan_bwd.default, tuple(d[:5]) + (None,) * 4 + (dy, None, False))


def test_sscan_noncontiguous_inputs():
    x = {n: (t.detach() if t is not None else None) for n, t in make(2, 7, 6, 5, 0, True, True).items()}
    nc = dict(x)
    nc["x"] = x["x"].transpose(0, 1).contiguous().transpose(0, 1)  # batch/seq strides swapped, no copy
    nc["B"] = torch.stack([x["B"]] * 2, -1)[..., 1]                # innermost stride 2: copied
    nc["A"] = x["A"].t().contiguous().t()                          # A with innermost stride D
    nc["D"] = torch.stack([x["D"]] * 3, -1)[:, 0]
    assert not nc["x"].is_contiguous() and nc["B"].stride(-1) == 2 and nc["A"].stride(-1) != 1
    y, hT = ct.sscan(*(nc[n] for n in NAMES))
    y_c, hT_c = ct.sscan(*(x[n] for n in NAMES))
    torch.testing.assert_close(y, y_c, rtol=0, atol=0)
    torch.testing.assert_close(hT, hT_c, rtol=0, atol=0)


def test_eager_autograd_function_matches_registered_op():
    # As for SSD: the eager autograd.Function and the registered op agree bit for bit,
    # every optional input given, grouped B/C.
    x = make(2, 9, 6, 5, 2, True, True)
    ins = tuple(x[n] for n in NAMES)
    assert ct._path(ins) == "function"
    y, hT = ct.sscan(*ins, delta_softplus=True)
    y_op, hT_op = torch.ops.chunkgen.sscan_fwd(*ins, True)
    w = torch.randn(y.shape, generator=torch.Generator().manual_seed(2))
    g = torch.autograd.grad((y * w).sum() + hT.sum(), ins)
    g_op = torch.autograd.grad((y_op * w).sum() + hT_op.sum(), ins)
    torch.testing.assert_close(y, y_op, rtol=0, atol=0)
    for n, a, b in zip(NAMES, g, g_op):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=n)
