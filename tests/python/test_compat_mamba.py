"""chunkgen.compat.mamba against mamba_ssm's own pure-PyTorch references (tests/python/refs/
mamba_ref.py, pinned from mamba_ssm 2.3.2.post1): same inputs through mamba_ssm's
convention, every output and every gradient within 1e-4 (float32) on odd shapes."""
import pytest
import torch
import torch.nn.functional as F

from compat_util import compare
from refs.mamba_ref import (selective_scan_ref, selective_state_update_ref, ssd_chunk_scan_combined_ref,
                            ssd_minimal_discrete, ssd_selective_scan)

from chunkgen.compat import mamba as cm


def _inputs(batch=2, seqlen=100, nheads=6, headdim=48, ngroups=2, dstate=40, seed=0, D=None, z=False,
            dt_bias=False, init=False, raw_dt=False):
    """mamba_chunk_scan_combined's tensors; dt positive (or raw, for softplus)."""
    g = torch.Generator().manual_seed(seed)
    r = (lambda *s: torch.randn(*s, generator=g))
    t = dict(x=r(batch, seqlen, nheads, headdim),
             dt=(r(batch, seqlen, nheads) - 1.0) if raw_dt else torch.rand(batch, seqlen, nheads, generator=g) * 0.3
             + 0.02,
             A=-(torch.rand(nheads, generator=g) + 0.5),
             B=r(batch, seqlen, ngroups, dstate) * 0.4, C=r(batch, seqlen, ngroups, dstate) * 0.4)
    if D == "1d":
        t["D"] = r(nheads)
    elif D == "2d":
        t["D"] = r(nheads, headdim)
    if z:
        t["z"] = r(batch, seqlen, nheads, headdim)
    if dt_bias:
        t["dt_bias"] = r(nheads) * 0.5
    if init:
        t["initial_states"] = r(batch, nheads, headdim, dstate) * 0.5
    return t


