"""A small Mamba-2 style model in plain JAX on chunkgen.jax.ssd (or any SSD function with
its signature): parameters as a dict of arrays, no framework.

    cfg = Config(d_model=128, heads=1, groups=1, dk=128, dv=128, layers=2)
    params = init(jax.random.key(0), cfg)
    y = apply(params, x, cfg)                  # x [B, T, d_model]; ssd = chunkgen.jax.ssd
    y = apply(params, x, cfg, ssd=my_ssd)      # my_ssd(q, k, v, log_alpha) token-major
    caches = [jnp.zeros(cache_shape(cfg, slots))] * cfg.layers  # decoding (chunkgen.jax.ssd_step)
    y, caches = apply_step(params, x1, cfg, caches, slot_ids)  # x1 [B, 1, d_model]

Each layer: RMS norm, an in-projection to q, k (per group), v, dt (per head) and a gate;
dt = softplus(dt + dt_bias), log_alpha = -exp(a_log) * dt, v scaled by dt; SSD; the output
gated by silu(gate), out-projected and added to the residual. With bfloat16 / float16
parameters (init(..., dtype=jnp.bfloat16)) q, k, v stay 16-bit and log_alpha is float32.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Config", "init", "apply", "cache_shape", "mixer_step", "apply_step"]


class Config(NamedTuple):
    d_model: int = 128
    heads: int = 1
    groups: int = 1
    dk: int = 128
    dv: int = 128
    layers: int = 2


def _in_sizes(c: Config):
    return (c.groups * c.dk, c.groups * c.dk, c.heads * c.dv, c.heads, c.heads * c.dv)  # q, k, v, dt, gate


def init(key, c: Config, dtype=jnp.float32) -> dict:
    """Parameters of every layer: {'layers': [{'norm', 'w_in', 'dt_bias', 'a_log', 'w_out'}, ...]}."""
    n_in = sum(_in_sizes(c))
    layers = []
    for k in jax.random.split(key, c.layers):
        k1, k2 = jax.random.split(k)
        layers.append(dict(norm=jnp.ones(c.d_model, dtype),
                           w_in=jax.random.normal(k1, (c.d_model, n_in), dtype) * c.d_model ** -0.5,
                           dt_bias=jnp.full(c.heads, -1.0, dtype), a_log=jnp.zeros(c.heads, dtype),
                           w_out=jax.random.normal(k2, (c.heads * c.dv, c.d_model), dtype) * (c.heads * c.dv) ** -0.5))
    return {"layers": layers}


def _ssd_token(q, k, v, log_alpha):
    from . import jax as cj

    return cj.ssd(q, k, v, log_alpha, layout="token")


def mixer(p: dict, x, c: Config, ssd=None):
    """One Mamba-2 style SSD mixer on x [B, T, d_model] (no residual)."""
    return _mix(p, x, c, lambda q, k, v, la: (ssd or _ssd_token)(q, k, v, la)[0])


def cache_shape(c: Config, slots: int):
    """The shape of one layer's state cache of `slots` sequences: [slots, heads, dk, dv]."""
    return (slots, c.heads, c.dk, c.dv)


def mixer_step(p: dict, x, c: Config, cache, state_indices, dst_indices=None):
    """Decoding: the mixer on x [B, T, d_model] (T = 1 per step) from the states
    cache[state_indices[b]] (chunkgen.jax.ssd_step; -1 a padding entry). Returns (out, new
    cache); the new cache aliases the old one (donate it for an in-place update)."""
    from . import jax as cj

    new = []

    def run(q, k, v, la):
        o, cache2 = cj.ssd_step(q, k, v, la, cache, state_indices, dst_indices)
        new.append(cache2)
        return o

    return _mix(p, x, c, run), new[0]


def apply_step(params: dict, x, c: Config, caches, state_indices, dst_indices=None):
    """The model's decode step: x [B, T, d_model], caches one per layer (cache_shape);
    returns (out, new caches). T steps equal apply over the same T tokens from zero states."""
    out = []
    for p, cache in zip(params["layers"], caches):
        y, cache = mixer_step(p, x, c, cache, state_indices, dst_indices)
        x = x + y
        out.append(cache)
    return x, out


def _mix(p: dict, x, c: Config, run):
    B, T, _ = x.shape
    h = x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * p["norm"]
    sizes = _in_sizes(c)
    cuts = [sum(sizes[:i + 1]) for i in range(len(sizes) - 1)]
    q, k, v, dt, gate = jnp.split(h @ p["w_in"], cuts, axis=-1)
    q = jax.nn.silu(q).reshape(B, T, c.groups, c.dk) * c.dk ** -0.5
    k = jax.nn.silu(k).reshape(B, T, c.groups, c.dk)
    dt = jax.nn.softplus(dt + p["dt_bias"])  # [B, T, H]
    v = v.reshape(B, T, c.heads, c.dv) * dt[..., None]
    log_alpha = -jnp.exp(p["a_log"]) * dt
    if log_alpha.dtype in (jnp.bfloat16, jnp.float16):  # chunkgen keeps the decay float32
        log_alpha = log_alpha.astype(jnp.float32)
    o = run(q, k, v, log_alpha)
    return (o.reshape(B, T, c.heads * c.dv) * jax.nn.silu(gate)) @ p["w_out"]


def apply(params: dict, x, c: Config, ssd=None):
    """The model on x [B, T, d_model]: every layer's mixer added to the residual."""
    for p in params["layers"]:
        x = x + mixer(p, x, c, ssd)
    return x
