"""Context parallelism in JAX: one sequence (or a packed stream) split along T over a mesh
axis, exact (docs/context_parallel.md, MATH_GDN.md section 6).

Inside shard_map (the arrays are each device's contiguous piece of the sequence axis):

    o, hT = chunkgen.jax_cp.ssd(q, k, v, log_alpha, h0=None, *, axis_name, layout="head",
                                cu_seqlens=None)
    y, hT = chunkgen.jax_cp.sscan(x, delta, A, B, C, D=None, z=None, delta_bias=None,
                                  h0=None, *, axis_name, delta_softplus=False, cu_seqlens=None)
    o, hT = chunkgen.jax_cp.gdr(q, k, v, g, beta, h0=None, *, axis_name, scale=None,
                                use_qk_l2norm=False, layout="token", cu_seqlens=None)

On global arrays, under jax.jit with inputs sharded over T (and over batch / heads on a
2-D mesh): shard_ssd(mesh, seq_axis, batch_axis, head_axis), shard_gdr(mesh, seq_axis, batch_axis,
head_axis, scale=, use_qk_l2norm=, layout=) and shard_sscan(mesh, seq_axis, batch_axis)
return functions with the ops' arguments; they pad T to a multiple
of the device count (padded tokens leave every state unchanged) and return the global
outputs and final states.

Per device: (1) the local chunked pass from a zero state (device 0 from h0) gives the
outputs and the state N_r at the segment's end; (2) one all_gather exchanges the
(transition M_r, state N_r) pairs, O(heads x state) floats per device; (3) each device
folds the pairs of the devices before it (S <- M_j S + N_j) into its entering state S_r;
(4) SSD adds the entering state's contribution o_t += exp(sum_{i<=t} log_alpha_i) q_t S_r
(2 dk dv FLOPs per token and head, a fraction of a second pass); the selective scan,
whose correction would cost as much as the scan, runs its local pass again from S_r; the
gated delta rule's transition is a dk x dk matrix per (row, value head), and one call of
the op with dk extra zero value columns (the state's extra columns starting at the
identity) gives the outputs, N_r, M_r and the correction's P_t = scale qn_t^T M_{1..t}:
o_t += P_t S_r (docs/context_parallel.md, "The gated delta rule").
Every gradient is JAX's reverse mode through these steps: the all_gather's transpose
(a reduce-scatter of the pairs' cotangents) is the reverse exchange, chunkgen's backward
runs for the local passes.

Within the per-device calls:
- Use shard_map(..., check_vma=False), as chunkgen.jax.shard_ssd does: the forward passes
  JAX's varying-axis checks, but chunkgen.jax's custom_vjp backward returns its gradients
  without the varying-axis type (a chunkgen.jax matter, python/chunkgen/jax.py's f_bwd).
- h0 ([B, H, dk, dv] / [B, D, N], or [Nseq, ...] with cu_seqlens) is the global
  initial state; only the device where a sequence starts reads it, and its gradient is
  that device's (sum it over axis_name if h0 is replicated; the shard_* wrappers do).
- hT without cu_seqlens is the state at the end of this device's segment (the last
  device's is the sequence's final state); with cu_seqlens [Nseq, ...] holds the final
  state of each sequence that ends on this device, zeros elsewhere (their sum over the
  axis is every sequence's final state).
- cu_seqlens (global offsets, B = 1, replicated) may put sequence boundaries anywhere: a
  sequence crossing a device boundary gets its state from the device(s) before it; a
  sequence may span any number of devices. Each device runs the library's varlen call on
  its pieces (global offsets clipped to its range: empty pieces pass their state).
"""
from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp

from . import jax as cj
from ._cp import check_descriptors, describe, real_bits as _real_bits
from ._ops import layout_flag

__all__ = ["ssd", "sscan", "gdr", "shard_ssd", "shard_sscan", "shard_gdr"]

_F32 = jnp.float32
_HI = jax.lax.Precision.HIGHEST

# Tests only: a function applied to the gathered pairs (to see the tests fail when the
# exchanged state is wrong). Never set in real use.
_PERTURB = None


# ------------------------------------------------------------- shared steps

