"""numpy calls: chunkgen.ssd, ssd_bwd, sscan, sscan_bwd.

Arrays are passed to the C library as they are (pointer, shape, strides) through the
buffer protocol: no copy for any strides the C API takes. A copy is made only where
the C API cannot read the array: the innermost stride is not 1 (and that dimension is
longer than 1), a stride is negative or not a multiple of the element size, or every
stride is zero (a broadcast view, which the C API would read as contiguous).
float64 inputs run on the `ref` backend (the float64 ground truth) when backend is
"auto". Outputs are new C-contiguous arrays of the inputs' dtype.
"""
from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from . import _C
from ._ops import OPS, backend_index, layout_flag

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _needs_copy(a: np.ndarray) -> bool:
    st, sh, it = a.strides, a.shape, a.itemsize
    if sh[-1] > 1 and st[-1] != it:
        return True
    if any(s < 0 or s % it for s in st):
        return True
    return a.size > 1 and not any(st)


def _prep(name: str, a) -> Optional[np.ndarray]:
    if a is None:
        return None
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    if a.dtype not in _FLOATS:
        raise ValueError(f"{name}: dtype {a.dtype} but expected float32 or float64")
    if a.flags.c_contiguous or a.ndim == 0 or not _needs_copy(a):
        return a
    return np.ascontiguousarray(a)


_EMPTY = {dt: functools.partial(np.empty, dtype=dt) for dt in _FLOATS}


def run(op: str, given: dict, flag: int, backend: str, config: Optional[str], verbose: bool = False):
    """Run `op` on the arrays in `given` (input name -> array or None); return its
    outputs in the op's order: new arrays, or None for the gradient of an absent input."""
    info = OPS[op]
    ins = tuple([_prep(n, given.get(n)) for n in info.inputs])
    first = ins[0]
    b = 0 if backend == "auto" else backend_index(backend)  # auto: float64 runs on ref (in C)
    empty = _EMPTY[first.dtype] if first is not None else _EMPTY[_FLOATS[0]]
    return _C.call(info.index, ins, -1, flag, b, config, verbose, empty, None, None)


def ssd(q, k, v, log_alpha, h0=None, *, layout="token", backend="auto", config=None, verbose=False):
    """SSD forward. q, k [B, T, G, dk]; v [B, T, H, dv]; log_alpha [B, T, H]
    (layout="head": T and the heads axis swapped); h0 [B, H, dk, dv] or None.
    Returns (o [like v], hT [B, H, dk, dv])."""
    return run("ssd_fwd", dict(q=q, k=k, v=v, log_alpha=log_alpha, h0=h0), layout_flag(layout), backend, config,
               verbose)


def ssd_bwd(q, k, v, log_alpha, dout, h0=None, dhT=None, *, layout="token", backend="auto", config=None,
            verbose=False):
    """SSD backward. Returns (dq, dk, dv, dlog_alpha, dh0); dh0 is None when h0 is.
    dq and dk are summed over the heads of each group."""
    return run("ssd_bwd", dict(q=q, k=k, v=v, log_alpha=log_alpha, h0=h0, dout=dout, dhT=dhT), layout_flag(layout),
               backend, config, verbose)


def sscan(x, delta, A, B, C, D=None, z=None, delta_bias=None, h0=None, *, delta_softplus=False, backend="auto",
          config=None, verbose=False):
    """Selective-scan forward. x, delta, z [B, L, D]; A [D, N]; B, C [B, L, N] or
    [B, L, G, N]; D, delta_bias [D]; h0 [B, D, N]. Returns (y [B, L, D], hT [B, D, N])."""
    return run("sscan_fwd", dict(x=x, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias, h0=h0),
               int(bool(delta_softplus)), backend, config, verbose)


def sscan_bwd(x, delta, A, B, C, dy, D=None, z=None, delta_bias=None, h0=None, dhT=None, *, delta_softplus=False,
              backend="auto", config=None, verbose=False):
    """Selective-scan backward. Returns (dx, ddelta, dA, dB, dC, dD, dz, ddelta_bias, dh0);
    each of the last four is None when its input is."""
    given = dict(x=x, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias, h0=h0, dy=dy, dhT=dhT)
    return run("sscan_bwd", given, int(bool(delta_softplus)), backend, config, verbose)
