"""chunkgen.jax: forward and every gradient against the pure-JAX lax.scan recurrence
(float64 on the ref backend, float32 on the CPU path with chunkgen's tolerance), under
jit, grad, vjp, vmap (one folded custom call, no loop) and check_grads; trace-time and
run-time errors carrying chunkgen's message."""
import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

jax.config.update("jax_enable_x64", True)

import chunkgen.jax as cj  # noqa: E402
from jax_ref import rel_err, sscan_scan, ssd_scan  # noqa: E402
from ref import TOL_BWD, TOL_FWD  # noqa: E402

F64_TOL = 1e-10


def ssd_inputs(seed, B=2, G=2, H=4, T=37, dk=48, dv=40, dtype=np.float64, h0=True):
    rng = np.random.default_rng(seed)
    r = lambda *s, scale=1.0: jnp.asarray((rng.standard_normal(s) * scale).astype(dtype))  # noqa: E731
    x = dict(q=r(B, G, T, dk, scale=dk ** -0.5), k=r(B, G, T, dk, scale=dk ** -0.5), v=r(B, H, T, dv),
             log_alpha=jnp.asarray((-rng.random((B, H, T)) * 0.5).astype(dtype)))
    if h0:
        x["h0"] = r(B, H, dk, dv)
    return x


def to_token(x):
    """head-major SSD inputs -> token-major (h0 is the same in both)."""
    return {n: (a if n == "h0" else jnp.swapaxes(a, 1, 2)) for n, a in x.items()}


def vjp_all(f, x, seed):
    """(outputs, gradients of every input) for random cotangents of both outputs."""
    names = list(x)
    outs, pull = jax.vjp(lambda *a: f(**dict(zip(names, a))), *x.values())
    rng = np.random.default_rng(seed)
    cts = tuple(jnp.asarray(rng.standard_normal(o.shape).astype(o.dtype)) for o in outs)
    return outs, dict(zip(names, pull(cts)))


SSD_SHAPES = [
    dict(B=2, G=2, H=4, T=37, dk=48, dv=40),  # G < H, T not a multiple of anything
    dict(B=1, G=1, H=1, T=1, dk=48, dv=40),   # T = 1, a single head
    dict(B=1, G=1, H=1, T=37, dk=7, dv=5),    # a single head, odd dims
]


@pytest.mark.parametrize("shape", SSD_SHAPES, ids=lambda s: "g{G}h{H}_t{T}_dk{dk}_dv{dv}".format(**s))
@pytest.mark.parametrize("layout", ["head", "token"])
@pytest.mark.parametrize("h0", [True, False], ids=["h0", "no_h0"])
def test_ssd_float64_vs_scan(shape, layout, h0):
    x = ssd_inputs(0, **shape, h0=h0)
    (o_r, hT_r), g_r = vjp_all(ssd_scan, x, 1)
    if layout == "token":
        f = jax.jit(lambda **a: (lambda o, hT: (jnp.swapaxes(o, 1, 2), hT))(*cj.ssd(**to_token(a), layout="token")))
    else:
        f = jax.jit(lambda **a: cj.ssd(**a))
    (o, hT), g = vjp_all(f, x, 1)
    assert o.dtype == jnp.float64
    assert rel_err(o, o_r) < F64_TOL and rel_err(hT, hT_r) < F64_TOL
    for n in x:
        assert g[n].shape == x[n].shape, n
        assert rel_err(g[n], g_r[n]) < F64_TOL, n


def test_ssd_float32_vs_reference():
    x64 = ssd_inputs(2)
    x = {n: a.astype(jnp.float32) for n, a in x64.items()}
    (o_r, hT_r), g_r = vjp_all(ssd_scan, x64, 3)
    (o, hT), g = vjp_all(jax.jit(lambda **a: cj.ssd(**a)), x, 3)
    assert o.dtype == jnp.float32 and g["q"].dtype == jnp.float32
    assert rel_err(o, o_r) < TOL_FWD and rel_err(hT, hT_r) < TOL_FWD
    for n in x:
        assert rel_err(g[n], g_r[n]) < TOL_BWD, n