def _exchange(M, N, axis_name):
    """One all_gather of the packed (transition, state) pairs: returns M_all [P, *M.shape],
    N_all [P, *N.shape] (float32)."""
    b = N.shape[0]
    payload = jnp.concatenate([M.reshape(b, -1).astype(_F32), N.reshape(b, -1).astype(_F32)], axis=-1)
    g = jax.lax.all_gather(payload, axis_name)
    if _PERTURB is not None:
        g = _PERTURB(g)
    m = M.size // b
    return g[..., :m].reshape((-1,) + M.shape), g[..., m:].reshape((-1,) + N.shape)


def _enter(M_all, N_all, r, apply):
    """The state entering device r: S = 0; S <- M_j S + N_j for j < r (a scan over the P
    gathered pairs, masked: differentiable, no dynamic trip count)."""
    js = jnp.arange(M_all.shape[0])

    def step(S, xs):
        j, M, N = xs
        return jnp.where(j < r, apply(M, S) + N, S), None

    # (+ 0 r: the carry varies over the axis from the start, as shard_map's check_vma wants)
    S0 = jnp.zeros(N_all.shape[1:], _F32) + (r * 0).astype(_F32)
    S, _ = jax.lax.scan(step, S0, (js, M_all, N_all))
    return S


def _pieces(cu, s, tl):
    """Facts of device [s, s + tl) about the global sequences cu (offsets [N + 1]):
    the local offsets, which sequences start before s, the one entering (crossing s), the
    one leaving (crossing s + tl), the entering one's local length, and which end here."""
    starts, ends = cu[:-1], cu[1:]
    e = s + tl
    before = starts < s
    enter = before & (ends > s)
    leave = (starts < e) & (ends > e)
    local = jnp.clip(cu - s, 0, tl).astype(cu.dtype)
    len_in = jnp.sum(jnp.where(enter, jnp.clip(ends - s, 0, tl), 0))
    ends_here = jnp.where(ends > 0, (ends > s) & (ends <= e), s == 0)
    return local, before, enter, leave, len_in, ends_here


def _bcast(mask, like):
    return mask.reshape(mask.shape + (1,) * (like.ndim - mask.ndim))


# --------------------------------------------------------------------- SSD

