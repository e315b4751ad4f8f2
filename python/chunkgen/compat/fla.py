"""fla's entry points on chunkgen (PyTorch): a model written for fla runs on chunkgen by
changing one import (docs/compat.md):

    from fla.ops.simple_gla import chunk_simple_gla
    # becomes
    from chunkgen.compat.fla import chunk_simple_gla

Same arguments, defaults, shapes and `(o, final_state)` return as fla 0.6.0 (fla-core;
tests/python/refs/fla_ref.py holds its naive references, which the tests compare
against). fla's tensors are [B, T, H, D] (chunkgen's token-major layout, no copy) and its
state [N, H, K, V] is chunkgen's [B, H, dk, dv] as it is.

The helpers below (_scale / _scaled_q, _state_in, _state_out, _varlen_check, _hints) hold
what every fla op shares (scale default K^-0.5, state_v_first, cu_seqlens with batch 1,
chunk_size as a hint), so that an op on another chunkgen kernel is one short function over
them: chunk_gated_delta_rule, once chunkgen's gated delta rule op exists (its contract takes
q, k [B, T, H, K], v [B, T, HV, V], g, beta [B, T, HV], h0 [N, HV, K, V], a scale and
use_qk_l2norm, and cu_seqlens, as fla), is _hints + _varlen_check + the op with
scale=_scale(scale, k) and h0=_state_in(...), returning (o.to(q.dtype), _state_out(...));
fused_recurrent_gated_delta_rule is the same call (or the decode step op's).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from .. import torch as ct

__all__ = ["chunk_simple_gla"]


def _hints(op: str, kwargs: dict) -> None:
    """fla's **kwargs: head_first is refused (as fla does), chunk_size is a hint
    (chunkgen's tuner picks the chunk; the result does not depend on it); any other
    keyword raises TypeError naming it (fla would ignore it silently)."""
    if "head_first" in kwargs:
        raise DeprecationWarning("head_first has been removed. Inputs must be in `[B, T, H, ...]` format.")
    kwargs.pop("chunk_size", None)
    if kwargs:
        raise TypeError(f"{op}: unexpected keyword argument(s) {', '.join(sorted(kwargs))} (chunkgen.compat.fla "
                        f"takes fla 0.6.0's arguments; chunk_size is accepted as a hint)")


def _scale(scale: Optional[float], k: Tensor) -> float:
    """fla's scale: K^-0.5 by default (K = k's last extent)."""
    return k.shape[-1] ** -0.5 if scale is None else scale


def _scaled_q(q: Tensor, k: Tensor, scale: Optional[float]) -> Tensor:
    """q * scale (for ops without a scale argument: chunkgen.torch.ssd), in float32 for
    16-bit q (chunkgen takes a float32 q with 16-bit k, v: the scale is not rounded into q)."""
    scale = _scale(scale, k)
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


def _varlen_check(q: Tensor, cu_seqlens: Optional[Tensor], initial_state: Optional[Tensor]) -> None:
    """fla's varlen rules, with its messages: batch 1, one initial state per sequence."""
    if cu_seqlens is None:
        return
    if q.shape[0] != 1:
        raise ValueError(f"The batch size is expected to be 1 rather than {q.shape[0]} when using `cu_seqlens`. "
                         f"Please flatten variable-length inputs before processing.")
    if initial_state is not None and initial_state.shape[0] != len(cu_seqlens) - 1:
        raise ValueError(f"The number of initial states is expected to be equal to the number of input sequences, "
                         f"i.e., {len(cu_seqlens) - 1} rather than {initial_state.shape[0]}.")


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
    _hints("chunk_simple_gla", kwargs)
    _varlen_check(q, cu_seqlens, initial_state)
    o, hT = ct.ssd(_scaled_q(q, k, scale), k, v, _gate(g, g_gamma, q, v), _state_in(initial_state, state_v_first),
                   layout="token", cu_seqlens=cu_seqlens)
    return o.to(q.dtype), _state_out(hT, output_final_state, state_v_first)