def test_ssd_grad_and_check_grads():
    x = ssd_inputs(4, B=1, G=1, H=2, T=5, dk=3, dv=2)

    def loss(q, k, v, log_alpha, h0):
        o, hT = cj.ssd(q, k, v, log_alpha, h0)
        return (o ** 2).sum() + (hT * 0.5).sum()

    def loss_ref(q, k, v, log_alpha, h0):
        o, hT = ssd_scan(q, k, v, log_alpha, h0)
        return (o ** 2).sum() + (hT * 0.5).sum()

    args = tuple(x.values())
    g = jax.jit(jax.grad(loss, argnums=tuple(range(5))))(*args)
    g_r = jax.grad(loss_ref, argnums=tuple(range(5)))(*args)
    for a, b in zip(g, g_r):
        assert rel_err(a, b) < F64_TOL
    check_grads(lambda *a: cj.ssd(*a), args, order=1, modes=["rev"])


def n_calls(jaxpr_text):
    return jaxpr_text.count("target_name=chunkgen")


def has_loop(jaxpr_text):
    return re.search(r"\b(scan|while)\[", jaxpr_text) is not None


def test_ssd_vmap_folds_into_batch():
    xs = [ssd_inputs(10 + i, B=2, G=2, H=4, T=9, dk=5, dv=3) for i in range(3)]
    stacked = {n: jnp.stack([x[n] for x in xs]) for n in xs[0]}
    # the last input unmapped: broadcast, still one call
    f = jax.vmap(lambda q, k, v, la, h0: cj.ssd(q, k, v, la, h0), in_axes=(0, 0, 0, 0, None))
    args = (stacked["q"], stacked["k"], stacked["v"], stacked["log_alpha"], xs[0]["h0"])
    o, hT = jax.jit(f)(*args)
    for i, x in enumerate(xs):
        o_r, hT_r = ssd_scan(x["q"], x["k"], x["v"], x["log_alpha"], xs[0]["h0"])
        assert rel_err(o[i], o_r) < F64_TOL and rel_err(hT[i], hT_r) < F64_TOL
    text = str(jax.make_jaxpr(f)(*args))
    assert n_calls(text) == 1 and not has_loop(text)
    # vmap of the gradient: the forward and the backward calls, each once
    g = jax.vmap(jax.grad(lambda q, k, v, la, h0: cj.ssd(q, k, v, la, h0)[0].sum(), argnums=(0, 2)),
                 in_axes=(0, 0, 0, 0, None))
    text = str(jax.make_jaxpr(g)(*args))
    assert n_calls(text) == 2 and not has_loop(text)
    dq, dv = jax.jit(g)(*args)
    for i, x in enumerate(xs):
        dq_r, dv_r = jax.grad(lambda q, v: ssd_scan(q, x["k"], v, x["log_alpha"], xs[0]["h0"])[0].sum(),
                              argnums=(0, 1))(x["q"], x["v"])
        assert rel_err(dq[i], dq_r) < F64_TOL and rel_err(dv[i], dv_r) < F64_TOL


def sscan_inputs(seed, B=2, L=37, D=6, N=5, G=None, dtype=np.float64, full=True):
    rng = np.random.default_rng(seed)
    r = lambda *s, scale=1.0: jnp.asarray((rng.standard_normal(s) * scale).astype(dtype))  # noqa: E731
    bc = (B, L, G, N) if G else (B, L, N)
    x = dict(x=r(B, L, D), delta=r(B, L, D, scale=0.5), A=-jnp.asarray(rng.random((D, N)).astype(dtype) + 0.5),
             B=r(*bc), C=r(*bc))
    if full:
        x.update(D=r(D), z=r(B, L, D), delta_bias=r(D, scale=0.1), h0=r(B, D, N))
    return x


