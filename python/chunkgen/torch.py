"""PyTorch ops: chunkgen.torch.ssd, chunkgen.torch.sscan, chunkgen.torch.gdr and
chunkgen.torch.lru (docs/lru.md), differentiable in every input.

Registered with torch.library.custom_op as chunkgen::ssd_fwd, chunkgen::ssd_bwd,
chunkgen::sscan_fwd, chunkgen::sscan_bwd, chunkgen::gdr_fwd, chunkgen::gdr_bwd,
chunkgen::lru_fwd and chunkgen::lru_bwd, each
with a fake (meta) implementation and
the forward ops with autograd formulas (the backward ops), so torch.compile(fullgraph=
True) traces them without a graph break and torch.library.opcheck passes.

- CPU tensors run on chunkgen's CPU path; float64 tensors on the float64 `ref` backend.
- torch.bfloat16 / torch.float16 q, k, v (SSD) or x, delta, B, C, z (selective scan) are
  passed as they are (each tensor's own dtype; the library checks the mix, docs/dtypes.md):
  o / y come back in v's / x's dtype (o follows v, y follows x), hT in float32, every
  gradient in its input's dtype; log_alpha, A, D, delta_bias, h0 stay float32 (math and
  accumulation are float32).
- CUDA tensors run on the generated CUDA kernels (backend auto: device pointers) on
  torch.cuda.current_stream(); float64 CUDA tensors run on `ref` on host copies.
- Tensors are passed with their strides; a copy is made only where the innermost stride
  is not 1 or every stride is zero (see chunkgen._numpy).
- On CUDA the kernels' workspace comes from PyTorch's caching allocator: the binding asks
  cg_workspace_size and passes a uint8 tensor of that size as cg_exec.workspace.
- Eager calls on plain tensors with no tracing or dispatch mode skip the dispatcher (its
  Python overhead is ~100 us per call): without gradients they run the op's implementation
  directly, with gradients through an autograd.Function with the registered op's backward
  formula. Everything else (torch.compile, fake tensors, modes) takes the custom op.
- One C crossing per call (chunkgen._C.call): the tensors' pointers, dtypes, shapes and
  strides are read in C, the checks and the output shapes come from the op table.
- Grouped q/k (and B/C) gradients are summed over each group's heads by the C backward.
- Arguments are checked by the library (cg_validate) before any output or copy is made:
  a bad shape raises its message, never a huge allocation.
- Meta tensors (eager or under FakeTensorMode) give meta outputs of the right shapes and
  dtypes, the call checked by the library as when traced; nothing runs.
- Gradients are first order: chunkgen's backward is not differentiable, so a backward
  through gradients taken with create_graph=True (or torch.func.hessian, a grad of a
  grad) raises RuntimeError saying so, never a silent None or zero.
- torch.func: grad, vjp, jacrev and torch.vmap work (vmap folds the mapped axis into the
  batch: one call; with cu_seqlens, or a mapped A / D / delta_bias, or the selective
  scan's backward, one call per mapped element). Forward-mode AD (torch.func.jvp,
  jacfwd, hessian, torch.autograd.forward_ad) raises RuntimeError naming it.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.autograd.forward_ad as _fwad
from torch import Tensor

from . import _C
from ._ops import I32, I64, OPS, layout_flag, output_shapes, scale_factor, validate

__all__ = ["ssd", "sscan", "gdr", "ssd_step", "sscan_step", "gdr_step", "lru"]

_AUTO = 0
_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)  # cg_dtype order
_C.set_torch_dtypes(*_DTYPES)
_C.set_torch_index_dtypes(torch.int32, torch.int64)  # cu_seqlens


def _run(op: str, ins: tuple, flag: int, cu: Optional[Tensor] = None, reals=None) -> Tuple[Optional[Tensor], ...]:
    """Run op on its inputs (OPS[op].inputs order); the outputs in the op's order, None
    for the gradient of an absent input. The checks, the copies where the C API cannot
    take a tensor's strides, the output shapes and the call are in one C crossing.
    cu: cu_seqlens (int32/int64 [N + 1]) or None (docs/varlen.md). reals: the op's real
    arguments (OPS[op].reals order, e.g. gdr's scale; None: the defaults)."""
    first = ins[0]
    index = OPS[op].index
    if first is not None and not first.is_cuda:
        if first.is_meta:  # eager meta tensors: the outputs' shapes and dtypes, checked (_fake)
            return _fake(op, ins, flag, cu, reals)
        return _C.call(index, ins, -1, flag, _AUTO, None, False, first.new_empty, _DTYPES, None, None, cu, reals)
    _C.check_tensors(index, ins)  # (raises for a missing first input)
    dev = first.device
    if first.dtype == torch.float64:  # the float64 reference runs on the host
        outs = _run(op, tuple(t.cpu() if t is not None else None for t in ins), flag,
                    cu.cpu() if cu is not None else None, reals)
        return tuple(t.to(dev) if t is not None else None for t in outs)
    with torch.cuda.device(dev):
        stream = torch.cuda.current_stream(dev).cuda_stream
        # the kernels' scratch from PyTorch's caching allocator (stream-ordered reuse)
        return _C.call(index, ins, -1, flag, _AUTO, None, False, first.new_empty, _DTYPES, stream,
                       lambda n: torch.empty(n, dtype=torch.uint8, device=dev), cu, reals)


def _op_impl(op: str, ins: tuple, flag: int, cu: Optional[Tensor] = None, reals=None) -> Tuple[Tensor, ...]:
    """The custom op's implementation: a custom op returns tensors only, so the gradient
    of an absent input is an empty tensor."""
    outs = _run(op, ins, flag, cu, reals)
    return tuple([t if t is not None else ins[0].new_empty(0) for t in outs])


def _cu_facts(cu: Optional[Tensor]):
    """cu_seqlens' number of sequences (a symbolic size when traced) and (shape, cg_dtype)
    for the traced validation; (None, None) without it."""
    if cu is None:
        return None, None
    if cu.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"cu_seqlens: dtype {cu.dtype} but expected int32 or int64 (the sequences' offsets)")
    nseq = cu.shape[0] - 1 if cu.dim() == 1 else None
    return nseq, (tuple(cu.shape), I64 if cu.dtype == torch.int64 else I32)


