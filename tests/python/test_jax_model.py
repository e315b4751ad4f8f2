"""A few SGD steps of a small Mamba-2 style model in JAX (chunkgen.jax_nn: in-projection to
q, k, v, dt; SSD; gated out-projection) with chunkgen.jax.ssd match the same model on the
pure-JAX lax.scan recurrence: losses and parameters, float32 (chunkgen's CPU path)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import chunkgen.jax as cj  # noqa: E402
from chunkgen import jax_nn  # noqa: E402
from jax_ref import rel_err, ssd_scan  # noqa: E402

CFG = jax_nn.Config(d_model=16, heads=2, groups=1, dk=8, dv=6, layers=2)
Bsz, T = 2, 37


def ssd_chunkgen(q, k, v, log_alpha):
    return cj.ssd(q, k, v, log_alpha, layout="token")


def ssd_pure(q, k, v, log_alpha):
    sw = lambda a: jnp.swapaxes(a, 1, 2)  # noqa: E731
    o, hT = ssd_scan(sw(q), sw(k), sw(v), sw(log_alpha))
    return sw(o), hT


def train(ssd, steps=4, lr=0.05):
    params = jax_nn.init(jax.random.key(0), CFG)
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((Bsz, T, CFG.d_model)).astype(np.float32))
    target = jnp.asarray(rng.standard_normal((Bsz, T, CFG.d_model)).astype(np.float32))
    loss = lambda p: jnp.mean((jax_nn.apply(p, x, CFG, ssd) - target) ** 2)  # noqa: E731

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
    for a, b in zip(jax.tree.leaves(p_cg), jax.tree.leaves(p_ref)):
        assert a.dtype == jnp.float32 and rel_err(a, b) < 1e-4
    # the default ssd of jax_nn is chunkgen's
    x = jnp.ones((1, 5, CFG.d_model), jnp.float32)
    assert rel_err(jax_nn.apply(p_cg, x, CFG), jax_nn.apply(p_cg, x, CFG, ssd_chunkgen)) == 0
