"""numpy calls with float16 and bfloat16 (ml_dtypes, as jax and the peers' .npy files hold
it) arrays on an explicit backend: forward and backward vs torch float64 autograd on the
upcast rounded inputs, within the 16-bit accuracy rule (half_ref.py); output dtypes; a bad
mix rejected with the library's message. A backend that cannot take 16-bit tensors yet
(it answers CG_EUNSUPPORTED) is skipped with its message, never passed."""
import numpy as np
import pytest
import torch

import chunkgen
from half_ref import check_accuracy
from ref import rel_err, sscan_ref, ssd_ref

ml_dtypes = pytest.importorskip("ml_dtypes")
DTYPES = {"bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16)}
BACKENDS = ["ref", "cpu"]


def call(f, *a, **kw):
    """f(*a, **kw), skipping the test when the backend refuses 16-bit tensors."""
    try:
        return f(*a, **kw)
    except RuntimeError as e:
        if "(not supported by the chosen backend)" in str(e):  # CG_EUNSUPPORTED's status text
            pytest.skip(f"backend {kw.get('backend')} takes no 16-bit tensors here: {e}")
        raise


def t64(a):
    return torch.from_numpy(np.asarray(a, np.float64))


def err_check(name, got, ref64, grad):
    ref_np = ref64.detach().numpy()
    return check_accuracy(name, got, ref_np, ref_np.astype(got.dtype), np_rel_err, grad)


def np_rel_err(a, b):
    return rel_err(t64(a), t64(b))


def check_all(x, outs, outs_r, dtype, grads, g_r):
    """The output (o / y) in the 16-bit dtype, the state float32, each gradient in its
    input's dtype; every one within the accuracy rule."""
    (out, state), (out_r, state_r) = outs, outs_r
    assert out.dtype == dtype and state.dtype == np.float32
    err_check("out", out, out_r, False)
    err_check("state", state, state_r, False)
    for (n, a), g, gr in zip(x.items(), grads, g_r):
        assert g.dtype == a.dtype, n
        err_check("d" + n, g, gr, True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("T,dk,layout", [(1, 130, "token"), (37, 7, "head"), (37, 48, "token")])
def test_ssd_half(backend, dt, T, dk, layout):
    dtype = DTYPES[dt]
    rng = np.random.default_rng(0)
    B, G, H, dv = 2, 2, 4, 40
    r = lambda *s, scale=1.0: rng.standard_normal(s) * scale  # noqa: E731
    x = dict(q=r(B, T, G, dk, scale=dk ** -0.5).astype(dtype), k=r(B, T, G, dk, scale=dk ** -0.5).astype(dtype),
             v=r(B, T, H, dv).astype(dtype), log_alpha=(-rng.random((B, T, H)) * 0.5).astype(np.float32),
             h0=r(B, H, dk, dv).astype(np.float32))
    do, dhT = r(B, T, H, dv).astype(dtype), r(B, H, dk, dv).astype(np.float32)
    x64 = {n: t64(a).requires_grad_() for n, a in x.items()}
    o_r, hT_r = ssd_ref(*x64.values())
    g_r = torch.autograd.grad((o_r * t64(do)).sum() + (hT_r * t64(dhT)).sum(), list(x64.values()))
    if layout == "head":  # permuted views (bfloat16: descriptors with the strides; no copy)
        y = {n: (a.swapaxes(1, 2) if n != "h0" else a) for n, a in x.items()}
        o, hT = call(chunkgen.ssd, **y, layout="head", backend=backend)
        grads = call(chunkgen.ssd_bwd, y["q"], y["k"], y["v"], y["log_alpha"], do.swapaxes(1, 2), y["h0"], dhT,
                     layout="head", backend=backend)
        o = o.swapaxes(1, 2)
        grads = [g.swapaxes(1, 2) if n != "h0" else g for n, g in zip(x, grads)]
    else:
        o, hT = call(chunkgen.ssd, **x, backend=backend)
        grads = call(chunkgen.ssd_bwd, x["q"], x["k"], x["v"], x["log_alpha"], do, x["h0"], dhT, backend=backend)
    assert f"backend={backend}" in chunkgen.last_dispatch()
    check_all(x, (o, hT), (o_r, hT_r), dtype, grads, g_r)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("L,G", [(1, 0), (37, 2)])
def test_sscan_half(backend, dt, L, G):
    dtype = DTYPES[dt]
    rng = np.random.default_rng(1)
    Bsz, D, N = 2, 6, 5
    bc = (Bsz, L, G, N) if G else (Bsz, L, N)
    r = lambda *s: rng.standard_normal(s)  # noqa: E731
    x = dict(x=r(Bsz, L, D).astype(dtype), delta=(rng.random((Bsz, L, D)) * 0.5).astype(dtype),
             A=(-rng.random((D, N)) - 0.2).astype(np.float32), B=r(*bc).astype(dtype), C=r(*bc).astype(dtype),
             D=r(D).astype(np.float32), z=r(Bsz, L, D).astype(dtype),
             delta_bias=(rng.random(D) * 0.2).astype(np.float32), h0=r(Bsz, D, N).astype(np.float32))
    dy, dhT = r(Bsz, L, D).astype(dtype), r(Bsz, D, N).astype(np.float32)
    x64 = {n: t64(a).requires_grad_() for n, a in x.items()}
    y_r, hT_r = sscan_ref(*x64.values(), delta_softplus=True)
    g_r = torch.autograd.grad((y_r * t64(dy)).sum() + (hT_r * t64(dhT)).sum(), list(x64.values()))
    y, hT = call(chunkgen.sscan, **x, delta_softplus=True, backend=backend)
    grads = call(chunkgen.sscan_bwd, x["x"], x["delta"], x["A"], x["B"], x["C"], dy, x["D"], x["z"],
                 x["delta_bias"], x["h0"], dhT, delta_softplus=True, backend=backend)
    check_all(x, (y, hT), (y_r, hT_r), dtype, grads, g_r)


def test_bad_mix_numpy():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 4, 1, 3)).astype(np.float16) for _ in range(3))
    la = -np.abs(rng.standard_normal((1, 4, 1))).astype(np.float32)
    with pytest.raises(ValueError, match=r"k: dtype CG_BF16 but expected CG_F16 like q"):
        chunkgen.ssd(q, k.astype(ml_dtypes.bfloat16), v, la, backend="ref")
    with pytest.raises(ValueError, match=r"log_alpha: dtype CG_F16 but expected CG_F32"):
        chunkgen.ssd(q, k, v, la.astype(np.float16), backend="ref")
    with pytest.raises(ValueError, match="q: dtype int8 but expected float32 or float64, or float16 / bfloat16"):
        chunkgen.ssd(q.astype(np.int8), k, v, la)


