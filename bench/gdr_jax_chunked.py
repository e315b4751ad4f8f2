"""The gated delta rule by the chunked WY form in plain jnp (the peer of the benchmark
bench/gdr_peers.py; MATH_GDN.md section 2): per chunk of C tokens, with the in-chunk
cumulative log-decay gc and L_ij = exp(gc_i - gc_j) (i >= j),
  M = strict_lower((beta k) k^T * L),  Tm = (I + M)^-1   (a unit lower-triangular solve)
  u = Tm (beta v),  w = Tm (beta k exp(gc))
then a lax.scan over the chunks with the state S [dk, dv]:
  vn = u - w S,  o = (q exp(gc)) S + tril(q k^T * L) vn,
  S <- exp(gc_last) S + (k exp(gc_last - gc))^T vn.
Gradients by jax's autodiff of the same function. Token-major inputs of one head count
(q/k already repeated to the value heads), as fla's naive references take them."""
import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular


def gdr_chunked(q, k, v, g, beta, h0, scale, C=64):
    """q, k [B, T, H, K]; v [B, T, H, V]; g, beta [B, T, H]; h0 [B, H, K, V]. Returns (o, hT)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    pad = (-T) % C
    N = (T + pad) // C

    def chunks(x):  # [B, T, H, ...] -> [N, B, H, C, ...] (zero-padded: g = beta = k = 0 leave S alone)
        x = jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
        x = jnp.moveaxis(x, 1, 2)
        x = x.reshape(x.shape[:2] + (N, C) + x.shape[3:])
        return jnp.moveaxis(x, 2, 0)

    q, k, v, g, beta = chunks(q * scale), chunks(k), chunks(v), chunks(g), chunks(beta)
    gc = jnp.cumsum(g, axis=-1)
    tri = jnp.tril(jnp.ones((C, C), bool))
    L = jnp.where(tri, jnp.exp(jnp.where(tri, gc[..., :, None] - gc[..., None, :], 0.0)), 0.0)
    kb = k * beta[..., None]
    M = jnp.where(jnp.tril(jnp.ones((C, C), bool), -1), (kb @ jnp.swapaxes(k, -1, -2)) * L, 0.0)
    eye = jnp.broadcast_to(jnp.eye(C, dtype=q.dtype), M.shape)
    Tm = solve_triangular(eye + M, eye, lower=True, unit_diagonal=True)
    u = Tm @ (v * beta[..., None])
    w = Tm @ (kb * jnp.exp(gc)[..., None])
    A = (q @ jnp.swapaxes(k, -1, -2)) * L

    def step(S, xs):
        q_i, k_i, u_i, w_i, A_i, gc_i = xs
        vn = u_i - w_i @ S
        o = (q_i * jnp.exp(gc_i)[..., None]) @ S + A_i @ vn
        last = gc_i[..., -1:]
        S = S * jnp.exp(last)[..., None] + jnp.swapaxes(k_i * jnp.exp(last - gc_i)[..., None], -1, -2) @ vn
        return S, o

    S, o = jax.lax.scan(step, h0, (q, k, u, w, A, gc))  # o [N, B, H, C, V]
    o = jnp.moveaxis(o, 0, 2).reshape(B, H, N * C, V)[:, :, :T]
    return jnp.moveaxis(o, 1, 2), S
