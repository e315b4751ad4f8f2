"""mamba_ssm's entry points on chunkgen (PyTorch): a model written for mamba_ssm runs on
chunkgen by changing one import (docs/compat.md):

    from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
    from mamba_ssm.ops.triton.selective_state_update import selective_state_update
    # becomes
    from chunkgen.compat.mamba import (mamba_chunk_scan_combined, selective_scan_fn,
                                       selective_state_update)

Same names, arguments, defaults, shapes, dtypes of the outputs and return tuples as
mamba_ssm 2.3.2 (tests/python/refs/mamba_ref.py holds its pure-PyTorch references, which
the tests compare against). The mapping (Mamba-2 SSD as chunkgen.torch.ssd):
q = C, k = B, v = dt * x, log_alpha = dt * A, with dt = clamp(softplus(dt + dt_bias),
dt_limit); chunkgen's state [.., dstate, headdim] is mamba_ssm's [.., headdim, dstate]
transposed (views: the binding copies only where the innermost stride is not 1); the D skip
and the z gate (y * silu(z)) are applied here. Mamba-1 is chunkgen.torch.sscan on
transposed views of mamba_ssm's [batch, dim, seqlen] tensors.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import torch as ct
from . import _mamba_args as args

__all__ = ["mamba_chunk_scan_combined", "selective_scan_fn", "selective_state_update"]

_INF = float("inf")


def _wide(t: Tensor) -> Tensor:
    """t in float32 when it is 16-bit (mamba_ssm's kernels compute dt, A, D in float32)."""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


def _dt(dt: Tensor, dt_bias: Optional[Tensor], dt_softplus: bool, dt_limit) -> Tensor:
    """mamba_ssm's kernel's dt: + dt_bias, softplus (x itself above 20, as F.softplus),
    then clamped to dt_limit always (the default (0, inf) clamps a negative dt to 0); the
    gradient is 0 where the clamp bites, as mamba_ssm's."""
    lo, hi = args.check_dt_limit(dt_limit)
    dt = _wide(dt)
    if dt_bias is not None:
        dt = dt + _wide(dt_bias)
    if dt_softplus:
        dt = F.softplus(dt)
    return dt.clamp(min=lo, max=None if math.isinf(hi) else hi)


def _seq_starts(seq_idx: Tensor) -> Tensor:
    """[batch, seqlen] booleans: where a new sequence starts (seq_idx changes from the
    previous token; at t = 0 where seq_idx is not 0, since mamba_ssm's initial_states
    belong to sequence 0)."""
    prev = torch.cat([torch.zeros_like(seq_idx[:, :1]), seq_idx[:, :-1]], dim=1)
    return seq_idx != prev


def _skip_gate(y: Tensor, x: Tensor, D: Optional[Tensor], z: Optional[Tensor]) -> Tensor:
    """y + D x, times silu(z) (mamba_ssm's order), in float32 for 16-bit x; in x's dtype."""
    if D is not None:
        y = y + x * (_wide(D)[:, None] if D.dim() == 1 else _wide(D))
    if z is not None:
        y = y * F.silu(_wide(z))
    return y.to(x.dtype)


def mamba_chunk_scan_combined(x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, chunk_size: int,
                              D: Optional[Tensor] = None, z: Optional[Tensor] = None,
                              dt_bias: Optional[Tensor] = None, initial_states: Optional[Tensor] = None,
                              seq_idx: Optional[Tensor] = None, cu_seqlens: Optional[Tensor] = None,
                              dt_softplus: bool = False, dt_limit=(0.0, _INF), return_final_states: bool = False,
                              return_varlen_states: bool = False):
    """mamba_ssm's Mamba-2 chunked scan on chunkgen.torch.ssd, differentiable in x, dt, A,
    B, C, D, z, dt_bias and initial_states (also through varlen states, which mamba_ssm's
    backward refuses).

    x, z (batch, seqlen, nheads, headdim); dt (batch, seqlen, nheads); A, dt_bias (nheads,);
    B, C (batch, seqlen, ngroups, dstate); D (nheads,) or (nheads, headdim);
    initial_states (batch, nheads, headdim, dstate); seq_idx (batch, seqlen) integers.
    Returns out (like x), plus final_states (batch, nheads, headdim, dstate) float32 with
    return_final_states, plus varlen_states (num_sequences, nheads, headdim, dstate) with
    return_varlen_states: out, (out, final), (out, varlen) or (out, final, varlen). The
    states are transposed views of chunkgen's [.., dstate, headdim] states.

    chunk_size is a hint: accepted and ignored (chunkgen's tuner picks the chunk; the
    result does not depend on it). Any headdim, dstate and seqlen, CPU tensors and any
    batch with seq_idx are accepted. seq_idx: a new sequence starts wherever it changes
    (mamba_ssm's kernels expect it non-decreasing, as made from cu_seqlens); the state
    resets there (log_alpha = -inf: no host synchronization), initial_states go to the
    sequence with index 0. cu_seqlens is used only with return_varlen_states, as in
    mamba_ssm; then batch must be 1 and seq_idx must start a sequence at each offset
    (checked: ValueError naming cu_seqlens)."""
    dims = args.chunk_scan_dims(
        *(None if t is None else tuple(t.shape) for t in (x, dt, A, B, C, D, z, dt_bias, initial_states, seq_idx)))
    batch = dims[0]
    varlen = args.varlen_rules(batch, seq_idx is not None, cu_seqlens is not None, return_varlen_states)
    dt = _dt(dt, dt_bias, dt_softplus, dt_limit)
    v = _wide(x) * dt[..., None]
    log_alpha = dt * _wide(A)
    if seq_idx is not None:
        log_alpha = log_alpha.masked_fill(_seq_starts(seq_idx)[..., None], -_INF)
    h0 = initial_states.transpose(-1, -2) if initial_states is not None else None
    cu = None
    if varlen:
        cu = cu_seqlens
        if not torch.compiler.is_compiling():
            args.check_offsets_match(seq_idx.detach().cpu().numpy(), cu.detach().cpu().numpy())
        nseq = cu.shape[0] - 1
        if h0 is not None and nseq > 1:  # initial_states: the first sequence's (seq_idx 0)
            h0 = _wide(h0)
            h0 = torch.cat([h0, h0.new_zeros((nseq - 1,) + tuple(h0.shape[1:]))])
    if h0 is not None:
        h0 = _wide(h0)
    o, hT = ct.ssd(C, B, v, log_alpha, h0, layout="token", cu_seqlens=cu)
    out = _skip_gate(o, x, D, z)
    states = hT.transpose(-1, -2)  # [N or batch, nheads, headdim, dstate]
    final = states[-1:] if varlen else states
    return args.returns(out, final, states, return_final_states, return_varlen_states)


# ------------------------------------------------------------------ Mamba-1

def _bc(name: str, t: Tensor, batch: int, dim: int, L: int) -> Tensor:
    """mamba_ssm's B / C as chunkgen.torch.sscan takes them: (batch, dstate, L) ->
    [batch, L, dstate]; (batch, G, dstate, L) -> [batch, L, G, dstate] (views); a
    constant (dim, dstate) -> [batch, L, dim, dstate], one group per channel (stride 0)."""
    if t.is_complex():
        raise ValueError(f"{name}: complex but chunkgen's selective scan is real (complex A, B, C are refused)")
    if t.dim() == 2:
        args.expect(name, tuple(t.shape), (dim, t.shape[1]), "(dim, dstate)")
        return t[None, None].expand(batch, L, dim, t.shape[1])
    if t.dim() == 3:
        args.expect(name, tuple(t.shape), (batch, t.shape[1], L), "(batch, dstate, seqlen)")
        return t.transpose(1, 2)
    if t.dim() == 4:
        args.expect(name, tuple(t.shape), (batch,) + tuple(t.shape[1:3]) + (L,), "(batch, ngroups, dstate, seqlen)")
        return t.permute(0, 3, 1, 2)
    raise ValueError(f"{name}: shape {tuple(t.shape)} but expected (batch, dstate, seqlen), (batch, ngroups, "
                     f"dstate, seqlen) or (dim, dstate)")


def _same_groups(b: Tensor, c: Tensor, dim: int):
    """B and C with one group count (chunkgen takes them alike): a 3-D one becomes one
    group, and differing counts are spread to one group per channel."""
    b4 = b if b.dim() == 4 else b[:, :, None]
    c4 = c if c.dim() == 4 else c[:, :, None]
    if b4.shape[2] == c4.shape[2]:
        return (b, c) if b.dim() == c.dim() else (b4, c4)

    def per_channel(t):
        g = t.shape[2]
        return t[:, :, :, None].expand(t.shape[0], t.shape[1], g, dim // g, t.shape[3]).reshape(
            t.shape[0], t.shape[1], dim, t.shape[3])

    return per_channel(b4), per_channel(c4)


def selective_scan_fn(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor] = None,
                      z: Optional[Tensor] = None, delta_bias: Optional[Tensor] = None, delta_softplus: bool = False,
                      return_last_state: bool = False):
    """mamba_ssm's Mamba-1 selective scan on chunkgen.torch.sscan, differentiable in every
    tensor (and through last_state, whose gradient mamba_ssm ignores).

    u, delta, z (batch, dim, seqlen); A (dim, dstate) real; B, C (batch, dstate, seqlen),
    (batch, ngroups, dstate, seqlen) or constant (dim, dstate); D, delta_bias (dim,).
    Returns out (batch, dim, seqlen) in u's dtype (a transposed view of chunkgen's
    [batch, seqlen, dim]) or (out, last_state (batch, dim, dstate) float32). Complex A, B, C
    raise ValueError. For an initial state use chunkgen.torch.sscan(..., h0=...)."""
    if u.dim() != 3:
        raise ValueError(f"u: shape {tuple(u.shape)} but expected (batch, dim, seqlen)")
    batch, dim, L = u.shape
    if A.is_complex():
        raise ValueError("A: complex but chunkgen's selective scan is real (complex A, B, C are refused)")
    args.expect("delta", tuple(delta.shape), (batch, dim, L), "(batch, dim, seqlen) like u")
    if A.dim() != 2 or A.shape[0] != dim:
        raise ValueError(f"A: shape {tuple(A.shape)} but expected ({dim}, dstate) (dim, dstate)")
    args.expect("z", None if z is None else tuple(z.shape), (batch, dim, L), "(batch, dim, seqlen) like u")
    for name, t in (("D", D), ("delta_bias", delta_bias)):
        args.expect(name, None if t is None else tuple(t.shape), (dim,), "(dim,)")
    Bt, Ct = _same_groups(_bc("B", B, batch, dim, L), _bc("C", C, batch, dim, L), dim)
    y, last = ct.sscan(u.transpose(1, 2), delta.transpose(1, 2), A, Bt, Ct, D,
                       None if z is None else z.transpose(1, 2), delta_bias, None,
                       delta_softplus=bool(delta_softplus))
    out = y.transpose(1, 2)
    return (out, last) if return_last_state else out


