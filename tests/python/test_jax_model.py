"""A few SGD steps of a small Mamba-2 style model in JAX (in-projection to q, k, v, dt;
SSD; gated out-projection) with chunkgen.jax.ssd match the same model on the pure-JAX
lax.scan recurrence: losses and parameters, float32 (chunkgen's CPU path)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import chunkgen.jax as cj  # noqa: E402
from jax_ref import rel_err, ssd_scan  # noqa: E402

Bsz, T, DM, G, H, DK, DV = 2, 37, 16, 1, 2, 8, 6


def init(seed):
    rng = np.random.default_rng(seed)
    f = lambda *s, scale: jnp.asarray((rng.standard_normal(s) * scale).astype(np.float32))  # noqa: E731
    n_in = 2 * G * DK + H * DV + H + H * DV  # q, k, v, dt, gate
    return dict(w_in=f(DM, n_in, scale=DM ** -0.5), a_log=jnp.zeros(H, jnp.float32) + 0.3,
                w_out=f(H * DV, DM, scale=(H * DV) ** -0.5))


def model(params, x, ssd):
    """x [B, T, DM] -> [B, T, DM]; ssd(q, k, v, log_alpha) token-major."""
    p = x @ params["w_in"]
    sizes = np.cumsum([G * DK, G * DK, H * DV, H])
    q, k, v, dt, gate = jnp.split(p, sizes, axis=-1)
    q = jax.nn.silu(q).reshape(Bsz, T, G, DK)
    k = jax.nn.silu(k).reshape(Bsz, T, G, DK)
    dt = jax.nn.softplus(dt)  # [B, T, H]
    v = v.reshape(Bsz, T, H, DV) * dt[..., None]
    log_alpha = -jnp.exp(params["a_log"]) * dt
    o, _ = ssd(q, k, v, log_alpha)
    y = o.reshape(Bsz, T, H * DV) * jax.nn.silu(gate)
    return x + y @ params["w_out"]


def ssd_chunkgen(q, k, v, log_alpha):
    return cj.ssd(q, k, v, log_alpha, layout="token")


def ssd_pure(q, k, v, log_alpha):
    sw = lambda a: jnp.swapaxes(a, 1, 2)  # noqa: E731
    o, hT = ssd_scan(sw(q), sw(k), sw(v), sw(log_alpha))
    return sw(o), hT


def train(ssd, steps=4, lr=0.05):
    params = init(0)
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((Bsz, T, DM)).astype(np.float32))
    target = jnp.asarray(rng.standard_normal((Bsz, T, DM)).astype(np.float32))
    loss = lambda p: jnp.mean((model(p, x, ssd) - target) ** 2)  # noqa: E731

    @jax.jit
    def step(p):
        value, g = jax.value_and_grad(loss)(p)
        return jax.tree.map(lambda a, b: a - lr * b, p, g), value

    losses = []
    for _ in range(steps):
        params, value = step(params)
        losses.append(float(value))
    return losses, params


def test_training_steps_match_pure_jax():
    l_cg, p_cg = train(ssd_chunkgen)
    l_ref, p_ref = train(ssd_pure)
    assert l_cg[-1] < l_cg[0]  # it trains
    for a, b in zip(l_cg, l_ref):
        assert abs(a - b) <= 1e-4 * abs(b), (l_cg, l_ref)
    for n in p_ref:
        assert rel_err(p_cg[n], p_ref[n]) < 1e-4, n
