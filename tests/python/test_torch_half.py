"""chunkgen.torch with torch.bfloat16 / torch.float16 tensors (issue #15 item 1): forward and
every gradient vs torch float64 autograd on the upcast rounded inputs (ref.py), within the
16-bit accuracy rule (half_ref.py); the outputs' and the gradients' dtypes; the registered
ops' fake kernels (dtypes, the library's messages for a bad mix at trace time), opcheck,
torch.compile and the nn module in bfloat16."""
import copy
import itertools

import pytest
import torch

import chunkgen
import chunkgen.torch as ct
from chunkgen.nn import Mamba2Mixer
from half_ref import check_accuracy
from ref import rel_err, sscan_ref, ssd_ref

HALF = (torch.bfloat16, torch.float16)
SSD = ("q", "k", "v", "log_alpha", "h0")
SSCAN = ("x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0")


def leaves(t64: dict, dtypes: dict, device="cpu"):
    """The test's leaves: each float64 tensor rounded to its dtype (default float32)."""
    return {n: (x.to(dtypes.get(n, torch.float32)).to(device).requires_grad_() if x is not None else None)
            for n, x in t64.items()}


def upcast(x: dict):
    """The rounded inputs in float64 (the reference's leaves)."""
    return {n: (t.detach().double().cpu().requires_grad_() if t is not None else None) for n, t in x.items()}


def ssd64(B, T, G, H, dk, dv, h0, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    return dict(q=r(B, T, G, dk) / dk ** 0.5, k=r(B, T, G, dk) / dk ** 0.5, v=r(B, T, H, dv),
                log_alpha=-torch.rand(B, T, H, generator=g, dtype=torch.float64) * 0.5,
                h0=r(B, H, dk, dv) if h0 else None)


def sscan64(Bsz, L, D, N, G, opt, h0, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    u = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)  # noqa: E731
    bc = (Bsz, L, G, N) if G else (Bsz, L, N)
    return dict(x=r(Bsz, L, D), delta=u(Bsz, L, D) * 0.5, A=-u(D, N) - 0.2, B=r(*bc), C=r(*bc),
                D=r(D) if opt else None, z=r(Bsz, L, D) if opt else None, delta_bias=u(D) * 0.2 if opt else None,
                h0=r(Bsz, D, N) if h0 else None)


def compare(names, outs, outs_r, want_dtypes, x, g, g_r):
    """Outputs and gradients: dtypes as the rule says, errors within the accuracy rule."""
    for o, o_r, dt, n in zip(outs, outs_r, want_dtypes, ("out", "state")):
        assert o.dtype == dt, (n, o.dtype, dt)
        check_accuracy(n, o, o_r, o_r.to(o.dtype), rel_err, grad=False)
    for n in names:
        assert g[n].dtype == x[n].dtype, (n, g[n].dtype, x[n].dtype)  # a gradient has its input's dtype
        check_accuracy("d" + n, g[n], g_r[n], g_r[n].to(g[n].dtype), rel_err, grad=True)


def run_ssd(x, layout, dhT=True, seed=1):
    """chunkgen.torch.ssd on leaves x (token-major; head-major as transposed views) and
    torch float64 autograd on the upcast leaves, with the same rounded cotangents."""
    x64 = upcast(x)
    B, T, H, dv = x["v"].shape
    dk = x["q"].shape[3]
    gen = torch.Generator().manual_seed(seed)
    w_o = torch.randn(B, T, H, dv, generator=gen, dtype=torch.float64)
    w_h = torch.randn(B, H, dk, dv, generator=gen, dtype=torch.float64)
    if layout == "head":
        o, hT = ct.ssd(*(x[n].transpose(1, 2) for n in SSD[:4]), x["h0"], layout="head")
        assert o.shape == (B, H, T, dv)
        o = o.transpose(1, 2)
    else:
        o, hT = ct.ssd(*(x[n] for n in SSD))
    # the cotangents autograd passes: the weights rounded to each output's dtype
    w_o_r, w_h_r = w_o.to(o.dtype).double(), w_h.to(hT.dtype).double()
    loss = (o.double() * w_o).sum() + ((hT.double() * w_h).sum() if dhT else 0)
    names = [n for n in SSD if x[n] is not None]
    g = dict(zip(names, torch.autograd.grad(loss, [x[n] for n in names])))
    o_r, hT_r = ssd_ref(*(x64[n] for n in SSD))
    loss_r = (o_r * w_o_r).sum() + ((hT_r * w_h_r).sum() if dhT else 0)
    g_r = dict(zip(names, torch.autograd.grad(loss_r, [x64[n] for n in names])))
    return names, (o, hT), (o_r, hT_r), g, g_r


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "f16"])
@pytest.mark.parametrize("T,dk,layout,h0", [c for c in itertools.product([1, 37], [7, 48, 130], ["token", "head"],
                                                                          [False, True])])
