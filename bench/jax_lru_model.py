"""The seeds' `ssm` suite `lru` cell's model in plain JAX: a stack of RG-LRU style mixers
(Griffin's recurrent block without its conv), parameters as a dict of arrays.

Each layer on x [B, T, d]: RMS norm; an in-projection to the recurrence's input u, its
input gate i, its recurrence gate r and an output branch z (d channels each);
log a_t = -8 r_t softplus(lam) (a = sigmoid(-lam)^(8 r), Griffin's c = 8), b_t =
sqrt(1 - a_t^2) i_t; h_t = a_t h_{t-1} + b_t u_t (the LRU, `lru(a, b, u)`, token-major
[B, T, d], y_t = h_t); the output y * gelu(z), out-projected and added to the residual.

`lru` is chunkgen.jax.lru (default) or any function with its signature returning (y, hT):
jax_assoc_lru (jax.lax.associative_scan) and jax_scan_lru (jax.lax.scan) are the pure-JAX
peers."""
import jax
import jax.numpy as jnp


def init(key, d_model=128, layers=2, dtype=jnp.float32):
    out = []
    for k in jax.random.split(key, layers):
        k1, k2 = jax.random.split(k)
        out.append(dict(norm=jnp.ones(d_model, dtype),
                        w_in=jax.random.normal(k1, (d_model, 4 * d_model), dtype) * d_model ** -0.5,
                        lam=jnp.full(d_model, -2.0, dtype),
                        w_out=jax.random.normal(k2, (d_model, d_model), dtype) * d_model ** -0.5))
    return {"layers": out}


def jax_assoc_lru(a, b, x):
    def comb(l, r):
        return l[0] * r[0], r[0] * l[1] + r[1]

    _, h = jax.lax.associative_scan(comb, (a, b * x), axis=1)
    return h, h[:, -1]


def jax_scan_lru(a, b, x):
    def step(h, t):
        h = t[0] * h + t[1] * t[2]
        return h, h

    hT, y = jax.lax.scan(step, jnp.zeros_like(a[:, 0]), tuple(jnp.moveaxis(v, 1, 0) for v in (a, b, x)))
    return jnp.moveaxis(y, 0, 1), hT


def _chunkgen_lru(a, b, x):
    import chunkgen.jax as cj

    return cj.lru(a, b, x, layout="token")


def apply(params, x, lru=None):
    lru = lru or _chunkgen_lru
    for p in params["layers"]:
        h = x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * p["norm"]
        u, i, r, z = jnp.split(h @ p["w_in"], 4, axis=-1)
        log_a = -8.0 * jax.nn.sigmoid(r) * jax.nn.softplus(p["lam"])
        a = jnp.exp(log_a)
        b = jnp.sqrt(jnp.maximum(1 - a * a, 1e-6)) * jax.nn.sigmoid(i)
        y, _ = lru(a, b, u)
        x = x + (y * jax.nn.gelu(z)) @ p["w_out"]
    return x
