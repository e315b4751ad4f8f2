"""chunkgen.jax.gdr (the gated delta rule, #35) against a float64 loop of fla's
recurrence (MATH_GDN.md 4.1; gdr_loop.py, shared with test_torch_gdr.py): forward and
every gradient (jax.grad, check_grads), the L2 norm, a scale, both layouts; jit, vmap
(one folded custom call), float32."""
import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

jax.config.update("jax_enable_x64", True)

import chunkgen.jax as cj  # noqa: E402
from gdr_loop import gdr_loop  # noqa: E402
from jax_ref import rel_err  # noqa: E402


def gdr_scan(*a, **kw):
    return gdr_loop(jnp, *a, **kw)


def inputs(seed, B=2, T=11, G=2, H=4, dk=5, dv=3, dtype=np.float64):
    rng = np.random.default_rng(seed)
    r = lambda *s: jnp.asarray(rng.standard_normal(s).astype(dtype))  # noqa: E731
    return dict(q=r(B, T, G, dk), k=r(B, T, G, dk), v=r(B, T, H, dv),
                g=jnp.asarray(-rng.random((B, T, H)).astype(dtype) * 0.5),
                beta=jnp.asarray(rng.random((B, T, H)).astype(dtype) * 1.8 + 0.1), h0=r(B, H, dk, dv))


NAMES = ("q", "k", "v", "g", "beta", "h0")


@pytest.mark.parametrize("layout", ["token", "head"])
@pytest.mark.parametrize("scale", [None, 0.6])
def test_gdr_float64_vs_scan(layout, scale):
    x = inputs(1)
    args = tuple(x[n] for n in NAMES)

    def ours(q, k, v, g, beta, h0):
        if layout == "head":
            t = lambda a: jnp.swapaxes(a, 1, 2)  # noqa: E731
            o, hT = cj.gdr(t(q), t(k), t(v), t(g), t(beta), h0, scale=scale, use_qk_l2norm=True, layout="head")
            return t(o), hT
        return cj.gdr(q, k, v, g, beta, h0, scale=scale, use_qk_l2norm=True)

    ref = lambda *a: gdr_scan(*a, scale=scale, l2norm=True)  # noqa: E731
    o, hT = jax.jit(ours)(*args)
    o_r, hT_r = ref(*args)
    assert rel_err(o, o_r) < 1e-12 and rel_err(hT, hT_r) < 1e-12
    loss = lambda f: lambda *a: (f(*a)[0] ** 2).sum() + f(*a)[1].sum()  # noqa: E731
    g = jax.grad(loss(ours), argnums=tuple(range(6)))(*args)
    g_r = jax.grad(loss(ref), argnums=tuple(range(6)))(*args)
    for a, b in zip(g, g_r):
        assert rel_err(a, b) < 1e-12
    small = tuple(inputs(2, B=1, T=4, G=1, H=2, dk=3, dv=2)[n] for n in NAMES)
    check_grads(lambda *a: cj.gdr(*a, use_qk_l2norm=True), small, order=1, modes=["rev"])


def test_gdr_float32_and_vmap():
    x64 = inputs(3, T=37, dk=16, dv=8)
    x = {n: a.astype(jnp.float32) for n, a in x64.items()}
    o, hT = cj.gdr(**x, use_qk_l2norm=True)
    o_r, hT_r = gdr_scan(**x64, l2norm=True)
    assert o.dtype == jnp.float32 and rel_err(o, o_r) < 1e-5 and rel_err(hT, hT_r) < 1e-5
    xs = [inputs(10 + i) for i in range(3)]
    st = tuple(jnp.stack([x[n] for x in xs]) for n in NAMES)
    f = jax.vmap(lambda *a: cj.gdr(*a, use_qk_l2norm=True))
    o, hT = jax.jit(f)(*st)
    for i, x in enumerate(xs):
        o_r, hT_r = gdr_scan(**x, l2norm=True)
        assert rel_err(o[i], o_r) < 1e-12 and rel_err(hT[i], hT_r) < 1e-12
    text = str(jax.make_jaxpr(f)(*st))
    assert text.count("target_name=chunkgen") == 1 and not re.search(r"\b(scan|while)\[", text)


@pytest.mark.parametrize("scale", [None, 0.45])
def test_gdr_float32_scale_and_grads(scale):
    """float32 on the CPU path: the scale is the call's attribute (the library's argument),
    so o and every gradient (dq with it) match the float64 scan with that scale, under jit."""
    x64 = inputs(5, T=37, G=2, H=6, dk=48, dv=40)
    x = {n: a.astype(jnp.float32) for n, a in x64.items()}
    loss = lambda f: lambda *a: (f(*a)[0] ** 2).sum() + f(*a)[1].sum()  # noqa: E731
    ours = lambda *a: cj.gdr(*a, scale=scale, use_qk_l2norm=True)  # noqa: E731
    ref = lambda *a: gdr_scan(*a, scale=scale, l2norm=True)  # noqa: E731
    o, hT = jax.jit(ours)(*(x[n] for n in NAMES))
    o_r, hT_r = ref(*(x64[n] for n in NAMES))
    assert rel_err(o, o_r) < 1e-5 and rel_err(hT, hT_r) < 1e-5
    g = jax.jit(jax.grad(loss(ours), argnums=tuple(range(6))))(*(x[n] for n in NAMES))
    g_r = jax.grad(loss(ref), argnums=tuple(range(6)))(*(x64[n] for n in NAMES))
    for a, b in zip(g, g_r):
        assert a.dtype == jnp.float32 and rel_err(a, b) < 1e-4


def test_gdr_errors_at_trace_time():
    x = inputs(4)
    with pytest.raises(ValueError, match="H = 3 is not a multiple of G = 2"):
        jax.jit(lambda q, k, v, g, beta: cj.gdr(q, k, v, g, beta))(x["q"], x["k"], x["v"][:, :, :3], x["g"][:, :, :3],
                                                                   x["beta"][:, :, :3])
    with pytest.raises(ValueError, match="scale: nan but expected a finite value >= 0"):
        cj.gdr(*(x[n] for n in NAMES), scale=float("nan"))

