"""fla's gated delta rule on jax.Array (chunkgen.jax.gdr): chunk_gated_delta_rule and
fused_recurrent_gated_delta_rule with chunkgen.compat.fla's (and fla-core 0.6.0's)
arguments, defaults, shapes and `(o, final_state)` returns, differentiable with jax.grad /
jax.vjp in q, k, v, g, beta, initial_state (and A_log, dt_bias), under jax.jit
(docs/compat.md):

    from chunkgen.compat.jax_fla import chunk_gated_delta_rule

fla has no JAX version; this one follows its PyTorch convention on jax.Array, so that a JAX
port of a Gated DeltaNet model keeps fla's call. fla's tensors are chunkgen's token-major
layout as they are (q, k [B, T, H, K], v [B, T, HV, V], g, beta [B, T, HV]); the argument
rules are shared with the PyTorch module (_fla_args.py).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import jax as cj
from . import _fla_args as args

__all__ = ["chunk_gated_delta_rule", "chunk_gdn", "fused_recurrent_gated_delta_rule", "fused_recurrent_gdn"]

_HALF = (jnp.bfloat16, jnp.float16)


def _call(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel, use_gate_in_kernel,
          A_log, dt_bias, use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first, cu_seqlens):
    """fla's checks, its in-kernel gate (-exp(A_log) softplus(g + dt_bias), float32) and
    beta sigmoid done here, then chunkgen.jax.gdr on the arrays as they are."""
    args.gdr_heads(q, k, v, g, beta)
    args.varlen_check(q, cu_seqlens, initial_state)
    if use_gate_in_kernel:
        x = g.astype(jnp.float32) if dt_bias is None else g.astype(jnp.float32) + dt_bias.astype(jnp.float32)
        g = -jnp.exp(A_log.astype(jnp.float32)) * jax.nn.softplus(x)
    elif g.dtype in _HALF:
        g = g.astype(jnp.float32)
    if use_beta_sigmoid_in_kernel:
        beta = jax.nn.sigmoid(beta) * (2 if allow_neg_eigval else 1)
    beta = beta.astype(v.dtype)
    h0 = initial_state
    if h0 is not None:
        h0 = h0.astype(jnp.float32) if h0.dtype in _HALF else h0
        h0 = jnp.swapaxes(h0, -1, -2) if state_v_first else h0
    o, hT = cj.gdr(q, k, v, g, beta, h0, scale=args.default_scale(scale, k), use_qk_l2norm=use_qk_l2norm_in_kernel,
                   layout="token", cu_seqlens=cu_seqlens)
    if not output_final_state:
        return o.astype(q.dtype), None
    return o.astype(q.dtype), (jnp.swapaxes(hT, -1, -2) if state_v_first else hT)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state: bool = False,
                           use_qk_l2norm_in_kernel: bool = False, use_beta_sigmoid_in_kernel: bool = False,
                           allow_neg_eigval: bool = False, state_v_first: bool = False, cu_seqlens=None,
                           cu_seqlens_cpu=None, chunk_indices=None, cp_context=None, **kwargs):
    """chunkgen.compat.fla.chunk_gated_delta_rule on jax.Array (the same arguments, keywords,
    checks and returns: (o [B, T, HV, V] in q's dtype, final_state [N, HV, K, V] or None))."""
    state_v_first = args.state_layout(state_v_first, kwargs)
    use_gate_in_kernel, A_log, dt_bias = args.gate_options(kwargs, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    args.hints("chunk_gated_delta_rule", kwargs)
    args.no_cp(cp_context)
    return _call(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel,
                 use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first,
                 cu_seqlens)


def fused_recurrent_gated_delta_rule(q, k, v, g=None, gk=None, gv=None, beta=None, scale=None, initial_state=None,
                                     output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                                     use_gate_in_kernel: bool = False, A_log=None, dt_bias=None,
                                     use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False,
                                     state_v_first: bool = False, cu_seqlens=None, **kwargs):
    """chunkgen.compat.fla.fused_recurrent_gated_delta_rule on jax.Array (g None: no decay;
    beta None: ones; gk, gv refused)."""
    state_v_first = args.fused_recurrent_rules(kwargs, state_v_first, g, gk, gv, use_gate_in_kernel, A_log,
                                               use_beta_sigmoid_in_kernel, allow_neg_eigval)
    if g is None:
        g = jnp.zeros(v.shape[:3], jnp.float64 if v.dtype == jnp.float64 else jnp.float32)
    if beta is None:
        beta = jnp.ones(v.shape[:3], v.dtype)
    return _call(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel,
                 use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first,
                 cu_seqlens)


chunk_gdn = chunk_gated_delta_rule
fused_recurrent_gdn = fused_recurrent_gated_delta_rule
