"""PyTorch ops: chunkgen.torch.ssd and chunkgen.torch.sscan, differentiable in every input.

Registered with torch.library.custom_op as chunkgen::ssd_fwd, chunkgen::ssd_bwd,
chunkgen::sscan_fwd and chunkgen::sscan_bwd, each with a fake (meta) implementation and
the forward ops with autograd formulas (the backward ops), so torch.compile(fullgraph=
True) traces them without a graph break and torch.library.opcheck passes.

- CPU tensors run on chunkgen's CPU path; float64 tensors on the float64 `ref` backend.
- CUDA tensors run on the generated CUDA kernels (backend auto: device pointers) on
  torch.cuda.current_stream(); float64 CUDA tensors run on `ref` on host copies.
- Tensors are passed with their strides; a copy is made only where the innermost stride
  is not 1 or every stride is zero (see chunkgen._numpy).
- On CUDA the kernels' workspace comes from PyTorch's caching allocator: the binding asks
  cg_workspace_size and passes a uint8 tensor of that size as cg_exec.workspace.
- Eager calls needing neither autograd nor tracing (no_grad / inference, plain tensors,
  no dispatch mode) skip the dispatcher and run the op's implementation directly.
- Grouped q/k (and B/C) gradients are summed over each group's heads by the C backward.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _C
from ._ops import OPS, REF, layout_flag, output_shape

__all__ = ["ssd", "sscan"]

_FLOATS = (torch.float32, torch.float64)
_AUTO = 0


def _check(op: str, given: dict) -> None:
    """dtype and device checks shared by the real and the fake implementations."""
    info = OPS[op]
    first = given[info.inputs[0]]
    for n in info.inputs:
        t = given.get(n)
        if t is None:
            continue
        if t.dtype not in _FLOATS:
            raise ValueError(f"{n}: dtype {t.dtype} but expected torch.float32 or torch.float64")
        if t.dtype != first.dtype:
            raise ValueError(f"{n}: dtype {t.dtype} but expected {first.dtype} like {info.inputs[0]}")
        if t.device != first.device:
            raise ValueError(f"{n}: on {t.device} but expected {first.device} like {info.inputs[0]}")
        if t.dim() > 4:
            raise ValueError(f"{n}: {t.dim()} dimensions but expected at most 4")
        if t.numel() == 0:  # (an empty tensor has no data pointer to hand to the C call)
            raise ValueError(f"{n}: shape {tuple(t.shape)} has no elements (expected every dimension >= 1)")


def _prep(t: Tensor):
    """(tensor, descriptor): the tensor itself, or a contiguous copy where the C API
    cannot take its strides (innermost stride not 1, or all strides zero)."""
    st = t.stride()
    shape = t.shape
    if st and ((shape[-1] > 1 and st[-1] != 1) or (not any(st) and t.numel() > 1)):
        t = t.contiguous()
        st = t.stride()
    return t, (t.data_ptr(), 0 if t.dtype == torch.float32 else 1, shape, st)


def _shapes(op: str, given: dict) -> dict:
    return {n: (tuple(given[n].shape) if given.get(n) is not None else None) for n in OPS[op].inputs}


def _run(op: str, given: dict, want, flag: int) -> Tuple[Tensor, ...]:
    """Allocate the outputs in `want` (the others come back as empty tensors: a custom
    op returns tensors only), run op, return the outputs in the op's order."""
    _check(op, given)
    info = OPS[op]
    first = given[info.inputs[0]]
    dev, dtype = first.device, first.dtype
    if dev.type == "cuda" and dtype == torch.float64:
        # The float64 reference runs on the host.
        host = {n: (t.cpu() if t is not None else None) for n, t in given.items()}
        return tuple(t.to(dev) for t in _run(op, host, want, flag))
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"{info.inputs[0]}: on {dev} but expected a CPU or CUDA tensor")
    keep, shapes, descs = {}, {}, {}
    for n in info.inputs:
        t = given.get(n)
        if t is None:
            shapes[n] = descs[n] = None
        else:
            keep[n], descs[n] = _prep(t)
            shapes[n] = descs[n][2]
    outs = {}
    for n in info.outputs:
        if n in want:
            outs[n], descs[n] = _prep(torch.empty(output_shape(op, n, shapes, flag), dtype=dtype, device=dev))
        else:
            outs[n] = first.new_empty(0)
            descs[n] = None
    tensors = tuple([descs[n] for n in info.fields])
    backend = REF if dtype == torch.float64 else _AUTO
    if dev.type == "cuda":
        with torch.cuda.device(dev):
            stream = torch.cuda.current_stream(dev).cuda_stream
            # the kernels' scratch from PyTorch's caching allocator (stream-ordered reuse)
            nbytes = _C.workspace_size(info.index, tensors, flag, backend, None, stream, None, 0, False)
            ws = torch.empty(nbytes, dtype=torch.uint8, device=dev) if nbytes else None
            _C.run(info.index, tensors, flag, backend, None, stream, ws.data_ptr() if ws is not None else None,
                   nbytes, False)
    else:
        _C.run(info.index, tensors, flag, backend, None, None, None, 0, False)
    del keep  # the inputs' copies live until here
    return tuple([outs[n] for n in info.outputs])


