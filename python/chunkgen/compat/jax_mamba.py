"""mamba_ssm's mamba_chunk_scan_combined on jax.Array (chunkgen.jax.ssd): the same
arguments, defaults, shapes and return tuples as chunkgen.compat.mamba's (and
mamba_ssm's), differentiable with jax.grad / jax.vjp in x, dt, A, B, C, D, z, dt_bias and
initial_states, under jax.jit (docs/compat.md):

    from chunkgen.compat.jax_mamba import mamba_chunk_scan_combined

The mapping is chunkgen.compat.mamba's: q = C, k = B, v = dt * x, log_alpha = dt * A with
dt = clamp(softplus(dt + dt_bias), dt_limit); states transposed between chunkgen's
[.., dstate, headdim] and mamba_ssm's [.., headdim, dstate]; the D skip and the z gate here.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import jax as cj
from . import _mamba_args as args

__all__ = ["mamba_chunk_scan_combined"]

_INF = float("inf")
_HALF = (jnp.bfloat16, jnp.float16)


def _wide(a):
    """a in float32 when it is 16-bit (mamba_ssm computes dt, A, D in float32)."""
    return a.astype(jnp.float32) if a.dtype in _HALF else a


def _dt(dt, dt_bias, dt_softplus, dt_limit):
    """mamba_ssm's kernel's dt: + dt_bias, softplus (x itself above 20), clamped to
    dt_limit always; the gradient is 0 where the clamp bites (as mamba_ssm's)."""
    lo, hi = args.check_dt_limit(dt_limit)
    dt = _wide(dt)
    if dt_bias is not None:
        dt = dt + _wide(dt_bias)
    if dt_softplus:
        dt = jnp.where(dt <= 20.0, jax.nn.softplus(dt), dt)
    dt = jnp.where(dt < lo, jnp.asarray(lo, dt.dtype), dt)
    return dt if math.isinf(hi) else jnp.where(dt > hi, jnp.asarray(hi, dt.dtype), dt)


def _traced(a) -> bool:
    return isinstance(a, jax.core.Tracer)


def mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                              seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, _INF),
                              return_final_states=False, return_varlen_states=False):
    """chunkgen.compat.mamba.mamba_chunk_scan_combined on jax.Array (its docstring has the
    shapes and rules). chunk_size is a hint (ignored). seq_idx works under jit (the state
    resets where it changes: log_alpha = -inf there). With return_varlen_states the
    cu_seqlens offsets are checked against seq_idx when both are concrete (not traced);
    the varlen call runs on the CPU platform (chunkgen.jax's cu_seqlens)."""
    dims = args.chunk_scan_dims(
        *(None if a is None else tuple(a.shape) for a in (x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx)))
    varlen = args.varlen_rules(dims[0], seq_idx is not None, cu_seqlens is not None, return_varlen_states)
    dt = _dt(dt, dt_bias, dt_softplus, dt_limit)
    v = _wide(x) * dt[..., None]
    log_alpha = dt * _wide(A)
    if seq_idx is not None:
        prev = jnp.concatenate([jnp.zeros_like(seq_idx[:, :1]), seq_idx[:, :-1]], axis=1)
        log_alpha = jnp.where((seq_idx != prev)[..., None], -jnp.inf, log_alpha)
    h0 = None if initial_states is None else jnp.swapaxes(_wide(initial_states), -1, -2)
    cu = None
    if varlen:
        cu = cu_seqlens
        if not (_traced(seq_idx) or _traced(cu)):
            args.check_offsets_match(np.asarray(seq_idx), np.asarray(cu))
        nseq = cu.shape[0] - 1
        if h0 is not None and nseq > 1:  # initial_states: the first sequence's (seq_idx 0)
            h0 = jnp.concatenate([h0, jnp.zeros((nseq - 1,) + h0.shape[1:], h0.dtype)])
    o, hT = cj.ssd(C, B, v, log_alpha, h0, layout="token", cu_seqlens=cu)
    if D is not None:
        o = o + _wide(x) * (_wide(D)[:, None] if D.ndim == 1 else _wide(D))
    if z is not None:
        o = o * jax.nn.silu(_wide(z))
    out = o.astype(x.dtype)
    states = jnp.swapaxes(hT, -1, -2)  # [N or batch, nheads, headdim, dstate]
    final = states[-1:] if varlen else states
    return args.returns(out, final, states, return_final_states, return_varlen_states)
