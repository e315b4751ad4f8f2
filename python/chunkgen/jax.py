"""JAX ops: chunkgen.jax.ssd, chunkgen.jax.sscan, chunkgen.jax.gdr and chunkgen.jax.lru
through the XLA FFI.

    o, hT = chunkgen.jax.ssd(q, k, v, log_alpha, h0=None, *, layout="head")
    y, hT = chunkgen.jax.sscan(x, delta, A, B, C, D=None, z=None, delta_bias=None, h0=None,
                               *, delta_softplus=False)
    y, hT = chunkgen.jax.lru(a, b, x, h0=None, *, layout="token")   # docs/lru.md

- Each op is one XLA custom call (the FFI handlers of chunkgen._jax_ffi, python/src/
  cg_jax_ffi.cc, registered as "chunkgen" for the CPU platform and, when JAX has a CUDA
  backend, for CUDA: the generated kernels on XLA's stream with an XLA scratch workspace).
- Both are jax.custom_vjp functions whose backward is chunkgen's backward call; the
  residuals are the inputs (no per-token states are saved).
- float32 runs chunkgen's CPU path (CUDA kernels on a GPU); float64 (jax_enable_x64) runs
  the float64 `ref` backend, so jax.test_util.check_grads can check the VJP.
- jnp.bfloat16 / jnp.float16 q, k, v (SSD) or x, delta, B, C, z (selective scan) are taken
  as they are (no cast; each tensor's dtype goes to the library, which checks the mix:
  docs/dtypes.md): o / y come back in v's / x's dtype (o follows v, y follows x), the
  states hT in float32, every gradient in its input's dtype; log_alpha, A, D, delta_bias
  and h0 stay float32. Auto dispatch runs them where the library takes them.
- Shapes are checked when the call is traced, by the library itself (cg_validate on
  descriptors whose data pointers are never read): a bad shape, or one whose size
  overflows 64 bits, raises ValueError with chunkgen's message before anything is
  lowered. A failing call at run time raises an XLA error carrying cg_errmsg.
- Gradients are first order, reverse mode (jax.grad, jax.vjp, jax.jacrev): chunkgen's
  backward is not differentiable, so jax.grad or jax.jacrev of a gradient raises
  NotImplementedError saying so; forward mode (jax.jvp, jax.jacfwd, jax.hessian) is
  refused by JAX itself (TypeError: "can't apply forward-mode autodiff (jvp) to a
  custom_vjp function").
- vmap: a batching rule (jax.custom_batching.custom_vmap) folds the mapped axis into the
  batch axis B -- one custom call for the whole batch, never a loop. The selective scan's
  unbatched parameters (A, D, delta_bias) and its backward (whose dA, dD, ddelta_bias sum
  over B) cannot fold: those cases run one call per mapped element (lax.map).
- Sharding: the SSD and gated-delta-rule calls have a custom_partitioning rule
  (jax_partition.py, from the op table): under plain jit, inputs sharded over batch and/or
  heads (whole groups) run per device without an all-gather. shard_ssd / shard_sscan do it by shard_map (the selective scan's only way).
- Threads and the cache directory: set_threads / set_cache_dir below (the handlers'
  contexts are their own, apart from chunkgen._C's); the environment variables of
  include/chunkgen.h apply as everywhere.
"""
from __future__ import annotations

import functools
import warnings
from typing import Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from . import _C
from ._ops import BF16, F16, F32, F64, I32, I64, OPS, REF, layout_flag, output_dtypes, output_shape, scale_factor, validate
from .jax_partition import partitioned

try:
    from . import _jax_ffi
except ImportError as e:  # pragma: no cover - depends on how the package was built
    raise ImportError("chunkgen.jax: this chunkgen was built without jaxlib's FFI headers (the jaxlib of the "
                      "building Python): reinstall with a plain `pip install .` (it fetches jaxlib for the build) or, "
                      "with jax installed, `pip install --no-build-isolation .`; not with CHUNKGEN_NO_JAX=1") from e

__all__ = ["ssd", "sscan", "lru", "shard_ssd", "shard_sscan", "set_threads", "set_cache_dir"]

TARGET = "chunkgen"
_targets = _jax_ffi.targets()
jax.ffi.register_ffi_target(TARGET, _targets["cpu"], platform="cpu")