def _fake(op: str, given: dict, want, flag: int) -> Tuple[Tensor, ...]:
    _check(op, given)
    info = OPS[op]
    first = given[info.inputs[0]]
    shapes = _shapes(op, given)
    return tuple(first.new_empty(output_shape(op, n, shapes, flag) if n in want else (0,)) for n in info.outputs)


def _eager_direct(tensors) -> bool:
    """True for an eager call that needs neither autograd nor tracing nor a dispatch
    mode: plain tensors, none requiring grad (or grad mode off), not compiling. Such
    calls skip the dispatcher (tens of microseconds) and run the implementation of the
    custom op directly; everything else goes through the registered op."""
    if torch.compiler.is_compiling():  # first: dynamo must not trace the mode queries
        return False
    if _dispatch_mode is None or _dispatch_mode() is not None or _function_mode():
        return False
    grad = torch.is_grad_enabled()
    for t in tensors:
        if t is not None and (type(t) is not Tensor or (grad and t.requires_grad)):
            return False
    return True


try:  # without these (private) queries every call takes the registered op
    from torch.utils._python_dispatch import _get_current_dispatch_mode as _dispatch_mode
except ImportError:
    _dispatch_mode = None
_function_mode = getattr(torch._C, "_is_torch_function_mode_enabled", lambda: True)


# ------------------------------------------------------------------ SSD

def _ssd_fwd_given(q, k, v, log_alpha, h0):
    return dict(q=q, k=k, v=v, log_alpha=log_alpha, h0=h0)


def _ssd_bwd_given(q, k, v, log_alpha, h0, dout, dhT):
    return dict(q=q, k=k, v=v, log_alpha=log_alpha, h0=h0, dout=dout, dhT=dhT)


def _ssd_bwd_want(h0):
    return ("dq", "dk", "dv", "dlog_alpha") + (("dh0",) if h0 is not None else ())


@torch.library.custom_op("chunkgen::ssd_fwd", mutates_args=())
def ssd_fwd(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, h0: Optional[Tensor],
            layout: str) -> Tuple[Tensor, Tensor]:
    """SSD forward: (o, hT)."""
    return _run("ssd_fwd", _ssd_fwd_given(q, k, v, log_alpha, h0), ("o", "hT"), layout_flag(layout))


@ssd_fwd.register_fake
def _(q, k, v, log_alpha, h0, layout):
    return _fake("ssd_fwd", _ssd_fwd_given(q, k, v, log_alpha, h0), ("o", "hT"), layout_flag(layout))


@torch.library.custom_op("chunkgen::ssd_bwd", mutates_args=())
def ssd_bwd(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, h0: Optional[Tensor], dout: Tensor,
            dhT: Optional[Tensor], layout: str) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """SSD backward: (dq, dk, dv, dlog_alpha, dh0); dh0 is empty when h0 is None."""
    return _run("ssd_bwd", _ssd_bwd_given(q, k, v, log_alpha, h0, dout, dhT), _ssd_bwd_want(h0),
                layout_flag(layout))


@ssd_bwd.register_fake
def _(q, k, v, log_alpha, h0, dout, dhT, layout):
    return _fake("ssd_bwd", _ssd_bwd_given(q, k, v, log_alpha, h0, dout, dhT), _ssd_bwd_want(h0),
                 layout_flag(layout))


def _ssd_setup(ctx, inputs, output):
    q, k, v, log_alpha, h0, layout = inputs
    ctx.layout = layout
    ctx.has_h0 = h0 is not None
    ctx.save_for_backward(q, k, v, log_alpha, h0)


def _ssd_backward(ctx, do, dhT):
    q, k, v, log_alpha, h0 = ctx.saved_tensors
    if do is None:
        do = torch.zeros_like(v)
    dq, dk, dv, dla, dh0 = ssd_bwd(q, k, v, log_alpha, h0, do, dhT, ctx.layout)
    return dq, dk, dv, dla, (dh0 if ctx.has_h0 else None), None


ssd_fwd.register_autograd(_ssd_backward, setup_context=_ssd_setup)


