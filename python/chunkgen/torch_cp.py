"""Context parallelism in PyTorch: one sequence (or a packed stream) split along T over
the ranks of a torch.distributed process group, exact, autograd included
(docs/context_parallel.md, MATH_GDN.md section 6).

    o, hT = chunkgen.torch_cp.ssd(q, k, v, log_alpha, h0=None, *, group=None,
                                  layout="token", cu_seqlens=None)
    y, hT = chunkgen.torch_cp.sscan(x, delta, A, B, C, D=None, z=None, delta_bias=None,
                                    h0=None, *, group=None, delta_softplus=False,
                                    cu_seqlens=None)
    o, hT = chunkgen.torch_cp.gdr(q, k, v, g, beta, h0=None, *, group=None, scale=None,
                                  use_qk_l2norm=False, layout="token", cu_seqlens=None)

Each rank passes its own contiguous piece of the sequence axis, in rank order (rank r
holds the tokens after rank r - 1's); the pieces may have any lengths >= 1
(chunkgen.torch_cp.split_sizes gives the balanced split). Every other extent, dtype,
option and cu_seqlens (the global offsets, B = 1) must agree: a small descriptor is
all-gathered first and a disagreement raises ValueError on every rank, naming it.

- The local pass (chunkgen.torch.ssd / sscan) runs from a zero state (rank 0 from h0);
  one all-gather over the group exchanges the (transition, state) pairs, O(heads x state)
  floats per rank; each rank folds the pairs of the ranks before it into its entering
  state. SSD corrects its outputs (o_t += exp(cumsum log_alpha)_t q_t S, float32); the
  selective scan runs its local pass again from the entering state. The gated delta
  rule's transition is a dk x dk matrix per (row, value head): one call of the op with dk
  extra zero value columns (the state's extra columns starting at the identity) gives the
  outputs, the state, the transition and the correction's P_t (o_t += P_t S, float32).
- Autograd: the exchange is an autograd.Function whose backward is the reverse exchange
  (reduce-scatter of the gathered pairs' cotangents; all-reduce where the backend has no
  reduce-scatter, e.g. gloo). Every rank must run backward through its outputs (as with
  any collective in autograd), once per forward call, in the same order. The exchange is
  in every rank's graph whenever the outputs require grad (whichever inputs do, and
  whether or not the rank has a pair to send), so its backward collective runs on every
  rank exactly once per backward pass; whether the outputs require grad (grad mode on and
  an input requiring grad) is part of the descriptor: ranks that disagree raise.
- h0 is read by the rank where each sequence starts (rank 0 without cu_seqlens); its
  gradient arrives there. Parameters replicated over the group (A, D, delta_bias, and
  h0 if replicated) get per-rank partial gradients: sum them over the group (all_reduce),
  as for every other weight under sequence parallelism.
- hT: without cu_seqlens, the state at the end of this rank's piece (the last rank's is
  the final state); with cu_seqlens, [Nseq, ...] with the final state of every sequence
  that ends on this rank, zeros elsewhere.
- Collectives go through the group's backend (gloo on CPU tensors, NCCL on CUDA tensors);
  STATS counts the bytes passed to them (bench/cp_bytes.py).
"""
from __future__ import annotations

from typing import List, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from . import torch as cgt
from ._cp import DESC_LEN, GRAD, MAGIC, REAL, check_descriptors, describe, pieces, real_bits, split_sizes
from ._ops import layout_flag, scale_factor

__all__ = ["ssd", "sscan", "gdr", "split_sizes", "STATS"]

_DTYPE_NAMES = ("float32", "float64", "bfloat16", "float16")
_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
# The collectives this process called and the bytes of the tensors it passed in and got
# back: gather_* (the descriptor and the pairs' all-gather), reverse_* (the backward's
# reduce-scatter, an all-reduce of the whole gathered cotangent on gloo).
STATS = {"descriptor_calls": 0, "exchange_calls": 0, "reverse_calls": 0, "gather_in": 0, "gather_out": 0,
         "reverse_in": 0, "reverse_out": 0}