def _fake(op: str, ins: tuple, flag: int, cu: Optional[Tensor] = None, reals=None) -> Tuple[Tensor, ...]:
    """The outputs' shapes (the op table's) and dtypes (the binding's rule, as _run makes
    them); with concrete sizes the library validates the call, so a bad shape or dtype
    mix raises its message when traced, as eagerly. With cu_seqlens the states have its
    N sequences (the offsets' values are checked by the call, not when traced)."""
    info = OPS[op]
    out_dt = _C.check_tensors(info.index, ins)
    first = ins[0]
    in_shapes = [t.shape if t is not None else None for t in ins]
    nseq, cu_desc = _cu_facts(cu)
    concrete = [s for s in in_shapes if s is not None] + ([cu.shape] if cu is not None else [])
    if all(type(d) is int for s in concrete for d in s):  # checked before any output is made
        given = {n: tuple(s) for n, s in zip(info.inputs, in_shapes) if s is not None}
        validate(op, given, {n: _DTYPES.index(t.dtype) for n, t in zip(info.inputs, ins) if t is not None}, flag,
                 _AUTO, cu_desc, reals)
    shapes = output_shapes(op, in_shapes, flag, -1, nseq)
    return tuple(first.new_empty(s, dtype=_DTYPES[d]) if s is not None else first.new_empty((0,))
                 for s, d in zip(shapes, out_dt))


def _backward(bwd, saved: tuple, rest: tuple, dy: Optional[Tensor], dhT: Optional[Tensor], dy_like) -> tuple:
    """Gradients of every forward input (None for absent ones), of the flag, the real
    arguments and cu_seqlens (None), by the backward op bwd (its inputs: the forward's, dy,
    dhT, the flag and the op's real arguments (rest), cu_seqlens; its outputs: the gradients
    of the forward's inputs in their order). saved: the forward's inputs and cu_seqlens."""
    *fwd_ins, cu = saved
    if dy is None:
        dy = torch.zeros(dy_like[0], dtype=dy_like[1], device=dy_like[2])
    grads = bwd(*fwd_ins, dy, dhT, *rest, cu)
    return tuple(g if t is not None else None for g, t in zip(grads, fwd_ins)) + (None,) * (len(rest) + 1)


def _split(op: str, args: tuple):
    """A registered op's arguments: (tensors, flag, reals, cu_seqlens): its inputs in
    OPS[op].inputs order, the flag, the op's real arguments (OPS[op].reals), cu_seqlens."""
    n = len(OPS[op].inputs)
    return args[:n], args[n], args[n + 1:-1], args[-1]


def _setup_for(fwd: str):
    """The forward op's setup_context: saves its tensors and cu_seqlens, keeps the flag and
    the real arguments (ctx.rest: what the backward op takes between dhT and cu_seqlens)."""
    n = len(OPS[fwd].inputs)

    def setup(ctx, inputs, output):
        ctx.rest = tuple(inputs[n:-1])
        ctx.dy_like = (output[0].shape, output[0].dtype, output[0].device)
        ctx.save_for_backward(*inputs[:n], inputs[-1])

    return setup