def _ssd_correction(q, S, acum, head: bool, tmask=None):
    """exp(acum_t) q_t S for every local token (float32), in v's layout: S [B, H, dk, dv],
    acum [B, H, T] (the inclusive cumsum of log_alpha from the segment start); tmask [B, T]:
    the tokens that get it (a select after the product: no 0 x NaN for the others)."""
    b, h, dk, dv = S.shape
    g = q.shape[1] if head else q.shape[2]
    Sg = S.reshape(b, g, h // g, dk, dv)
    w = jnp.exp(acum)
    t = acum.shape[-1]
    if head:
        c = jnp.einsum("bgtk,bgrkv->bgrtv", q.astype(_F32), Sg, precision=_HI)
        c = (c * w.reshape(b, g, h // g, t, 1)).reshape(b, h, t, dv)
        return c if tmask is None else jnp.where(tmask[:, None, :, None], c, 0.0)
    c = jnp.einsum("btgk,bgrkv->btgrv", q.astype(_F32), Sg, precision=_HI)
    c = (c * jnp.swapaxes(w, 1, 2).reshape(b, t, g, h // g, 1)).reshape(b, t, h, dv)
    return c if tmask is None else jnp.where(tmask[:, :, None, None], c, 0.0)


def _scalar_apply(M, S):
    return _diagonal_apply(M[..., None, None], S)


def _diagonal_apply(M, S):
    """M S for a diagonal (elementwise) transition; M = 0 (a sequence starts inside the
    segment) cuts the chain even where S is not finite, so that a NaN or inf in one
    sequence's state never reaches another's (as in the one-device call)."""
    return jnp.where(M == 0, 0.0, M * S)


def ssd(q, k, v, log_alpha, h0=None, *, axis_name, layout: str = "head", cu_seqlens=None):
    """chunkgen.jax.ssd on this device's piece of a sequence sharded along T over mesh axis
    `axis_name` (call inside shard_map). Returns (o, hT): o exact for the whole sequence,
    hT as the module docstring says."""
    head = bool(layout_flag(layout))
    r = jax.lax.axis_index(axis_name)
    la = log_alpha.astype(_F32)
    acum = jnp.cumsum(la if head else jnp.swapaxes(la, 1, 2), axis=-1)  # [B, H, T]
    tl = acum.shape[-1]
    if cu_seqlens is None:
        h0_loc = None if h0 is None else jnp.where(r == 0, h0, 0.0).astype(h0.dtype)
        o0, N = cj.ssd(q, k, v, log_alpha, h0_loc, layout=layout)
        M = jnp.exp(acum[..., -1])
        S = _enter(*_exchange(M, N, axis_name), r, _scalar_apply)
        o = (o0.astype(_F32) + _ssd_correction(q, S, acum, head)).astype(o0.dtype)
        return o, M[..., None, None] * S + N
    cu = jnp.asarray(cu_seqlens)
    local, before, enter, leave, len_in, ends_here = _pieces(cu, r * tl, tl)
    h0_loc = None if h0 is None else jnp.where(_bcast(before, h0), 0.0, h0).astype(h0.dtype)
    o0, hT0 = cj.ssd(q, k, v, log_alpha, h0_loc, layout=layout, cu_seqlens=local)
    M = jnp.where(jnp.any(enter & leave), jnp.exp(acum[..., -1]), 0.0)  # [1, H]
    N = jnp.sum(jnp.where(_bcast(leave, hT0), hT0, 0.0), axis=0)[None]  # (a select: no 0 x NaN)
    S = jnp.where(jnp.any(enter), _enter(*_exchange(M, N, axis_name), r, _scalar_apply), 0.0)
    tmask = (jnp.arange(tl) < len_in)[None]
    o = (o0.astype(_F32) + _ssd_correction(q, S, acum, head, tmask)).astype(o0.dtype)
    lam_in = jnp.exp(acum[0, :, jnp.clip(len_in - 1, 0, tl - 1)])  # [H]: the entering piece's decay
    hT = jnp.where(_bcast(enter, hT0), hT0 + (lam_in[:, None, None] * S[0])[None], hT0)
    return o, jnp.where(_bcast(ends_here, hT), hT, 0.0)


# ---------------------------------------------------------- selective scan

def _dt(delta, delta_bias, softplus: bool):
    dt = delta.astype(_F32)
    if delta_bias is not None:
        dt = dt + delta_bias.astype(_F32)
    return jax.nn.softplus(dt) if softplus else dt


def sscan(x, delta, A, B, C, D=None, z=None, delta_bias=None, h0=None, *, axis_name, delta_softplus: bool = False,
          cu_seqlens=None, valid_len: Optional[int] = None):
    """chunkgen.jax.sscan on this device's piece of a sequence sharded along L over mesh
    axis `axis_name` (call inside shard_map). valid_len: the global number of real tokens
    when the stream was padded at its end (the padded tokens get dt = 0, which leaves the
    state unchanged); None: no padding (or cu_seqlens, where padding is its own sequence).
    Returns (y, hT) as the module docstring says."""
    r = jax.lax.axis_index(axis_name)
    tl = x.shape[1]
    dt = _dt(delta, delta_bias, delta_softplus)  # [B, L, D] float32: the transitions' exponents
    if valid_len is not None and cu_seqlens is None:
        dt = jnp.where((r * tl + jnp.arange(tl) < valid_len)[None, :, None], dt, 0.0)
        # the library gets dt itself, so that the padded tokens' dt is exactly 0
        run = functools.partial(cj.sscan, x, dt.astype(delta.dtype), A, B, C, D, z, None,
                                delta_softplus=False)
    else:
        run = functools.partial(cj.sscan, x, delta, A, B, C, D, z, delta_bias, delta_softplus=delta_softplus)
    M_full = jnp.exp(A.astype(_F32)[None] * jnp.sum(dt, axis=1)[..., None])  # [B, D, N]
    if cu_seqlens is None:
        h0_loc = None if h0 is None else jnp.where(r == 0, h0, 0.0).astype(h0.dtype)
        _, N = run(h0_loc)
        S = _enter(*_exchange(M_full, N, axis_name), r, _diagonal_apply)
        return run(S if h0_loc is None else S + h0_loc)
    cu = jnp.asarray(cu_seqlens)
    local, before, enter, leave, _, ends_here = _pieces(cu, r * tl, tl)
    h0_loc = None if h0 is None else jnp.where(_bcast(before, h0), 0.0, h0).astype(h0.dtype)
    _, hT0 = run(h0_loc, cu_seqlens=local)
    M = jnp.where(jnp.any(enter & leave), M_full, 0.0)
    N = jnp.sum(jnp.where(_bcast(leave, hT0), hT0, 0.0), axis=0)[None]
    S = jnp.where(jnp.any(enter), _enter(*_exchange(M, N, axis_name), r, _diagonal_apply), 0.0)
    h0_2 = jnp.where(_bcast(enter, hT0), S, 0.0) + (0.0 if h0_loc is None else h0_loc)
    y, hT = run(h0_2, cu_seqlens=local)
    return y, jnp.where(_bcast(ends_here, hT), hT, 0.0)


# ------------------------------------------------------ gated delta rule

def _matrix_apply(M, S):
    """M S for a dk x dk transition per (row, head); an all-zero M (a sequence starts
    inside the segment) cuts the chain even where S is not finite."""
    cut = jnp.all(M == 0, axis=(-2, -1), keepdims=True)
    return jnp.where(cut, 0.0, jnp.einsum("...ij,...jv->...iv", M, S, precision=_HI))


def _gdr_extended(q, k, v, g, beta, h0, eye_rows, *, scale, use_qk_l2norm, layout, cu_seqlens):
    """One call of the op with dk more value columns: v gets zeros there, the state's extra
    columns start at the identity in the rows eye_rows [rows] marks (0 elsewhere). The
    columns of the state evolve independently, so the call returns at once the outputs and
    final states from h0 (the first dv columns) and, in the extra ones, the segment's
    transition M (the final state's) and P_t = scale qn_t^T M_{1..t} (the output's): the
    entering state S adds P_t S to o_t (docs/context_parallel.md, "The gated delta rule").
    Returns (o0, P, N, M)."""
    dk, dv = q.shape[-1], v.shape[-1]
    rows = cu_seqlens.shape[0] - 1 if cu_seqlens is not None else v.shape[0]
    h = v.shape[1] if layout == "head" else v.shape[2]
    vx = jnp.concatenate([v, jnp.zeros(v.shape[:-1] + (dk,), v.dtype)], axis=-1)
    eye = jnp.where(eye_rows[:, None, None, None], jnp.eye(dk, dtype=_F32), 0.0)
    h_in = jnp.zeros((rows, h, dk, dv), _F32) if h0 is None else h0.astype(_F32)
    hx = jnp.concatenate([h_in, jnp.broadcast_to(eye, (rows, h, dk, dk))], axis=-1)
    o, hT = cj.gdr(q, k, vx, g, beta, hx, scale=scale, use_qk_l2norm=use_qk_l2norm, layout=layout,
                   cu_seqlens=cu_seqlens)
    return o[..., :dv], o[..., dv:], hT[..., :dv], hT[..., dv:]


def _gdr_correction(P, S, head: bool, tmask=None):
    """P_t S for every local token (float32), in v's layout; tmask [B, T]: the tokens that
    get it (a select after the product)."""
    c = jnp.einsum("bhtk,bhkv->bhtv" if head else "bthk,bhkv->bthv", P.astype(_F32), S, precision=_HI)
    if tmask is None:
        return c
    return jnp.where(tmask[:, None, :, None] if head else tmask[:, :, None, None], c, 0.0)


def gdr(q, k, v, g, beta, h0=None, *, axis_name, scale=None, use_qk_l2norm: bool = False, layout: str = "token",
        cu_seqlens=None):
    """chunkgen.jax.gdr on this device's piece of a sequence sharded along T over mesh axis
    `axis_name` (call inside shard_map). Returns (o, hT): o exact for the whole sequence,
    hT as the module docstring says."""
    head = bool(layout_flag(layout))
    r = jax.lax.axis_index(axis_name)
    tl = q.shape[2 if head else 1]
    run = functools.partial(_gdr_extended, q, k, v, g, beta, scale=scale, use_qk_l2norm=use_qk_l2norm,
                            layout=layout)
    if cu_seqlens is None:
        h0_loc = None if h0 is None else jnp.where(r == 0, h0, 0.0).astype(h0.dtype)
        o0, P, N, M = run(h0_loc, jnp.ones((v.shape[0],), bool), cu_seqlens=None)
        S = _enter(*_exchange(M, N, axis_name), r, _matrix_apply)
        o = (o0.astype(_F32) + _gdr_correction(P, S, head)).astype(o0.dtype)
        return o, _matrix_apply(M, S) + N
    cu = jnp.asarray(cu_seqlens)
    local, before, enter, leave, len_in, ends_here = _pieces(cu, r * tl, tl)
    h0_loc = None if h0 is None else jnp.where(_bcast(before, h0), 0.0, h0).astype(h0.dtype)
    o0, P, hT0, Ms = run(h0_loc, enter, cu_seqlens=local)
    # (selects, never 0 x NaN: a sequence's NaN stays in it)
    M = jnp.where(jnp.any(enter & leave), jnp.sum(jnp.where(_bcast(leave, Ms), Ms, 0.0), axis=0), 0.0)[None]
    N = jnp.sum(jnp.where(_bcast(leave, hT0), hT0, 0.0), axis=0)[None]
    S = jnp.where(jnp.any(enter), _enter(*_exchange(M, N, axis_name), r, _matrix_apply), 0.0)
    tmask = (jnp.arange(tl) < len_in)[None]
    o = (o0.astype(_F32) + _gdr_correction(P, S, head, tmask)).astype(o0.dtype)
    M_in = jnp.sum(jnp.where(_bcast(enter, Ms), Ms, 0.0), axis=0)  # [H, dk, dk]: the entering piece's
    hT = jnp.where(_bcast(enter, hT0), hT0 + _matrix_apply(M_in, S[0])[None], hT0)
    return o, jnp.where(_bcast(ends_here, hT), hT, 0.0)


# ------------------------------------------------ global arrays under jax.jit

_DTYPE_NAMES = ("float32", "float64", "bfloat16", "float16")


_CALLS = [0]


def _host_allgather(flat):
    """Every process's int list, through jax.distributed's key-value store (host only: this
    runs while the caller is traced, where no device computation may run). Every process
    traces the same calls in the same order, so the n-th call's keys meet."""
    from jax._src import distributed

    client = distributed.global_state.client
    n, me, procs = _CALLS[0], jax.process_index(), jax.process_count()
    _CALLS[0] += 1
    client.key_value_set(f"chunkgen_cp/{n}/{me}", ",".join(map(str, flat)))
    rows = [[int(x) for x in client.blocking_key_value_get(f"chunkgen_cp/{n}/{p}", 60_000).split(",")]
            for p in range(procs)]
    return rows


def _agree(what: str, op: str, options, tensors, seq_dims, cu) -> None:
    """Multi-controller JAX (jax.process_count() > 1): every process traces its own
    program, and processes whose calls differ would compile collectives that never meet.
    Exchange the call's descriptor between the processes when it is traced (a host
    all-gather) and raise ValueError on every process, naming the first difference.
    (cu_seqlens is compared by length: its values may be traced.) One process: shapes
    agree by construction, nothing is exchanged."""
    if jax.process_count() == 1:
        return
    import numpy as np

    given = [(n, None, -1) if t is None else (n, tuple(t.shape), cj._DTYPES.get(np.dtype(t.dtype), 99))
             for n, t in tensors]
    cu_vals = None if cu is None else list(range(cu.shape[0]))
    flat, fields = describe(op, options, given, seq_dims, cu_vals, 0)
    rows = _host_allgather(flat)
    check_descriptors(what + " (processes are ranks here)", rows, fields,
                      _DTYPE_NAMES)


def _pad_t(a, axis, pad):
    if a is None or not pad:
        return a
    widths = [(0, 0)] * a.ndim
    widths[axis] = (0, pad)
    return jnp.pad(a, widths)


def _varlen_pad(cu, h0, total):
    """A padded stream's extra tokens as one more (dummy) sequence: cu_seqlens gets the
    padded length appended, h0 a zero state."""
    cu = jnp.concatenate([jnp.asarray(cu), jnp.asarray([total], dtype=jnp.asarray(cu).dtype)])
    if h0 is not None:
        h0 = jnp.concatenate([h0, jnp.zeros((1,) + h0.shape[1:], h0.dtype)])
    return cu, h0


def _run_sharded(mesh, body, args, specs, out_specs):
    return jax.shard_map(body, mesh=mesh, in_specs=tuple(specs), out_specs=out_specs, check_vma=False)(*args)


def _finish_state(hT, varlen: bool, nseq: Optional[int]):
    """[P, ...] per-device states -> the global final states: the last device's (one
    sequence per row), or the sum over devices of the per-sequence ones (each sequence's
    final state is nonzero on exactly one device)."""
    return hT.sum(0)[:nseq] if varlen else hT[-1]


def _shard_heads(mesh, seq_axis, batch_axis, head_axis, layout, what, op, options, gates, local):
    """The global form of an op with q, k [.., G, .., dk], v [.., H, .., dv], per-head
    gates (names `gates`, [B, T, H] / [B, H, T]), h0 and cu_seqlens, its T split over
    `seq_axis` (and batch over `batch_axis`, groups/heads over `head_axis`): pads T, runs
    local(q, k, v, *gates, h0, axis_name=, cu_seqlens=) under shard_map, returns (o, hT)."""
    from jax.sharding import PartitionSpec as P

    head = bool(layout_flag(layout))
    tax = 2 if head else 1
    if head:
        seq, st = P(batch_axis, head_axis, seq_axis, None), P(batch_axis, head_axis, seq_axis)
    else:
        seq, st = P(batch_axis, seq_axis, head_axis, None), P(batch_axis, seq_axis, head_axis)
    n_dev = mesh.shape[seq_axis]
    ng = len(gates)

    def f(q, k, v, *gh, cu_seqlens=None):
        gs, h0 = list(gh[:ng]), gh[ng] if len(gh) > ng else None
        _agree(what, op, dict(options, **{"layout (0 token, 1 head)": int(head), "devices": n_dev}),
               [("q", q), ("k", k), ("v", v)] + list(zip(gates, gs)) + [("h0", h0)], {}, cu_seqlens)
        t = q.shape[tax]
        tl = -(-t // n_dev)
        pad = tl * n_dev - t
        q, k, v = (_pad_t(a, tax, pad) for a in (q, k, v))
        gs = [_pad_t(a, tax, pad) for a in gs]
        varlen = cu_seqlens is not None
        nseq = None
        if varlen:
            nseq = cu_seqlens.shape[0] - 1
            if pad:
                cu_seqlens, h0 = _varlen_pad(cu_seqlens, h0, tl * n_dev)
        rows = None if varlen else batch_axis
        state = P(seq_axis, rows, head_axis, None, None)
        args, specs = [q, k, v] + gs, [seq, seq, seq] + [st] * ng
        if h0 is not None:  # one copy per device along seq_axis: its gradient sums over them
            args.append(jnp.broadcast_to(h0[None], (n_dev,) + h0.shape))
            specs.append(state)
        if varlen:
            args.append(jnp.asarray(cu_seqlens))
            specs.append(P())

        def body(*a):
            rest = list(a[3 + ng:])
            h = rest.pop(0)[0] if h0 is not None else None
            cu = rest.pop(0) if varlen else None
            o, hT = local(*a[:3 + ng], h, axis_name=seq_axis, cu_seqlens=cu)
            return o, hT[None]

        o, hT = _run_sharded(mesh, body, args, specs, (seq, state))
        if pad:
            o = jax.lax.slice_in_dim(o, 0, t, axis=tax)
        return o, _finish_state(hT, varlen, nseq)

    return f


def shard_ssd(mesh, seq_axis: str, batch_axis=None, head_axis=None, *, layout: str = "head"):
    """ssd over global arrays whose T is split over mesh axis `seq_axis` (and batch over
    `batch_axis`, groups/heads over `head_axis`, either may be None). Returns
    f(q, k, v, log_alpha, h0=None, cu_seqlens=None) -> (o, hT), exact, for use under
    jax.jit. T need not divide by the axis size: the stream is padded at its end to
    ceil(T / P) tokens per device (docs/context_parallel.md)."""
    run = _shard_heads(mesh, seq_axis, batch_axis, head_axis, layout, "chunkgen.jax_cp.shard_ssd", "ssd", {},
                       ("log_alpha",), functools.partial(ssd, layout=layout))

    def f(q, k, v, log_alpha, h0=None, cu_seqlens=None):
        return run(q, k, v, log_alpha, h0, cu_seqlens=cu_seqlens)

    return f


def shard_gdr(mesh, seq_axis: str, batch_axis=None, head_axis=None, *, scale=None, use_qk_l2norm: bool = False,
              layout: str = "token"):
    """gdr over global arrays whose T is split over mesh axis `seq_axis` (and batch over
    `batch_axis`, groups/heads over `head_axis`, either may be None). Returns
    f(q, k, v, g, beta, h0=None, cu_seqlens=None) -> (o, hT), exact, for use under
    jax.jit; T is padded as in shard_ssd (a padded token has g = beta = 0: the identity)."""
    opts = {"use_qk_l2norm": int(bool(use_qk_l2norm)), "scale (float64 bits)": _real_bits(scale)}
    run = _shard_heads(mesh, seq_axis, batch_axis, head_axis, layout, "chunkgen.jax_cp.shard_gdr", "gdr", opts,
                       ("g", "beta"), functools.partial(gdr, scale=scale, use_qk_l2norm=use_qk_l2norm, layout=layout))

    def f(q, k, v, g, beta, h0=None, cu_seqlens=None):
        return run(q, k, v, g, beta, h0, cu_seqlens=cu_seqlens)

    return f


def shard_sscan(mesh, seq_axis: str, batch_axis=None, *, delta_softplus: bool = False):
    """sscan over global arrays whose L is split over mesh axis `seq_axis` (batch over
    `batch_axis` or None; A, D, delta_bias replicated). Returns
    f(x, delta, A, B, C, D=None, z=None, delta_bias=None, h0=None, cu_seqlens=None)
    -> (y, hT), exact, for use under jax.jit; L is padded as in shard_ssd."""
    from jax.sharding import PartitionSpec as P

    n_dev = mesh.shape[seq_axis]
    b3, b4 = P(batch_axis, seq_axis, None), P(batch_axis, seq_axis, None, None)
    names = ("x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0")
    params = ("A", "D", "delta_bias")

    def f(x, delta, A, B, C, D=None, z=None, delta_bias=None, h0=None, cu_seqlens=None):
        given = dict(x=x, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias, h0=h0)
        _agree("chunkgen.jax_cp.shard_sscan", "sscan", {"delta_softplus": int(bool(delta_softplus)),
                                                         "devices": n_dev}, list(given.items()), {}, cu_seqlens)
        length = x.shape[1]
        tl = -(-length // n_dev)
        pad = tl * n_dev - length
        varlen = cu_seqlens is not None
        nseq = None
        for n in ("x", "delta", "B", "C", "z"):
            given[n] = _pad_t(given[n], 1, pad)
        if varlen:
            nseq = cu_seqlens.shape[0] - 1
            if pad:
                cu_seqlens, given["h0"] = _varlen_pad(cu_seqlens, given["h0"], tl * n_dev)
        rows = None if varlen else batch_axis
        state = P(seq_axis, rows, None, None)
        present = [n for n in names if given[n] is not None]
        args, specs = [], []
        for n in present:
            a = given[n]
            if n in params:  # replicated, their gradients summed over the devices by shard_map
                specs.append(P())
            elif n == "h0":
                a = jnp.broadcast_to(a[None], (n_dev,) + a.shape)
                specs.append(state)
            else:
                specs.append(b4 if a.ndim == 4 else b3)
            args.append(a)
        if varlen:
            args.append(jnp.asarray(cu_seqlens))
            specs.append(P())

        def body(*a):
            kw = dict(zip(present, a))
            if "h0" in kw:
                kw["h0"] = kw["h0"][0]
            cu = a[len(present)] if varlen else None
            y, hT = sscan(**kw, axis_name=seq_axis, delta_softplus=delta_softplus, cu_seqlens=cu,
                          valid_len=length if pad else None)
            return y, hT[None]

        y, hT = _run_sharded(mesh, body, args, specs, (b3, state))
        if pad:
            y = y[:, :length]
        return y, _finish_state(hT, varlen, nseq)

    return f
