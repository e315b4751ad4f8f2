"""The four ops as the extension module describes them, and their output shapes.

The order of each op's tensors (inputs, then outputs), their names and roles come from
chunkgen._C.ops(), which reads the library's op table (runtime/ops.h), and so do the
output shapes (output_shapes): the numpy and the torch front ends pass their inputs in
OPS[op].inputs order and never list an op's tensors themselves.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from . import _C

Shape = Tuple[int, ...]


class OpInfo:
    """One op of the C op table: its tensors in table order (inputs first), and per tensor
    its extents (symbol names of the token-major dimensions, "" for 1; `layout` tensors
    swap dimensions 1 and 2 in head-major) and, for backward outputs, the input it is the
    gradient of."""
    __slots__ = ("index", "name", "fields", "inputs", "outputs", "extents", "layout", "grad_of", "inplace", "reals")

    def __init__(self, index: int, name: str, tensors):
        self.index = index
        self.name = name
        self.fields = tuple(t[0] for t in tensors)
        self.inputs = tuple(t[0] for t in tensors if not t[1])
        self.outputs = tuple(t[0] for t in tensors if t[1])
        self.extents = {t[0]: t[2] for t in tensors}
        self.layout = {t[0]: t[3] for t in tensors}
        self.grad_of = {t[0]: t[4] for t in tensors if t[4] is not None}
        self.inplace = tuple(t[0] for t in tensors if t[5])  # inputs the call also writes (a state cache)
        self.reals = _C.reals(index)  # the real (float) arguments, after the flag (cg_op_info.reals: gdr's scale)


OPS: Dict[str, OpInfo] = {name: OpInfo(i, name, ts) for i, (name, ts) in enumerate(_C.ops())}
BACKENDS: Tuple[str, ...] = _C.backends()  # index = cg_backend value
F32, F64, BF16, F16, I32, I64 = 0, 1, 2, 3, 4, 5  # cg_dtype (include/chunkgen.h)
REF = BACKENDS.index("ref")

LAYOUTS = {"token": 0, "head": 1}


def backend_index(backend: str) -> int:
    try:
        return BACKENDS.index(backend)
    except ValueError:
        raise ValueError(f"backend: '{backend}' but expected one of {', '.join(BACKENDS)}") from None


def layout_flag(layout: str) -> int:
    try:
        return LAYOUTS[layout]
    except (KeyError, TypeError):
        raise ValueError(f"layout: '{layout}' but expected 'token' ([B, T, heads, dim]) or 'head' ([B, heads, T, dim])") from None


def output_shapes(op: str, shapes: Sequence[Optional[Shape]], flag: int, want: int = -1,
                  nseq=None) -> Tuple[Optional[Shape], ...]:
    """Shapes of `op`'s outputs (in OPS[op].outputs order) from its inputs' shapes (in
    OPS[op].inputs order, None: absent; ints or symbolic sizes), from the C op table.
    want: a bit per output; -1: the forward outputs and the gradient of every given input
    (None for the others). An extent an input lacks is 1: the C call names the argument.
    nseq: with cu_seqlens, its number of sequences N (len - 1): the states' first extent."""
    return _C.output_shapes(OPS[op].index, flag, tuple(shapes), want, nseq)


def output_shape(op: str, out: str, shapes: Dict[str, Optional[Shape]], flag: int, nseq=None) -> Shape:
    """Shape of output `out` of `op` given the input shapes by name (None: absent)."""
    info = OPS[op]
    i = info.outputs.index(out)
    return output_shapes(op, [shapes.get(n) for n in info.inputs], flag, 1 << i, nseq)[i]