@pytest.mark.parametrize("case", ["full_grouped", "plain", "t1"])
def test_sscan_float64_vs_scan(case):
    kw = dict(full_grouped=dict(G=2), plain=dict(full=False), t1=dict(L=1, D=3, N=4))[case]
    softplus = case != "plain"
    x = sscan_inputs(20, **kw)
    (y_r, hT_r), g_r = vjp_all(lambda **a: sscan_scan(**a, delta_softplus=softplus), x, 21)
    (y, hT), g = vjp_all(jax.jit(lambda **a: cj.sscan(**a, delta_softplus=softplus)), x, 21)
    assert rel_err(y, y_r) < F64_TOL and rel_err(hT, hT_r) < F64_TOL
    for n in x:
        assert g[n].shape == x[n].shape, n
        assert rel_err(g[n], g_r[n]) < F64_TOL, n


def test_sscan_float32_and_check_grads():
    x64 = sscan_inputs(30, G=2)
    x = {n: a.astype(jnp.float32) for n, a in x64.items()}
    (y_r, _), g_r = vjp_all(lambda **a: sscan_scan(**a, delta_softplus=True), x64, 31)
    (y, _), g = vjp_all(jax.jit(lambda **a: cj.sscan(**a, delta_softplus=True)), x, 31)
    assert y.dtype == jnp.float32 and rel_err(y, y_r) < TOL_FWD
    for n in x:
        assert rel_err(g[n], g_r[n]) < TOL_BWD, n
    small = sscan_inputs(32, B=1, L=4, D=2, N=3)
    check_grads(lambda *a: cj.sscan(*a, delta_softplus=True), tuple(small.values()), order=1, modes=["rev"])


def test_sscan_vmap():
    xs = [sscan_inputs(40 + i, B=2, L=7, D=4, N=3, full=False) for i in range(3)]
    A = xs[0]["A"]
    names = ("x", "delta", "B", "C")
    stacked = [jnp.stack([x[n] for x in xs]) for n in names]
    f = jax.vmap(lambda x, d, B, C: cj.sscan(x, d, A, B, C))
    y, hT = jax.jit(f)(*stacked)
    for i, x in enumerate(xs):
        y_r, hT_r = sscan_scan(x["x"], x["delta"], A, x["B"], x["C"])
        assert rel_err(y[i], y_r) < F64_TOL and rel_err(hT[i], hT_r) < F64_TOL
    text = str(jax.make_jaxpr(f)(*stacked))
    assert n_calls(text) == 1 and not has_loop(text)
    # A mapped too: cannot fold (A has no batch axis), one call per element, still right
    As = jnp.stack([x["A"] for x in xs])
    y2, _ = jax.vmap(lambda x, d, A, B, C: cj.sscan(x, d, A, B, C))(stacked[0], stacked[1], As, *stacked[2:])
    y_r, _ = sscan_scan(xs[2]["x"], xs[2]["delta"], xs[2]["A"], xs[2]["B"], xs[2]["C"])
    assert rel_err(y2[2], y_r) < F64_TOL


def test_errors_at_trace_time():
    x = ssd_inputs(50, B=1, G=2, H=4, T=5, dk=3, dv=2, h0=False)
    bad = dict(x, v=x["v"][:, :3])  # H = 3 not a multiple of G = 2
    with pytest.raises(ValueError, match="H % G"):
        jax.jit(lambda **a: cj.ssd(**a)).trace(**bad)
    with pytest.raises(ValueError, match="log_alpha"):
        jax.eval_shape(lambda **a: cj.ssd(**a), **dict(x, log_alpha=x["log_alpha"][:, :, :4]))
    with pytest.raises(ValueError, match="expected float32 or float64"):
        cj.ssd(**dict(x, q=x["q"].astype(jnp.int32)))
    with pytest.raises(ValueError, match="like q"):
        cj.ssd(**dict(x, k=x["k"].astype(jnp.float32)))
    with pytest.raises(ValueError, match="layout"):
        cj.ssd(**x, layout="tokens")


