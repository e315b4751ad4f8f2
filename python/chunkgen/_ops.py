"""The four ops as the extension module describes them, and their output shapes.

The order of each op's tensors (inputs, then outputs) comes from chunkgen._C.ops(),
which reads it from the C argument structs: the numpy and the torch front ends both
build their descriptor tuples from OPS below and never list the fields themselves.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from . import _C

Shape = Tuple[int, ...]


class OpInfo:
    __slots__ = ("index", "name", "fields", "inputs", "outputs")

    def __init__(self, index: int, name: str, fields: Sequence[str], is_out: Sequence[bool]):
        self.index = index
        self.name = name
        self.fields = tuple(fields)
        self.inputs = tuple(f for f, o in zip(fields, is_out) if not o)
        self.outputs = tuple(f for f, o in zip(fields, is_out) if o)


OPS: Dict[str, OpInfo] = {name: OpInfo(i, name, f, o) for i, (name, f, o) in enumerate(_C.ops())}
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


def _d(shape: Optional[Shape], i: int) -> int:
    # A dimension, or 1 where the caller's shape is wrong: the C call then names the
    # wrong argument (inputs are checked before outputs).
    if shape is None or not -len(shape) <= i < len(shape):
        return 1
    return int(shape[i])


def state_shape(op: str, shapes: Dict[str, Optional[Shape]], flag: int) -> Shape:
    """Shape of h0 / hT / dhT / dh0: [B, H, dk, dv] for SSD, [B, D, N] for sscan."""
    if op.startswith("ssd"):
        q, v = shapes["q"], shapes["v"]
        return (_d(v, 0), _d(v, 1 if flag else 2), _d(q, -1), _d(v, -1))
    x, A = shapes["x"], shapes["A"]
    return (_d(x, 0), _d(x, 2), _d(A, 1))


def output_shape(op: str, out: str, shapes: Dict[str, Optional[Shape]], flag: int) -> Shape:
    """Shape of output `out` of `op` given the input shapes (None: absent)."""
    if out == "hT" or out == "dh0":
        return state_shape(op, shapes, flag)
    if out == "o":
        return tuple(shapes["v"] or (1,))
    if out == "y":
        return tuple(shapes["x"] or (1,))
    # A gradient has its input's shape.
    return tuple(shapes[out[1:]] or (1,))