def _register_cuda(register=jax.ffi.register_ffi_target) -> Optional[str]:
    """Register the CUDA handler (jaxlib defers it to a CUDA plugin when there is one;
    without one it is accepted and never used). A failure is never swallowed: a
    RuntimeWarning names its cause (CPU calls are unaffected; a call on a GPU then fails
    in XLA, which names the missing target). Returns the cause, None on success."""
    try:
        register(TARGET, _targets["cuda"], platform="CUDA")
        return None
    except Exception as e:  # noqa: BLE001 - every cause is reported, none swallowed
        cause = f"{type(e).__name__}: {e}"
        warnings.warn(f"chunkgen.jax: the CUDA FFI handler could not be registered ({cause}); calls on a GPU "
                      f"will fail, calls on the CPU are unaffected", RuntimeWarning, stacklevel=2)
        return cause


CUDA_REGISTRATION_ERROR = _register_cuda()  # None, or why the CUDA handler is not registered

_AUTO = 0
# numpy dtypes (jnp.bfloat16 is ml_dtypes.bfloat16) -> cg_dtype, and back
_DTYPES = {np.dtype(np.float32): F32, np.dtype(np.float64): F64, np.dtype(jnp.bfloat16): BF16,
           np.dtype(np.float16): F16}
_NP = {c: dt for dt, c in _DTYPES.items()}
# Tensors without the leading batch axis B (the op table's extents; A, D, delta_bias and
# their gradients).
_UNBATCHED = frozenset(n for info in OPS.values() for n, e in info.extents.items() if e[0] != "B")
CU = "cu_seqlens"  # the op table's `varlen` row: an operand after the inputs (docs/varlen.md)
_INDEX = {np.dtype(np.int32): I32, np.dtype(np.int64): I64}


def set_threads(threads: int) -> None:
    """CPU threads of every chunkgen.jax call (0 = all online cores)."""
    _jax_ffi.set_threads(int(threads))


def set_cache_dir(path: Optional[str]) -> None:
    """Cache directory of every chunkgen.jax call (None: the library's default)."""
    _jax_ffi.set_cache_dir(None if path is None else str(path))


# ------------------------------------------------------------ the custom call

def _dtypes_of(op: str, given: dict) -> dict:
    """The cg_dtype of each given input (name -> code); whether their mix is allowed is
    the library's to say (validate)."""
    codes = {}
    for n in OPS[op].inputs:
        a = given.get(n)
        if a is None:
            continue
        dt = np.dtype(a.dtype)
        if dt not in _DTYPES:
            raise ValueError(f"{n}: dtype {dt} but expected float32 or float64, or bfloat16 / float16 (docs/dtypes.md)")
        if a.ndim > 4:
            raise ValueError(f"{n}: {a.ndim} dimensions but expected at most 4")
        codes[n] = _DTYPES[dt]
    return codes


def _raw(op: str, names: Tuple[str, ...], want: Tuple[str, ...], flag: int, reals: Tuple[float, ...], *arrays):
    """The custom call itself on arrays (the present inputs `names`, in field order);
    returns the outputs `want`, in field order. reals: the op's real arguments (OPS[op].reals
    order; () for an op without), the call's attribute "reals"."""
    info = OPS[op]
    given = dict(zip(names, arrays))
    cu = given.pop(CU, None)
    codes = _dtypes_of(op, given)
    backend = REF if F64 in codes.values() else _AUTO
    shapes = {n: (tuple(given[n].shape) if n in given else None) for n in info.inputs}
    cu_desc = nseq = None
    if cu is not None:
        if np.dtype(cu.dtype) not in _INDEX:
            raise ValueError(f"cu_seqlens: dtype {cu.dtype} but expected int32 or int64 (the sequences' offsets)")
        cu_desc = (tuple(cu.shape), _INDEX[np.dtype(cu.dtype)])
        nseq = cu.shape[0] - 1 if cu.ndim == 1 else None
    validate(op, shapes, codes, flag, backend, cu_desc, reals)  # at trace time, the library's messages
    out_dt = dict(zip(info.outputs, output_dtypes(op, [codes.get(n) for n in info.inputs])))
    present = 1 << len(info.fields) if cu is not None else 0
    for i, n in enumerate(info.fields):
        if n in given or n in want:
            present |= 1 << i
    out_types = [jax.ShapeDtypeStruct(output_shape(op, n, shapes, flag, nseq), _NP[out_dt[n]])
                 for n in info.outputs if n in want]
    call = jax.ffi.ffi_call(TARGET, out_types)
    return tuple(call(*arrays, op=np.int64(info.index), flag=np.int64(flag), present=np.int64(present),
                      backend=np.int64(backend), config="", reals=_reals_attr(op, reals)))