def seq_len(op: str, shapes: Dict[str, Optional[Shape]], flag: int) -> int:
    """The packed length (T or L) of a call from its inputs' shapes: the extent of the op's
    sequence symbol in the first given input that has it (the op table's extents)."""
    info = OPS[op]
    seq = "T" if "T" in info.extents[info.inputs[0]] else "L"
    for n in info.inputs:
        ext, shp = info.extents[n], shapes.get(n)
        if shp is None or seq not in ext:
            continue
        pos = ext.index(seq)
        if info.layout[n] and flag & 1 and pos in (1, 2):
            pos = 3 - pos
        return int(shp[pos])
    raise ValueError(f"{op}: no input gives {seq}")


def output_dtypes(op: str, dtypes: Sequence[Optional[int]]) -> Tuple[int, ...]:
    """The cg_dtype of each of `op`'s outputs (OPS[op].outputs order) from its inputs'
    (OPS[op].inputs order, None: absent), by the library's own dtype rules (cg__op_dtypes,
    docs/dtypes.md: o follows v, y follows x, a gradient its input, the states float32;
    float64 throughout a float64 call). ValueError with the library's message for a mix it
    rejects."""
    return _C.output_dtypes(OPS[op].index, tuple(dtypes))


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def validate(op: str, shapes: Dict[str, Optional[Shape]], dtypes: Dict[str, int], flag: int, backend: int,
             cu=None, reals=None) -> None:
    """The library's own check of a call that is only traced (JAX's abstract evaluation,
    torch's fake tensors): cg_validate on descriptors of the inputs' shapes and dtypes,
    contiguous (the library computes the strides and checks their 64-bit range), at an
    aligned address that is never read; the outputs, which the binding makes from the op
    table's shapes, are left out. Raises ValueError with the library's message (a bad
    shape, a dtype mix it rejects, a size that overflows 64 bits). cu: with cu_seqlens,
    its (shape, cg_dtype): the offsets' values are not known when traced, so the call is
    checked with valid ones of that shape and dtype ([0, ..., 0, T]): the shapes (B = 1,
    the states per sequence) and the offsets' dtype and rank are the library's to check.
    reals: the op's real arguments (OPS[op].reals order; None: the defaults), checked too."""
    info = OPS[op]
    offsets = None
    if cu is not None:
        import numpy as np
        cu_shape, cu_dt = cu
        offsets = np.zeros(tuple(int(d) for d in cu_shape), dtype=np.int64 if cu_dt == I64 else np.int32)
        if offsets.ndim == 1 and offsets.size > 1:  # (a T the dtype cannot hold: the last offset is refused)
            offsets[-1] = min(seq_len(op, shapes, flag), np.iinfo(offsets.dtype).max)
    addr = {n: 1 << 20 for n in info.fields}
    if info.inplace:  # an input the call writes is checked as an output is: placed past every other one
        size = {F32: 4, F64: 8, BF16: 2, F16: 2, I32: 4, I64: 8}
        nbytes = {n: size.get(dtypes.get(n), 8) * _prod(shapes[n]) for n in info.fields if shapes.get(n) is not None}
        end = (1 << 20) + max([b for n, b in nbytes.items() if n not in info.inplace] or [0])
        for n in info.inplace:
            addr[n] = end = (end + 63) // 64 * 64
            end += nbytes.get(n, 0)
    descs = tuple((addr[n], dtypes[n], tuple(int(d) for d in shapes[n]), None) if shapes.get(n) is not None else None
                  for n in info.fields)
    _C.validate(info.index, descs, flag, backend, None, None, None, 0, False, offsets, reals)



def scale_factor(scale, dk) -> float:
    """The factor of an output that is linear in a scale whose default (None or 0) is
    dk^-1/2, against that default; ValueError for a scale that is not finite and >= 0.
    (The decode step gdr_step multiplies its o by it; the chunked gdr passes scale to the
    library as the op's real argument.)"""
    if scale is None:
        return 1.0
    scale = float(scale)
    if not (scale >= 0 and scale != float("inf")):
        raise ValueError(f"scale: {scale} but expected a finite value >= 0 (0 or None: dk^-1/2)")
    return scale * float(dk) ** 0.5 if scale else 1.0
