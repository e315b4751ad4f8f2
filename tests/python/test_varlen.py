"""cu_seqlens in the bindings (docs/varlen.md): a packed call equals the per-sequence calls
concatenated, forward and every gradient (states per sequence), in numpy and torch, both
SSD layouts, grouped q/k (G = 2 < H = 4) and grouped B/C, int32 and int64 offsets; the
torch ops' fake kernels and torch.compile; the library's message for a bad offset."""
import itertools

import numpy as np
import pytest
import torch

import chunkgen
import chunkgen.torch as ct
from ref import rel_err

LENGTHS = [1, 37, 64, 200, 0, 5]
TOL = 1e-5  # packed against per-sequence calls: the same float32 path, sequence by sequence
IDX = {"int32": torch.int32, "int64": torch.int64}


def offsets(lengths, dtype):
    return torch.tensor([0] + list(itertools.accumulate(lengths)), dtype=dtype)


def leaves(t):
    return {n: (x.detach().clone().requires_grad_() if x is not None else None) for n, x in t.items()}


def ssd_inputs(T, N, h0, layout, seed=0):
    G, H, dk, dv = 2, 4, 5, 7
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    t = dict(q=r(1, T, G, dk) / dk ** 0.5, k=r(1, T, G, dk) / dk ** 0.5, v=r(1, T, H, dv),
             log_alpha=-torch.rand(1, T, H, generator=g) * 0.5, h0=r(N, H, dk, dv) if h0 else None)
    if layout == "head":  # head-major: the same values as contiguous [1, heads, T, dim]
        t = {n: (x.transpose(1, 2).contiguous() if x is not None and n != "h0" else x) for n, x in t.items()}
    return t


def sscan_inputs(L, N, h0, seed=0):
    D, Ns, G = 6, 5, 2
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    u = lambda *s: torch.rand(*s, generator=g)  # noqa: E731
    return dict(x=r(1, L, D), delta=u(1, L, D) * 0.5, A=-u(D, Ns) - 0.2, B=r(1, L, G, Ns), C=r(1, L, G, Ns),
                D=r(D), z=r(1, L, D), delta_bias=u(D) * 0.2, h0=r(N, D, Ns) if h0 else None)


def packed_vs_split(fn, names, per_token, seq_dim, state_shape, lengths, idx, h0, dhT):
    """fn(tensors, cu) -> (out, hT) on the leaves; the packed call against one call per
    sequence over slices of the same leaves (a 0-length sequence: hT = h0 or 0), the
    same loss, every gradient."""
    cu = offsets(lengths, IDX[idx])
    N, T = len(lengths), sum(lengths)
    base = per_token(T, N, h0)
    gen = torch.Generator().manual_seed(1)
    x = leaves(base)
    out, hT = fn(x, cu)
    w_o = torch.randn(out.shape, generator=gen)
    w_h = torch.randn(N, *state_shape, generator=gen)
    assert hT.shape == (N, *state_shape)
    loss = (out * w_o).sum() + ((hT * w_h).sum() if dhT else 0)
    g = torch.autograd.grad(loss, [x[n] for n in names if x[n] is not None])

    y = leaves(base)
    outs, hTs = [], []
    for n, (s, e) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
        h0_n = y["h0"][n:n + 1] if y["h0"] is not None else None
        if e == s:
            outs.append(None)
            hTs.append(h0_n[0] if h0_n is not None else torch.zeros(state_shape))
            continue
        sub = {k: (v.narrow(seq_dim(k), s, e - s) if k in per_token.tokens else v) for k, v in y.items()}
        sub["h0"] = h0_n
        o_n, hT_n = fn(sub, None)
        outs.append(o_n)
        hTs.append(hT_n[0])
    d = seq_dim("o")
    out_s = torch.cat([o for o in outs if o is not None], dim=d)
    hT_s = torch.stack(hTs)
    loss_s = (out_s * w_o).sum() + ((hT_s * w_h).sum() if dhT else 0)
    g_s = torch.autograd.grad(loss_s, [y[n] for n in names if y[n] is not None])

    assert rel_err(out, out_s) < TOL
    assert rel_err(hT, hT_s) < TOL
    for n, a, b in zip([n for n in names if x[n] is not None], g, g_s):
        assert a.shape == b.shape and rel_err(a, b) < TOL, n
    if h0:  # a 0-length sequence passes its state through, and its gradient
        empty = [n for n, L_ in enumerate(lengths) if L_ == 0]
        assert torch.equal(hT[empty].detach(), base["h0"][empty])


