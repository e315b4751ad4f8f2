"""chunkgen.jax with jnp.bfloat16 / jnp.float16 arrays: forward and every gradient (jit +
vjp: the custom_vjp's cotangents in the outputs' dtypes, gradients in the inputs') vs the
pure-JAX float64 lax.scan on the upcast rounded inputs (jax_ref.py), within the 16-bit
accuracy rule (half_ref.py); the abstract evaluation's output dtypes; a bad mix rejected
at trace time with the library's message; the jax_nn model in bfloat16."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

import chunkgen.jax as cj  # noqa: E402
from chunkgen import jax_nn  # noqa: E402
from half_ref import check_accuracy  # noqa: E402
from jax_ref import rel_err, sscan_scan, ssd_scan  # noqa: E402

HALF = {"bf16": jnp.bfloat16, "f16": jnp.float16}


def rounded(x64: dict, dtypes: dict):
    return {n: a.astype(dtypes.get(n, jnp.float32)) for n, a in x64.items()}


def vjp_pair(f, f_ref, x, seed):
    """(outputs, gradients) of f on x and of f_ref on x upcast to float64, for the same
    random cotangents rounded to f's output dtypes."""
    names = list(x)
    outs, pull = jax.vjp(lambda *a: f(**dict(zip(names, a))), *x.values())
    rng = np.random.default_rng(seed)
    cts = tuple(jnp.asarray(rng.standard_normal(o.shape)).astype(o.dtype) for o in outs)
    g = dict(zip(names, pull(cts)))
    x64 = [a.astype(jnp.float64) for a in x.values()]
    outs_r, pull_r = jax.vjp(lambda *a: f_ref(**dict(zip(names, a))), *x64)
    g_r = dict(zip(names, pull_r(tuple(c.astype(jnp.float64) for c in cts))))
    return outs, outs_r, g, g_r


def compare(outs, outs_r, out_dtypes, x, g, g_r):
    for n, o, o_r, dt in zip(("out", "state"), outs, outs_r, out_dtypes):
        assert o.dtype == dt, (n, o.dtype, dt)
        check_accuracy(n, o, o_r, o_r.astype(o.dtype), rel_err, grad=False)
    for n in x:
        assert g[n].dtype == x[n].dtype and g[n].shape == x[n].shape, n
        check_accuracy("d" + n, g[n], g_r[n], g_r[n].astype(g[n].dtype), rel_err, grad=True)


def ssd64(seed, B=2, G=2, H=4, T=37, dk=48, dv=40):
    rng = np.random.default_rng(seed)
    r = lambda *s, scale=1.0: jnp.asarray(rng.standard_normal(s) * scale)  # noqa: E731
    return dict(q=r(B, G, T, dk, scale=dk ** -0.5), k=r(B, G, T, dk, scale=dk ** -0.5), v=r(B, H, T, dv),
                log_alpha=jnp.asarray(-rng.random((B, H, T)) * 0.5), h0=r(B, H, dk, dv))


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("T,dk", [(1, 7), (37, 48), (37, 130)])
def test_ssd_half_vs_scan(dt, T, dk):
    dtype = HALF[dt]
    x = rounded(ssd64(0, T=T, dk=dk), dict(q=dtype, k=dtype, v=dtype))
    outs, outs_r, g, g_r = vjp_pair(jax.jit(lambda **a: cj.ssd(**a)), ssd_scan, x, 1)
    compare(outs, outs_r, (dtype, jnp.float32), x, g, g_r)


