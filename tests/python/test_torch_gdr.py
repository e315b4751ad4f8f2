"""chunkgen.torch.gdr (the gated delta rule, #35) against a float64 PyTorch loop of fla's
recurrence (MATH_GDN.md 4.1; gdr_loop.py) differentiated by autograd: forward and every
gradient, grouped heads, both layouts, the L2 norm on and off, a given scale, varlen,
float32 and 16-bit inputs; torch.compile(fullgraph=True), opcheck, fake tensors, vmap;
and, when the math brief's oracle (../shared/math_check_gdn.py) is beside the checkout,
against it."""
import contextlib
import io
import os

import numpy as np
import pytest
import torch

import chunkgen.torch as ct
from gdr_loop import gdr_loop
from ref import rel_err


def gdr_ref(*a, **kw):
    return gdr_loop(torch, *a, **kw)


def inputs(B=2, T=13, G=2, H=4, dk=5, dv=3, l2norm=True, dtype=torch.float64, h0=True, seed=0):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    k = r(B, T, G, dk) * (1.0 if l2norm else 0.3)
    x = dict(q=r(B, T, G, dk), k=k, v=r(B, T, H, dv), g=-torch.rand(B, T, H, generator=gen, dtype=torch.float64) * 0.5,
             beta=torch.rand(B, T, H, generator=gen, dtype=torch.float64) * 1.8 + 0.1,
             h0=r(B, H, dk, dv) if h0 else None)
    keep = torch.float64 if dtype == torch.float64 else torch.float32  # g and the states: float32 (or a float64 call)
    return {n: (a.to(keep if n in ("g", "h0") else dtype) if a is not None else None) for n, a in x.items()}


NAMES = ("q", "k", "v", "g", "beta", "h0")


def grads_of(fn, x, seed=1):
    """(o, hT) and the gradients of <o, W> + <hT, W2> in every input, float64 cotangents."""
    x = {n: (a.detach().clone().requires_grad_() if a is not None else None) for n, a in x.items()}
    o, hT = fn(**x)
    gen = torch.Generator().manual_seed(seed)
    W = torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype)
    W2 = torch.randn(hT.shape, generator=gen, dtype=torch.float64).to(hT.dtype)
    ins = [x[n] for n in NAMES if x[n] is not None]
    gs = torch.autograd.grad((o * W).sum() + (hT * W2).sum(), ins)
    return o.detach(), hT.detach(), gs


@pytest.mark.parametrize("l2norm", [True, False])
@pytest.mark.parametrize("scale", [None, 0.7])
@pytest.mark.parametrize("layout", ["token", "head"])
def test_gdr_float64_vs_loop(l2norm, scale, layout):
    x = inputs(l2norm=l2norm)
    ref = grads_of(lambda **a: gdr_ref(**a, scale=scale, l2norm=l2norm), x)
    if layout == "head":  # head-major views of the same memory (no copy)
        def fn(q, k, v, g, beta, h0):
            o, hT = ct.gdr(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), g.transpose(1, 2),
                           beta.transpose(1, 2), h0, scale=scale, use_qk_l2norm=l2norm, layout="head")
            return o.transpose(1, 2), hT
    else:
        def fn(**a):
            return ct.gdr(**a, scale=scale, use_qk_l2norm=l2norm)
    got = grads_of(fn, x)
    assert rel_err(got[0], ref[0]) < 1e-12 and rel_err(got[1], ref[1]) < 1e-12
    for a, b in zip(got[2], ref[2]):
        assert rel_err(a, b) < 1e-12


@pytest.mark.parametrize("T,scale", [(1, None), (37, None), (37, 0.35)])
def test_gdr_float32_cpu_path(T, scale):
    """The chunked CPU path; a given scale goes to the library (the op's real argument), so
    o and dq (and, through o, every gradient) see it: checked against the float64 loop."""
    x64 = inputs(B=2, T=T, G=2, H=6, dk=48, dv=40, seed=T)
    ref = grads_of(lambda **a: gdr_ref(**a, scale=scale, l2norm=True), x64)
    x32 = {n: (a.float() if a is not None else None) for n, a in x64.items()}
    got = grads_of(lambda **a: ct.gdr(**a, scale=scale, use_qk_l2norm=True), x32)
    assert rel_err(got[0], ref[0]) < 1e-5 and rel_err(got[1], ref[1]) < 1e-5
    for a, b in zip(got[2], ref[2]):
        assert rel_err(a, b) < 1e-4


@pytest.mark.parametrize("dtype,tol", [(torch.bfloat16, 2e-2), (torch.float16, 5e-3)])
def test_gdr_16bit(dtype, tol):
    x = inputs(T=20, dk=16, dv=8, dtype=dtype)
    o, hT = ct.gdr(**x, use_qk_l2norm=True)
    assert o.dtype == dtype and hT.dtype == torch.float32
    x64 = {n: (a.double() if a is not None else None) for n, a in x.items()}  # the same rounded inputs
    o_r, hT_r = gdr_ref(**x64, l2norm=True)
    assert rel_err(o, o_r) < tol and rel_err(hT, hT_r) < 1e-5


def test_gdr_varlen_matches_each_sequence():
    lens = [1, 12, 7]
    x = inputs(B=1, T=sum(lens), h0=False)
    N, H, dk, dv = len(lens), 4, 5, 3
    h0 = torch.randn(N, H, dk, dv, dtype=torch.float64)
    cu = torch.tensor([0, 1, 13, 20], dtype=torch.int32)
    o, hT = ct.gdr(x["q"], x["k"], x["v"], x["g"], x["beta"], h0, use_qk_l2norm=True, cu_seqlens=cu)
    for n in range(N):
        sl = slice(int(cu[n]), int(cu[n + 1]))
        o_r, hT_r = gdr_ref(*(x[m][:, sl] for m in ("q", "k", "v", "g", "beta")), h0[n:n + 1], l2norm=True)
        assert rel_err(o[:, sl], o_r) < 1e-12 and rel_err(hT[n:n + 1], hT_r) < 1e-12


