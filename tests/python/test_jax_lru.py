"""chunkgen.jax.lru (the diagonal linear recurrence, #38 item 7) against a float64 lax.scan:
forward and every gradient (jax.grad, check_grads), both layouts, a of either sign, jit,
vmap (one folded custom call), float32, varlen."""
import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

jax.config.update("jax_enable_x64", True)

import chunkgen.jax as cj  # noqa: E402
from jax_ref import rel_err  # noqa: E402


def lru_scan(a, b, x, h0=None):
    """Token-major a, b, x [B, L, D]; h0 [B, D]."""
    h = h0 if h0 is not None else jnp.zeros((a.shape[0], a.shape[2]), a.dtype)

    def step(h, xs):
        at, bt, xt = xs
        h = at * h + bt * xt
        return h, h

    hT, y = jax.lax.scan(step, h, tuple(jnp.moveaxis(v, 1, 0) for v in (a, b, x)))
    return jnp.moveaxis(y, 0, 1), hT


def inputs(seed, B=2, L=11, D=37, dtype=np.float64):
    rng = np.random.default_rng(seed)
    r = lambda *s: jnp.asarray(rng.standard_normal(s).astype(dtype))  # noqa: E731
    return dict(a=jnp.asarray(rng.uniform(-1.1, 1.1, (B, L, D)).astype(dtype)), b=r(B, L, D), x=r(B, L, D),
                h0=r(B, D))


NAMES = ("a", "b", "x", "h0")


@pytest.mark.parametrize("layout", ["token", "head"])
def test_lru_float64_vs_scan(layout):
    x = inputs(1)
    args = tuple(x[n] for n in NAMES)

    def ours(a, b, x, h0):
        if layout == "head":
            t = lambda v: jnp.swapaxes(v, 1, 2)  # noqa: E731
            y, hT = cj.lru(t(a), t(b), t(x), h0, layout="head")
            return t(y), hT
        return cj.lru(a, b, x, h0)

    y, hT = jax.jit(ours)(*args)
    y_r, hT_r = lru_scan(*args)
    assert rel_err(y, y_r) < 1e-12 and rel_err(hT, hT_r) < 1e-12
    loss = lambda f: lambda *a: (f(*a)[0] ** 2).sum() + f(*a)[1].sum()  # noqa: E731
    g = jax.grad(loss(ours), argnums=(0, 1, 2, 3))(*args)
    g_r = jax.grad(loss(lru_scan), argnums=(0, 1, 2, 3))(*args)
    for p, q in zip(g, g_r):
        assert rel_err(p, q) < 1e-12
    small = tuple(inputs(2, B=1, L=4, D=3)[n] for n in NAMES)
    check_grads(cj.lru, small, order=1, modes=["rev"])


def test_lru_float32_vmap_varlen():
    x64 = inputs(3, L=1, D=5)
    x = {n: v.astype(jnp.float32) for n, v in x64.items()}
    y, hT = cj.lru(**x)
    y_r, hT_r = lru_scan(**x64)
    assert y.dtype == jnp.float32 and rel_err(y, y_r) < 1e-5 and rel_err(hT, hT_r) < 1e-5
    xs = [inputs(10 + i) for i in range(3)]
    st = tuple(jnp.stack([x[n] for x in xs]) for n in NAMES)
    f = jax.vmap(cj.lru)
    y, hT = jax.jit(f)(*st)
    for i, x in enumerate(xs):
        y_r, hT_r = lru_scan(**x)
        assert rel_err(y[i], y_r) < 1e-12 and rel_err(hT[i], hT_r) < 1e-12
    text = str(jax.make_jaxpr(f)(*st))
    assert text.count("target_name=chunkgen") == 1 and not re.search(r"\b(scan|while)\[", text)
    v = inputs(5, B=1, L=20, D=4)
    h0 = jnp.asarray(np.random.default_rng(6).standard_normal((2, 4)))
    cu = jnp.asarray([0, 8, 20], jnp.int32)
    y, hT = cj.lru(v["a"], v["b"], v["x"], h0, cu_seqlens=cu)
    for n, sl in enumerate([slice(0, 8), slice(8, 20)]):
        y_r, hT_r = lru_scan(v["a"][:, sl], v["b"][:, sl], v["x"][:, sl], h0[n:n + 1])
        assert rel_err(y[:, sl], y_r) < 1e-12 and rel_err(hT[n:n + 1], hT_r) < 1e-12