def _not_differentiable(op: str) -> str:
    return (f"chunkgen's backward is not differentiable: the gradients of chunkgen.torch.{op} cannot be differentiated "
            f"again (second-order gradients: a backward through gradients taken with create_graph=True, "
            f"torch.func.hessian, jacrev of a grad); only first-order gradients are supported (README, "
            f"\"Second-order gradients\")")


def _refuse_second_order(op: str):
    """The backward of chunkgen's backward (the registered ssd_bwd / sscan_bwd ops and the
    Functions that compute the gradients): raises."""

    def backward(ctx, *grads):
        raise RuntimeError(_not_differentiable(op))

    return backward


def _make_function(fwd: str, bwd: str):
    """The eager autograd path (an autograd.Function: no dispatcher, tens of us less per
    call than the custom op); the same backward formula as the registered op's. With
    create_graph=True the gradients are made by a node whose own backward raises (a
    second differentiation reaches it through the forward's inputs and the incoming
    gradients), never a silent None or a missing term."""
    public = fwd[:-len("_fwd")]

    def direct_bwd(*args):
        ins, flag, reals, cu = _split(bwd, args)
        return _run(bwd, tuple(ins), flag, cu, reals)

    # its graph node: SsdBwdFunctionBackward (named at creation)
    Backward = type(bwd.title().replace("_", "") + "Function", (torch.autograd.Function,),
                    {"forward": staticmethod(lambda ctx, *args: direct_bwd(*args)),
                     "backward": staticmethod(_refuse_second_order(public))})

    def graph_bwd(*args):
        if torch.is_grad_enabled():  # create_graph=True: the gradients are tied to a refusing node
            return Backward.apply(*args)
        return direct_bwd(*args)

    setup = _setup_for(fwd)

    def forward(ctx, *args):  # (not setup_context: torch binds its arguments with inspect per call)
        ins, flag, reals, cu = _split(fwd, args)
        outs = _run(fwd, tuple(ins), flag, cu, reals)
        setup(ctx, args, outs)
        return outs

    def backward(ctx, dy, dhT):
        return _backward(graph_bwd, ctx.saved_tensors, ctx.rest, dy, dhT, ctx.dy_like)

    # named at creation: the graph node is <Name>Backward (e.g. SsdFwdFunctionBackward)
    name = fwd.title().replace("_", "") + "Function"
    return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                    "backward": staticmethod(backward)})


def _no_forward_ad(op: str) -> str:
    return (f"chunkgen.torch.{op}: forward-mode AD (torch.func.jvp, torch.func.jacfwd, torch.func.hessian, "
            f"torch.autograd.forward_ad) is not supported: chunkgen has no JVP formula; use reverse mode "
            f"(backward, torch.autograd.grad, torch.func.grad / vjp / jacrev; README, \"torch.func\")")


def _make_func_function(fwd_op, bwd_op, public: str):
    """The path under torch.func transforms and forward-mode AD: an autograd.Function with
    setup_context (what functorch requires) over the registered ops, whose vmap rules
    (_vmap_rule) serve torch.vmap; generate_vmap_rule lets functorch batch the Function
    through those ops. torch.func.grad / vjp / jacrev work (first order); a JVP is
    refused by name (no forward formula), and so is differentiating the gradients (the
    backward's own Function refuses, as on the eager path)."""

    def refuse_jvp(ctx, *tangents):
        raise RuntimeError(_no_forward_ad(public))

    bwd_fn = type(f"{public.title()}BwdFuncFunction", (torch.autograd.Function,), {
        "generate_vmap_rule": True,
        "forward": staticmethod(lambda *args: bwd_op(*args)),
        "setup_context": staticmethod(lambda ctx, inputs, output: None),
        "backward": staticmethod(_refuse_second_order(public)), "jvp": staticmethod(refuse_jvp)})

    def backward(ctx, dy, dhT):
        return _backward(bwd_fn.apply, ctx.saved_tensors, ctx.rest, dy, dhT, ctx.dy_like)

    return type(f"{public.title()}FwdFuncFunction", (torch.autograd.Function,), {
        "generate_vmap_rule": True,
        "forward": staticmethod(lambda *args: fwd_op(*args)),
        "setup_context": staticmethod(_setup_for(public + "_fwd")),
        "backward": staticmethod(backward), "jvp": staticmethod(refuse_jvp)})


