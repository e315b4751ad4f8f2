"""numpy calls: chunkgen.ssd, ssd_bwd, sscan, sscan_bwd.

Arrays are passed to the C library as they are (pointer, shape, strides) through the
buffer protocol: no copy for any strides the C API takes. A copy is made only where
the C API cannot read the array: the innermost stride is not 1 (and that dimension is
longer than 1), a stride is negative or not a multiple of the element size, or every
stride is zero (a broadcast view, which the C API would read as contiguous).
float64 inputs run on the `ref` backend (the float64 ground truth) when backend is
"auto". float16 and bfloat16 (ml_dtypes.bfloat16, as jax and the .npy files of the peers
use) arrays are taken where the library takes 16-bit tensors (q, k, v; x, delta, B, C, z;
docs/dtypes.md; it checks the mix). Outputs are new C-contiguous arrays: o / y in v's / x's
dtype, every gradient in its input's, the states float32 (float64 in a float64 call).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import _C
from ._ops import BF16, OPS, backend_index, layout_flag

try:  # numpy's bfloat16 is ml_dtypes' (jax brings it)
    from ml_dtypes import bfloat16 as _bfloat16
except ImportError:  # pragma: no cover - no ml_dtypes: no bfloat16 arrays either
    _bfloat16 = None

# cg_dtype order (include/chunkgen.h)
_NP = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(_bfloat16) if _bfloat16 else None, np.dtype(np.float16))
_FLOATS = tuple(dt for dt in _NP if dt is not None)


def _needs_copy(a: np.ndarray) -> bool:
    st, sh, it = a.strides, a.shape, a.itemsize
    if sh[-1] > 1 and st[-1] != it:
        return True
    if any(s < 0 or s % it for s in st):
        return True
    return a.size > 1 and not any(st)


def _prep(name: str, a) -> Optional[np.ndarray]:
    """An input as an array of a float dtype (not copied yet: _copy_needed)."""
    if a is None:
        return None
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    if a.dtype not in _FLOATS:
        raise ValueError(f"{name}: dtype {a.dtype} but expected float32 or float64, or float16 / bfloat16 (docs/dtypes.md)")
    return a


def _copy_needed(a: Optional[np.ndarray]) -> bool:
    return a is not None and not a.flags.c_contiguous and a.ndim > 0 and _needs_copy(a)


def _as_copied(a: np.ndarray):
    """What the library will be given for an array it gets a copy of: a contiguous
    descriptor (strides None) at an aligned address that is never read."""
    return (1 << 20, _NP.index(a.dtype), a.shape, None)


def _arg(a: Optional[np.ndarray]):
    """What the C call reads: the array (buffer protocol), or for bfloat16, which numpy
    cannot export as a buffer, its (ptr, cg_dtype, shape, strides) descriptor (the array
    stays alive in the caller's tuple)."""
    if a is None or a.dtype != _NP[BF16]:
        return a
    return (a.ctypes.data, BF16, a.shape, tuple(s // a.itemsize for s in a.strides))


def _prep_cu(cu) -> Optional[np.ndarray]:
    """cu_seqlens as the C call reads it: an int32 or int64 array (any strides; the library
    checks its rank and values and names the first bad offset)."""
    if cu is None:
        return None
    if type(cu) is not np.ndarray:
        cu = np.asarray(cu)
    if cu.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ValueError(f"cu_seqlens: dtype {cu.dtype} but expected int32 or int64 (the sequences' offsets)")
    if any(s < 0 or s % cu.itemsize for s in cu.strides):
        cu = np.ascontiguousarray(cu)
    return cu


def run(op: str, given: dict, flag: int, backend: str, config: Optional[str], verbose: bool = False, cu_seqlens=None):
    """Run `op` on the arrays in `given` (input name -> array or None); return its
    outputs in the op's order: new arrays, or None for the gradient of an absent input.
    cu_seqlens: the packed sequences' offsets [N + 1] (docs/varlen.md) or None."""
    info = OPS[op]
    arrays = tuple([_prep(n, given.get(n)) for n in info.inputs])
    b = 0 if backend == "auto" else backend_index(backend)  # auto: float64 runs on ref (in C)
    cu = _prep_cu(cu_seqlens)
    if any(_copy_needed(a) for a in arrays):
        # the library checks the call before any copy is made (that of a broadcast input
        # can be huge): a bad argument raises its message, not a failed allocation
        descs = tuple(_as_copied(a) if _copy_needed(a) else _arg(a) for a in arrays)
        _C.validate(info.index, descs + (None,) * len(info.outputs), flag, b, config, None, None, 0, False, cu)
        arrays = tuple(np.ascontiguousarray(a) if _copy_needed(a) else a for a in arrays)
    return _C.call(info.index, tuple([_arg(a) for a in arrays]), -1, flag, b, config, verbose, np.empty, _NP, None,
                   None, cu)


def ssd(q, k, v, log_alpha, h0=None, *, layout="token", backend="auto", config=None, verbose=False,
        cu_seqlens=None):
    """SSD forward. q, k [B, T, G, dk]; v [B, T, H, dv]; log_alpha [B, T, H]
    (layout="head": T and the heads axis swapped); h0 [B, H, dk, dv] or None.
    Returns (o [like v], hT [B, H, dk, dv]).
    cu_seqlens (int32/int64 [N + 1], docs/varlen.md): N sequences packed along T with B = 1;
    h0 and hT are then per sequence, [N, H, dk, dv]."""
    return run("ssd_fwd", dict(q=q, k=k, v=v, log_alpha=log_alpha, h0=h0), layout_flag(layout), backend, config,
               verbose, cu_seqlens)


def ssd_bwd(q, k, v, log_alpha, dout, h0=None, dhT=None, *, layout="token", backend="auto", config=None,
            verbose=False, cu_seqlens=None):
    """SSD backward. Returns (dq, dk, dv, dlog_alpha, dh0); dh0 is None when h0 is.
    dq and dk are summed over the heads of each group. cu_seqlens as in ssd (h0, dhT, dh0
    per sequence)."""
    return run("ssd_bwd", dict(q=q, k=k, v=v, log_alpha=log_alpha, h0=h0, dout=dout, dhT=dhT), layout_flag(layout),
               backend, config, verbose, cu_seqlens)


def sscan(x, delta, A, B, C, D=None, z=None, delta_bias=None, h0=None, *, delta_softplus=False, backend="auto",
          config=None, verbose=False, cu_seqlens=None):
    """Selective-scan forward. x, delta, z [B, L, D]; A [D, N]; B, C [B, L, N] or
    [B, L, G, N]; D, delta_bias [D]; h0 [B, D, N]. Returns (y [B, L, D], hT [B, D, N]).
    cu_seqlens (int32/int64 [Nseq + 1]): sequences packed along L with B = 1; h0 and hT
    are then per sequence, [Nseq, D, N]."""
    return run("sscan_fwd", dict(x=x, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias, h0=h0),
               int(bool(delta_softplus)), backend, config, verbose, cu_seqlens)


def sscan_bwd(x, delta, A, B, C, dy, D=None, z=None, delta_bias=None, h0=None, dhT=None, *, delta_softplus=False,
              backend="auto", config=None, verbose=False, cu_seqlens=None):
    """Selective-scan backward. Returns (dx, ddelta, dA, dB, dC, dD, dz, ddelta_bias, dh0);
    each of the last four is None when its input is. cu_seqlens as in sscan (dA, dD,
    ddelta_bias summed over the sequences)."""
    given = dict(x=x, delta=delta, A=A, B=B, C=C, D=D, z=z, delta_bias=delta_bias, h0=h0, dy=dy, dhT=dhT)
    return run("sscan_bwd", given, int(bool(delta_softplus)), backend, config, verbose, cu_seqlens)
