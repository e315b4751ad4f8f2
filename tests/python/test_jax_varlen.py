"""chunkgen.jax with cu_seqlens (docs/varlen.md): a packed call equals the per-sequence calls
concatenated, forward and every gradient (states per sequence), under jit and grad, both
SSD layouts, G = 2 < H = 4, grouped sscan B/C; vmap over packed calls; a bad offset's
message at run time."""
import itertools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import chunkgen.jax as cj  # noqa: E402

LENGTHS = [1, 37, 64, 200, 0, 5]
TOL = 1e-5


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    m = np.abs(b).max()
    return np.abs(a - b).max() / (m if m else 1.0)


def offsets(dt):
    return jnp.asarray(np.array([0] + list(itertools.accumulate(LENGTHS)), dtype=dt))


def ssd_inputs(layout, seed=0):
    N, T, G, H, dk, dv = len(LENGTHS), sum(LENGTHS), 2, 4, 5, 7
    rng = np.random.default_rng(seed)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    x = dict(q=r(1, T, G, dk) / np.float32(dk ** 0.5), k=r(1, T, G, dk) / np.float32(dk ** 0.5), v=r(1, T, H, dv),
             log_alpha=(-rng.random((1, T, H)) * 0.5).astype(np.float32), h0=r(N, H, dk, dv))
    if layout == "head":
        x = {n: (np.ascontiguousarray(a.swapaxes(1, 2)) if n != "h0" else a) for n, a in x.items()}
    return {n: jnp.asarray(a) for n, a in x.items()}


@pytest.mark.parametrize("layout", ["head", "token"])
def test_jax_ssd_packed_equals_per_sequence(layout):
    x = ssd_inputs(layout)
    cu = offsets(np.int32)
    ax = 2 if layout == "head" else 1
    rng = np.random.default_rng(5)
    w_o = jnp.asarray(rng.standard_normal(x["v"].shape).astype(np.float32))
    w_h = jnp.asarray(rng.standard_normal(x["h0"].shape).astype(np.float32))
    names = ("q", "k", "v", "log_alpha", "h0")

    def packed(*a):
        o, hT = cj.ssd(*a, layout=layout, cu_seqlens=cu)
        return (o * w_o).sum() + (hT * w_h).sum(), (o, hT)

    def split(*a):
        t = dict(zip(names, a))
        loss, outs, hts = 0.0, [], []
        bounds = np.asarray(cu)
        for n, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
            if e == s:
                hts.append(t["h0"][n])
                continue
            sl = lambda z: jax.lax.slice_in_dim(z, int(s), int(e), axis=ax)  # noqa: E731
            o, hT = cj.ssd(sl(t["q"]), sl(t["k"]), sl(t["v"]), sl(t["log_alpha"]), t["h0"][n:n + 1], layout=layout)
            outs.append(o)
            hts.append(hT[0])
        o, hT = jnp.concatenate(outs, axis=ax), jnp.stack(hts)
        return (o * w_o).sum() + (hT * w_h).sum(), (o, hT)

    args = tuple(x[n] for n in names)
    (lp, (op, hp)), gp = jax.jit(jax.value_and_grad(packed, argnums=range(5), has_aux=True))(*args)
    (ls, (os_, hs)), gs = jax.value_and_grad(split, argnums=range(5), has_aux=True)(*args)
    assert hp.shape == x["h0"].shape
    assert rel(op, os_) < TOL and rel(hp, hs) < TOL
    for n, a, b in zip(names, gp, gs):
        assert rel(a, b) < TOL, n


def test_jax_sscan_packed_equals_per_sequence():
    N, L, D, Ns, G = len(LENGTHS), sum(LENGTHS), 6, 5, 2
    rng = np.random.default_rng(1)
    r = lambda *s: jnp.asarray(rng.standard_normal(s).astype(np.float32))  # noqa: E731
    u = lambda *s: jnp.asarray(rng.random(s).astype(np.float32))  # noqa: E731
    names = ("x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0")
    x = dict(x=r(1, L, D), delta=u(1, L, D) * 0.5, A=-u(D, Ns) - 0.2, B=r(1, L, G, Ns), C=r(1, L, G, Ns), D=r(D),
             z=r(1, L, D), delta_bias=u(D) * 0.2, h0=r(N, D, Ns))
    cu = offsets(np.int64 if jax.config.jax_enable_x64 else np.int32)
    w_y, w_h = r(1, L, D), r(N, D, Ns)
    per_token = ("x", "delta", "B", "C", "z")

    def packed(*a):
        y, hT = cj.sscan(*a, delta_softplus=True, cu_seqlens=cu)
        return (y * w_y).sum() + (hT * w_h).sum()

    def split(*a):
        t = dict(zip(names, a))
        bounds = np.asarray(cu)
        ys, hts = [], []
        for n, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
            if e == s:
                hts.append(t["h0"][n])
                continue
            sub = {k: (v[:, int(s):int(e)] if k in per_token else v) for k, v in t.items()}
            sub["h0"] = t["h0"][n:n + 1]
            y, hT = cj.sscan(*(sub[k] for k in names), delta_softplus=True)
            ys.append(y)
            hts.append(hT[0])
        return (jnp.concatenate(ys, axis=1) * w_y).sum() + (jnp.stack(hts) * w_h).sum()

    args = tuple(x[n] for n in names)
    gp = jax.jit(jax.grad(packed, argnums=range(9)))(*args)
    gs = jax.grad(split, argnums=range(9))(*args)
    assert rel(packed(*args), split(*args)) < TOL
    for n, a, b in zip(names, gp, gs):
        assert rel(a, b) < TOL, n


def test_jax_varlen_vmap_and_errors():
    """vmap over packed calls runs one call per element (B = 1 cannot fold); the library's
    messages for bad offsets (at run time) and for states of the wrong count (traced)."""
    x = ssd_inputs("head")
    cu = offsets(np.int32)
    names = ("q", "k", "v", "log_alpha", "h0")
    stacked = tuple(jnp.stack([x[n], 2 * x[n]]) for n in names)
    o, hT = jax.vmap(lambda *a: cj.ssd(*a, cu_seqlens=cu))(*stacked)
    o1, hT1 = cj.ssd(*(2 * x[n] for n in names), cu_seqlens=cu)
    assert rel(o[1], o1) < TOL and rel(hT[1], hT1) < TOL
    with pytest.raises(ValueError, match="h0: shape"):
        cj.ssd(*(x[n] for n in names), cu_seqlens=cu[:-1])
    bad = jnp.asarray(np.array([0, 50, 40, 302, 302, 302, 307], dtype=np.int32))
    with pytest.raises(Exception, match=r"cu_seqlens\[2\] = 40 but expected >= cu_seqlens\[1\] = 50"):
        jax.block_until_ready(cj.ssd(*(x[n] for n in names), cu_seqlens=bad))