def ssd(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, h0: Optional[Tensor] = None, *,
        layout: str = "token") -> Tuple[Tensor, Tensor]:
    """Mamba-2 SSD, differentiable in q, k, v, log_alpha and h0.

    Per (b, h), g = h // (H // G):  S_t = exp(log_alpha_t) S_{t-1} + k_t^T v_t,  o_t = q_t S_t.
    layout "token": q, k [B, T, G, dk]; v [B, T, H, dv]; log_alpha [B, T, H].
    layout "head":  q, k [B, G, T, dk]; v [B, H, T, dv]; log_alpha [B, H, T]
    (e.g. token-major tensors given as .transpose(1, 2) views: no copy).
    h0 [B, H, dk, dv] or None. Returns (o [like v], hT [B, H, dk, dv])."""
    flag = layout_flag(layout)
    if _eager_direct((q, k, v, log_alpha, h0)):
        return _run("ssd_fwd", _ssd_fwd_given(q, k, v, log_alpha, h0), ("o", "hT"), flag)
    return ssd_fwd(q, k, v, log_alpha, h0, layout)


# ------------------------------------------------------ selective scan

_SSCAN_OPT = ("D", "z", "delta_bias", "h0")


def _sscan_given(x, delta, A, B, C, D, z, delta_bias, h0):
    return dict(x=x, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias, h0=h0)


def _sscan_bwd_want(given):
    return ("dx", "ddelta", "dA", "dB", "dC") + tuple("d" + n for n in _SSCAN_OPT if given[n] is not None)


@torch.library.custom_op("chunkgen::sscan_fwd", mutates_args=())
def sscan_fwd(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor], z: Optional[Tensor],
              delta_bias: Optional[Tensor], h0: Optional[Tensor], delta_softplus: bool) -> Tuple[Tensor, Tensor]:
    """Selective-scan forward: (y, hT)."""
    return _run("sscan_fwd", _sscan_given(x, delta, A, B, C, D, z, delta_bias, h0), ("y", "hT"), int(delta_softplus))


@sscan_fwd.register_fake
def _(x, delta, A, B, C, D, z, delta_bias, h0, delta_softplus):
    return _fake("sscan_fwd", _sscan_given(x, delta, A, B, C, D, z, delta_bias, h0), ("y", "hT"),
                 int(delta_softplus))


@torch.library.custom_op("chunkgen::sscan_bwd", mutates_args=())
def sscan_bwd(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor], z: Optional[Tensor],
              delta_bias: Optional[Tensor], h0: Optional[Tensor], dy: Tensor, dhT: Optional[Tensor],
              delta_softplus: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Selective-scan backward: (dx, ddelta, dA, dB, dC, dD, dz, ddelta_bias, dh0); the
    last four are empty when their input is None."""
    given = _sscan_given(x, delta, A, B, C, D, z, delta_bias, h0)
    want = _sscan_bwd_want(given)
    given.update(dy=dy, dhT=dhT)
    return _run("sscan_bwd", given, want, int(delta_softplus))


@sscan_bwd.register_fake
def _(x, delta, A, B, C, D, z, delta_bias, h0, dy, dhT, delta_softplus):
    given = _sscan_given(x, delta, A, B, C, D, z, delta_bias, h0)
    want = _sscan_bwd_want(given)
    given.update(dy=dy, dhT=dhT)
    return _fake("sscan_bwd", given, want, int(delta_softplus))


def _sscan_setup(ctx, inputs, output):
    *tensors, delta_softplus = inputs
    ctx.delta_softplus = delta_softplus
    ctx.present = [t is not None for t in tensors]
    ctx.save_for_backward(*tensors)


def _sscan_backward(ctx, dy, dhT):
    x, delta, A, B, C, D, z, delta_bias, h0 = ctx.saved_tensors
    if dy is None:
        dy = torch.zeros_like(x)
    grads = sscan_bwd(x, delta, A, B, C, D, z, delta_bias, h0, dy, dhT, ctx.delta_softplus)
    return tuple(g if present else None for g, present in zip(grads, ctx.present)) + (None,)


sscan_fwd.register_autograd(_sscan_backward, setup_context=_sscan_setup)


def sscan(x: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, D: Optional[Tensor] = None,
          z: Optional[Tensor] = None, delta_bias: Optional[Tensor] = None, h0: Optional[Tensor] = None, *,
          delta_softplus: bool = False) -> Tuple[Tensor, Tensor]:
    """Mamba-1 selective scan, differentiable in every tensor.

    dt = delta (+ delta_bias), softplus(dt) if delta_softplus;
    h_t[d,n] = exp(dt_t[d] A[d,n]) h_{t-1}[d,n] + dt_t[d] B_t[n] x_t[d];
    y_t[d] = sum_n C_t[n] h_t[d,n] + D[d] x_t[d], times silu(z_t[d]) if z is given.
    x, delta, z [B, L, D]; A [D, N]; B, C [B, L, N] or [B, L, G, N]; D, delta_bias [D];
    h0 [B, D, N]. Returns (y [B, L, D], hT [B, D, N])."""
    if _eager_direct((x, delta, A, B, C, D, z, delta_bias, h0)):
        return _run("sscan_fwd", _sscan_given(x, delta, A, B, C, D, z, delta_bias, h0), ("y", "hT"),
                    int(bool(delta_softplus)))
    return sscan_fwd(x, delta, A, B, C, D, z, delta_bias, h0, bool(delta_softplus))
