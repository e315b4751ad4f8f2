"""fla's argument rules that chunkgen.compat.fla (PyTorch) and chunkgen.compat.jax_fla (JAX)
share: fla-core 0.6.0's checks and messages, on anything with .shape (torch tensors, jax
arrays), and its keywords (chunk_size a hint, head_first refused, transpose_state_layout
deprecated)."""
from __future__ import annotations

import warnings
from typing import Optional


def state_layout(state_v_first: bool, kwargs: dict) -> bool:
    """fla's deprecated transpose_state_layout keyword (renamed state_v_first), as fla."""
    if "transpose_state_layout" not in kwargs:
        return state_v_first
    if state_v_first:
        raise ValueError("Cannot pass both `state_v_first` and the deprecated `transpose_state_layout`.")
    warnings.warn("`transpose_state_layout` is deprecated and renamed to `state_v_first`.", DeprecationWarning,
                  stacklevel=3)
    return bool(kwargs.pop("transpose_state_layout"))


def hints(op: str, kwargs: dict) -> None:
    """fla's **kwargs: head_first is refused (as fla does), chunk_size is a hint
    (chunkgen's tuner picks the chunk; the result does not depend on it); any other
    keyword raises TypeError naming it (fla would ignore it silently)."""
    if "head_first" in kwargs:
        raise DeprecationWarning("head_first has been removed. Inputs must be in `[B, T, H, ...]` format.")
    kwargs.pop("chunk_size", None)
    if kwargs:
        raise TypeError(f"{op}: unexpected keyword argument(s) {', '.join(sorted(kwargs))} (chunkgen.compat.fla "
                        f"takes fla 0.6.0's arguments; chunk_size is accepted as a hint)")


def default_scale(scale: Optional[float], k) -> float:
    """fla's scale: K^-0.5 by default (K = k's last extent)."""
    return k.shape[-1] ** -0.5 if scale is None else scale


def varlen_check(q, cu_seqlens, initial_state) -> None:
    """fla's varlen rules, with its messages: batch 1, one initial state per sequence."""
    if cu_seqlens is None:
        return
    if q.shape[0] != 1:
        raise ValueError(f"The batch size is expected to be 1 rather than {q.shape[0]} when using `cu_seqlens`. "
                         f"Please flatten variable-length inputs before processing.")
    if initial_state is not None and initial_state.shape[0] != len(cu_seqlens) - 1:
        raise ValueError(f"The number of initial states is expected to be equal to the number of input sequences, "
                         f"i.e., {len(cu_seqlens) - 1} rather than {initial_state.shape[0]}.")


def gdr_heads(q, k, v, g, beta) -> None:
    """fla's head checks (its messages), then the shapes chunkgen's gdr reads: q, k
    [B, T, H, K], v [B, T, HV, V], g and beta [B, T, HV] (a per-value beta [B, T, HV, V],
    which fla's fused_recurrent takes, is refused)."""
    if q.shape[2] != k.shape[2]:
        raise ValueError(f"q and k must have the same number of heads, "
                         f"but got q.shape[2]={q.shape[2]} and k.shape[2]={k.shape[2]}")
    H, HV = q.shape[2], v.shape[2]
    if HV % H != 0:
        raise ValueError(f"For GVA, num_v_heads (HV={HV}) must be evenly divisible by "
                         f"num_heads (H={H}), but got HV % H = {HV % H}")
    want = tuple(v.shape[:3])
    if len(beta.shape) == 4:
        raise ValueError(f"beta: shape {tuple(beta.shape)} (a beta per value channel) but chunkgen.compat.fla takes "
                         f"one beta per head and token, {want} [B, T, HV]")
    for name, x in (("g", g), ("beta", beta)):
        if tuple(x.shape) != want:
            raise ValueError(f"{name}: shape {tuple(x.shape)} but expected {want} [B, T, HV] like v's first three")


def gate_options(kwargs: dict, use_beta_sigmoid_in_kernel: bool, allow_neg_eigval: bool):
    """fla's in-kernel gate keywords of chunk_gated_delta_rule's **kwargs (use_gate_in_kernel,
    A_log, dt_bias), popped, with fla's checks."""
    use_gate_in_kernel = kwargs.pop("use_gate_in_kernel", False)
    A_log, dt_bias = kwargs.pop("A_log", None), kwargs.pop("dt_bias", None)
    check_gates(use_gate_in_kernel, A_log, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    return use_gate_in_kernel, A_log, dt_bias


def check_gates(use_gate_in_kernel: bool, A_log, use_beta_sigmoid_in_kernel: bool, allow_neg_eigval: bool) -> None:
    if use_gate_in_kernel and A_log is None:
        raise ValueError("`A_log` must be provided when `use_gate_in_kernel=True`.")
    if allow_neg_eigval and not use_beta_sigmoid_in_kernel:
        raise ValueError("`allow_neg_eigval=True` requires `use_beta_sigmoid_in_kernel=True`.")


def no_cp(cp_context) -> None:
    if cp_context is not None:
        raise ValueError("cp_context: given but chunkgen.compat.fla does not take fla's context-parallel context "
                         "(use chunkgen.torch_cp / chunkgen.jax_cp for context parallelism)")


def no_channel_gates(gk, gv) -> None:
    """fused_recurrent's per-channel decays: refused, naming the argument."""
    for name, x in (("gk", gk), ("gv", gv)):
        if x is not None:
            raise ValueError(f"{name}: given but chunkgen's gated delta rule takes one decay per head and token "
                             f"(g [B, T, HV]); per-channel decays (gk, gv) are not supported")


def fused_recurrent_rules(kwargs: dict, state_v_first: bool, g, gk, gv, use_gate_in_kernel: bool, A_log,
                          use_beta_sigmoid_in_kernel: bool, allow_neg_eigval: bool) -> bool:
    """fused_recurrent_gated_delta_rule's argument rules, both frameworks: the state layout
    keyword, the hints, no per-channel gates, the in-kernel gate's checks (g given with it);
    returns state_v_first."""
    state_v_first = state_layout(state_v_first, kwargs)
    hints("fused_recurrent_gated_delta_rule", kwargs)
    no_channel_gates(gk, gv)
    check_gates(use_gate_in_kernel, A_log, use_beta_sigmoid_in_kernel, allow_neg_eigval)
    if use_gate_in_kernel and g is None:
        raise ValueError("`g` (raw pre-activation) must be provided when `use_gate_in_kernel=True`.")
    return state_v_first