SSD_NAMES = ("q", "k", "v", "log_alpha", "h0")


@pytest.mark.parametrize("layout,idx,h0,dhT", [("token", "int32", True, True), ("head", "int64", True, True),
                                               ("token", "int64", False, True), ("head", "int32", True, False),
                                               ("token", "int32", False, False)])
def test_torch_ssd_packed_equals_per_sequence(layout, idx, h0, dhT):
    def per_token(T, N, h):
        return ssd_inputs(T, N, h, layout)
    per_token.tokens = ("q", "k", "v", "log_alpha")

    def fn(t, cu):
        return ct.ssd(*(t[n] for n in SSD_NAMES), layout=layout, cu_seqlens=cu)

    packed_vs_split(fn, SSD_NAMES, per_token, lambda n: 2 if layout == "head" else 1, (4, 5, 7), LENGTHS, idx, h0,
                    dhT)


SSCAN_NAMES = ("x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0")


@pytest.mark.parametrize("idx,h0,dhT,softplus", [("int32", True, True, True), ("int64", False, True, False),
                                                 ("int64", True, False, True)])
def test_torch_sscan_packed_equals_per_sequence(idx, h0, dhT, softplus):
    def per_token(L, N, h):
        return sscan_inputs(L, N, h)
    per_token.tokens = ("x", "delta", "B", "C", "z")

    def fn(t, cu):
        return ct.sscan(*(t[n] for n in SSCAN_NAMES), delta_softplus=softplus, cu_seqlens=cu)

    packed_vs_split(fn, SSCAN_NAMES, per_token, lambda n: 1, (6, 5), LENGTHS, idx, h0, dhT)


def test_numpy_packed_equals_per_sequence():
    """The plain numpy functions (forward and backward ops) with int32 and int64 offsets."""
    rng = np.random.default_rng(3)
    N, T = len(LENGTHS), sum(LENGTHS)
    t = {n: (x.numpy() if x is not None else None) for n, x in ssd_inputs(T, N, True, "token").items()}
    dout = rng.standard_normal(t["v"].shape).astype(np.float32)
    dhT = rng.standard_normal(t["h0"].shape).astype(np.float32)
    for dt in (np.int32, np.int64):
        cu = np.array([0] + list(itertools.accumulate(LENGTHS)), dtype=dt)
        o, hT = chunkgen.ssd(t["q"], t["k"], t["v"], t["log_alpha"], t["h0"], cu_seqlens=cu)
        grads = chunkgen.ssd_bwd(t["q"], t["k"], t["v"], t["log_alpha"], dout, t["h0"], dhT, cu_seqlens=cu)
        assert hT.shape == t["h0"].shape and grads[4].shape == t["h0"].shape
        for n, (s, e) in enumerate(zip(cu[:-1], cu[1:])):
            if e == s:
                np.testing.assert_array_equal(hT[n], t["h0"][n])
                np.testing.assert_array_equal(grads[4][n], dhT[n])
                continue
            sl = lambda a: a[:, s:e]  # noqa: E731
            o_n, hT_n = chunkgen.ssd(sl(t["q"]), sl(t["k"]), sl(t["v"]), sl(t["log_alpha"]), t["h0"][n:n + 1])
            g_n = chunkgen.ssd_bwd(sl(t["q"]), sl(t["k"]), sl(t["v"]), sl(t["log_alpha"]), sl(dout),
                                   t["h0"][n:n + 1], dhT[n:n + 1])
            np.testing.assert_allclose(o[:, s:e], o_n, rtol=0, atol=1e-6)
            np.testing.assert_allclose(hT[n], hT_n[0], rtol=0, atol=1e-6)
            for a, b in zip(grads[:4], g_n[:4]):
                np.testing.assert_allclose(a[:, s:e], b, rtol=0, atol=1e-6)
            np.testing.assert_allclose(grads[4][n], g_n[4][0], rtol=0, atol=1e-6)

    s = {n: (x.numpy() if x is not None else None) for n, x in sscan_inputs(T, N, True).items()}
    cu = np.array([0] + list(itertools.accumulate(LENGTHS)), dtype=np.int64)
    y, hT = chunkgen.sscan(*(s[n] for n in SSCAN_NAMES), cu_seqlens=cu)
    assert y.shape == s["x"].shape and hT.shape == s["h0"].shape
    for n, (a, e) in enumerate(zip(cu[:-1], cu[1:])):
        if e == a:
            np.testing.assert_array_equal(hT[n], s["h0"][n])
            continue
        sub = {k: (v[:, a:e] if k in ("x", "delta", "B", "C", "z") else v) for k, v in s.items()}
        sub["h0"] = s["h0"][n:n + 1]
        y_n, hT_n = chunkgen.sscan(*(sub[k] for k in SSCAN_NAMES))
        np.testing.assert_allclose(y[:, a:e], y_n, rtol=0, atol=1e-6)
        np.testing.assert_allclose(hT[n], hT_n[0], rtol=0, atol=1e-6)