def test_ssd_token_layout_bf16():
    x = rounded(ssd64(2, T=9, dk=7, dv=5), dict(q=jnp.bfloat16, k=jnp.bfloat16, v=jnp.bfloat16))
    tok = lambda **a: {n: (v if n == "h0" else jnp.swapaxes(v, 1, 2)) for n, v in a.items()}  # noqa: E731

    def f(**a):
        o, hT = cj.ssd(**tok(**a), layout="token")
        return jnp.swapaxes(o, 1, 2), hT

    outs, outs_r, g, g_r = vjp_pair(jax.jit(f), ssd_scan, x, 3)
    compare(outs, outs_r, (jnp.bfloat16, jnp.float32), x, g, g_r)


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("L,G", [(1, None), (37, 2)])
def test_sscan_half_vs_scan(dt, L, G):
    dtype = HALF[dt]
    rng = np.random.default_rng(4)
    B, D, N = 2, 6, 5
    bc = (B, L, G, N) if G else (B, L, N)
    r = lambda *s, scale=1.0: jnp.asarray(rng.standard_normal(s) * scale)  # noqa: E731
    x64 = dict(x=r(B, L, D), delta=r(B, L, D, scale=0.5), A=-jnp.asarray(rng.random((D, N)) + 0.5), B=r(*bc),
               C=r(*bc), D=r(D), z=r(B, L, D), delta_bias=r(D, scale=0.1), h0=r(B, D, N))
    x = rounded(x64, {n: dtype for n in ("x", "delta", "B", "C", "z")})
    outs, outs_r, g, g_r = vjp_pair(jax.jit(lambda **a: cj.sscan(**a, delta_softplus=True)),
                                    lambda **a: sscan_scan(**a, delta_softplus=True), x, 5)
    compare(outs, outs_r, (dtype, jnp.float32), x, g, g_r)


def test_abstract_eval_dtypes_and_bad_mix():
    x = rounded(ssd64(6, B=1, T=5, dk=3, dv=2), dict(q=jnp.bfloat16, k=jnp.bfloat16, v=jnp.bfloat16))
    o, hT = jax.eval_shape(lambda **a: cj.ssd(**a), **x)
    assert o.dtype == jnp.bfloat16 and hT.dtype == jnp.float32
    mixed = dict(x, v=x["v"].astype(jnp.float32))  # o follows v
    o, hT = jax.eval_shape(lambda **a: cj.ssd(**a), **mixed)
    assert o.dtype == jnp.float32
    with pytest.raises(ValueError, match=r"k: dtype CG_F16 but expected CG_BF16 like q"):
        jax.eval_shape(lambda **a: cj.ssd(**a), **dict(x, k=x["k"].astype(jnp.float16)))
    with pytest.raises(ValueError, match=r"log_alpha: dtype CG_BF16 but expected CG_F32"):
        jax.jit(lambda **a: cj.ssd(**a)).trace(**dict(x, log_alpha=x["log_alpha"].astype(jnp.bfloat16)))
    with pytest.raises(ValueError, match=r"v: dtype CG_BF16 but expected CG_F64 like q"):
        cj.ssd(**dict({n: a.astype(jnp.float64) for n, a in x.items()}, v=x["v"]))


def test_jax_nn_model_bfloat16():
    cfg = jax_nn.Config(d_model=16, heads=2, groups=1, dk=8, dv=6, layers=2)
    params = jax_nn.init(jax.random.key(0), cfg, dtype=jnp.bfloat16)
    xin = jnp.asarray(np.random.default_rng(7).standard_normal((2, 13, 16))).astype(jnp.bfloat16)

    def ssd_f64(q, k, v, log_alpha):
        assert log_alpha.dtype == jnp.float32 and v.dtype == jnp.bfloat16
        sw = lambda a: jnp.swapaxes(a.astype(jnp.float64), 1, 2)  # noqa: E731
        o, hT = ssd_scan(sw(q), sw(k), sw(v), sw(log_alpha))
        return jnp.swapaxes(o, 1, 2).astype(v.dtype), hT.astype(jnp.float32)

    y = jax.jit(lambda p, x: jax_nn.apply(p, x, cfg))(params, xin)
    y_r = jax.jit(lambda p, x: jax_nn.apply(p, x, cfg, ssd_f64))(params, xin)
    assert y.dtype == jnp.bfloat16 and rel_err(y, y_r) < 2e-2
    loss = lambda p, s: jnp.mean(jax_nn.apply(p, xin, cfg, s).astype(jnp.float32) ** 2)  # noqa: E731
    g = jax.jit(jax.grad(lambda p: loss(p, None)))(params)
    g_r = jax.jit(jax.grad(lambda p: loss(p, ssd_f64)))(params)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_r)):
        assert a.dtype == jnp.bfloat16 and rel_err(a, b) < 5e-2
