"""Context parallelism, framework-neutral parts (docs/context_parallel.md): how a packed
sequence is split over P devices, the small descriptor every rank exchanges before the
state exchange (so that ranks that disagree fail with a message, never hang or compute a
wrong result), and the communication formula.

The recurrence-specific parts (what a device's transition is, how its pass is fixed for
the entering state) are in jax_cp.py / torch_cp.py; the exchange, the combine (which takes
the transition's `apply`: a scalar per head, elementwise, or, for the gated delta rule, a
dk x dk matmul), the pieces and the descriptor here and there are generic
(docs/context_parallel.md, "The gated delta rule (later)").
"""
from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple

from . import _C

MAGIC = 0x43474350  # "CGCP"
_VERSION = _C.version


def split_sizes(total: int, parts: int) -> List[int]:
    """The balanced split of `total` tokens over `parts` ranks (PyTorch, where ranks may
    hold any contiguous split of at least one token each): the first total % parts ranks
    get one token more than the others. (JAX pads the stream at its end to
    parts * ceil(total / parts) tokens instead, since shard_map splits evenly; the padded
    tokens leave every state unchanged: docs/context_parallel.md.)"""
    if parts < 1:
        raise ValueError(f"parts: {parts} but expected >= 1 (the number of devices)")
    if total < parts:
        raise ValueError(f"total: {total} tokens but expected >= parts = {parts} (every rank holds at least one)")
    base, extra = divmod(total, parts)
    return [base + (r < extra) for r in range(parts)]


def pieces(cu: Sequence[int], s: int, tl: int):
    """Facts of the rank holding tokens [s, s + tl) about the global sequences cu (offsets
    [N + 1], Python ints): the local offsets, which sequences start before s, the one
    entering (crossing s) or None, the one leaving (crossing s + tl) or None, the entering
    one's local length, and which sequences end here (where their final state is)."""
    e = s + tl
    n = len(cu) - 1
    local = [min(max(c - s, 0), tl) for c in cu]
    before = [cu[i] < s for i in range(n)]
    enter = next((i for i in range(n) if cu[i] < s < cu[i + 1]), None)
    leave = next((i for i in range(n) if cu[i] < e < cu[i + 1]), None)
    len_in = min(cu[enter + 1] - s, tl) if enter is not None else 0
    ends_here = [(s < cu[i + 1] <= e) if cu[i + 1] > 0 else s == 0 for i in range(n)]
    return local, before, enter, leave, len_in, ends_here


# ------------------------------------------------------------- the descriptor

REAL = " (float64 bits)"  # an option named "... (float64 bits)" holds real_bits(value)
# PyTorch's option: 1 when the call's outputs will require grad (grad mode on and an input
# requires grad). Ranks must agree: the exchange's backward is a collective.
GRAD = "requires grad"


def real_bits(x) -> int:
    """A real option as an int64 for the descriptor: its float64 bits; None or 0 (the
    op's default) -1."""
    if x is None or float(x) == 0.0:
        return -1
    return struct.unpack("<q", struct.pack("<d", float(x)))[0]

DESC_LEN = 128


def _version_number() -> int:
    parts = (_VERSION.split("+")[0].split("-")[0].split(".") + ["0", "0", "0"])[:3]
    try:
        return int(parts[0]) * 10000 + int(parts[1]) * 100 + int(parts[2])
    except ValueError:
        return sum(ord(c) * 31 ** i for i, c in enumerate(_VERSION)) % (1 << 40)


def _hash_ints(values: Sequence[int]) -> int:
    h = 1469598103934665603
    for v in values:
        h = ((h ^ (int(v) & 0xFFFFFFFFFFFFFFFF)) * 1099511628211) & 0x7FFFFFFFFFFFFFFF
    return h