def test_ssd_half_matches_float64(dtype, T, dk, layout, h0):
    # the odd-shape set: T = 1 and 37, dk 7 / 48 / 130, dv 40, G = 2 < H = 4, both layouts
    x = leaves(ssd64(2, T, 2, 4, dk, 40, h0), dict(q=dtype, k=dtype, v=dtype))
    names, outs, outs_r, g, g_r = run_ssd(x, layout)
    compare(names, outs, outs_r, (dtype, torch.float32), x, g, g_r)  # o like v; hT float32


def test_ssd_mixed_float32_v_gives_float32_o():
    # q, k bfloat16 with v float32: allowed; o follows v (float32), dq, dk bfloat16
    x = leaves(ssd64(1, 9, 2, 4, 7, 5, True), dict(q=torch.bfloat16, k=torch.bfloat16))
    names, outs, outs_r, g, g_r = run_ssd(x, "token")
    compare(names, outs, outs_r, (torch.float32, torch.float32), x, g, g_r)
    assert g["q"].dtype == torch.bfloat16 and g["v"].dtype == torch.float32


def run_sscan(x, softplus, seed=1):
    x64 = upcast(x)
    Bsz, L, D = x["x"].shape
    N = x["A"].shape[1]
    gen = torch.Generator().manual_seed(seed)
    w_y = torch.randn(Bsz, L, D, generator=gen, dtype=torch.float64)
    w_h = torch.randn(Bsz, D, N, generator=gen, dtype=torch.float64)
    y, hT = ct.sscan(*(x[n] for n in SSCAN), delta_softplus=softplus)
    loss = (y.double() * w_y).sum() + (hT.double() * w_h).sum()
    y_r, hT_r = sscan_ref(*(x64[n] for n in SSCAN), delta_softplus=softplus)
    loss_r = (y_r * w_y.to(y.dtype).double()).sum() + (hT_r * w_h.to(hT.dtype).double()).sum()
    names = [n for n in SSCAN if x[n] is not None]
    g = dict(zip(names, torch.autograd.grad(loss, [x[n] for n in names])))
    g_r = dict(zip(names, torch.autograd.grad(loss_r, [x64[n] for n in names])))
    return names, (y, hT), (y_r, hT_r), g, g_r


SSCAN_HALF = ("x", "delta", "B", "C", "z")


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "f16"])
@pytest.mark.parametrize("L,G,opt,h0", [(1, 0, True, True), (37, 2, True, True), (37, 0, False, False),
                                        (37, 2, True, False)])
def test_sscan_half_matches_float64(dtype, L, G, opt, h0):
    # x, delta, B, C, z 16-bit; A, D, delta_bias, h0 float32; odd D = 6, N = 5
    x = leaves(sscan64(2, L, 6, 5, G, opt, h0), {n: dtype for n in SSCAN_HALF})
    names, outs, outs_r, g, g_r = run_sscan(x, softplus=opt)
    compare(names, outs, outs_r, (dtype, torch.float32), x, g, g_r)  # y like x; hT float32


def test_sscan_bf16_x_with_float32_delta():
    # the peers' mix: bfloat16 x (and B, C, z) with float32 delta
    x = leaves(sscan64(2, 37, 6, 5, 2, True, True), dict(x=torch.bfloat16, B=torch.bfloat16, C=torch.bfloat16,
                                                        z=torch.bfloat16))
    names, outs, outs_r, g, g_r = run_sscan(x, softplus=True)
    compare(names, outs, outs_r, (torch.bfloat16, torch.float32), x, g, g_r)
    assert g["delta"].dtype == torch.float32 and g["x"].dtype == torch.bfloat16