def _heads(M, nheads):
    """B / C (batch, seqlen, ngroups, dstate) per head, as ssd_minimal_discrete takes them."""
    return M.repeat_interleave(nheads // M.shape[2], dim=2)


def _minimal(x, dt, A, B, C, initial_states=None, block_len=None):
    """mamba_chunk_scan_combined by ssd_minimal_discrete, as mamba_ssm's ssd_minimal.py
    test feeds it: X = x * dt, A = A * dt, B, C per head; block_len divides seqlen."""
    H = x.shape[2]
    y, final = ssd_minimal_discrete(x * dt[..., None], A * dt, _heads(B, H), _heads(C, H), block_len or x.shape[1],
                                    initial_states=None if initial_states is None else initial_states[:, None])
    return y, final


@pytest.mark.parametrize("seqlen,block,init", [(100, 25, True), (100, 20, False), (1, 1, True), (37, 37, True)])
def test_chunk_scan_vs_ssd_minimal_discrete(seqlen, block, init):
    t = _inputs(seqlen=seqlen, init=init, seed=seqlen)
    compare(lambda **a: cm.mamba_chunk_scan_combined(chunk_size=64, return_final_states=True, **a),
            lambda **a: _minimal(block_len=block, **a), t)


@pytest.mark.parametrize("D,z,bias,softplus", [("1d", True, True, True), ("2d", False, True, True),
                                               (None, True, False, False), ("2d", True, False, True)])
def test_chunk_scan_vs_chunked_reference(D, z, bias, softplus):
    """ssd_chunk_scan_combined_ref (mamba_ssm's chunked reference: D, z, dt_bias, softplus);
    the reference at chunk 32, chunkgen given chunk_size 64 (a hint: seqlen 96 is not a
    multiple of it)."""
    t = _inputs(seqlen=96, D=D, z=z, dt_bias=bias, raw_dt=softplus, seed=3)
    compare(lambda **a: cm.mamba_chunk_scan_combined(chunk_size=64, dt_softplus=softplus, **a),
            lambda **a: ssd_chunk_scan_combined_ref(chunk_size=32, dt_softplus=softplus, **a), t)


@pytest.mark.parametrize("dt_limit", [(0.2, 1.5), (0.0, float("inf"))])
def test_chunk_scan_dt_limit_vs_selective_scan(dt_limit):
    """ssd_selective_scan (mamba_ssm's reference with dt_limit, on selective_scan_ref): the
    clamp biting at both ends, dt_bias, softplus, D (nheads, headdim), z, seqlen 37."""
    t = _inputs(batch=2, seqlen=37, nheads=6, headdim=8, ngroups=2, dstate=40, D="2d", z=True, dt_bias=True,
                raw_dt=True, seed=5)
    if dt_limit[0] > 0:
        dt = F.softplus(t["dt"] + t["dt_bias"])
        assert (dt < dt_limit[0]).any() and (dt > dt_limit[1]).any()  # the clamp bites at both ends
    compare(lambda **a: cm.mamba_chunk_scan_combined(chunk_size=16, dt_softplus=True, dt_limit=dt_limit, **a),
            lambda **a: ssd_selective_scan(dt_softplus=True, dt_limit=dt_limit, **a), t)


def _segments(seq_idx_row):
    """(start, end) of each run of equal values."""
    s = seq_idx_row.tolist()
    starts = [0] + [i for i in range(1, len(s)) if s[i] != s[i - 1]]
    return list(zip(starts, starts[1:] + [len(s)]))


def _per_sequence(x, dt, A, B, C, seq_idx, initial_states=None):
    """The reference of a packed batch: ssd_minimal_discrete on each sequence alone (the
    first sequence of each row from its initial state): out, final and varlen states."""
    outs, finals, states = [], [], []
    for b in range(x.shape[0]):
        row = []
        for i, (s, e) in enumerate(_segments(seq_idx[b])):
            h0 = initial_states[b:b + 1] if (initial_states is not None and i == 0) else None
            y, fin = _minimal(x[b:b + 1, s:e], dt[b:b + 1, s:e], A, B[b:b + 1, s:e], C[b:b + 1, s:e], h0)
            row.append(y)
            states.append(fin)
        outs.append(torch.cat(row, dim=1))
        finals.append(states[-1])
    return torch.cat(outs), torch.cat(finals), torch.cat(states)


def test_chunk_scan_seq_idx_any_batch():
    """seq_idx with batch 2 (mamba_ssm's packing of several sequences per row): the state
    resets at each new index; initial_states go to sequence 0 of each row."""
    t = _inputs(batch=2, seqlen=50, nheads=6, headdim=48, ngroups=2, dstate=40, init=True, seed=11)
    seq_idx = torch.tensor([[0] * 20 + [1] * 17 + [2] * 13, [0] * 3 + [1] * 47], dtype=torch.int32)
    compare(lambda **a: cm.mamba_chunk_scan_combined(chunk_size=8, seq_idx=seq_idx, return_final_states=True, **a),
            lambda **a: _per_sequence(seq_idx=seq_idx, **a)[:2], t)


def test_chunk_scan_varlen_states():
    """cu_seqlens with return_varlen_states (batch 1, seq_idx made from cu_seqlens, as
    mamba_ssm's Mamba2 calls it): out, final_states and each sequence's state, and their
    gradients (mamba_ssm's backward refuses varlen states; chunkgen's takes them)."""
    t = _inputs(batch=1, seqlen=50, init=True, seed=13)
    cu = torch.tensor([0, 20, 21, 37, 50], dtype=torch.int64)
    seq_idx = torch.repeat_interleave(torch.arange(4, dtype=torch.int32), cu.diff())[None]
    compare(lambda **a: cm.mamba_chunk_scan_combined(chunk_size=64, seq_idx=seq_idx, cu_seqlens=cu,
                                                     return_final_states=True, return_varlen_states=True, **a),
            lambda **a: _per_sequence(seq_idx=seq_idx, **a), t)
    out, vs = cm.mamba_chunk_scan_combined(chunk_size=64, seq_idx=seq_idx, cu_seqlens=cu, return_varlen_states=True,
                                           **t)
    assert vs.shape == (4, 6, 48, 40)
    # without return_varlen_states cu_seqlens is ignored, as in mamba_ssm
    plain = cm.mamba_chunk_scan_combined(chunk_size=64, cu_seqlens=cu, **t)
    ref, _ = _minimal(**t)
    assert torch.allclose(plain, ref, atol=1e-4, rtol=1e-4)


def test_chunk_scan_returns_and_dtypes():
    t = _inputs(batch=1, seqlen=9, nheads=2, headdim=3, ngroups=1, dstate=5, init=True)
    out = cm.mamba_chunk_scan_combined(chunk_size=4, **t)
    assert isinstance(out, torch.Tensor) and out.shape == t["x"].shape and out.dtype == torch.float32
    out, fin = cm.mamba_chunk_scan_combined(chunk_size=4, return_final_states=True, **t)
    assert fin.shape == (1, 2, 3, 5) and fin.dtype == torch.float32
    xb = {k: (v.bfloat16() if k in ("x", "B", "C") else v) for k, v in t.items()}
    ob, fb = cm.mamba_chunk_scan_combined(chunk_size=4, return_final_states=True, **xb)
    assert ob.dtype == torch.bfloat16 and fb.dtype == torch.float32
    assert (ob.float() - out).abs().max() <= 0.05 * out.abs().max()


def test_chunk_scan_errors():
    t = _inputs(batch=1, seqlen=9, nheads=4, headdim=3, ngroups=2, dstate=5)
    bad = dict(t, B=t["B"][..., :4])
    with pytest.raises(ValueError, match=r"^C: shape \(1, 9, 2, 5\) but expected \(1, 9, 2, 4\)"):
        cm.mamba_chunk_scan_combined(chunk_size=4, **bad)
    with pytest.raises(ValueError, match=r"^dt: shape"):
        cm.mamba_chunk_scan_combined(chunk_size=4, **dict(t, dt=t["dt"][:, :8]))
    with pytest.raises(ValueError, match=r"^B: ngroups = 3 but expected a divisor of nheads = 4"):
        cm.mamba_chunk_scan_combined(chunk_size=4, **dict(t, B=t["B"][:, :, :1].expand(1, 9, 3, 5),
                                                          C=t["C"][:, :, :1].expand(1, 9, 3, 5)))
    cu = torch.tensor([0, 4, 9])
    with pytest.raises(ValueError, match=r"^seq_idx: None with return_varlen_states=True"):
        cm.mamba_chunk_scan_combined(chunk_size=4, cu_seqlens=cu, return_varlen_states=True, **t)
    with pytest.raises(ValueError, match=r"^cu_seqlens: None but return_varlen_states=True"):
        cm.mamba_chunk_scan_combined(chunk_size=4, return_varlen_states=True, **t)
    wrong = torch.tensor([[0] * 5 + [1] * 4], dtype=torch.int32)  # starts at 5, cu_seqlens at 4
    with pytest.raises(ValueError, match=r"^cu_seqlens: offset 4 is inside a sequence of seq_idx"):
        cm.mamba_chunk_scan_combined(chunk_size=4, cu_seqlens=cu, seq_idx=wrong, return_varlen_states=True, **t)
    with pytest.raises(ValueError, match=r"^dt_limit"):
        cm.mamba_chunk_scan_combined(chunk_size=4, dt_limit=(1.0, 0.5), **t)


# ------------------------------------------------------------------ Mamba-1

def _sscan_inputs(batch=2, dim=10, L=23, N=7, bc="3d", G=2, D=True, z=True, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = (lambda *s: torch.randn(*s, generator=g))
    shape = {"3d": (batch, N, L), "4d": (batch, G, N, L), "2d": (dim, N)}[bc]
    t = dict(u=r(batch, dim, L), delta=torch.rand(batch, dim, L, generator=g) * 0.5 - 0.6 if bias else
             torch.rand(batch, dim, L, generator=g) * 0.3 + 0.05,
             A=-(torch.rand(dim, N, generator=g) + 0.3), B=r(*shape) * 0.5, C=r(*shape) * 0.5)
    if D:
        t["D"] = r(dim)
    if z:
        t["z"] = r(batch, dim, L)
    if bias:
        t["delta_bias"] = torch.rand(dim, generator=g) * 0.5 + 0.5
    return t


@pytest.mark.parametrize("bc,D,z,softplus", [("3d", True, True, True), ("4d", True, False, True),
                                             ("2d", False, True, False), ("4d", False, False, False)])
def test_selective_scan_fn_vs_ref(bc, D, z, softplus):
    t = _sscan_inputs(bc=bc, D=D, z=z, bias=softplus, seed=hash(bc) % 100)
    compare(lambda **a: cm.selective_scan_fn(delta_softplus=softplus, return_last_state=True, **a),
            lambda **a: selective_scan_ref(delta_softplus=softplus, return_last_state=True, **a), t)
    out = cm.selective_scan_fn(delta_softplus=softplus, **t)
    assert isinstance(out, torch.Tensor) and out.shape == t["u"].shape


def test_selective_scan_fn_seqlen_1_and_errors():
    t = _sscan_inputs(L=1, dim=5, N=3, seed=2)
    compare(lambda **a: cm.selective_scan_fn(delta_softplus=True, **a),
            lambda **a: selective_scan_ref(delta_softplus=True, **a), t)
    with pytest.raises(ValueError, match=r"^A: complex"):
        cm.selective_scan_fn(t["u"], t["delta"], t["A"].to(torch.complex64), t["B"], t["C"])
    with pytest.raises(ValueError, match=r"^delta: shape"):
        cm.selective_scan_fn(t["u"], t["delta"][:, :4], t["A"], t["B"], t["C"])
    with pytest.raises(ValueError, match=r"^A: shape \(4, 3\) but expected \(5, dstate\)"):
        cm.selective_scan_fn(t["u"], t["delta"], t["A"][:4], t["B"], t["C"])


def _step_inputs(batch=3, nheads=6, dim=8, dstate=7, ngroups=2, tied=True, heads=True, seed=0):
    """selective_state_update's tensors; tied: Mamba-2's A, dt, dt_bias, D broadcast over
    dim (and dstate) with zero strides, as Mamba2.step passes them."""
    g = torch.Generator().manual_seed(seed)
    r = (lambda *s: torch.randn(*s, generator=g))
    if tied:
        A = (-(torch.rand(nheads, generator=g) + 0.5))[:, None, None].expand(nheads, dim, dstate)
        dt = r(batch, nheads)[..., None].expand(batch, nheads, dim)
        dt_bias = r(nheads)[:, None].expand(nheads, dim)
        D = r(nheads)[:, None].expand(nheads, dim)
    else:
        A, dt, dt_bias, D = -(torch.rand(nheads, dim, dstate, generator=g) + 0.5), r(batch, nheads, dim), \
            r(nheads, dim), r(nheads, dim)
    t = dict(x=r(batch, nheads, dim), dt=dt, A=A, B=r(batch, ngroups, dstate), C=r(batch, ngroups, dstate), D=D,
             z=r(batch, nheads, dim), dt_bias=dt_bias)
    if not heads:  # Mamba-1's (batch, dim) form
        t = {k: v[:, 0] if k in ("x", "dt", "z", "B", "C") else v[0] for k, v in t.items()}
    return t


@pytest.mark.parametrize("tied,heads,softplus", [(True, True, True), (False, True, False), (False, False, True)])
def test_selective_state_update_vs_ref(tied, heads, softplus):
    t = _step_inputs(tied=tied, heads=heads)
    shape = (3, 6, 8, 7) if heads else (3, 8, 7)
    state = torch.randn(shape, generator=torch.Generator().manual_seed(9))
    s_ref, s_ours = state.clone(), state.clone()
    ref = selective_state_update_ref(s_ref, dt_softplus=softplus, **t)
    ours = cm.selective_state_update(s_ours, dt_softplus=softplus, **t)
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    assert (ours - ref).abs().max() <= 1e-4 * ref.abs().max()
    assert (s_ours - s_ref).abs().max() <= 1e-4 * s_ref.abs().max()


def test_selective_state_update_slots_and_padding():
    """state_batch_indices picks each row's slot (mamba_ssm's reference has none: it runs
    on the gathered slots); a negative index is a padding row (out 0, no slot touched)."""
    t = _step_inputs(batch=3)
    state = torch.randn(5, 6, 8, 7, generator=torch.Generator().manual_seed(4))
    idx = torch.tensor([4, 0, 2], dtype=torch.int32)
    gathered = state[idx.long()].clone()
    ref = selective_state_update_ref(gathered, dt_softplus=True, **t)
    ours_state = state.clone()
    ours = cm.selective_state_update(ours_state, dt_softplus=True, state_batch_indices=idx, **t)
    assert (ours - ref).abs().max() <= 1e-4 * ref.abs().max()
    assert (ours_state[idx.long()] - gathered).abs().max() <= 1e-4 * gathered.abs().max()
    assert torch.equal(ours_state[[1, 3]], state[[1, 3]])  # other slots untouched
    pad_state = state.clone()
    out = cm.selective_state_update(pad_state, dt_softplus=True, state_batch_indices=torch.tensor([4, -1, 2]), **t)
    assert torch.equal(out[1], torch.zeros_like(out[1])) and torch.allclose(out[[0, 2]], ours[[0, 2]])
    assert torch.equal(pad_state[[0, 1, 3]], state[[0, 1, 3]])
    with pytest.raises(ValueError, match=r"^A: shape"):
        cm.selective_state_update(state.clone(), **dict(t, A=t["A"][:, :, :3]), state_batch_indices=idx)


def test_prefill_then_decode():
    """The chunked scan's final states continue by selective_state_update as mamba_ssm's
    Mamba2 does (prefill, then step): the step's output is the scan's next token."""
    t = _inputs(batch=2, seqlen=12, nheads=4, headdim=5, ngroups=2, dstate=6, D="1d", z=True, dt_bias=True,
                raw_dt=True, seed=21)
    full = cm.mamba_chunk_scan_combined(chunk_size=8, dt_softplus=True, **t)
    head = {k: (v[:, :11] if k in ("x", "dt", "B", "C", "z") else v) for k, v in t.items()}
    _, state = cm.mamba_chunk_scan_combined(chunk_size=8, dt_softplus=True, return_final_states=True, **head)
    state = state.contiguous()
    H, P, N = 4, 5, 6
    out = cm.selective_state_update(
        state, t["x"][:, 11], t["dt"][:, 11, :, None].expand(2, H, P), t["A"][:, None, None].expand(H, P, N),
        t["B"][:, 11], t["C"][:, 11], D=t["D"][:, None].expand(H, P), z=t["z"][:, 11],
        dt_bias=t["dt_bias"][:, None].expand(H, P), dt_softplus=True)
    assert (out - full[:, 11]).abs().max() <= 1e-4 * full.abs().max()
