"""fla's entry points on chunkgen (PyTorch): a model written for fla runs on chunkgen by
changing one import (docs/compat.md):

    from fla.ops.simple_gla import chunk_simple_gla
    # becomes
    from chunkgen.compat.fla import chunk_simple_gla

Same arguments, defaults, shapes and `(o, final_state)` return as fla 0.6.0 (fla-core;
tests/python/refs/fla_ref.py holds its naive references, which the tests compare
against). fla's tensors are [B, T, H, D] (chunkgen's token-major layout, no copy) and its
state [N, H, K, V] is chunkgen's [B, H, dk, dv] as it is.

_fla_args.py holds fla's argument rules (scale default K^-0.5, cu_seqlens with batch 1,
chunk_size as a hint, head checks: shared with chunkgen.compat.jax_fla); the helpers below
(_scaled_q, _state_in, _state_out) the torch-side ones. The gated delta rule (chunk_gated_delta_rule,
fused_recurrent_gated_delta_rule) runs on chunkgen.torch.gdr, whose token-major layout is
fla's (chunkgen's G is fla's H, its H fla's HV): q, k, v, g, beta are passed as they are.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import torch as ct
from . import _fla_args as args

__all__ = ["chunk_simple_gla", "chunk_gated_delta_rule", "chunk_gdn", "fused_recurrent_gated_delta_rule",
           "fused_recurrent_gdn"]


def _scaled_q(q: Tensor, k: Tensor, scale: Optional[float]) -> Tensor:
    """q * scale (for ops without a scale argument: chunkgen.torch.ssd), in float32 for
    16-bit q (chunkgen takes a float32 q with 16-bit k, v: the scale is not rounded into q)."""
    scale = args.default_scale(scale, k)
    if scale == 1:
        return q
    wide = q.float() if q.dtype in (torch.bfloat16, torch.float16) else q
    return wide * scale


def _state_in(initial_state: Optional[Tensor], state_v_first: bool) -> Optional[Tensor]:
    """fla's initial_state ([N, H, K, V], or [N, H, V, K] with state_v_first) as chunkgen's
    h0 [N, H, dk, dv] (a transposed view for state_v_first), float32 if 16-bit."""
    if initial_state is None:
        return None
    if initial_state.dtype in (torch.bfloat16, torch.float16):
        initial_state = initial_state.float()
    return initial_state.transpose(-1, -2) if state_v_first else initial_state


def _state_out(hT: Tensor, output_final_state: bool, state_v_first: bool) -> Optional[Tensor]:
    if not output_final_state:
        return None
    return hT.transpose(-1, -2) if state_v_first else hT


def _gate(g: Optional[Tensor], g_gamma: Optional[Tensor], q: Tensor, v: Tensor) -> Tensor:
    """The per-head log decay [B, T, H] from g ([B, T, H]) or g_gamma ([H], broadcast with
    zero strides: no copy), or zeros when neither is given; float32."""
    if g is not None and g_gamma is not None:
        raise ValueError("g, g_gamma: both given but expected at most one (the data-dependent gate g [B, T, H] "
                         "or the constant g_gamma [H])")
    if g is not None:
        return g.float() if g.dtype in (torch.bfloat16, torch.float16) else g
    B, T, H = v.shape[0], v.shape[1], v.shape[2]
    if g_gamma is not None:
        if tuple(g_gamma.shape) != (H,):
            raise ValueError(f"g_gamma: shape {tuple(g_gamma.shape)} but expected ({H},) [H]")
        return g_gamma.float()[None, None].expand(B, T, H)
    return v.new_zeros((B, T, H), dtype=torch.float64 if v.dtype == torch.float64 else torch.float32)


def chunk_simple_gla(q: Tensor, k: Tensor, v: Tensor, g: Optional[Tensor] = None, g_gamma: Optional[Tensor] = None,
                     scale: Optional[float] = None, initial_state: Optional[Tensor] = None,
                     output_final_state: bool = False, state_v_first: bool = False,
                     cu_seqlens: Optional[Tensor] = None, cu_seqlens_cpu: Optional[Tensor] = None,
                     **kwargs) -> Tuple[Tensor, Optional[Tensor]]:
    """fla's simple GLA (a scalar gate per head and token) on chunkgen.torch.ssd:
    S_t = exp(g_t) S_{t-1} + k_t^T v_t, o_t = scale q_t S_t; differentiable in q, k, v, g,
    g_gamma (fla: no gradient) and initial_state.

    q, k [B, T, H, K] (chunkgen also takes fewer q/k heads dividing H); v [B, T, H, V];
    g [B, T, H] or g_gamma [H] (at most one; neither: no decay); scale default K^-0.5;
    initial_state [N, H, K, V] ([N, H, V, K] with state_v_first). Returns (o [B, T, H, V]
    in q's dtype, final_state [N, H, K, V] float32 or None). cu_seqlens ([N + 1] int32 /
    int64) packs N sequences along T with B = 1; cu_seqlens_cpu is accepted and unused
    (chunkgen needs no host copy). Any K, V and T; CPU tensors."""
    args.hints("chunk_simple_gla", kwargs)
    args.varlen_check(q, cu_seqlens, initial_state)
    o, hT = ct.ssd(_scaled_q(q, k, scale), k, v, _gate(g, g_gamma, q, v), _state_in(initial_state, state_v_first),
                   layout="token", cu_seqlens=cu_seqlens)
    return o.to(q.dtype), _state_out(hT, output_final_state, state_v_first)


# ------------------------------------------------------------------ the gated delta rule

def _gdr_gate(g: Tensor, A_log: Optional[Tensor], dt_bias: Optional[Tensor]) -> Tensor:
    """fla's in-kernel GDN gate (use_gate_in_kernel): g = -exp(A_log) * softplus(g + dt_bias),
    computed here in float32 (fla's naive_gdn_gate), differentiable in g, A_log and dt_bias."""
    x = g.float() if dt_bias is None else g.float() + dt_bias.float()
    return -A_log.float().exp() * F.softplus(x)


def _gdr_call(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: Optional[float],
              initial_state: Optional[Tensor], output_final_state: bool, use_qk_l2norm_in_kernel: bool,
              use_gate_in_kernel: bool, A_log: Optional[Tensor], dt_bias: Optional[Tensor],
              use_beta_sigmoid_in_kernel: bool, allow_neg_eigval: bool, state_v_first: bool,
              cu_seqlens: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor]]:
    """The shared body of both gated delta rule entry points: fla's checks, its in-kernel
    gate and beta sigmoid done here (elementwise, differentiable), then chunkgen.torch.gdr
    on fla's tensors as they are (token-major: no copy)."""
    args.gdr_heads(q, k, v, g, beta)
    args.varlen_check(q, cu_seqlens, initial_state)
    if use_gate_in_kernel:
        g = _gdr_gate(g, A_log, dt_bias)
    elif g.dtype in (torch.bfloat16, torch.float16):
        g = g.float()  # chunkgen's g is float32 (fla's kernels read it in float32 too)
    if use_beta_sigmoid_in_kernel:
        beta = beta.sigmoid() * 2 if allow_neg_eigval else beta.sigmoid()
    if beta.dtype != v.dtype:
        beta = beta.to(v.dtype)  # chunkgen takes beta in v's dtype
    o, hT = ct.gdr(q, k, v, g, beta, _state_in(initial_state, state_v_first), scale=args.default_scale(scale, k),
                   use_qk_l2norm=use_qk_l2norm_in_kernel, layout="token", cu_seqlens=cu_seqlens)
    return o.to(q.dtype), _state_out(hT, output_final_state, state_v_first)


