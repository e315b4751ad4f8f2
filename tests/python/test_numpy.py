"""numpy calls: chunkgen.ssd/ssd_bwd/sscan/sscan_bwd vs the float64 PyTorch recurrence,
float64 on the ref backend, strides without copies, and the thread/cache settings."""
import numpy as np
import pytest
import torch

import chunkgen
from ref import TOL_BWD, TOL_FWD, rel_err, sscan_ref, ssd_ref


def rnd(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def ssd_inputs(rng, B=2, T=37, G=2, H=4, dk=7, dv=40):
    return dict(q=rnd(rng, B, T, G, dk, scale=dk ** -0.5), k=rnd(rng, B, T, G, dk, scale=dk ** -0.5),
                v=rnd(rng, B, T, H, dv), log_alpha=(-rng.random((B, T, H)) * 0.5).astype(np.float32),
                h0=rnd(rng, B, H, dk, dv))


def torch_grads(f, arrays, weights):
    ts = {n: torch.from_numpy(a).double().requires_grad_() for n, a in arrays.items()}
    outs = f(**ts)
    loss = sum((o * torch.from_numpy(w).double()).sum() for o, w in zip(outs, weights))
    return outs, dict(zip(ts, torch.autograd.grad(loss, list(ts.values()))))


@pytest.mark.parametrize("layout", ["token", "head"])
def test_ssd_fwd_bwd(layout):
    rng = np.random.default_rng(0)
    x = ssd_inputs(rng)
    do, dhT = rnd(rng, *x["v"].shape), rnd(rng, *x["h0"].shape)
    (o_r, hT_r), g_r = torch_grads(ssd_ref, x, (do, dhT))
    if layout == "head":  # permuted views: no copy
        y = {n: (a.swapaxes(1, 2) if n != "h0" else a) for n, a in x.items()}
        o, hT = chunkgen.ssd(**y, layout="head")
        o = o.swapaxes(1, 2)
        dq, dk, dv, dla, dh0 = chunkgen.ssd_bwd(y["q"], y["k"], y["v"], y["log_alpha"], do.swapaxes(1, 2), y["h0"],
                                                dhT, layout="head")
        dq, dk, dv, dla = (a.swapaxes(1, 2) for a in (dq, dk, dv, dla))
    else:
        o, hT = chunkgen.ssd(**x)
        dq, dk, dv, dla, dh0 = chunkgen.ssd_bwd(x["q"], x["k"], x["v"], x["log_alpha"], do, x["h0"], dhT)
    assert o.dtype == np.float32
    assert rel_err(torch.from_numpy(o), o_r) < TOL_FWD
    assert rel_err(torch.from_numpy(hT), hT_r) < TOL_FWD
    for n, a in zip(("q", "k", "v", "log_alpha", "h0"), (dq, dk, dv, dla, dh0)):
        assert rel_err(torch.from_numpy(np.ascontiguousarray(a)), g_r[n]) < TOL_BWD, n
    # without h0 there is no dh0
    assert chunkgen.ssd_bwd(x["q"], x["k"], x["v"], x["log_alpha"], do)[4] is None


def test_ssd_float64_runs_on_ref():
    rng = np.random.default_rng(1)
    x = {n: a.astype(np.float64) for n, a in ssd_inputs(rng, T=5, dk=3, dv=2).items()}
    o, hT = chunkgen.ssd(**x)
    assert o.dtype == np.float64 and "backend=ref" in chunkgen.last_dispatch()
    o_r, hT_r = ssd_ref(*(torch.from_numpy(x[n]) for n in ("q", "k", "v", "log_alpha", "h0")))
    assert rel_err(torch.from_numpy(o), o_r) < 1e-12 and rel_err(torch.from_numpy(hT), hT_r) < 1e-12


def test_sscan_fwd_bwd():
    rng = np.random.default_rng(2)
    Bsz, L, D, N, G = 2, 37, 6, 5, 2
    x = dict(x=rnd(rng, Bsz, L, D), delta=(rng.random((Bsz, L, D)) * 0.5).astype(np.float32),
             A=(-rng.random((D, N)) - 0.2).astype(np.float32), B=rnd(rng, Bsz, L, G, N), C=rnd(rng, Bsz, L, G, N),
             D=rnd(rng, D), z=rnd(rng, Bsz, L, D), delta_bias=(rng.random(D) * 0.2).astype(np.float32),
             h0=rnd(rng, Bsz, D, N))
    dy, dhT = rnd(rng, Bsz, L, D), rnd(rng, Bsz, D, N)
    (y_r, hT_r), g_r = torch_grads(lambda **t: sscan_ref(**t, delta_softplus=True), x, (dy, dhT))
    y, hT = chunkgen.sscan(**x, delta_softplus=True)
    assert rel_err(torch.from_numpy(y), y_r) < TOL_FWD and rel_err(torch.from_numpy(hT), hT_r) < TOL_FWD
    order = ("x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0")
    grads = chunkgen.sscan_bwd(x["x"], x["delta"], x["A"], x["B"], x["C"], dy, x["D"], x["z"], x["delta_bias"],
                               x["h0"], dhT, delta_softplus=True)
    for n, a in zip(order, grads):
        assert rel_err(torch.from_numpy(a), g_r[n]) < TOL_BWD, n
    # optional gradients are absent when their inputs are
    part = chunkgen.sscan_bwd(x["x"], x["delta"], x["A"], x["B"], x["C"], dy)
    assert all(a is not None for a in part[:5]) and all(a is None for a in part[5:])


def test_outer_strides_are_not_copied(monkeypatch):
    rng = np.random.default_rng(3)
    x = ssd_inputs(rng, T=9)
    o_c, hT_c = chunkgen.ssd(**x)
    big = np.zeros((2, 9, 6, 40), np.float32)
    big[:, :, 1:5] = x["v"]
    views = dict(x, v=big[:, :, 1:5], log_alpha=np.repeat(x["log_alpha"], 2, axis=0)[::2])

    def no_copy(*a, **k):
        raise AssertionError("copied an array the C API takes as it is")

    monkeypatch.setattr(np, "ascontiguousarray", no_copy)
    o, hT = chunkgen.ssd(**views)
    np.testing.assert_array_equal(o, o_c)
    np.testing.assert_array_equal(hT, hT_c)
    monkeypatch.undo()
    # innermost stride != 1 and negative strides are copied, with the same result
    views = dict(x, q=np.repeat(x["q"], 2, axis=-1)[..., ::2], k=x["k"][:, ::-1][:, ::-1])
    o2, _ = chunkgen.ssd(**views)
    np.testing.assert_array_equal(o2, o_c)


def test_set_threads_and_cache_dir(tmp_path):
    rng = np.random.default_rng(4)
    x = ssd_inputs(rng, T=3, dv=5)
    try:
        chunkgen.set_threads(1)
        chunkgen.set_cache_dir(str(tmp_path))
        assert chunkgen.get_cache_dir() == str(tmp_path)
        o1, _ = chunkgen.ssd(**x)
        assert "threads=1" in chunkgen.last_dispatch()
        with pytest.raises(ValueError, match="threads"):
            chunkgen.set_threads(-1)
        doc = chunkgen.export_configs()
        assert doc["kind"] == "chunkgen-configs" and doc["entries"] == []
    finally:
        chunkgen.set_threads(0)
        chunkgen.set_cache_dir(None)
    assert chunkgen.get_cache_dir() is None


def test_threads_get_their_own_contexts():
    # Calls from several Python threads at once (the GIL is released during each) give
    # the serial results, and each thread's last_dispatch is its own.
    import threading

    rng = np.random.default_rng(5)
    problems = [ssd_inputs(rng, T=11 + i, dk=3 + i, dv=4) for i in range(4)]
    serial = [chunkgen.ssd(**p) for p in problems]
    results, lines, errors = [None] * 4, [None] * 4, []

    def work(i):
        try:
            for _ in range(5):
                results[i] = chunkgen.ssd(**problems[i], config=f"chunk={4 + i}" if i % 2 else None)
            lines[i] = chunkgen.last_dispatch()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(4):
        for a, b in zip(results[i], serial[i]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert ("chunk=%d" % (4 + i) in lines[i]) == bool(i % 2), lines[i]


@pytest.mark.parametrize("layout", ["token", "head"])
@pytest.mark.parametrize("h0", [False, True])
def test_output_shapes_from_the_op_table(layout, h0):
    # The front ends take the outputs' shapes (and which gradients to make) from the C op
    # table (chunkgen._ops.output_shapes, also the fake implementations'): they must be
    # the real calls' outputs, for both layouts, grouped and ungrouped B/C, optional inputs
    # given or not. Symbolic sizes are taken as they are (any object).
    from chunkgen._ops import OPS, output_shapes

    rng = np.random.default_rng(3)
    flag = 1 if layout == "head" else 0
    x = ssd_inputs(rng, B=2, T=5, G=1, H=3, dk=4, dv=6)
    if not h0:
        x["h0"] = None
    if layout == "head":
        x = {n: (a.swapaxes(1, 2) if a is not None and n != "h0" else a) for n, a in x.items()}
    fwd = chunkgen.ssd(**x, layout=layout)
    bwd = chunkgen.ssd_bwd(x["q"], x["k"], x["v"], x["log_alpha"], fwd[0], x["h0"], layout=layout)
    for op, given, outs in (("ssd_fwd", x, fwd), ("ssd_bwd", dict(x, dout=fwd[0], dhT=None), bwd)):
        shapes = output_shapes(op, [given[n].shape if given.get(n) is not None else None for n in OPS[op].inputs],
                               flag)
        assert shapes == tuple(o.shape if o is not None else None for o in outs), op
    sym = output_shapes("ssd_fwd", [("b", "t", "g", "dk"), ("b", "t", "g", "dk"), ("b", "t", "h", "dv"),
                                    ("b", "t", "h"), None], 0)
    assert sym == (("b", "t", "h", "dv"), ("b", "h", "dk", "dv"))
    for grouped in (False, True):
        bc = (2, 5, 2, 3) if grouped else (2, 5, 3)
        s = dict(x=rnd(rng, 2, 5, 4), delta=rnd(rng, 2, 5, 4) ** 2, A=-rnd(rng, 4, 3) ** 2, B=rnd(rng, *bc),
                 C=rnd(rng, *bc), D=rnd(rng, 4) if h0 else None, z=None, delta_bias=None,
                 h0=rnd(rng, 2, 4, 3) if h0 else None)
        fwd = chunkgen.sscan(**s)
        bwd = chunkgen.sscan_bwd(**s, dy=fwd[0])
        for op, given, outs in (("sscan_fwd", s, fwd), ("sscan_bwd", dict(s, dy=fwd[0], dhT=None), bwd)):
            shapes = output_shapes(op, [given[n].shape if given.get(n) is not None else None
                                        for n in OPS[op].inputs], 0)
            assert shapes == tuple(o.shape if o is not None else None for o in outs), (op, grouped)