def test_fake_and_compile():
    """The fake kernels give the states N sequences; torch.compile(fullgraph=True) traces a
    varlen call and matches the eager one; opcheck passes with cu_seqlens."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    N, T = len(LENGTHS), sum(LENGTHS)
    t = ssd_inputs(T, N, True, "token")
    cu = offsets(LENGTHS, torch.int32)
    short = cu[:-1].clone()
    with FakeTensorMode() as mode:
        f = {n: mode.from_tensor(x) for n, x in t.items()}
        o, hT = torch.ops.chunkgen.ssd_fwd(*(f[n] for n in SSD_NAMES), "token", mode.from_tensor(cu))
        assert tuple(o.shape) == (1, T, 4, 7) and tuple(hT.shape) == (N, 4, 5, 7)
        with pytest.raises(ValueError, match="h0: shape"):  # the library's validation, when traced
            torch.ops.chunkgen.ssd_fwd(*(f[n] for n in SSD_NAMES), "token", mode.from_tensor(short))

    args = tuple(t[n] for n in SSD_NAMES) + ("token", cu)
    torch.library.opcheck(torch.ops.chunkgen.ssd_fwd.default, args)
    s = sscan_inputs(T, N, True)
    torch.library.opcheck(torch.ops.chunkgen.sscan_fwd.default, tuple(s[n] for n in SSCAN_NAMES) + (True, cu))

    def f(q, k, v, la, h0, cu):
        o, hT = ct.ssd(q, k, v, la, h0, cu_seqlens=cu)
        return o.sum() + hT.square().sum()

    x = leaves(t)
    eager = f(*(x[n] for n in SSD_NAMES), cu)
    g_e = torch.autograd.grad(eager, [x[n] for n in SSD_NAMES])
    compiled = torch.compile(f, fullgraph=True)(*(x[n] for n in SSD_NAMES), cu)
    g_c = torch.autograd.grad(compiled, [x[n] for n in SSD_NAMES])
    assert rel_err(compiled, eager) < TOL
    for a, b in zip(g_c, g_e):
        assert rel_err(a, b) < TOL


def test_bad_offsets_message():
    t = ssd_inputs(10, 3, True, "token")
    args = tuple(t[n] for n in SSD_NAMES)
    bad = torch.tensor([0, 6, 5, 10], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"cu_seqlens\[2\] = 5 but expected >= cu_seqlens\[1\] = 6"):
        ct.ssd(*args, cu_seqlens=bad)
    with pytest.raises(ValueError, match=r"cu_seqlens\[3\] = 9 but expected T = 10"):
        chunkgen.ssd(*(a.numpy() for a in args), cu_seqlens=np.array([0, 2, 4, 9], dtype=np.int64))
    with pytest.raises(ValueError, match="cu_seqlens: dtype .*but expected int32 or int64"):
        chunkgen.ssd(*(a.numpy() for a in args), cu_seqlens=np.array([0, 2, 4, 10], dtype=np.float32))
    with pytest.raises(ValueError, match="cu_seqlens: dtype .*but expected int32 or int64"):
        ct.ssd(*args, cu_seqlens=torch.tensor([0, 2, 4, 10], dtype=torch.int16))
    with pytest.raises(ValueError, match="h0: shape"):  # states per sequence: N = 3 here
        ct.ssd(*args, cu_seqlens=torch.tensor([0, 10], dtype=torch.int64))