def selective_state_update(state: Tensor, x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor,
                           D: Optional[Tensor] = None, z: Optional[Tensor] = None, dt_bias: Optional[Tensor] = None,
                           dt_softplus: bool = False, state_batch_indices: Optional[Tensor] = None) -> Tensor:
    """mamba_ssm's one-token decode step: updates `state` in place and returns out.

    state (slots, nheads, dim, dstate) or (slots, dim, dstate); x, dt, z (batch, nheads, dim)
    or (batch, dim); A (nheads, dim, dstate) or (dim, dstate) (zero strides welcome);
    B, C (batch, ngroups, dstate) or (batch, dstate); D, dt_bias (nheads, dim) or (dim,);
    state_batch_indices (batch,): the state slot of each row (default: row b, slot b).
    out like x. Not differentiable (as mamba_ssm's).

    Runs on chunkgen's decode step op (chunkgen.torch.sscan_step): Mamba-2's heads x dim are
    its channels (groups of nheads / ngroups heads), the state is its cache [slots, channels,
    dstate] (a view: updated in place; a state whose (nheads, dim) do not merge into one
    stride, or whose dtype is neither float32 nor x's, goes through a float32 copy, written
    back). Beyond mamba_ssm: a negative slot index marks a padding row (out 0, no state
    touched; vLLM's PAD_SLOT_ID); the slots of one call must be distinct (ValueError)."""
    has_heads = state.dim() > 3
    state4 = state if has_heads else state.unsqueeze(1)
    up = (lambda t, n: t.unsqueeze(1) if t is not None and t.dim() == n else t)
    x, dt, B, C, z = up(x, 2), up(dt, 2), up(B, 2), up(C, 2), up(z, 2)
    A = A.unsqueeze(0) if A.dim() == 2 else A
    D = D.unsqueeze(0) if D is not None and D.dim() == 1 else D
    dt_bias = dt_bias.unsqueeze(0) if dt_bias is not None and dt_bias.dim() == 1 else dt_bias
    slots, nheads, dim, dstate = state4.shape
    batch = x.shape[0]
    hd = (batch, nheads, dim)
    args.expect("x", tuple(x.shape), hd, "(batch, nheads, dim)")
    args.expect("dt", tuple(dt.shape), hd, "(batch, nheads, dim) like x")
    args.expect("A", tuple(A.shape), (nheads, dim, dstate), "(nheads, dim, dstate)")
    args.expect("B", tuple(B.shape), (batch, B.shape[1], dstate), "(batch, ngroups, dstate)")
    args.expect("C", tuple(C.shape), tuple(B.shape), "(batch, ngroups, dstate) like B")
    if nheads % B.shape[1]:
        raise ValueError(f"B: ngroups = {B.shape[1]} but expected a divisor of nheads = {nheads}")
    for name, t in (("D", D), ("dt_bias", dt_bias)):
        args.expect(name, None if t is None else tuple(t.shape), (nheads, dim), "(nheads, dim) or (dim,)")
    args.expect("z", None if z is None else tuple(z.shape), hd, "(batch, nheads, dim) like x")
    if state_batch_indices is None and slots != batch:
        raise ValueError(f"state: {slots} slots but x has batch {batch} (pass state_batch_indices to pick slots)")
    if state_batch_indices is not None:
        args.expect("state_batch_indices", tuple(state_batch_indices.shape), (batch,), "(batch,)")
    with torch.no_grad():
        out = _state_step(state4, x, dt, A, B, C, D, z, dt_bias, bool(dt_softplus), state_batch_indices)
    return out if has_heads else out.squeeze(1)