def _path(tensors) -> str:
    """"direct": an eager call that needs neither autograd nor tracing nor a dispatch
    mode (plain tensors, none requiring grad or grad mode off, not compiling) runs the
    implementation directly; "function": the same but with gradients, through an
    autograd.Function; "func": under torch.func transforms (vmap, grad, jvp, ...) or
    forward-mode AD, through an autograd.Function functorch takes (_make_func_function);
    "op": everything else, through the registered custom op."""
    if torch.compiler.is_compiling():  # first: dynamo must not trace the mode queries
        return "op"
    if _functorch_active() or _forward_ad_active():
        return "func"
    if _dispatch_mode is None or _dispatch_mode() is not None or _function_mode():
        return "op"
    grad = torch.is_grad_enabled()
    path = "direct"
    for t in tensors:
        if t is not None:
            if type(t) not in _PLAIN:
                return "op"
            if grad and t.requires_grad:
                path = "function"
    return path


_PLAIN = (Tensor, torch.nn.Parameter)  # (a Parameter disables __torch_function__)


def _eager_direct(tensors) -> bool:
    return _path(tensors) == "direct"


try:  # without these (private) queries every call takes the registered op
    from torch.utils._python_dispatch import _get_current_dispatch_mode as _dispatch_mode
except ImportError:
    _dispatch_mode = None
_function_mode = getattr(torch._C, "_is_torch_function_mode_enabled", lambda: True)
# torch.func transforms (functorch's interpreter stack) and torch.autograd.forward_ad levels:
# the tensors there have no storage of their own, or carry tangents the C call cannot see.
# (Without these private queries every call takes the "func" path: slower, never wrong.)
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: True)
_forward_ad_active = ((lambda: _fwad._current_level >= 0) if hasattr(_fwad, "_current_level") else (lambda: True))


# ------------------------------------------------------------ torch.vmap

# Tensors without the leading batch axis B (the op table's extents: A, D, delta_bias and
# their gradients): a vmapped call cannot fold the mapped axis into B when one of them is
# mapped.
_UNBATCHED = frozenset(n for info in OPS.values() for n, e in info.extents.items() if e[0] != "B")