def describe(op: str, options: Dict[str, int], tensors: Sequence[Tuple[str, Optional[Tuple[int, ...]], int]],
             seq_dims: Dict[str, int], cu_values: Optional[Sequence[int]], local_len: int):
    """The descriptor of one rank's call: fields (name, values) flattened to DESC_LEN
    int64s (and the fields, to decode a differing one). options: name -> int. tensors:
    (name, shape or None, dtype code); the dimension seq_dims[name] (the
    local token count, which ranks may legitimately differ in) is left out of the
    comparison and sent as `local_len`."""
    fields: List[Tuple[str, List[int]]] = [("magic", [MAGIC]), ("chunkgen version", [_version_number()]),
                                           ("op", [sum(ord(c) << (8 * i) for i, c in enumerate(op[:7]))])]
    fields += [(f"option {k}", [int(v)]) for k, v in options.items()]
    for name, shape, code in tensors:
        if shape is None:
            fields.append((name, [-1]))
            continue
        shp = [(-2 if i == seq_dims.get(name) else int(d)) for i, d in enumerate(shape)]
        fields.append((name, [code, len(shp)] + shp))
    if cu_values is None:
        fields.append(("cu_seqlens", [-1]))
    else:
        fields.append(("cu_seqlens", [len(cu_values), _hash_ints(cu_values)]))
    flat = [local_len]
    for _, vals in fields:
        flat += vals
    if len(flat) > DESC_LEN:
        raise ValueError(f"context parallel descriptor: {len(flat)} fields but at most {DESC_LEN}")
    return flat + [0] * (DESC_LEN - len(flat)), fields


def _decode(flat: Sequence[int], fields) -> List[Tuple[str, List[int]]]:
    out, i = [], 1
    for name, vals in fields:
        n = len(vals)
        # a differing layout (absent vs present, other ndim) changes the length: read as many
        if name not in ("magic", "chunkgen version", "op", "cu_seqlens") and not name.startswith("option "):
            if flat[i] == -1:
                n = 1
            else:
                n = 2 + int(flat[i + 1]) if 0 <= int(flat[i + 1]) <= 8 else len(vals)
        out.append((name, [int(v) for v in flat[i:i + n]]))
        i += n
    return out


def _show(name: str, vals: List[int], dtypes: Sequence[str]) -> str:
    if name.endswith(REAL):
        real = "the default" if vals[0] == -1 else repr(struct.unpack("<d", struct.pack("<q", vals[0]))[0])
        return f"{name[:-len(REAL)]} = {real}"
    if name == "option " + GRAD:
        return "inputs that require grad" if vals[0] else "no input that requires grad (or grad mode off)"
    if name in ("magic", "op") or name.startswith("option "):
        return f"{name} = {vals[0]}"
    if name == "chunkgen version":
        return f"chunkgen version {vals[0]}"
    if name == "cu_seqlens":
        return "no cu_seqlens" if vals[0] == -1 else f"cu_seqlens of {vals[0]} offsets (values hash {vals[1]:x})"
    if vals[0] == -1:
        return f"{name} absent"
    code, shape = vals[0], ["T_local" if d == -2 else d for d in vals[2:]]
    dt = dtypes[code] if 0 <= code < len(dtypes) else str(code)
    return f"{name} {dt} shape ({', '.join(map(str, shape))})"


def check_descriptors(what: str, gathered: Sequence[Sequence[int]], fields, dtypes: Sequence[str]) -> List[int]:
    """Compare every rank's descriptor (gathered: one row per rank) with rank 0's; raise
    ValueError naming the first field that differs, the same message on every rank.
    Returns the ranks' local token counts."""
    rows = [[int(v) for v in row] for row in gathered]
    base = rows[0]
    for r, row in enumerate(rows[1:], 1):
        if row[1:] == base[1:]:
            continue
        a, b = _decode(base, fields), _decode(row, fields)
        for (name, va), (_, vb) in zip(a, b):
            if va != vb:
                why = ("every rank's outputs must require grad or none's: the exchange's backward is a collective "
                       "that every rank joins" if name == "option " + GRAD else
                       "every rank must call with the same options, dtypes, chunkgen version and shapes but for the "
                       "local token count")
                raise ValueError(f"{what}: the ranks disagree: rank {r} has {_show(name, vb, dtypes)} but rank 0 has "
                                 f"{_show(name, va, dtypes)} ({why})")
        raise ValueError(f"{what}: the ranks disagree: rank {r}'s call descriptor differs from rank 0's")
    lens = [row[0] for row in rows]
    if any(n < 0 for n in lens):
        raise ValueError(f"{what}: local token counts {lens} but expected >= 0 on every rank")
    return lens
