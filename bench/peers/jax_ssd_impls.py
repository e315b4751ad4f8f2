"""Pure-JAX SSD implementations, token-major (q, k [B, T, G, dk]; v [B, T, H, dv];
log_alpha [B, T, H]; h0 [B, H, dk, dv]): the JAX peers of the benchmarks
(bench/peers/jax_peers.py, bench/jax_ssm.py). Import after XLA_FLAGS is set.

  ssd_scan   a plain jax.lax.scan over the tokens (state [B, H, dk, dv] carried);
  ssd_chunk  the chunked algorithm in jax.numpy: per chunk the masked Q K^T times V, plus
             the entering state read by Q; a lax.scan over the chunks passes the state.
"""
import jax
import jax.numpy as jnp


def rep_heads(x, H):
    return jnp.repeat(x, H // x.shape[2], axis=2)


def ssd_scan(q, k, v, la, h0):
    H = v.shape[2]
    q, k = rep_heads(q, H), rep_heads(k, H)

    def step(S, xs):
        qt, kt, vt, at = xs  # [B, H, dk], [B, H, dk], [B, H, dv], [B, H]
        S = jnp.exp(at)[..., None, None] * S + kt[..., :, None] * vt[..., None, :]
        return S, jnp.einsum("bhk,bhkv->bhv", qt, S)

    xs = tuple(jnp.moveaxis(x, 1, 0) for x in (q, k, v, la))
    S, o = jax.lax.scan(step, h0, xs)
    return jnp.moveaxis(o, 0, 1), S


def ssd_chunk(q, k, v, la, h0, chunk):
    B, T, _, dk = q.shape
    H, dv = v.shape[2], v.shape[3]
    q, k = rep_heads(q, H), rep_heads(k, H)
    pad = (-T) % chunk
    if pad:  # zero tokens: decay 1, no contribution, output dropped
        q, k, v = (jnp.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))) for x in (q, k, v))
        la = jnp.pad(la, ((0, 0), (0, pad), (0, 0)))
    nc = (T + pad) // chunk
    # [nc, B, H, l, d]
    q, k, v = (x.reshape(B, nc, chunk, H, x.shape[-1]).transpose(1, 0, 3, 2, 4) for x in (q, k, v))
    A = jnp.cumsum(la.reshape(B, nc, chunk, H).transpose(1, 0, 3, 2), axis=-1)  # [nc, B, H, l]
    tri = jnp.tril(jnp.ones((chunk, chunk), dtype=bool))

    def step(S, xs):
        qc, kc, vc, Ac = xs
        diff = jnp.where(tri, Ac[..., :, None] - Ac[..., None, :], -jnp.inf)
        P = jnp.einsum("bhld,bhsd->bhls", qc, kc) * jnp.exp(diff)
        o = jnp.einsum("bhls,bhsv->bhlv", P, vc) + jnp.exp(Ac)[..., None] * jnp.einsum("bhld,bhdv->bhlv", qc, S)
        w = jnp.exp(Ac[..., -1:] - Ac)
        S = jnp.exp(Ac[..., -1])[..., None, None] * S + jnp.einsum("bhld,bhl,bhlv->bhdv", kc, w, vc)
        return S, o

    S, o = jax.lax.scan(step, h0, (q, k, v, A))
    o = o.transpose(1, 0, 3, 2, 4).reshape(B, nc * chunk, H, dv)[:, :T]
    return o, S