# Tests only: functions applied to the gathered pairs (forward) and to the reduced pair
# cotangents (backward), to see the tests fail when either exchange is wrong.
_PERTURB = None
_PERTURB_GRAD = None


def _comm_device(group, like: Tensor):
    return like.device if dist.get_backend(group) == "nccl" else torch.device("cpu")


def _all_gather(t: Tensor, group) -> Tensor:
    world = dist.get_world_size(group)
    out = t.new_empty((world,) + tuple(t.shape))
    if dist.get_backend(group) == "nccl":
        dist.all_gather_into_tensor(out, t, group=group)
    else:
        dist.all_gather(list(out.unbind(0)), t, group=group)
    STATS["gather_in"] += t.numel() * t.element_size()
    STATS["gather_out"] += out.numel() * out.element_size()
    return out


def _reduce_scatter(g: Tensor, group) -> Tensor:
    """Row `rank` of the sum over ranks of g [P, ...]."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    STATS["reverse_calls"] += 1
    STATS["reverse_in"] += g.numel() * g.element_size()
    if dist.get_backend(group) == "nccl":
        out = g.new_empty(g.shape[1:])
        dist.reduce_scatter_tensor(out, g, group=group)
        STATS["reverse_out"] += out.numel() * out.element_size()
        return out
    dist.all_reduce(g, group=group)  # (gloo has no reduce-scatter: a ring all-reduce moves 2 (P - 1) rows)
    STATS["reverse_out"] += g.numel() * g.element_size()
    return g[rank].clone()


class _Exchange(torch.autograd.Function):
    """All-gather of each rank's packed (transition, state) pair [b, f] -> [P, b, f]; its
    backward is the reverse exchange: each rank gets the sum over ranks of the gathered
    pairs' cotangents at its own row. `anchors` (the call's inputs that require grad; no
    gradient flows to them here) put the exchange in the graph even where the pair does
    not depend on them (a rank with no outgoing pair, gates that do not require grad, an
    h0 only rank 0 reads), so that its backward collective runs on every rank."""

    @staticmethod
    def forward(ctx, payload, group, *anchors):
        ctx.group, ctx.device, ctx.anchors = group, payload.device, len(anchors)
        dev = _comm_device(group, payload)
        STATS["exchange_calls"] += 1
        out = _all_gather(payload.detach().to(dev).contiguous(), group).to(payload.device)
        if _PERTURB is not None:
            out = _PERTURB(out)
        return out

    @staticmethod
    def backward(ctx, g):
        dev = _comm_device(ctx.group, g)
        out = _reduce_scatter(g.detach().to(dev).contiguous().clone(), ctx.group).to(ctx.device)
        if _PERTURB_GRAD is not None:
            out = _PERTURB_GRAD(out)
        return (out, None) + (None,) * ctx.anchors


def _exchange(M: Tensor, N: Tensor, group, anchors: List[Tensor]):
    b = N.shape[0]
    payload = torch.cat([M.reshape(b, -1).float(), N.reshape(b, -1).float()], dim=-1)
    g = _Exchange.apply(payload, group, *anchors)
    m = M.numel() // b
    return g[..., :m].reshape((-1,) + tuple(M.shape)), g[..., m:].reshape((-1,) + tuple(N.shape))


class _Zero(torch.autograd.Function):
    """Zeros like x that keep x in the graph (a zero gradient flows back to it), without
    computing 0 * x (which is NaN where x is not finite)."""

    @staticmethod
    def forward(ctx, x):
        return torch.zeros_like(x)

    @staticmethod
    def backward(ctx, g):
        return torch.zeros_like(g)


def _diagonal_apply(m: Tensor, x: Tensor) -> Tensor:
    """m x for a diagonal (elementwise) transition; m = 0 (a sequence starts inside the
    segment) cuts the chain even where x is not finite, so that a NaN or inf in one
    sequence's state never reaches another's (as in the one-process call)."""
    return torch.where(m == 0, torch.zeros((), dtype=x.dtype, device=x.device), m * x)


def _scalar_apply(m: Tensor, x: Tensor) -> Tensor:
    return _diagonal_apply(m[..., None, None], x)


def _enter(M_all: Tensor, N_all: Tensor, rank: int, apply) -> Tensor:
    """S = 0; S <- M_j S + N_j for j < rank. (Starts from zeros tied to N_all, so that the
    exchange is in every rank's graph and its backward collective runs on every rank.)"""
    S = _Zero.apply(N_all[0])
    for j in range(rank):
        S = apply(M_all[j], S) + N_all[j]
    return S


def _agree(what: str, op: str, options, tensors, seq_dims, cu: Optional[Tensor], local_len: int, group,
           err: Optional[Exception] = None):
    """Exchange the call's descriptor (DESC_LEN int64s) and check that the ranks agree;
    returns every rank's local token count and the anchors (this rank's inputs that
    require grad, [] under no_grad; every rank has some or none: the descriptor says).
    A rank whose arguments cannot be described (or that already failed: err) still takes
    part (all -1) so that no rank hangs; every rank then raises."""
    cu_vals = None
    anchors = [t for _, t in tensors if getattr(t, "requires_grad", False)] if torch.is_grad_enabled() else []
    options = dict(options, **{GRAD: int(bool(anchors))})
    try:
        if err is not None:
            raise err
        if cu is not None:
            if cu.dtype not in (torch.int32, torch.int64) or cu.dim() != 1:
                raise ValueError(f"cu_seqlens: dtype {cu.dtype}, {cu.dim()} dimensions but expected int32 or int64 "
                                 f"[N + 1] (the global offsets)")
            cu_vals = [int(c) for c in cu.tolist()]
        given = []
        for name, t in tensors:
            if t is None:
                given.append((name, None, -1))
            elif t.dtype not in _DTYPES:
                raise ValueError(f"{name}: dtype {t.dtype} but expected float32, float64, bfloat16 or float16")
            else:
                given.append((name, tuple(t.shape), _DTYPES.index(t.dtype)))
        flat, fields = describe(op, options, given, seq_dims, cu_vals, local_len)
    except (ValueError, TypeError) as e:
        err, flat, fields = e, [-1] * DESC_LEN, None
    like = next(t for _, t in tensors if t is not None)
    dev = _comm_device(group, like)
    STATS["descriptor_calls"] += 1
    rows = _all_gather(torch.tensor(flat, dtype=torch.int64, device=dev), group).tolist()
    bad = [r for r, row in enumerate(rows) if row[1] != MAGIC]
    if err is not None:
        raise err
    if bad:
        raise ValueError(f"{what}: rank(s) {bad} could not describe their call (their own error says why); no "
                         f"rank ran it")
    lens = check_descriptors(what, rows, fields, _DTYPE_NAMES)
    if min(lens) < 1:
        raise ValueError(f"{what}: local token counts {lens} but expected >= 1 on every rank (split_sizes gives a "
                         f"balanced split)")
    if cu_vals is not None and cu_vals[-1] != sum(lens):
        raise ValueError(f"{what}: cu_seqlens[-1] = {cu_vals[-1]} but the ranks hold {sum(lens)} tokens "
                         f"({lens}): the offsets are global")
    return lens, anchors


def _mask(values, like: Tensor, ndim: int) -> Tensor:
    return torch.tensor(values, dtype=torch.bool, device=like.device).reshape((-1,) + (1,) * (ndim - 1))


# --------------------------------------------------------------------- SSD

def _ssd_correction(q: Tensor, S: Tensor, acum: Tensor, head: bool) -> Tensor:
    """exp(acum_t) q_t S for every token of q (float32), in v's layout: S [B, H, dk, dv],
    acum [B, H, T] (the inclusive cumsum of log_alpha from the segment start)."""
    b, h, dk, dv = S.shape
    g = q.shape[1] if head else q.shape[2]
    t = acum.shape[-1]
    Sg = S.reshape(b, g, h // g, dk, dv)
    w = torch.exp(acum)
    if head:
        c = torch.einsum("bgtk,bgrkv->bgrtv", q.float(), Sg)
        return (c * w.reshape(b, g, h // g, t, 1)).reshape(b, h, t, dv)
    c = torch.einsum("btgk,bgrkv->btgrv", q.float(), Sg)
    return (c * w.transpose(1, 2).reshape(b, t, g, h // g, 1)).reshape(b, t, h, dv)


def ssd(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, h0: Optional[Tensor] = None, *, group=None,
        layout: str = "token", cu_seqlens: Optional[Tensor] = None):
    """chunkgen.torch.ssd on this rank's piece of a sequence split along T over `group`
    (None: the default group). Returns (o, hT), o exact for the whole sequence, hT as the
    module docstring says."""
    try:  # (a bad layout on one rank: raised on every rank after the descriptor exchange)
        flag, bad = layout_flag(layout), None
    except ValueError as e:
        flag, bad = -1, e
    head = bool(flag == 1)
    tax = 2 if head else 1
    rank = dist.get_rank(group)
    names = ("q", "k", "v", "log_alpha", "h0")
    ts = (q, k, v, log_alpha, h0)
    lens, anchors = _agree("chunkgen.torch_cp.ssd", "ssd", {"layout (0 token, 1 head)": flag}, list(zip(names, ts)),
                  {n: tax for n in names[:4]}, cu_seqlens, q.shape[tax] if q.dim() > tax else -1, group, bad)
    s, tl = sum(lens[:rank]), lens[rank]
    la = log_alpha.float()
    acum = torch.cumsum(la if head else la.transpose(1, 2), dim=-1)  # [B, H, T]
    if cu_seqlens is None:
        o0, N = cgt.ssd(q, k, v, log_alpha, h0 if rank == 0 else None, layout=layout)
        M = torch.exp(acum[..., -1])
        S = _enter(*_exchange(M, N, group, anchors), rank, _scalar_apply)
        o = (o0.float() + _ssd_correction(q, S, acum, head)).to(o0.dtype)
        return o, M[..., None, None] * S + N
    local, before, enter, leave, len_in, ends_here = pieces([int(c) for c in cu_seqlens.tolist()], s, tl)
    h0_loc = None if h0 is None else torch.where(_mask(before, h0, h0.dim()), torch.zeros((), dtype=h0.dtype,
                                                                                              device=h0.device), h0)
    cu_loc = torch.tensor(local, dtype=cu_seqlens.dtype, device=cu_seqlens.device)
    o0, hT0 = cgt.ssd(q, k, v, log_alpha, h0_loc, layout=layout, cu_seqlens=cu_loc)
    through = enter is not None and enter == leave
    M = torch.exp(acum[..., -1]) * float(through)  # [1, H]
    N = hT0[leave][None] if leave is not None else torch.zeros_like(hT0[:1])
    S = _enter(*_exchange(M, N, group, anchors), rank, _scalar_apply)
    if enter is None:  # (0 * S: the exchange stays in this rank's graph, its backward collective runs)
        dep = _Zero.apply(S.sum())
        hT = torch.where(_mask(ends_here, hT0, 4), hT0, torch.zeros((), device=hT0.device))
        return o0 + dep.to(o0.dtype), hT + dep
    # only the entering sequence's tokens [0, len_in) get the correction
    first = (o0.narrow(tax, 0, len_in).float() + _ssd_correction(q.narrow(tax, 0, len_in), S, acum[..., :len_in],
                                                                 head)).to(o0.dtype)
    o = torch.cat([first, o0.narrow(tax, len_in, tl - len_in)], dim=tax) if len_in < tl else first
    fix = torch.exp(acum[0, :, len_in - 1])[:, None, None] * S[0]
    hT = torch.where(_mask([i == enter for i in range(hT0.shape[0])], hT0, 4), hT0 + fix[None], hT0)
    return o, torch.where(_mask(ends_here, hT, 4), hT, torch.zeros((), device=hT.device))


# ---------------------------------------------------------- selective scan

def sscan(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor] = None,
          z: Optional[Tensor] = None, delta_bias: Optional[Tensor] = None, h0: Optional[Tensor] = None, *,
          group=None, delta_softplus: bool = False, cu_seqlens: Optional[Tensor] = None):
    """chunkgen.torch.sscan on this rank's piece of a sequence split along L over `group`.
    Returns (y, hT) as the module docstring says."""
    rank = dist.get_rank(group)
    names = ("x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0")
    ts = (x, delta, A, B, C, D, z, delta_bias, h0)
    lens, anchors = _agree("chunkgen.torch_cp.sscan", "sscan", {"delta_softplus": int(bool(delta_softplus))},
                  list(zip(names, ts)), {n: 1 for n in ("x", "delta", "B", "C", "z")}, cu_seqlens,
                  x.shape[1] if x.dim() > 1 else -1, group)
    s, tl = sum(lens[:rank]), lens[rank]
    dt = delta.float() + (delta_bias.float() if delta_bias is not None else 0.0)
    if delta_softplus:
        dt = F.softplus(dt)
    M_full = torch.exp(A.float()[None] * dt.sum(1)[..., None])  # [B, D, N]

    def run(h, cu=None):
        return cgt.sscan(x, delta, A, B, C, D, z, delta_bias, h, delta_softplus=delta_softplus, cu_seqlens=cu)

    if cu_seqlens is None:
        h0_loc = h0 if rank == 0 else None
        _, N = run(h0_loc)
        S = _enter(*_exchange(M_full, N, group, anchors), rank, _diagonal_apply)
        return run(S if h0_loc is None else S + h0_loc)
    local, before, enter, leave, _, ends_here = pieces([int(c) for c in cu_seqlens.tolist()], s, tl)
    h0_loc = None if h0 is None else torch.where(_mask(before, h0, 3), torch.zeros((), dtype=h0.dtype,
                                                                                     device=h0.device), h0)
    cu_loc = torch.tensor(local, dtype=cu_seqlens.dtype, device=cu_seqlens.device)
    _, hT0 = run(h0_loc, cu_loc)
    through = enter is not None and enter == leave
    M = M_full * float(through)
    N = hT0[leave][None] if leave is not None else torch.zeros_like(hT0[:1])
    S = _enter(*_exchange(M, N, group, anchors), rank, _diagonal_apply)
    h2 = torch.where(_mask([i == enter for i in range(hT0.shape[0])], hT0, 3), S,
                     torch.zeros((), dtype=S.dtype, device=S.device))
    y, hT = run(h2 if h0_loc is None else h2 + h0_loc, cu_loc)
    return y, torch.where(_mask(ends_here, hT, 3), hT, torch.zeros((), device=hT.device))


# ------------------------------------------------------ gated delta rule

def _matrix_apply(m: Tensor, x: Tensor) -> Tensor:
    """m x for a dk x dk transition per (row, head); an all-zero m (a sequence starts
    inside the segment) cuts the chain even where x is not finite."""
    cut = (m == 0).all(dim=-1, keepdim=True).all(dim=-2, keepdim=True)
    return torch.where(cut, torch.zeros((), dtype=x.dtype, device=x.device), m @ x)


def _gdr_extended(q, k, v, g, beta, h0, eye_rows: List[bool], head: bool, cu, **opts):
    """One call of the op with dk more value columns: v gets zeros there, the state's extra
    columns start at the identity in the rows eye_rows marks (0 elsewhere). The columns of
    the state evolve independently, so the call gives the outputs and final states from h0
    (the first dv columns) and, in the extra ones, the segment's transition M (the final
    state's) and P_t = scale qn_t^T M_{1..t} (the output's). Returns (o0, P, N, M)."""
    dk, dv = q.shape[-1], v.shape[-1]
    h = v.shape[1] if head else v.shape[2]
    vx = torch.cat([v, v.new_zeros(v.shape[:-1] + (dk,))], dim=-1)
    rows = len(eye_rows)
    eye = torch.eye(dk, device=v.device)[None, None] * _mask(eye_rows, v, 4).float()
    h_in = torch.zeros(rows, h, dk, dv, device=v.device) if h0 is None else h0.float()
    hx = torch.cat([h_in, eye.expand(rows, h, dk, dk)], dim=-1)
    o, hT = cgt.gdr(q, k, vx, g, beta, hx, layout="head" if head else "token", cu_seqlens=cu, **opts)
    return o[..., :dv], o[..., dv:], hT[..., :dv], hT[..., dv:]


def _gdr_correction(P: Tensor, S: Tensor, head: bool) -> Tensor:
    return torch.einsum("bhtk,bhkv->bhtv" if head else "bthk,bhkv->bthv", P.float(), S)


def gdr(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, h0: Optional[Tensor] = None, *, group=None,
        scale: Optional[float] = None, use_qk_l2norm: bool = False, layout: str = "token",
        cu_seqlens: Optional[Tensor] = None):
    """chunkgen.torch.gdr on this rank's piece of a sequence split along T over `group`
    (None: the default group). Returns (o, hT), o exact for the whole sequence, hT as the
    module docstring says."""
    try:  # (a bad option on one rank: raised on every rank after the descriptor exchange)
        flag, bad = layout_flag(layout), None
        scale_factor(scale, q.shape[-1])
        sbits = real_bits(scale)
    except (ValueError, TypeError) as e:
        flag, bad, sbits = -1, e, -2
    head = bool(flag == 1)
    tax = 2 if head else 1
    rank = dist.get_rank(group)
    names = ("q", "k", "v", "g", "beta", "h0")
    ts = (q, k, v, g, beta, h0)
    opts = {"layout (0 token, 1 head)": flag, "use_qk_l2norm": int(bool(use_qk_l2norm)),
            "scale" + REAL: sbits}
    lens, anchors = _agree("chunkgen.torch_cp.gdr", "gdr", opts, list(zip(names, ts)), {n: tax for n in names[:5]},
                  cu_seqlens, q.shape[tax] if q.dim() > tax else -1, group, bad)
    s, tl = sum(lens[:rank]), lens[rank]
    run = lambda h, rows, cu=None: _gdr_extended(q, k, v, g, beta, h, rows, head, cu,  # noqa: E731
                                                 scale=scale, use_qk_l2norm=use_qk_l2norm)
    if cu_seqlens is None:
        o0, P, N, M = run(h0 if rank == 0 else None, [True] * v.shape[0])
        S = _enter(*_exchange(M, N, group, anchors), rank, _matrix_apply)
        return (o0.float() + _gdr_correction(P, S, head)).to(o0.dtype), _matrix_apply(M, S) + N
    local, before, enter, leave, len_in, ends_here = pieces([int(c) for c in cu_seqlens.tolist()], s, tl)
    h0_loc = None if h0 is None else torch.where(_mask(before, h0, h0.dim()), torch.zeros((), dtype=h0.dtype,
                                                                                              device=h0.device), h0)
    cu_loc = torch.tensor(local, dtype=cu_seqlens.dtype, device=cu_seqlens.device)
    o0, P, hT0, Ms = run(h0_loc, [i == enter for i in range(len(local) - 1)], cu_loc)
    through = enter is not None and enter == leave
    M = Ms[leave][None] if through else torch.zeros_like(Ms[:1])
    N = hT0[leave][None] if leave is not None else torch.zeros_like(hT0[:1])
    S = _enter(*_exchange(M, N, group, anchors), rank, _matrix_apply)
    if enter is None:  # (the exchange stays in this rank's graph, its backward collective runs)
        dep = _Zero.apply(S.sum())
        hT = torch.where(_mask(ends_here, hT0, 4), hT0, torch.zeros((), device=hT0.device))
        return o0 + dep.to(o0.dtype), hT + dep
    # only the entering sequence's tokens [0, len_in) get the correction
    first = (o0.narrow(tax, 0, len_in).float() + _gdr_correction(P.narrow(tax, 0, len_in), S, head)).to(o0.dtype)
    o = torch.cat([first, o0.narrow(tax, len_in, tl - len_in)], dim=tax) if len_in < tl else first
    fix = _matrix_apply(Ms[enter], S[0])
    hT = torch.where(_mask([i == enter for i in range(hT0.shape[0])], hT0, 4), hT0 + fix[None], hT0)
    return o, torch.where(_mask(ends_here, hT, 4), hT, torch.zeros((), device=hT.device))