def test_o_follows_v_as_documented():
    """o comes back in v's dtype (docs/dtypes.md), and every front end's docstring says so
    (issue #39 item 12: they said q's)."""
    import importlib
    import re
    for mod in ("chunkgen._numpy", "chunkgen.torch", "chunkgen.jax"):
        doc = " ".join(importlib.import_module(mod).__doc__.split())
        said = re.findall(r"o / y (?:come back )?in (\w)'s / (\w)'s", doc)
        assert said == [("v", "x")], (mod, said)
    rng = np.random.default_rng(3)
    q, k = (rng.standard_normal((1, 5, 1, 4)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((1, 5, 2, 3)).astype(DTYPES["bf16"])
    la = -rng.random((1, 5, 2)).astype(np.float32)
    o, _ = call(chunkgen.ssd, q, k, v, la, backend="ref")  # float32 q, bf16 v
    assert o.dtype == DTYPES["bf16"]
    o16, _ = call(chunkgen.ssd, q.astype(DTYPES["f16"]), k, v.astype(np.float32), la, backend="ref")
    assert o16.dtype == np.float32  # f16 q, float32 v: o float32
    import chunkgen.torch as ct
    ot, _ = ct.ssd(*(torch.from_numpy(a) for a in (q, k)), torch.from_numpy(v.astype(np.float32)).bfloat16(),
                   torch.from_numpy(la))
    assert ot.dtype == torch.bfloat16