def _reals_attr(op: str, reals) -> np.ndarray:
    """The custom call's attribute "reals": the op's real arguments as float64, 0 (the
    library's default) for each one not given."""
    r = np.zeros(len(OPS[op].reals), np.float64)
    r[:len(reals)] = reals
    return r


@functools.lru_cache(maxsize=None)
def _batched_call(op: str, names: Tuple[str, ...], want: Tuple[str, ...], flag: int, reals: Tuple[float, ...] = ()):
    """_raw as a custom_vmap function: under vmap the mapped axis folds into B (not with
    cu_seqlens: B = 1 there; one call per mapped element then, and no partitioning rule)."""
    raw = functools.partial(_raw, op, names, want, flag, reals)
    f = custom_vmap(raw if CU in names else partitioned(op, names, want, flag, raw))
    # the outputs split back by B when every one has it (not sscan_bwd's dA, dD, ddelta_bias)
    fold = all(OPS[op].extents[n][:1] == ("B",) for n in OPS[op].outputs) and CU not in names

    @f.def_vmap
    def rule(axis_size, in_batched, *arrays):
        if not fold or any(b for n, b in zip(names, in_batched) if n in _UNBATCHED):
            # cannot fold: one call per mapped element
            full = tuple(a if b else jnp.broadcast_to(a, (axis_size,) + a.shape) for a, b in zip(arrays, in_batched))
            return jax.lax.map(lambda xs: f(*xs), full), (True,) * len(want)
        folded = []
        for n, a, b in zip(names, arrays, in_batched):
            if n not in _UNBATCHED:
                if not b:
                    a = jnp.broadcast_to(a, (axis_size,) + a.shape)
                a = a.reshape((axis_size * a.shape[1],) + a.shape[2:])
            folded.append(a)
        outs = f(*folded)
        return tuple(o.reshape((axis_size, o.shape[0] // axis_size) + o.shape[1:]) for o in outs), (True,) * len(want)

    return f


def _not_differentiable(op: str) -> str:
    public = op[:op.rindex("_")]
    return (f"chunkgen's backward is not differentiable: the gradients of chunkgen.jax.{public} cannot be "
            f"differentiated again (second-order gradients: jax.grad or jax.jacrev of a gradient); only "
            f"first-order reverse-mode gradients are supported (README, \"Second-order gradients\")")


@functools.lru_cache(maxsize=None)
def _backward_call(op: str, names: Tuple[str, ...], want: Tuple[str, ...], flag: int, reals: Tuple[float, ...] = ()):
    """_batched_call of a backward op as a jax.custom_jvp function whose derivative rule
    raises: differentiating chunkgen's gradients (a second-order gradient) says so by
    name (the rule runs only when a tangent is nonzero)."""
    f = jax.custom_jvp(_batched_call(op, names, want, flag, reals))

    @f.defjvp
    def refuse(primals, tangents):
        raise NotImplementedError(_not_differentiable(op))

    return f


def _call(op: str, given: dict, want: Tuple[str, ...], flag: int, reals: Tuple[float, ...] = ()):
    """Run op on the inputs in `given` (name -> array or None): the outputs `want` as a
    dict. A backward op is not differentiable (_backward_call). reals: the op's real
    arguments (OPS[op].reals order)."""
    info = OPS[op]
    names = tuple(n for n in info.inputs + (CU,) if given.get(n) is not None)
    want = tuple(n for n in info.outputs if n in want)
    call = _backward_call if info.grad_of else _batched_call
    outs = call(op, names, want, flag, tuple(float(r) for r in reals))(*(jnp.asarray(given[n]) for n in names))
    return dict(zip(want, outs))


# ------------------------------------------------- the ops as custom_vjp functions

def _with_vjp(fwd: str, bwd: str):
    """fwd(flag, *inputs) -> its outputs (the op table's order), a custom_vjp function whose
    backward is the op bwd. flag: the op's int flag, or (flag, reals) for an op with real
    arguments (OPS[fwd].reals, e.g. gdr's scale: a static tuple of floats). The residuals are the inputs (no per-token states); bwd's
    inputs that fwd lacks are the cotangents of fwd's outputs, in order (dout, dhT for
    o, hT); bwd computes the gradient of every given input (the table's grad_of)."""
    fi, bi = OPS[fwd], OPS[bwd]
    grad = {x: g for g, x in bi.grad_of.items()}  # input -> its gradient output
    cot = tuple(n for n in bi.inputs if n not in fi.inputs)
    assert len(cot) == len(fi.outputs), (fwd, bwd)

    ins = fi.inputs + (CU,)  # cu_seqlens (or None) last; its cotangent is None

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
    def f(flag, *xs):
        flag, reals = flag if isinstance(flag, tuple) else (flag, ())
        r = _call(fwd, dict(zip(ins, xs)), fi.outputs, flag, reals)
        return tuple(r[n] for n in fi.outputs)

    def f_fwd(flag, *xs):
        return f(flag, *xs), xs

    def f_bwd(flag, xs, cts):
        given = dict(zip(ins, xs))
        given.update(zip(cot, cts))
        flag, reals = flag if isinstance(flag, tuple) else (flag, ())
        g = _call(bwd, given, tuple(grad[n] for n in fi.inputs if given[n] is not None and n in grad), flag, reals)
        return tuple(g.get(grad.get(n)) for n in fi.inputs) + (None,)

    f.defvjp(f_fwd, f_bwd)
    return f


_ssd = _with_vjp("ssd_fwd", "ssd_bwd")
_sscan = _with_vjp("sscan_fwd", "sscan_bwd")
_gdr = _with_vjp("gdr_fwd", "gdr_bwd")
_lru = _with_vjp("lru_fwd", "lru_bwd")


# -------------------------------------------------------------------- SSD

def ssd(q, k, v, log_alpha, h0=None, *, layout: str = "head", cu_seqlens=None):
    """SSD (Mamba-2 chunked gated linear attention), differentiable in every input.

    layout="head" (default, probjax's order): q, k [B, G, T, dk]; v [B, H, T, dv];
    log_alpha [B, H, T]. layout="token": q, k [B, T, G, dk]; v [B, T, H, dv];
    log_alpha [B, T, H]. h0 [B, H, dk, dv] or None. H % G == 0.
    Returns (o [like v], hT [B, H, dk, dv]).
    cu_seqlens (int32 / int64 [N + 1], docs/varlen.md): N sequences packed along T with
    B = 1; h0 and hT are then [N, H, dk, dv] (a host call: the CPU platform)."""
    return _ssd(layout_flag(layout), q, k, v, log_alpha, h0, cu_seqlens)


# --------------------------------------------------------- selective scan

def sscan(x, delta, A, B, C, D=None, z=None, delta_bias=None, h0=None, *, delta_softplus: bool = False,
          cu_seqlens=None):
    """Selective scan (Mamba-1 S6), differentiable in every input.

    x, delta, z [B, L, D]; A [D, N]; B, C [B, L, N] or grouped [B, L, G, N];
    D, delta_bias [D]; h0 [B, D, N]. Returns (y [B, L, D], hT [B, D, N]).
    cu_seqlens (int32 / int64 [Nseq + 1]): sequences packed along L with B = 1; h0 and hT
    are then [Nseq, D, N]."""
    return _sscan(int(bool(delta_softplus)), x, delta, A, B, C, D, z, delta_bias, h0, cu_seqlens)


# ------------------------------------------------------- gated delta rule

def gdr(q, k, v, g, beta, h0=None, *, scale=None, use_qk_l2norm: bool = False, layout: str = "token",
        cu_seqlens=None):
    """The gated delta rule as fla defines it (docs/gdr.md), differentiable in every input.

    Per value head h, q/k head h // (H // G), float32 state S [dk, dv]:
    S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,  o_t = S_t^T (scale q_t);
    with use_qk_l2norm q and k are first divided by sqrt(sum x^2 + 1e-6) over dk.
    layout="token" (default, fla's order): q, k [B, T, G, dk]; v [B, T, H, dv]; g, beta
    [B, T, H] (G is fla's H, H fla's HV). layout="head": q, k [B, G, T, dk]; v [B, H, T, dv];
    g, beta [B, H, T]. h0 [B, H, dk, dv] or None; scale None: dk^-1/2 (a Python float, the
    call's attribute; the library checks it). Returns (o [like v], hT [B, H, dk, dv]).
    cu_seqlens (int32 / int64 [N + 1]): N sequences packed along T with B = 1; h0 and hT
    are then [N, H, dk, dv]."""
    flag = layout_flag(layout) | (2 if use_qk_l2norm else 0)
    return _gdr((flag, (0.0 if scale is None else float(scale),)), q, k, v, g, beta, h0, cu_seqlens)


def lru(a, b, x, h0=None, *, layout: str = "token", cu_seqlens=None):
    """The diagonal linear recurrence of RG-LRU / Griffin (docs/lru.md), differentiable in
    a, b, x and h0: per (batch, channel d), h_t = a_t h_{t-1} + b_t x_t, y_t = h_t (float32
    state). layout="token" (default): a, b, x [B, L, D]; layout="head": [B, D, L]. h0 [B, D]
    or None. Returns (y [like x], hT [B, D] float32). cu_seqlens (int32 / int64 [N + 1]):
    N sequences packed along L with B = 1; h0 and hT are then [N, D]."""
    return _lru(layout_flag(layout), a, b, x, h0, cu_seqlens)


# --------------------------------------------------------------- sharding

def shard_ssd(mesh, batch_axis=None, head_axis=None, *, layout: str = "head"):
    """ssd over arrays sharded on `mesh`: batch over mesh axis `batch_axis`, heads (G and H,
    so G must divide by that axis' size) over `head_axis` (either may be None). Each
    device runs ssd on its own shard under shard_map: no all-gather of q, k, v. Returns a
    function with ssd's arguments; use it under jax.jit."""
    from jax.sharding import PartitionSpec as P

    if layout_flag(layout):  # head-major
        seq, st = P(batch_axis, head_axis, None, None), P(batch_axis, head_axis, None)
    else:
        seq, st = P(batch_axis, None, head_axis, None), P(batch_axis, None, head_axis)
    state = P(batch_axis, head_axis, None, None)

    def f(q, k, v, log_alpha, h0=None):
        specs = (seq, seq, seq, st) + ((state,) if h0 is not None else ())
        body = (lambda *a: ssd(*a, layout=layout))
        return jax.shard_map(body, mesh=mesh, in_specs=specs, out_specs=(seq, state), check_vma=False)(
            *((q, k, v, log_alpha) + ((h0,) if h0 is not None else ())))

    return f


def shard_sscan(mesh, batch_axis=None, *, delta_softplus: bool = False):
    """sscan over arrays sharded over batch on mesh axis `batch_axis` (parameters A, D,
    delta_bias replicated; their gradients are summed over the shards by shard_map's
    transpose). Each device runs sscan on its own shard: no all-gather."""
    from jax.sharding import PartitionSpec as P

    b3, b4 = P(batch_axis, None, None), P(batch_axis, None, None, None)

    def f(x, delta, A, B, C, D=None, z=None, delta_bias=None, h0=None):
        args = dict(x=x, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias, h0=h0)
        names = [n for n in OPS["sscan_fwd"].inputs if args[n] is not None]
        spec = {n: (P() if n in _UNBATCHED else (b4 if args[n].ndim == 4 else b3)) for n in names}

        def body(*a):
            return sscan(**dict(zip(names, a)), delta_softplus=delta_softplus)

        return jax.shard_map(body, mesh=mesh, in_specs=tuple(spec[n] for n in names), out_specs=(b3, b3),
                             check_vma=False)(
            *(args[n] for n in names))

    return f


# ------------------------------------------------------------ decode steps (issue #36)

def _step(op: str, given: dict, flag: int):
    """One decode-step call: the present inputs (name -> array) in field order as operands;
    the results, in field order, are the in-place inputs' new values (each aliased to its
    operand by input_output_aliases: XLA writes into the operand's buffer when it is
    donated, else copies it once) and the outputs. Returns (outputs..., new in-place
    inputs...)."""
    info = OPS[op]
    codes = {}
    for n, a in given.items():
        dt = np.dtype(a.dtype)
        if dt not in _DTYPES and dt not in _INDEX:
            raise ValueError(f"{n}: dtype {dt} but expected float32, float64, bfloat16 / float16, or int32 / int64 "
                             f"(slot indices)")
        codes[n] = _INDEX.get(dt, _DTYPES.get(dt))
    backend = REF if F64 in codes.values() else _AUTO
    shapes = {n: (tuple(given[n].shape) if n in given else None) for n in info.inputs}
    validate(op, shapes, codes, flag, backend)  # shapes and dtypes at trace time; the indices' values: the call's
    out_dt = dict(zip(info.outputs, output_dtypes(op, [codes.get(n) for n in info.inputs])))
    names = [n for n in info.fields if n in given]
    present, results, aliases = 0, [], {}
    for i, n in enumerate(info.fields):
        if n in given or n in info.outputs:
            present |= 1 << i
        if n in info.inplace:
            aliases[names.index(n)] = len(results)
            results.append(jax.ShapeDtypeStruct(given[n].shape, given[n].dtype))
        elif n in info.outputs:
            results.append(jax.ShapeDtypeStruct(output_shape(op, n, shapes, flag), _NP[out_dt[n]]))
    call = jax.ffi.ffi_call(TARGET, results, input_output_aliases=aliases)
    outs = call(*[given[n] for n in names], op=np.int64(info.index), flag=np.int64(flag), present=np.int64(present),
                backend=np.int64(backend), config="", reals=_reals_attr(op, ()))
    by_name = dict(zip([n for n in info.fields if n in info.inplace or n in info.outputs], outs))
    return tuple(by_name[n] for n in info.outputs) + tuple(by_name[n] for n in info.inplace)


def ssd_step(q, k, v, log_alpha, cache, state_indices, dst_indices=None):
    """One decode step of SSD (T tokens per entry, usually 1) from a state cache:
    returns (o [B, T, H, dv], new cache). q, k [B, T, G, dk]; v [B, T, H, dv]; log_alpha
    [B, T, H]; cache [S, H, dk, dv]; state_indices int32/int64 [B] (-1: padding, o zero, no
    slot touched); dst_indices [B, T] or None (the slot each token's state goes to, -1
    none; else the last state goes back to state_indices[b]). The new cache aliases the
    old one (input_output_aliases): donate it (jax.jit(..., donate_argnums)) and the
    update is in place. Not differentiable."""
    given = dict(q=q, k=k, v=v, log_alpha=log_alpha, cache=cache, state_indices=state_indices)
    if dst_indices is not None:
        given["dst_indices"] = dst_indices
    return _step("ssd_step", given, 0)


def sscan_step(x, delta, A, B, C, cache, state_indices, D=None, z=None, delta_bias=None, dst_indices=None, *,
               delta_softplus: bool = False):
    """One decode step of the selective scan (mamba's selective_state_update) from a state
    cache: returns (y [B, L, D], new cache). x, delta, z [B, L, D]; A [D, N]; B, C [B, L, N]
    or [B, L, G, N]; D, delta_bias [D]; cache [S, D, N]; indices as in ssd_step."""
    given = dict(x=x, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias, cache=cache,
                 state_indices=state_indices, dst_indices=dst_indices)
    return _step("sscan_step", {n: a for n, a in given.items() if a is not None}, int(bool(delta_softplus)))


def gdr_step(q, k, v, g, beta, cache, state_indices, dst_indices=None, *, scale=None, use_qk_l2norm: bool = False):
    """One decode step of the gated delta rule from a state cache: returns (o [B, T, H, dv],
    new cache). q, k [B, T, G, dk]; v [B, T, H, dv]; g, beta [B, T, H]; cache [S, H, dk, dv];
    indices as in ssd_step; scale (None: dk^-1/2) and use_qk_l2norm as in gdr."""
    mul = scale_factor(scale, q.shape[-1])
    given = dict(q=q, k=k, v=v, g=g, beta=beta, cache=cache, state_indices=state_indices)
    if dst_indices is not None:
        given["dst_indices"] = dst_indices
    o, new = _step("gdr_step", given, int(bool(use_qk_l2norm)))
    return (o if mul == 1 else (o * mul).astype(o.dtype)), new