def test_bad_mix_rejected_with_the_library_message():
    x = {n: (t.detach() if t is not None else None)
         for n, t in leaves(ssd64(1, 5, 2, 4, 3, 5, True), dict(q=torch.bfloat16, k=torch.bfloat16)).items()}
    # two 16-bit dtypes in one call
    with pytest.raises(ValueError, match=r"v: dtype CG_F16 but expected CG_BF16 like q"):
        ct.ssd(x["q"], x["k"], x["v"].half(), x["log_alpha"], x["h0"])
    # a float32-only tensor in 16 bits
    with pytest.raises(ValueError, match=r"log_alpha: dtype CG_BF16 but expected CG_F32"):
        ct.ssd(x["q"], x["k"], x["v"], x["log_alpha"].bfloat16(), x["h0"])
    with pytest.raises(ValueError, match=r"h0: dtype CG_F16 but expected CG_F32"):
        ct.ssd(x["q"].half(), x["k"].half(), x["v"], x["log_alpha"], x["h0"].half())
    # float64 with 16-bit
    with pytest.raises(ValueError, match=r"k: dtype CG_BF16 but expected CG_F64 like q"):
        ct.ssd(x["q"].double(), x["k"], x["v"].double(), x["log_alpha"].double(), x["h0"].double())
    s = {n: (t.detach() if t is not None else None) for n, t in leaves(sscan64(1, 4, 3, 2, 0, True, True), {}).items()}
    with pytest.raises(ValueError, match=r"A: dtype CG_BF16 but expected CG_F32"):
        ct.sscan(s["x"].bfloat16(), s["delta"], s["A"].bfloat16(), s["B"], s["C"])
    # and the same message when only traced (fake tensors: torch.compile's path)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        f = {n: mode.from_tensor(t) for n, t in x.items()}
        with pytest.raises(ValueError, match=r"v: dtype CG_F16 but expected CG_BF16 like q"):
            ct.ssd(f["q"], f["k"], f["v"].half(), f["log_alpha"], f["h0"])
        with pytest.raises(ValueError, match=r"log_alpha: dtype CG_BF16 but expected CG_F32"):
            ct.ssd(f["q"], f["k"], f["v"], f["log_alpha"].bfloat16(), f["h0"])


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "f16"])
def test_fake_kernels_give_the_real_dtypes(dtype):
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = {n: t.detach() for n, t in leaves(ssd64(1, 6, 2, 4, 3, 5, True), dict(q=dtype, k=dtype, v=dtype)).items()}
    do = torch.randn(1, 6, 4, 5).to(dtype)
    real_f = torch.ops.chunkgen.ssd_fwd(*(x[n] for n in SSD), "token")
    real_b = torch.ops.chunkgen.ssd_bwd(*(x[n] for n in SSD), do, None, "token")
    with FakeTensorMode() as mode:
        f = [mode.from_tensor(x[n]) for n in SSD]
        fake_f = torch.ops.chunkgen.ssd_fwd(*f, "token")
        fake_b = torch.ops.chunkgen.ssd_bwd(*f, mode.from_tensor(do), None, "token")
    assert [t.dtype for t in fake_f] == [t.dtype for t in real_f] == [dtype, torch.float32]
    assert [t.dtype for t in fake_b] == [t.dtype for t in real_b] == [dtype] * 3 + [torch.float32] * 2
    assert [t.shape for t in fake_b] == [t.shape for t in real_b]
    s = {n: (t.detach() if t is not None else None)
         for n, t in leaves(sscan64(1, 5, 4, 3, 2, True, True), {n: dtype for n in SSCAN_HALF}).items()}
    real = torch.ops.chunkgen.sscan_fwd(*(s[n] for n in SSCAN), True)
    with FakeTensorMode() as mode:
        fake = torch.ops.chunkgen.sscan_fwd(*(mode.from_tensor(s[n]) for n in SSCAN), True)
    assert [t.dtype for t in fake] == [t.dtype for t in real] == [dtype, torch.float32]


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "f16"])
def test_opcheck_half(dtype):
    x = {n: t.detach() for n, t in leaves(ssd64(1, 5, 2, 4, 3, 5, True), dict(q=dtype, k=dtype, v=dtype)).items()}
    torch.library.opcheck(torch.ops.chunkgen.ssd_fwd.default,
                          tuple(x[n].clone().requires_grad_() for n in SSD) + ("token",))
    do = torch.randn(1, 5, 4, 5).to(dtype)
    torch.library.opcheck(torch.ops.chunkgen.ssd_bwd.default, tuple(x[n] for n in SSD) + (do, torch.randn(1, 4, 3, 5),
                                                                                        "token"))
    s = {n: (t.detach() if t is not None else None)
         for n, t in leaves(sscan64(1, 5, 4, 3, 2, True, True), {n: dtype for n in SSCAN_HALF}).items()}
    torch.library.opcheck(torch.ops.chunkgen.sscan_fwd.default,
                          tuple(s[n].clone().requires_grad_() for n in SSCAN) + (True,))
    torch.library.opcheck(torch.ops.chunkgen.sscan_bwd.default,
                          tuple(s[n] for n in SSCAN) + (torch.randn(1, 5, 4).to(dtype), torch.randn(1, 4, 3), True))