def test_gdr_compile_fullgraph_and_opcheck():
    x = {n: (a.float() if a is not None else None) for n, a in inputs().items()}
    f = torch.compile(lambda q, k, v, g, beta, h0: ct.gdr(q, k, v, g, beta, h0, scale=0.5, use_qk_l2norm=True),
                      fullgraph=True, backend="eager")
    o, hT = f(**x)
    o_e, hT_e = ct.gdr(**x, scale=0.5, use_qk_l2norm=True)
    assert torch.equal(o, o_e) and torch.equal(hT, hT_e)
    args = tuple(x[n] for n in NAMES) + (2, 0.5)  # flag: token-major, use_qk_l2norm; the scale
    torch.library.opcheck(torch.ops.chunkgen.gdr_fwd.default, args)
    dout, dhT = torch.randn_like(o), torch.randn_like(hT)
    torch.library.opcheck(torch.ops.chunkgen.gdr_bwd.default, tuple(x[n] for n in NAMES) + (dout, dhT, 2, 0.5))
    for op in (torch.ops.chunkgen.gdr_fwd.default, torch.ops.chunkgen.gdr_bwd.default):
        assert "float scale" in str(op._schema)  # the op table's real argument, in the schema


def test_gdr_meta_and_errors():
    x = {n: (a.float().to("meta") if a is not None else None) for n, a in inputs().items()}
    o, hT = ct.gdr(**x)
    assert o.shape == (2, 13, 4, 3) and hT.shape == (2, 4, 5, 3) and o.device.type == "meta"
    x = {n: (a.float() if a is not None else None) for n, a in inputs().items()}
    with pytest.raises(ValueError, match="H = 3 is not a multiple of G = 2"):
        ct.gdr(x["q"], x["k"], x["v"][:, :, :3], x["g"][:, :, :3], x["beta"][:, :, :3])
    with pytest.raises(ValueError, match="scale: -1 but expected a finite value >= 0"):  # the library's check
        ct.gdr(**x, scale=-1)


def test_gdr_vmap_and_grad():
    xs = [inputs(seed=s) for s in range(2)]
    st = {n: torch.stack([x[n] for x in xs]) for n in NAMES}
    o, hT = torch.vmap(lambda q, k, v, g, beta, h0: ct.gdr(q, k, v, g, beta, h0, use_qk_l2norm=True))(
        *(st[n] for n in NAMES))
    for i, x in enumerate(xs):
        o_r, hT_r = gdr_ref(**x, l2norm=True)
        assert rel_err(o[i], o_r) < 1e-12 and rel_err(hT[i], hT_r) < 1e-12
    for scale in (None, 0.7):  # torch.func's path passes the scale too
        dq = torch.func.grad(lambda q: ct.gdr(q, *(xs[0][n] for n in NAMES[1:]), scale=scale)[0].sum())(xs[0]["q"])
        dq_r = torch.func.grad(lambda q: gdr_ref(q, *(xs[0][n] for n in NAMES[1:]), scale=scale)[0].sum())(xs[0]["q"])
        assert rel_err(dq, dq_r) < 1e-12


ORACLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "math_check_gdn.py")


@pytest.mark.skipif(not os.path.exists(ORACLE), reason="the math brief's oracle is not beside the checkout")
def test_gdr_vs_math_brief_oracle():
    ns = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(open(ORACLE).read(), ns)
    rng = np.random.default_rng(1)
    T, K, V = 13, 5, 4
    q, k = rng.standard_normal((T, K)), rng.standard_normal((T, K))
    k /= np.linalg.norm(k, axis=1, keepdims=True)
    v, beta, g = rng.standard_normal((T, V)), rng.uniform(0.1, 1.9, T), -rng.uniform(0.01, 0.5, T)
    S0, do, dST = rng.standard_normal((K, V)), rng.standard_normal((T, V)), rng.standard_normal((K, V))
    ns.update(T=T, K=K, V=V, s=K ** -0.5, do=do, dST=dST)  # the oracle's globals
    o, ST, _ = ns["seq_fwd"](q, k, v, beta, g, S0)
    want = ns["seq_bwd"](q, k, v, beta, g, S0)  # dq, dk, dv, dbeta, dg, dh0
    t = {n: torch.tensor(a).reshape(sh).requires_grad_() for n, a, sh in
         [("q", q, (1, T, 1, K)), ("k", k, (1, T, 1, K)), ("v", v, (1, T, 1, V)), ("g", g, (1, T, 1)),
          ("beta", beta, (1, T, 1)), ("h0", S0, (1, 1, K, V))]}
    oo, hT = ct.gdr(**t)
    gr = torch.autograd.grad((oo * torch.tensor(do).reshape(1, T, 1, V)).sum() +
                             (hT * torch.tensor(dST).reshape(1, 1, K, V)).sum(),
                             [t[n] for n in ("q", "k", "v", "beta", "g", "h0")])
    assert rel_err(oo.reshape(T, V), torch.tensor(o)) < 1e-14 and rel_err(hT.reshape(K, V), torch.tensor(ST)) < 1e-14
    for a, b in zip(gr, want):
        assert rel_err(a.reshape(b.shape), torch.tensor(b)) < 1e-14