def chunk_gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, scale: Optional[float] = None,
                           initial_state: Optional[Tensor] = None, output_final_state: bool = False,
                           use_qk_l2norm_in_kernel: bool = False, use_beta_sigmoid_in_kernel: bool = False,
                           allow_neg_eigval: bool = False, state_v_first: bool = False,
                           cu_seqlens: Optional[Tensor] = None, cu_seqlens_cpu: Optional[Tensor] = None,
                           chunk_indices: Optional[Tensor] = None, cp_context=None,
                           **kwargs) -> Tuple[Tensor, Optional[Tensor]]:
    """fla's chunk_gated_delta_rule (fla-core 0.6.0's arguments) on chunkgen.torch.gdr;
    differentiable in q, k, v, g, beta, initial_state (and A_log, dt_bias).

    Per value head: S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,
    o_t = S_t^T (scale q_t). q, k [B, T, H, K]; v [B, T, HV, V] (HV % H == 0, value head j
    reads q/k head j // (HV // H)); g (log decay), beta [B, T, HV]; initial_state
    [N, HV, K, V] ([N, HV, V, K] with state_v_first). Returns (o [B, T, HV, V] in q's dtype,
    final_state [N, HV, K, V] float32 or None). Keywords of fla's **kwargs: use_gate_in_kernel
    with A_log and dt_bias (g = -exp(A_log) softplus(g + dt_bias), computed here),
    chunk_size (a hint), transpose_state_layout (deprecated, as fla), head_first (refused,
    as fla). cu_seqlens_cpu and chunk_indices are accepted and unused; cp_context is
    refused (chunkgen.torch_cp is chunkgen's context parallelism). Any K, V and T; CPU
    tensors; varlen with any number of sequences."""
    state_v_first = args.state_layout(state_v_first, kwargs)
    use_gate_in_kernel, A_log, dt_bias = args.gate_options(kwargs, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    args.hints("chunk_gated_delta_rule", kwargs)
    args.no_cp(cp_context)
    return _gdr_call(q, k, v, g, beta, scale, initial_state, output_final_state,
                     use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel,
                     allow_neg_eigval, state_v_first, cu_seqlens)


def fused_recurrent_gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, g: Optional[Tensor] = None,
                                     gk: Optional[Tensor] = None, gv: Optional[Tensor] = None,
                                     beta: Optional[Tensor] = None, scale: Optional[float] = None,
                                     initial_state: Optional[Tensor] = None, output_final_state: bool = False,
                                     use_qk_l2norm_in_kernel: bool = False, use_gate_in_kernel: bool = False,
                                     A_log: Optional[Tensor] = None, dt_bias: Optional[Tensor] = None,
                                     use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False,
                                     state_v_first: bool = False, cu_seqlens: Optional[Tensor] = None,
                                     **kwargs) -> Tuple[Tensor, Optional[Tensor]]:
    """fla's fused_recurrent_gated_delta_rule (fla-core 0.6.0's arguments; its decode form,
    usually T = 1 with initial_state and output_final_state=True) on chunkgen.torch.gdr:
    the same recurrence and returns as chunk_gated_delta_rule. g None: no decay; beta None:
    ones (as fla). Beyond fla: differentiable (fla's backward raises NotImplementedError).
    gk [B, T, HV, K] and gv [B, T, HV, V] (per-channel decays) and a per-value beta are
    refused: chunkgen's gated delta rule has one decay and one beta per head and token."""
    state_v_first = args.fused_recurrent_rules(kwargs, state_v_first, g, gk, gv, use_gate_in_kernel, A_log,
                                               use_beta_sigmoid_in_kernel, allow_neg_eigval)
    if g is None:
        g = v.new_zeros(v.shape[:3], dtype=torch.float64 if v.dtype == torch.float64 else torch.float32)
    if beta is None:
        beta = torch.ones_like(v[..., 0])
    return _gdr_call(q, k, v, g, beta, scale, initial_state, output_final_state,
                     use_qk_l2norm_in_kernel, use_gate_in_kernel, A_log, dt_bias, use_beta_sigmoid_in_kernel,
                     allow_neg_eigval, state_v_first, cu_seqlens)


chunk_gdn = chunk_gated_delta_rule
fused_recurrent_gdn = fused_recurrent_gated_delta_rule
