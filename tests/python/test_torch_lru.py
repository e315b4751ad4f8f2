"""chunkgen.torch.lru (the diagonal linear recurrence of RG-LRU / Griffin, #38 item 7)
against a float64 PyTorch loop differentiated by autograd: forward and every gradient
(a, b, x, h0), both layouts, L = 1, odd D, a outside (0, 1], varlen, float32 and 16-bit
inputs; torch.compile(fullgraph=True), opcheck, fake/meta tensors, vmap and torch.func.grad."""
import pytest
import torch

import chunkgen.torch as ct
from ref import rel_err


def lru_ref(a, b, x, h0=None):
    """Token-major a, b, x [B, L, D]; h0 [B, D]: h_t = a_t h_{t-1} + b_t x_t, y_t = h_t."""
    h = h0 if h0 is not None else a.new_zeros(a.shape[0], a.shape[2])
    ys = []
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t] * x[:, t]
        ys.append(h)
    return (torch.stack(ys, 1) if ys else a.new_zeros(a.shape)), h


def inputs(B=2, L=13, D=37, dtype=torch.float64, h0=True, seed=0, alo=0.5, ahi=1.0):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    a = torch.rand(B, L, D, generator=gen, dtype=torch.float64) * (ahi - alo) + alo
    x = dict(a=a, b=r(B, L, D), x=r(B, L, D), h0=r(B, D) if h0 else None)
    keep = torch.float64 if dtype == torch.float64 else torch.float32  # h0: float32 (or a float64 call)
    return {n: (v.to(keep if n == "h0" else dtype) if v is not None else None) for n, v in x.items()}


NAMES = ("a", "b", "x", "h0")


def grads_of(fn, x, seed=1):
    """(y, hT) and the gradients of <y, W> + <hT, W2> (W, W2 drawn from seed) in every
    input given, in NAMES order."""
    leaves = {n: v.detach().clone().requires_grad_() for n, v in x.items() if v is not None}
    y, hT = fn(**{n: leaves.get(n) for n in x})
    gen = torch.Generator().manual_seed(seed)
    loss = sum((t * torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype)).sum() for t in (y, hT))
    return y.detach(), hT.detach(), torch.autograd.grad(loss, [leaves[n] for n in NAMES if n in leaves])


@pytest.mark.parametrize("layout", ["token", "head"])
@pytest.mark.parametrize("L,h0", [(1, True), (13, False), (13, True)])
def test_lru_float64_vs_loop(layout, L, h0):
    x = inputs(L=L, h0=h0, alo=-1.2, ahi=1.2)  # any real a
    ref = grads_of(lru_ref, x)
    if layout == "head":  # head-major views of the same memory (no copy)
        def fn(a, b, x, h0):
            t = lambda v: v.transpose(1, 2)  # noqa: E731
            y, hT = ct.lru(t(a), t(b), t(x), h0, layout="head")
            return y.transpose(1, 2), hT
    else:
        fn = ct.lru
    got = grads_of(fn, x)
    assert rel_err(got[0], ref[0]) < 1e-12 and rel_err(got[1], ref[1]) < 1e-12
    assert len(got[2]) == len(ref[2])
    for g, r in zip(got[2], ref[2]):
        assert rel_err(g, r) < 1e-12


@pytest.mark.parametrize("L", [1, 257])
def test_lru_float32_cpu_path(L):
    x64 = inputs(B=3, L=L, D=200, seed=L)
    ref = grads_of(lru_ref, x64)
    x32 = {n: (v.float() if v is not None else None) for n, v in x64.items()}
    got = grads_of(ct.lru, x32)
    assert got[0].dtype == torch.float32
    assert rel_err(got[0], ref[0]) < 1e-5 and rel_err(got[1], ref[1]) < 1e-5
    for g, r in zip(got[2], ref[2]):
        assert rel_err(g, r) < 1e-4


@pytest.mark.parametrize("dtype,tol", [(torch.bfloat16, 2e-2), (torch.float16, 5e-3)])
def test_lru_16bit(dtype, tol):
    x = inputs(L=40, D=37, dtype=dtype)
    y, hT = ct.lru(**x)
    assert y.dtype == dtype and hT.dtype == torch.float32
    x64 = {n: (v.double() if v is not None else None) for n, v in x.items()}  # the same rounded inputs
    y_r, hT_r = lru_ref(**x64)
    assert rel_err(y, y_r) < tol and rel_err(hT, hT_r) < 1e-5


def test_lru_varlen_matches_each_sequence():
    lens = [1, 12, 0, 7]
    x = inputs(B=1, L=sum(lens), h0=False)
    h0 = torch.randn(len(lens), 37, dtype=torch.float64)
    cu = torch.tensor([0, 1, 13, 13, 20], dtype=torch.int64)
    y, hT = ct.lru(x["a"], x["b"], x["x"], h0, cu_seqlens=cu)
    for n in range(len(lens)):
        sl = slice(int(cu[n]), int(cu[n + 1]))
        y_r, hT_r = lru_ref(x["a"][:, sl], x["b"][:, sl], x["x"][:, sl], h0[n:n + 1])
        assert y[:, sl].shape == y_r.shape and (not lens[n] or rel_err(y[:, sl], y_r) < 1e-12)
        assert rel_err(hT[n:n + 1], hT_r) < 1e-12  # an empty sequence: hT = its h0


def test_lru_compile_fullgraph_and_opcheck():
    x = {n: (v.float() if v is not None else None) for n, v in inputs().items()}
    f = torch.compile(lambda a, b, x, h0: ct.lru(a, b, x, h0), fullgraph=True, backend="eager")
    y, hT = f(**x)
    y_e, hT_e = ct.lru(**x)
    assert torch.equal(y, y_e) and torch.equal(hT, hT_e)
    torch.library.opcheck(torch.ops.chunkgen.lru_fwd.default, tuple(x[n] for n in NAMES) + (0,))
    dy, dhT = torch.randn_like(y), torch.randn_like(hT)
    torch.library.opcheck(torch.ops.chunkgen.lru_bwd.default, tuple(x[n] for n in NAMES) + (dy, dhT, 0))


def test_lru_meta_and_errors():
    x = {n: (v.float().to("meta") if v is not None else None) for n, v in inputs().items()}
    y, hT = ct.lru(**x)
    assert y.shape == (2, 13, 37) and hT.shape == (2, 37) and y.device.type == "meta"
    x = {n: (v.float() if v is not None else None) for n, v in inputs().items()}
    with pytest.raises(ValueError, match="b: shape"):
        ct.lru(x["a"], x["b"][:, :, :5], x["x"])


def test_lru_vmap_and_grad():
    xs = [inputs(seed=s) for s in range(2)]
    st = {n: torch.stack([x[n] for x in xs]) for n in NAMES}
    y, hT = torch.vmap(lambda a, b, x, h0: ct.lru(a, b, x, h0))(*(st[n] for n in NAMES))
    for i, x in enumerate(xs):
        y_r, hT_r = lru_ref(**x)
        assert rel_err(y[i], y_r) < 1e-12 and rel_err(hT[i], hT_r) < 1e-12
    da = torch.func.grad(lambda a: ct.lru(a, *(xs[0][n] for n in NAMES[1:]))[0].sum())(xs[0]["a"])
    da_r = torch.func.grad(lambda a: lru_ref(a, *(xs[0][n] for n in NAMES[1:]))[0].sum())(xs[0]["a"])
    assert rel_err(da, da_r) < 1e-12
