"""The selective scan (Mamba-1) in jax.numpy, for bench/peers/jax_peers.py.

  sscan_scan     a plain lax.scan over the tokens (state [B, D, N] carried);
  sscan_chunked  the chunked CPU form of seed 004 (probjax's chunked CPU path), written
                 here as the issue allows (the seed's code is not at hand): the decays
                 exp(delta A) and inputs delta x B of all tokens vectorized up front, a
                 lax.scan over chunks of K tokens with the K state steps unrolled in its
                 body (one fused loop per chunk, the chunk's states kept), and y = C . h
                 for the whole sequence in one contraction after the scan.
Both: delta_softplus with delta_bias, the D skip and the z gate, y = (C h + D x) * silu(z),
as chunkgen's sscan and torch_peers.sscan_plain. x, delta, z [B, L, D]; A [D, N];
B, C [B, L, N]; D, delta_bias [D]. Returns (y [B, L, D], hT [B, D, N]).
"""
import jax
import jax.numpy as jnp


def _prep(x, delta, A, Bm, delta_bias):
    dt = jax.nn.softplus(delta + delta_bias)                    # [B, L, D]
    dA = dt[..., None] * A                                      # [B, L, D, N]
    bx = (dt * x)[..., None] * Bm[:, :, None, :]                # [B, L, D, N]
    return dA, bx


def _out(ys, x, D, z):
    return (ys + D * x) * jax.nn.silu(z)


def sscan_scan(x, delta, A, Bm, Cm, D, z, delta_bias):
    dA, bx = _prep(x, delta, A, Bm, delta_bias)

    def step(h, inp):
        a, b, c = inp
        h = jnp.exp(a) * h + b
        return h, jnp.einsum("bdn,bn->bd", h, c)

    h0 = jnp.zeros(x.shape[:1] + A.shape, x.dtype)
    hT, ys = jax.lax.scan(step, h0, (jnp.moveaxis(dA, 1, 0), jnp.moveaxis(bx, 1, 0), jnp.moveaxis(Cm, 1, 0)))
    return _out(jnp.moveaxis(ys, 0, 1), x, D, z), hT


def sscan_chunked(x, delta, A, Bm, Cm, D, z, delta_bias, chunk=16):
    Bsz, L, Dd = x.shape
    K = min(chunk, L)
    if L % K:
        raise ValueError("sscan_chunked: seq %d is not a multiple of the chunk %d" % (L, K))
    nc = L // K
    dA, bx = _prep(x, delta, A, Bm, delta_bias)
    split = lambda t: jnp.moveaxis(t.reshape((Bsz, nc, K) + t.shape[2:]), 1, 0)  # noqa: E731  [nc, B, K, ...]

    def step(h, inp):
        a, b = inp                                               # [B, K, D, N]
        e = jnp.exp(a)
        hs = []
        for t in range(K):                                       # unrolled: one fused loop body per chunk
            h = e[:, t] * h + b[:, t]
            hs.append(h)
        return h, jnp.stack(hs, axis=1)

    h0 = jnp.zeros((Bsz,) + A.shape, x.dtype)
    hT, hs = jax.lax.scan(step, h0, (split(dA), split(bx)))     # hs [nc, B, K, D, N]
    hs = jnp.moveaxis(hs, 0, 1).reshape(Bsz, L, Dd, A.shape[1])
    ys = jnp.einsum("bldn,bln->bld", hs, Cm)                     # C . h for the whole sequence at once
    return _out(ys, x, D, z), hT
