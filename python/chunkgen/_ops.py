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
    __slots__ = ("index", "name", "fields", "inputs", "outputs", "extents", "layout", "grad_of")

    def __init__(self, index: int, name: str, tensors):
        self.index = index
        self.name = name
        self.fields = tuple(t[0] for t in tensors)
        self.inputs = tuple(t[0] for t in tensors if not t[1])
        self.outputs = tuple(t[0] for t in tensors if t[1])
        self.extents = {t[0]: t[2] for t in tensors}
        self.layout = {t[0]: t[3] for t in tensors}
        self.grad_of = {t[0]: t[4] for t in tensors if t[4] is not None}


OPS: Dict[str, OpInfo] = {name: OpInfo(i, name, ts) for i, (name, ts) in enumerate(_C.ops())}
BACKENDS: Tuple[str, ...] = _C.backends()  # index = cg_backend value
F32, F64 = 0, 1  # cg_dtype
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


def output_shapes(op: str, shapes: Sequence[Optional[Shape]], flag: int, want: int = -1) -> Tuple[Optional[Shape], ...]:
    """Shapes of `op`'s outputs (in OPS[op].outputs order) from its inputs' shapes (in
    OPS[op].inputs order, None: absent; ints or symbolic sizes), from the C op table.
    want: a bit per output; -1: the forward outputs and the gradient of every given input
    (None for the others). An extent an input lacks is 1: the C call names the argument."""
    return _C.output_shapes(OPS[op].index, flag, tuple(shapes), want)


def output_shape(op: str, out: str, shapes: Dict[str, Optional[Shape]], flag: int) -> Shape:
    """Shape of output `out` of `op` given the input shapes by name (None: absent)."""
    info = OPS[op]
    i = info.outputs.index(out)
    return output_shapes(op, [shapes.get(n) for n in info.inputs], flag, 1 << i)[i]
