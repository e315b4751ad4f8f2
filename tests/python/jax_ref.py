"""Pure-JAX sequential recurrences (lax.scan): the JAX tests' ground truth, differentiated
by JAX itself. SSD head-major ([B, heads, T, dim]); sscan in its logical order."""
import jax
import jax.numpy as jnp
import numpy as np


def ssd_scan(q, k, v, log_alpha, h0=None):
    """q, k [B, G, T, dk]; v [B, H, T, dv]; log_alpha [B, H, T]; h0 [B, H, dk, dv]."""
    B, G, T, dk = q.shape
    H, dv = v.shape[1], v.shape[3]
    qh, kh = jnp.repeat(q, H // G, axis=1), jnp.repeat(k, H // G, axis=1)
    S0 = h0 if h0 is not None else jnp.zeros((B, H, dk, dv), q.dtype)

    def step(S, xs):
        qt, kt, vt, at = xs
        S = jnp.exp(at)[..., None, None] * S + kt[..., :, None] * vt[..., None, :]
        return S, jnp.einsum("bhk,bhkv->bhv", qt, S)

    xs = tuple(jnp.moveaxis(a, 2, 0) for a in (qh, kh, v, log_alpha[..., None]))
    S, o = jax.lax.scan(step, S0, (xs[0], xs[1], xs[2], xs[3][..., 0]))
    return jnp.moveaxis(o, 0, 2), S


def sscan_scan(x, delta, A, B, C, D=None, z=None, delta_bias=None, h0=None, delta_softplus=False):
    """x, delta, z [B, L, D]; A [D, N]; B, C [B, L, N] or [B, L, G, N]; D, delta_bias [D]."""
    Bsz, L, Dd = x.shape
    N = A.shape[1]
    dt = delta + delta_bias if delta_bias is not None else delta
    if delta_softplus:
        dt = jax.nn.softplus(dt)

    def per_channel(M):
        if M.ndim == 4:
            return jnp.repeat(M, Dd // M.shape[2], axis=2)
        return jnp.broadcast_to(M[:, :, None, :], (Bsz, L, Dd, N))

    Bc, Cc = per_channel(B), per_channel(C)
    h = h0 if h0 is not None else jnp.zeros((Bsz, Dd, N), x.dtype)

    def step(h, xs):
        dtt, xt, bt, ct = xs
        h = jnp.exp(dtt[:, :, None] * A) * h + (dtt * xt)[:, :, None] * bt
        return h, (ct * h).sum(-1)

    h, y = jax.lax.scan(step, h, tuple(jnp.moveaxis(a, 1, 0) for a in (dt, x, Bc, Cc)))
    y = jnp.moveaxis(y, 0, 1)
    if D is not None:
        y = y + D * x
    if z is not None:
        y = y * jax.nn.silu(z)
    return y, h


def rel_err(a, b):
    """max |a - b| / max |b| (max |a - b| when b is all zero; inf on a NaN), as the C
    tests' relative-error helper (tests/python/ref.py for torch)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    d = np.abs(a - b)
    if np.isnan(d).any():
        return float("inf")
    m = np.abs(b).max()
    return d.max() / m if m > 0 else d.max()