def _vmap_rule(op: str, opfn):
    """The torch.vmap rule of a registered op: the mapped axis folds into the batch axis
    B, one call for the whole batch (as chunkgen.jax does), when every mapped tensor has
    B and there is no cu_seqlens (B = 1 there) and the op's outputs split back by B (not
    sscan_bwd: dA, dD, ddelta_bias sum over B); otherwise one call per mapped element."""
    info = OPS[op]
    nin = len(info.inputs)
    foldable = op != "sscan_bwd"

    def rule(vinfo, in_dims, *args, **kw):
        n = vinfo.batch_size
        if len(args) == nin + 1 + len(info.reals):  # cu_seqlens, left at its default, is not passed
            args += (kw.pop("cu_seqlens", None),)
        in_dims = tuple(in_dims) + (None,) * (len(args) - len(in_dims))
        tensors, rest, dims = args[:nin], args[nin:], in_dims[:nin]
        fold = foldable and args[-1] is None and not any(
            d is not None for name, d in zip(info.inputs, dims) if name in _UNBATCHED)
        if fold:
            folded = []
            for name, t, d in zip(info.inputs, tensors, dims):
                if t is not None and name not in _UNBATCHED:
                    t = t.movedim(d, 0) if d is not None else t.expand(n, *t.shape)
                    t = t.reshape(n * t.shape[1], *t.shape[2:])
                folded.append(t)
            outs = opfn(*folded, *rest)
            return (tuple(o.reshape(n, o.shape[0] // n, *o.shape[1:]) if o.numel() else o for o in outs),
                    tuple(0 if o.numel() else None for o in outs))
        per = []
        for i in range(n):  # one call per mapped element
            pick = [t.select(d, i) if t is not None and d is not None else t for t, d in zip(args, in_dims)]
            per.append(opfn(*pick))
        return tuple(torch.stack(o) for o in zip(*per)), (0,) * len(per[0])

    return rule


def _register(fwd_op, bwd_op, public: str):
    """The registered ops' autograd formula (the backward op; its own backward refuses) and
    vmap rules; returns the eager autograd.Function and the one for torch.func."""
    fwd, bwd = public + "_fwd", public + "_bwd"
    fwd_op.register_autograd(lambda ctx, dy, dhT: _backward(bwd_op, ctx.saved_tensors, ctx.rest, dy, dhT, ctx.dy_like),
                             setup_context=_setup_for(fwd))
    bwd_op.register_autograd(_refuse_second_order(public), setup_context=lambda ctx, inputs, output: None)
    fwd_op.register_vmap(_vmap_rule(fwd, fwd_op))
    bwd_op.register_vmap(_vmap_rule(bwd, bwd_op))
    return _make_function(fwd, bwd), _make_func_function(fwd_op, bwd_op, public)


# ------------------------------------------------------------------ SSD

@torch.library.custom_op("chunkgen::ssd_fwd", mutates_args=())
def ssd_fwd(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, h0: Optional[Tensor],
            layout: str, cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """SSD forward: (o, hT)."""
    return _op_impl("ssd_fwd", (q, k, v, log_alpha, h0), layout_flag(layout), cu_seqlens)


@ssd_fwd.register_fake
def _(q, k, v, log_alpha, h0, layout, cu_seqlens=None):
    return _fake("ssd_fwd", (q, k, v, log_alpha, h0), layout_flag(layout), cu_seqlens)


@torch.library.custom_op("chunkgen::ssd_bwd", mutates_args=())
def ssd_bwd(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, h0: Optional[Tensor], dout: Tensor,
            dhT: Optional[Tensor], layout: str,
            cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """SSD backward: (dq, dk, dv, dlog_alpha, dh0); dh0 is empty when h0 is None."""
    return _op_impl("ssd_bwd", (q, k, v, log_alpha, h0, dout, dhT), layout_flag(layout), cu_seqlens)


@ssd_bwd.register_fake
def _(q, k, v, log_alpha, h0, dout, dhT, layout, cu_seqlens=None):
    return _fake("ssd_bwd", (q, k, v, log_alpha, h0, dout, dhT), layout_flag(layout), cu_seqlens)


_SsdFunction, _SsdFuncFunction = _register(ssd_fwd, ssd_bwd, "ssd")


def ssd(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, h0: Optional[Tensor] = None, *,
        layout: str = "token", cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Mamba-2 SSD, differentiable in q, k, v, log_alpha and h0.

    Per (b, h), g = h // (H // G):  S_t = exp(log_alpha_t) S_{t-1} + k_t^T v_t,  o_t = q_t S_t.
    layout "token": q, k [B, T, G, dk]; v [B, T, H, dv]; log_alpha [B, T, H].
    layout "head":  q, k [B, G, T, dk]; v [B, H, T, dv]; log_alpha [B, H, T]
    (e.g. token-major tensors given as .transpose(1, 2) views: no copy).
    h0 [B, H, dk, dv] or None. Returns (o [like v], hT [B, H, dk, dv]).
    cu_seqlens (torch.int32/int64 [N + 1], docs/varlen.md): N sequences packed along T with
    B = 1, the state reset at each start; h0 and hT are then [N, H, dk, dv]."""
    ins = (q, k, v, log_alpha, h0)
    path = _path(ins + (cu_seqlens,))
    if path == "direct":
        return _run("ssd_fwd", ins, layout_flag(layout), cu_seqlens)
    if path == "function":
        return _SsdFunction.apply(*ins, layout_flag(layout), cu_seqlens)
    if path == "func":
        layout_flag(layout)  # (a bad layout: its message)
        return _SsdFuncFunction.apply(*ins, layout, cu_seqlens)
    return ssd_fwd(*ins, layout, cu_seqlens)


# ------------------------------------------------------ selective scan

@torch.library.custom_op("chunkgen::sscan_fwd", mutates_args=())
def sscan_fwd(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor], z: Optional[Tensor],
              delta_bias: Optional[Tensor], h0: Optional[Tensor], delta_softplus: bool,
              cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Selective-scan forward: (y, hT)."""
    return _op_impl("sscan_fwd", (x, delta, A, B, C, D, z, delta_bias, h0), int(delta_softplus), cu_seqlens)


@sscan_fwd.register_fake
def _(x, delta, A, B, C, D, z, delta_bias, h0, delta_softplus, cu_seqlens=None):
    return _fake("sscan_fwd", (x, delta, A, B, C, D, z, delta_bias, h0), int(delta_softplus), cu_seqlens)


@torch.library.custom_op("chunkgen::sscan_bwd", mutates_args=())
def sscan_bwd(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor], z: Optional[Tensor],
              delta_bias: Optional[Tensor], h0: Optional[Tensor], dy: Tensor, dhT: Optional[Tensor],
              delta_softplus: bool, cu_seqlens: Optional[Tensor] = None
              ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Selective-scan backward: (dx, ddelta, dA, dB, dC, dD, dz, ddelta_bias, dh0); the
    last four are empty when their input is None."""
    return _op_impl("sscan_bwd", (x, delta, A, B, C, D, z, delta_bias, h0, dy, dhT), int(delta_softplus), cu_seqlens)


@sscan_bwd.register_fake
def _(x, delta, A, B, C, D, z, delta_bias, h0, dy, dhT, delta_softplus, cu_seqlens=None):
    return _fake("sscan_bwd", (x, delta, A, B, C, D, z, delta_bias, h0, dy, dhT), int(delta_softplus), cu_seqlens)


_SscanFunction, _SscanFuncFunction = _register(sscan_fwd, sscan_bwd, "sscan")


def sscan(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor] = None,
          z: Optional[Tensor] = None, delta_bias: Optional[Tensor] = None, h0: Optional[Tensor] = None, *,
          delta_softplus: bool = False, cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Mamba-1 selective scan, differentiable in every tensor.

    dt = delta (+ delta_bias), softplus(dt) if delta_softplus;
    h_t[d,n] = exp(dt_t[d] A[d,n]) h_{t-1}[d,n] + dt_t[d] B_t[n] x_t[d];
    y_t[d] = sum_n C_t[n] h_t[d,n] + D[d] x_t[d], times silu(z_t[d]) if z is given.
    x, delta, z [B, L, D]; A [D, N]; B, C [B, L, N] or [B, L, G, N]; D, delta_bias [D];
    h0 [B, D, N]. Returns (y [B, L, D], hT [B, D, N]).
    cu_seqlens (torch.int32/int64 [Nseq + 1]): sequences packed along L with B = 1; h0 and
    hT are then [Nseq, D, N]; dA, dD, ddelta_bias are summed over the sequences."""
    ins = (x, delta, A, B, C, D, z, delta_bias, h0)
    path = _path(ins + (cu_seqlens,))
    if path == "direct":
        return _run("sscan_fwd", ins, int(bool(delta_softplus)), cu_seqlens)
    if path == "function":
        return _SscanFunction.apply(*ins, int(bool(delta_softplus)), cu_seqlens)
    if path == "func":
        return _SscanFuncFunction.apply(*ins, bool(delta_softplus), cu_seqlens)
    return sscan_fwd(*ins, bool(delta_softplus), cu_seqlens)


# ------------------------------------------------------ gated delta rule

@torch.library.custom_op("chunkgen::gdr_fwd", mutates_args=())
def gdr_fwd(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, h0: Optional[Tensor], flag: int,
            scale: float, cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Gated-delta-rule forward: (o, hT). flag: bit 0 head-major, bit 1 use_qk_l2norm;
    scale: the op's real argument (0: dk^-1/2)."""
    return _op_impl("gdr_fwd", (q, k, v, g, beta, h0), flag, cu_seqlens, (scale,))


@gdr_fwd.register_fake
def _(q, k, v, g, beta, h0, flag, scale, cu_seqlens=None):
    return _fake("gdr_fwd", (q, k, v, g, beta, h0), flag, cu_seqlens, (scale,))


@torch.library.custom_op("chunkgen::gdr_bwd", mutates_args=())
def gdr_bwd(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, h0: Optional[Tensor], dout: Tensor,
            dhT: Optional[Tensor], flag: int, scale: float,
            cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gated-delta-rule backward: (dq, dk, dv, dg, dbeta, dh0); dh0 is empty when h0 is None."""
    return _op_impl("gdr_bwd", (q, k, v, g, beta, h0, dout, dhT), flag, cu_seqlens, (scale,))


@gdr_bwd.register_fake
def _(q, k, v, g, beta, h0, dout, dhT, flag, scale, cu_seqlens=None):
    return _fake("gdr_bwd", (q, k, v, g, beta, h0, dout, dhT), flag, cu_seqlens, (scale,))


_GdrFunction, _GdrFuncFunction = _register(gdr_fwd, gdr_bwd, "gdr")


def gdr(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, h0: Optional[Tensor] = None, *,
        scale: Optional[float] = None, use_qk_l2norm: bool = False, layout: str = "token",
        cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """The gated delta rule as fla defines it (chunk_gated_delta_rule; docs/gdr.md),
    differentiable in q, k, v, g, beta and h0.

    Per value head h, q/k head h // (H // G), float32 state S [dk, dv]:
    S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,  o_t = S_t^T (scale q_t);
    with use_qk_l2norm q and k are first divided by sqrt(sum x^2 + 1e-6) over dk.
    layout "token": q, k [B, T, G, dk]; v [B, T, H, dv]; g, beta [B, T, H] (fla's order:
    G is fla's H, H is fla's HV). layout "head": q, k [B, G, T, dk]; v [B, H, T, dv];
    g, beta [B, H, T]. h0 [B, H, dk, dv] float32 or None. scale: None is dk^-1/2.
    Returns (o [like v], hT [B, H, dk, dv] float32). cu_seqlens (int32/int64 [N + 1]):
    N sequences packed along T with B = 1; h0 and hT are then [N, H, dk, dv].
    The scale goes to the library (the op's real argument), which checks it."""
    flag = layout_flag(layout) | (2 if use_qk_l2norm else 0)
    scale = 0.0 if scale is None else float(scale)  # 0: the library's dk^-1/2
    ins = (q, k, v, g, beta, h0)
    path = _path(ins + (cu_seqlens,))
    if path == "direct":
        return _run("gdr_fwd", ins, flag, cu_seqlens, (scale,))
    if path == "function":
        return _GdrFunction.apply(*ins, flag, scale, cu_seqlens)
    if path == "func":
        return _GdrFuncFunction.apply(*ins, flag, scale, cu_seqlens)
    return gdr_fwd(*ins, flag, scale, cu_seqlens)


# ------------------------------------------------------ LRU (diagonal linear recurrence)

@torch.library.custom_op("chunkgen::lru_fwd", mutates_args=())
def lru_fwd(a: Tensor, b: Tensor, x: Tensor, h0: Optional[Tensor], flag: int,
            cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """LRU forward: (y, hT). flag: bit 0 head-major."""
    return _op_impl("lru_fwd", (a, b, x, h0), flag, cu_seqlens)


@lru_fwd.register_fake
def _(a, b, x, h0, flag, cu_seqlens=None):
    return _fake("lru_fwd", (a, b, x, h0), flag, cu_seqlens)


@torch.library.custom_op("chunkgen::lru_bwd", mutates_args=())
def lru_bwd(a: Tensor, b: Tensor, x: Tensor, h0: Optional[Tensor], dy: Tensor, dhT: Optional[Tensor], flag: int,
            cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """LRU backward: (da, db, dx, dh0); dh0 is empty when h0 is None."""
    return _op_impl("lru_bwd", (a, b, x, h0, dy, dhT), flag, cu_seqlens)


@lru_bwd.register_fake
def _(a, b, x, h0, dy, dhT, flag, cu_seqlens=None):
    return _fake("lru_bwd", (a, b, x, h0, dy, dhT), flag, cu_seqlens)


_LruFunction, _LruFuncFunction = _register(lru_fwd, lru_bwd, "lru")


def lru(a: Tensor, b: Tensor, x: Tensor, h0: Optional[Tensor] = None, *, layout: str = "token",
        cu_seqlens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """The diagonal linear recurrence of RG-LRU / Griffin (docs/lru.md), differentiable in
    a, b, x and h0.

    Per (batch, channel d), float32 state h:  h_t = a_t h_{t-1} + b_t x_t,  y_t = h_t.
    layout "token": a, b, x [B, L, D]; layout "head": [B, D, L]. h0 [B, D] float32 or None.
    Returns (y [like x], hT [B, D] float32). a, b, x may be bfloat16 / float16 (math in
    float32). cu_seqlens (int32/int64 [N + 1]): N sequences packed along L with B = 1; h0
    and hT are then [N, D]."""
    flag = layout_flag(layout)
    ins = (a, b, x, h0)
    path = _path(ins + (cu_seqlens,))
    if path == "direct":
        return _run("lru_fwd", ins, flag, cu_seqlens)
    if path == "function":
        return _LruFunction.apply(*ins, flag, cu_seqlens)
    if path == "func":
        return _LruFuncFunction.apply(*ins, flag, cu_seqlens)
    return lru_fwd(*ins, flag, cu_seqlens)


# ------------------------------------------------------------ decode steps (issue #36)

@torch.library.custom_op("chunkgen::ssd_step", mutates_args=("cache",))
def ssd_step_op(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, cache: Tensor, state_indices: Tensor,
                dst_indices: Optional[Tensor] = None) -> Tensor:
    """SSD decode step: o; cache updated in place (declared to torch.library)."""
    return _run("ssd_step", (q, k, v, log_alpha, cache, state_indices, dst_indices), 0)[0]


@ssd_step_op.register_fake
def _(q, k, v, log_alpha, cache, state_indices, dst_indices=None):
    return v.new_empty(v.shape)  # o [B, T, H, dv] in v's dtype


@torch.library.custom_op("chunkgen::sscan_step", mutates_args=("cache",))
def sscan_step_op(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor],
                  z: Optional[Tensor], delta_bias: Optional[Tensor], cache: Tensor, state_indices: Tensor,
                  dst_indices: Optional[Tensor], delta_softplus: bool) -> Tensor:
    """Selective-scan decode step: y; cache updated in place (declared to torch.library)."""
    return _run("sscan_step", (x, delta, A, B, C, D, z, delta_bias, cache, state_indices, dst_indices),
                int(delta_softplus))[0]


@sscan_step_op.register_fake
def _(x, delta, A, B, C, D, z, delta_bias, cache, state_indices, dst_indices, delta_softplus):
    return x.new_empty(x.shape)  # y [B, L, D] in x's dtype


def ssd_step(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, cache: Tensor, state_indices: Tensor,
             dst_indices: Optional[Tensor] = None) -> Tensor:
    """One decode step of SSD (or T tokens per entry) from a state cache, updated in place.

    q, k [B, T, G, dk]; v [B, T, H, dv]; log_alpha [B, T, H] (T = 1 for plain decoding);
    cache [S, H, dk, dv] (float32, or q/k/v's 16-bit dtype); state_indices int32/int64 [B]:
    the slot entry b reads (-1: padding, its o is zero, no slot touched); dst_indices
    int32/int64 [B, T] or None: the slot the state after token t goes to (-1: none), else
    the state after the last token goes back to state_indices[b]. Returns o [B, T, H, dv].
    Not differentiable. Bad indices (out of range, a slot written twice, a slot written by
    one entry and read by another) raise ValueError before the cache is touched."""
    ins = (q, k, v, log_alpha, cache, state_indices, dst_indices)
    if _path(ins) == "direct":
        return _run("ssd_step", ins, 0)[0]
    return ssd_step_op(*ins)


def sscan_step(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, cache: Tensor, state_indices: Tensor,
               D: Optional[Tensor] = None, z: Optional[Tensor] = None, delta_bias: Optional[Tensor] = None,
               dst_indices: Optional[Tensor] = None, *, delta_softplus: bool = False) -> Tensor:
    """One decode step of the selective scan (mamba's selective_state_update) from a state
    cache, updated in place: x, delta, z [B, L, D] (L = 1 for plain decoding); A [D, N];
    B, C [B, L, N] or [B, L, G, N]; D, delta_bias [D]; cache [S, D, N]; state_indices [B];
    dst_indices [B, L] or None, as in ssd_step. Returns y [B, L, D]."""
    ins = (x, delta, A, B, C, D, z, delta_bias, cache, state_indices, dst_indices)
    if _path(ins) == "direct":
        return _run("sscan_step", ins, int(bool(delta_softplus)))[0]
    return sscan_step_op(*ins, bool(delta_softplus))


@torch.library.custom_op("chunkgen::gdr_step", mutates_args=("cache",))
def gdr_step_op(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cache: Tensor, state_indices: Tensor,
                dst_indices: Optional[Tensor], use_qk_l2norm: bool) -> Tensor:
    """Gated-delta-rule decode step (scale dk^-1/2): o; cache updated in place (declared to torch.library)."""
    return _run("gdr_step", (q, k, v, g, beta, cache, state_indices, dst_indices), int(use_qk_l2norm))[0]


@gdr_step_op.register_fake
def _(q, k, v, g, beta, cache, state_indices, dst_indices, use_qk_l2norm):
    return v.new_empty(v.shape)  # o [B, T, H, dv] in v's dtype


def gdr_step(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, cache: Tensor, state_indices: Tensor,
             dst_indices: Optional[Tensor] = None, *, scale: Optional[float] = None,
             use_qk_l2norm: bool = False) -> Tensor:
    """One decode step of the gated delta rule (fla's fused_recurrent over a cache, vLLM's
    GDN decode) from a state cache, updated in place: q, k [B, T, G, dk]; v [B, T, H, dv];
    g, beta [B, T, H] (T = 1 for plain decoding); cache [S, H, dk, dv]; state_indices,
    dst_indices as in ssd_step; scale (None: dk^-1/2) and use_qk_l2norm as in gdr.
    Returns o [B, T, H, dv]. Not differentiable."""
    mul = scale_factor(scale, q.shape[-1])
    ins = (q, k, v, g, beta, cache, state_indices, dst_indices)
    if _path(ins) == "direct":
        o = _run("gdr_step", ins, int(bool(use_qk_l2norm)))[0]
    else:
        o = gdr_step_op(*ins, bool(use_qk_l2norm))
    return o if mul == 1 else o * mul
