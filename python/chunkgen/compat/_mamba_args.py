"""The argument rules of mamba_ssm's mamba_chunk_scan_combined shared by the PyTorch and the
JAX entry points (chunkgen.compat.mamba, chunkgen.compat.jax_mamba): shape checks that name
mamba_ssm's arguments, the varlen rules and the return tuple. No torch or jax here: the
functions take shapes, numpy arrays and the outputs."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

Shape = Tuple[int, ...]


def expect(name: str, shape: Optional[Sequence[int]], want: Tuple[int, ...], what: str) -> None:
    """ValueError naming `name` when its shape (None: the argument is absent) is not `want`."""
    if shape is not None and tuple(shape) != tuple(want):
        raise ValueError(f"{name}: shape {tuple(shape)} but expected {tuple(want)} {what}")


def chunk_scan_dims(x: Shape, dt: Shape, A: Shape, B: Shape, C: Shape, D: Optional[Shape], z: Optional[Shape],
                    dt_bias: Optional[Shape], initial_states: Optional[Shape],
                    seq_idx: Optional[Shape]) -> Tuple[int, int, int, int, int, int]:
    """mamba_chunk_scan_combined's shapes checked (what mamba_ssm asserts, as ValueErrors
    naming the argument); returns (batch, seqlen, nheads, headdim, ngroups, dstate)."""
    if len(x) != 4:
        raise ValueError(f"x: shape {tuple(x)} but expected 4 dimensions (batch, seqlen, nheads, headdim)")
    if len(B) != 4:
        raise ValueError(f"B: shape {tuple(B)} but expected 4 dimensions (batch, seqlen, ngroups, dstate)")
    batch, seqlen, nheads, headdim = x
    ngroups, dstate = B[2], B[3]
    expect("dt", dt, (batch, seqlen, nheads), "(batch, seqlen, nheads)")
    expect("A", A, (nheads,), "(nheads,)")
    expect("B", B, (batch, seqlen, ngroups, dstate), "(batch, seqlen, ngroups, dstate)")
    expect("C", C, (batch, seqlen, ngroups, dstate), "(batch, seqlen, ngroups, dstate) like B")
    if ngroups < 1 or nheads % ngroups:
        raise ValueError(f"B: ngroups = {ngroups} but expected a divisor of nheads = {nheads}")
    if D is not None and tuple(D) != (nheads,):
        expect("D", D, (nheads, headdim), "(nheads, headdim) or (nheads,)")
    expect("z", z, (batch, seqlen, nheads, headdim), "(batch, seqlen, nheads, headdim) like x")
    expect("dt_bias", dt_bias, (nheads,), "(nheads,)")
    expect("initial_states", initial_states, (batch, nheads, headdim, dstate), "(batch, nheads, headdim, dstate)")
    expect("seq_idx", seq_idx, (batch, seqlen), "(batch, seqlen)")
    return batch, seqlen, nheads, headdim, ngroups, dstate


def check_dt_limit(dt_limit) -> Tuple[float, float]:
    try:
        lo, hi = (float(v) for v in dt_limit)
    except (TypeError, ValueError):
        raise ValueError(f"dt_limit: {dt_limit!r} but expected a pair (min, max) of numbers") from None
    if not lo <= hi:
        raise ValueError(f"dt_limit: {dt_limit!r} but expected min <= max")
    return lo, hi


def varlen_rules(batch: int, seq_idx_given: bool, cu_seqlens_given: bool, return_varlen_states: bool) -> bool:
    """Whether the call runs chunkgen's varlen path (per-sequence states from cu_seqlens).
    mamba_ssm uses cu_seqlens only for return_varlen_states (the state resets come from
    seq_idx alone), needs batch 1 there, and its varlen states are the sequences' final
    states only when seq_idx separates the same sequences: a call without seq_idx is
    refused (mamba_ssm would run the packed sequences as one and take states that depend
    on its chunk size)."""
    if not return_varlen_states:
        return False  # mamba_ssm ignores cu_seqlens then
    if not cu_seqlens_given:
        raise ValueError("cu_seqlens: None but return_varlen_states=True needs it (the sequences' offsets)")
    if batch != 1:
        raise ValueError(f"x: batch {batch} but return_varlen_states=True needs batch 1 (the sequences packed "
                         f"along seqlen, cu_seqlens their offsets; as mamba_ssm)")
    if not seq_idx_given:
        raise ValueError("seq_idx: None with return_varlen_states=True; pass seq_idx, the sequence index of each "
                         "token (as mamba_ssm's Mamba2 does): without it mamba_ssm runs the packed sequences as one "
                         "sequence and its varlen states depend on its chunk size")
    return True


def check_offsets_match(seq_idx: np.ndarray, cu: np.ndarray) -> None:
    """Every sequence of cu_seqlens starts where seq_idx starts a new sequence (seq_idx
    [1, seqlen] and cu [N + 1] as host arrays): then the varlen states are mamba_ssm's."""
    s = np.asarray(seq_idx).reshape(-1)
    cu = np.asarray(cu).reshape(-1)
    for c in cu[1:-1]:
        c = int(c)
        if 0 < c < s.size and s[c] == s[c - 1]:
            raise ValueError(f"cu_seqlens: offset {c} is inside a sequence of seq_idx (seq_idx[0, {c - 1}] == "
                             f"seq_idx[0, {c}] == {s[c]}); return_varlen_states needs seq_idx to start a new "
                             f"sequence at every offset (seq_idx made from cu_seqlens)")


def returns(out, final_states, varlen_states, return_final_states: bool, return_varlen_states: bool):
    """mamba_ssm's return convention: out; (out, final_states); (out, varlen_states);
    (out, final_states, varlen_states)."""
    if not return_varlen_states:
        return (out, final_states) if return_final_states else out
    return (out, final_states, varlen_states) if return_final_states else (out, varlen_states)