def test_runtime_error_carries_errmsg(monkeypatch):
    x = {n: a.astype(jnp.float32) for n, a in ssd_inputs(51, B=1, G=1, H=1, T=5, dk=3, dv=2).items()}
    compiled = jax.jit(lambda **a: cj.ssd(**a)).lower(**x).compile()
    # the library reads CHUNKGEN_CONFIG afresh on every call: a pinned config it refuses
    monkeypatch.setenv("CHUNKGEN_CONFIG", "ssd_fwd:chunk=banana")
    with pytest.raises(jax.errors.JaxRuntimeError, match="config chunk=banana: expected an integer"):
        jax.block_until_ready(compiled(**x))
    monkeypatch.delenv("CHUNKGEN_CONFIG")
    assert np.isfinite(np.asarray(compiled(**x)[0])).all()


def test_second_order_refused_by_name():
    # before: NotImplementedError "Differentiation rule for 'custom_partitioning' not implemented"
    x = ssd_inputs(60, B=1, G=1, H=2, T=9, dk=3, dv=2, h0=False)
    f = lambda q: (cj.ssd(q, x["k"], x["v"], x["log_alpha"])[0] ** 2).sum()  # noqa: E731
    assert np.isfinite(np.asarray(jax.grad(f)(x["q"]))).all()  # first order: fine
    for second in (jax.grad(lambda q: jax.grad(f)(q).sum()), jax.jacrev(jax.grad(f))):
        with pytest.raises(NotImplementedError, match="chunkgen's backward is not differentiable"):
            second(x["q"])
    for fwd_mode in (jax.hessian(f), jax.jacfwd(jax.grad(f))):  # forward mode: JAX's own refusal
        with pytest.raises(TypeError, match="forward-mode autodiff"):
            fwd_mode(x["q"])
    s = sscan_inputs(61, B=1, L=7, D=3, N=2, full=False)
    g = lambda A: (cj.sscan(s["x"], s["delta"], A, s["B"], s["C"])[0] ** 2).sum()  # noqa: E731
    with pytest.raises(NotImplementedError, match="gradients of chunkgen.jax.sscan cannot be differentiated"):
        jax.grad(lambda A: jax.grad(g)(A).sum())(s["A"])


def test_size_overflow_at_trace_time_names_the_tensor():
    # before: a bare OverflowError from the binding's descriptors
    T = 1 << 62
    S = jax.ShapeDtypeStruct
    ins = (S((1, 1, T, 1), jnp.float32), S((1, 1, T, 1), jnp.float32), S((1, 1, T, 1), jnp.float32),
           S((1, 1, T), jnp.float32))
    with pytest.raises(ValueError, match=r"q: byte size of shape \(1, 1, 4611686018427387904, 1\) overflows 64 bits"):
        jax.eval_shape(lambda q, k, v, la: cj.ssd(q, k, v, la), *ins)
    with pytest.raises(ValueError, match=r"q: shape\[2\] = 36893488147419103232 out of range"):
        jax.eval_shape(lambda q, k, v, la: cj.ssd(q, k, v, la), S((1, 1, 1 << 65, 1), jnp.float32), *ins[1:])


def test_cache_dir_with_nul_refused():
    with pytest.raises(ValueError, match=r"path: 'a\\x00b' contains a NUL character"):
        cj.set_cache_dir("a\x00b")  # before: accepted, and cut to "a"


def test_failed_cuda_registration_is_a_warning():
    # before: `except Exception: pass`
    assert cj.CUDA_REGISTRATION_ERROR is None  # (registration is deferred without a CUDA plugin)

    def broken(*a, **kw):
        raise RuntimeError("no such platform: CUDA")

    with pytest.warns(RuntimeWarning, match=r"CUDA FFI handler could not be registered \(RuntimeError: no such "
                                            r"platform: CUDA\)"):
        assert cj._register_cuda(broken) == "RuntimeError: no such platform: CUDA"