def _state_step(state, x, dt, A, B, C, D, z, dt_bias, softplus, idx):
    """selective_state_update on checked 4-D / 3-D tensors, by chunkgen.torch.sscan_step."""
    batch, nheads, dim = x.shape
    slots, dstate = state.shape[0], state.shape[-1]
    ch = nheads * dim  # Mamba-2's heads x dim as Mamba-1's channels; groups of nheads / ngroups heads
    if idx is None:
        idx = torch.arange(batch, device=x.device)
    else:  # any negative index is padding (the op's is -1)
        idx = torch.where(idx < 0, torch.full_like(idx, -1), idx)
    row = (lambda t: t.reshape(batch, 1, ch) if t is not None else None)
    vec = (lambda t: _wide(t).reshape(ch) if t is not None else None)
    cache = None
    if state.dtype in (torch.float32, x.dtype):
        try:
            cache = state.view(slots, ch, dstate)
        except RuntimeError:  # (nheads, dim) strides that do not merge
            pass
    work = cache if cache is not None else state.reshape(slots, ch, dstate).float()
    y = ct.sscan_step(row(x), row(dt), _wide(A).reshape(ch, dstate), B[:, None], C[:, None], work, idx, D=vec(D),
                      z=row(z), delta_bias=vec(dt_bias), delta_softplus=softplus)
    if cache is None:
        state.copy_(work.reshape(state.shape))
    return y.reshape(batch, nheads, dim).to(x.dtype)