def test_eager_function_matches_registered_op_bf16():
    # the eager autograd.Function and the registered op: the same C calls, bit for bit
    x = leaves(ssd64(2, 37, 2, 4, 7, 5, True), dict(q=torch.bfloat16, k=torch.bfloat16, v=torch.bfloat16))
    ins = tuple(x[n] for n in SSD)
    assert ct._path(ins) == "function"
    o, hT = ct.ssd(*ins)
    o_op, hT_op = torch.ops.chunkgen.ssd_fwd(*ins, "token")
    w = torch.randn(o.shape, generator=torch.Generator().manual_seed(2)).to(o.dtype)
    g = torch.autograd.grad((o * w).sum() + hT.sum(), ins)
    g_op = torch.autograd.grad((o_op * w).sum() + hT_op.sum(), ins)
    torch.testing.assert_close(o, o_op, rtol=0, atol=0)
    for a, b in zip(g, g_op):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph_bf16(backend):
    torch._dynamo.reset()
    x = leaves(ssd64(1, 9, 2, 4, 5, 3, True), dict(q=torch.bfloat16, k=torch.bfloat16, v=torch.bfloat16))
    s = leaves(sscan64(1, 9, 6, 4, 0, True, False), {n: torch.bfloat16 for n in SSCAN_HALF})

    def f(x, s):
        o, hT = ct.ssd(*(x[n].transpose(1, 2) for n in SSD[:4]), x["h0"], layout="head")
        y, yT = ct.sscan(*(s[n] for n in SSCAN), delta_softplus=True)
        assert o.dtype == torch.bfloat16 and hT.dtype == torch.float32 and y.dtype == torch.bfloat16
        return (o.float() ** 2).sum() + hT.sum() + (y.float() ** 2).sum() + yT.sum()

    lv = [t for t in list(x.values()) + list(s.values()) if t is not None]
    loss = f(x, s)
    grads = torch.autograd.grad(loss, lv)
    loss_c = torch.compile(f, fullgraph=True, backend=backend)(x, s)
    grads_c = torch.autograd.grad(loss_c, lv)
    torch.testing.assert_close(loss_c, loss, rtol=1e-6, atol=1e-6)
    for a, b in zip(grads_c, grads):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_mamba2_mixer_in_bfloat16():
    # a bfloat16 module: q, k, v stay bfloat16, the decay float32 (the module casts it);
    # against the same module on a float64 recurrence of the same bfloat16 tensors
    def ssd_f64(q, k, v, log_alpha):
        o, hT = ssd_ref(q.double(), k.double(), v.double(), log_alpha.double())
        return o.to(v.dtype), hT.float()

    seen = []

    def spy(q, k, v, log_alpha):
        seen.append((q.dtype, v.dtype, log_alpha.dtype))
        return ct.ssd(q, k, v, log_alpha)

    torch.manual_seed(0)
    ours = Mamba2Mixer(16, heads=4, groups=2, d_state=8, head_dim=6, scan=spy).to(torch.bfloat16)
    theirs = copy.deepcopy(ours)
    theirs.scan = ssd_f64
    u = torch.randn(2, 29, 16, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    a, b = ours(u), theirs(u)
    assert a.dtype == torch.bfloat16 and seen == [(torch.bfloat16, torch.bfloat16, torch.float32)]
    assert rel_err(a, b) < 2e-2
    ga = torch.autograd.grad(a.float().pow(2).sum(), list(ours.parameters()))
    gb = torch.autograd.grad(b.float().pow(2).sum(), list(theirs.parameters()))
    for p, x, y in zip(ours.parameters(), ga, gb):
        assert x.dtype == p.dtype == torch.bfloat16
        assert rel_err(x, y) < 5e-2
    # and the default scan
    assert Mamba2Mixer(16, heads=4).to(torch.float16)(u.half()).dtype == torch.float16


def test_auto_dispatch_runs_bf16_on_a_host_backend():
    # auto dispatch of 16-bit CPU tensors: a backend that takes them (cpu where it can, else ref)
    x = {n: t.detach() for n, t in leaves(ssd64(1, 3, 1, 1, 2, 2, False), dict(q=torch.bfloat16, k=torch.bfloat16,
                                                                              v=torch.bfloat16)).items() if t is not None}
    ct.ssd(x["q"], x["k"], x["v"], x["log_alpha"])
    line = chunkgen.last_dispatch()
    assert "backend=ref" in line or "backend=cpu" in line, line
