"""Bad input raises ValueError (CG_EINVAL) or RuntimeError carrying the library's message;
NaN inputs propagate without a crash. Both front ends (numpy and torch)."""
import re

import numpy as np
import pytest
import torch

import chunkgen
import chunkgen.torch as ct


def ssd_np(B=1, T=4, G=2, H=4, dk=3, dv=5):
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return [r(B, T, G, dk), r(B, T, G, dk), r(B, T, H, dv), -np.abs(r(B, T, H))]


def ssd_t(**kw):
    return [torch.from_numpy(a) for a in ssd_np(**kw)]


@pytest.mark.parametrize("front", ["numpy", "torch"])
def test_wrong_ndim(front):
    q, k, v, la = ssd_np() if front == "numpy" else ssd_t()
    f = chunkgen.ssd if front == "numpy" else ct.ssd
    with pytest.raises(ValueError, match=r"q: 3 dimensions .*expected 4"):
        f(q[0], k, v, la)
    with pytest.raises(ValueError, match=r"log_alpha: .*dimensions"):
        f(q, k, v, la[..., None])
    with pytest.raises(ValueError, match=r"x: 5 dimensions but expected at most 4"):
        (chunkgen.sscan if front == "numpy" else ct.sscan)(v[None], v, v, v, v)


@pytest.mark.parametrize("front", ["numpy", "torch"])
def test_empty_dimension(front):
    q, k, v, la = ssd_np(T=1) if front == "numpy" else ssd_t(T=1)
    with pytest.raises(ValueError, match=r"q: .*(T = 0|no elements).*expected .*>= 1"):
        (chunkgen.ssd if front == "numpy" else ct.ssd)(q[:, :0], k[:, :0], v[:, :0], la[:, :0])


@pytest.mark.parametrize("front", ["numpy", "torch"])
def test_heads_not_multiple_of_groups(front):
    q, k, v, la = ssd_np(G=3, H=4) if front == "numpy" else ssd_t(G=3, H=4)
    with pytest.raises(ValueError, match=r"H = 4 is not a multiple of G = 3"):
        (chunkgen.ssd if front == "numpy" else ct.ssd)(q, k, v, la)


@pytest.mark.parametrize("front", ["numpy", "torch"])
def test_batch_mismatch(front):
    q, k, _, _ = ssd_np(B=1) if front == "numpy" else ssd_t(B=1)
    _, _, v, la = ssd_np(B=2) if front == "numpy" else ssd_t(B=2)
    with pytest.raises(ValueError, match=r"v: shape \(2, 4, 4, 5\) but expected \(1, 4, 4, 5\)"):
        (chunkgen.ssd if front == "numpy" else ct.ssd)(q, k, v, la)


def test_integer_and_half_dtypes():
    # (since issue #15 float16 / bfloat16 q, k, v are taken: test_*_half.py; here what
    # stays rejected, 16-bit where a tensor stays float32 and float64 in a float32 call,
    # with the C library's messages)
    q, k, v, la = ssd_np()
    with pytest.raises(ValueError, match="q: dtype int32"):
        chunkgen.ssd(q.astype(np.int32), k, v, la)
    with pytest.raises(ValueError, match="log_alpha: dtype CG_F16 but expected CG_F32"):
        chunkgen.ssd(q, k, v.astype(np.float16), la.astype(np.float16))
    tq, tk, tv, tla = ssd_t()
    with pytest.raises(ValueError, match="q: dtype torch.int64"):
        ct.ssd(tq.long(), tk, tv, tla)
    with pytest.raises(ValueError, match="log_alpha: dtype CG_F16 but expected CG_F32"):
        ct.ssd(tq, tk.half(), tv, tla.half())
    with pytest.raises(ValueError, match="log_alpha: dtype CG_BF16 but expected CG_F32"):
        ct.ssd(tq, tk, tv.bfloat16(), tla.bfloat16())
    with pytest.raises(ValueError, match="k: dtype CG_F64 but expected CG_F32 like q"):
        ct.ssd(tq, tk.double(), tv, tla)
    with pytest.raises(ValueError, match="dtype"):  # mixed numpy dtypes: the C library's message
        chunkgen.ssd(q, k.astype(np.float64), v, la)


def test_tensors_on_different_devices():
    tq, tk, tv, tla = ssd_t()
    with pytest.raises(ValueError, match="v: on meta but expected cpu"):
        ct.ssd(tq, tk, tv.to("meta"), tla)
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="log_alpha: on cuda"):
            ct.ssd(tq, tk, tv, tla.cuda())


def test_bad_options():
    q, k, v, la = ssd_np()
    with pytest.raises(ValueError, match="layout: 'x'"):
        chunkgen.ssd(q, k, v, la, layout="x")
    with pytest.raises(ValueError, match="layout"):
        ct.ssd(*ssd_t(), layout="x")
    with pytest.raises(ValueError, match="backend: 'gpu'"):
        chunkgen.ssd(q, k, v, la, backend="gpu")
    with pytest.raises(ValueError, match="ref backend only"):
        chunkgen.ssd(*(a.astype(np.float64) for a in (q, k, v, la)), backend="cpu")
    with pytest.raises(ValueError, match="config"):
        chunkgen.ssd(q, k, v, la, backend="cpu", config="no_such_param=3")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_backend_without_gpu_is_runtime_error():
    with pytest.raises(RuntimeError) as e:
        chunkgen.ssd(*ssd_np(), backend="cuda")
    assert not isinstance(e.value, ValueError) and str(e.value)


@pytest.mark.parametrize("front", ["numpy", "torch", "ref"])
def test_nan_inputs_propagate(front):
    q, k, v, la = ssd_np(T=6)
    v[0, 2, 1, 3] = np.nan
    if front == "numpy":
        o, hT = chunkgen.ssd(q, k, v, la)
    elif front == "ref":
        o, hT = chunkgen.ssd(*(a.astype(np.float64) for a in (q, k, v, la)))
    else:
        o, hT = (t.numpy() for t in ct.ssd(*(torch.from_numpy(a) for a in (q, k, v, la))))
    # v[b, t, h, j] reaches o[b, t' >= t, h, j] and hT[b, h, :, j] only. The float32 CPU
    # path may also spread it to earlier tokens of the same chunk (a causal mask applied
    # by multiplication); the sequential float64 reference must match exactly.
    nan_o = np.zeros(o.shape, bool)
    nan_o[0, 2:, 1, 3] = True
    nan_h = np.zeros(hT.shape, bool)
    nan_h[0, 1, :, 3] = True
    np.testing.assert_array_equal(np.isnan(hT), nan_h)
    if front == "ref":
        np.testing.assert_array_equal(np.isnan(o), nan_o)
    else:
        assert np.isnan(o[nan_o]).all()
        assert not np.isnan(o[:, :, [0, 2, 3]]).any() and not np.isnan(o[..., [0, 1, 2, 4]]).any()
    x = np.ones((1, 5, 2), np.float32)
    x[0, 1, 0] = np.nan
    y, _ = chunkgen.sscan(x, np.full_like(x, 0.1), -np.ones((2, 3), np.float32), np.ones((1, 5, 3), np.float32),
                          np.ones((1, 5, 3), np.float32))
    assert np.isnan(y[0, 1:, 0]).all() and np.isfinite(y[0, :, 1]).all()


def test_missing_first_input():
    _, tk, tv, tla = ssd_t()
    with pytest.raises(ValueError, match="q: None but expected a tensor"):
        ct.ssd(None, tk, tv, tla)
    with pytest.raises(ValueError, match="q: .*null data pointer"):
        chunkgen.ssd(None, tk.numpy(), tv.numpy(), tla.numpy())


# ------------------------------------------------ checked before any allocation (#39 item 8)

def _huge_q(front, T, all_zero):
    """A q of T tokens (G = 1, dk = 64) that takes no memory: a broadcast view, with every
    stride zero (a copy would be made) or only the token strides zero (taken as it is;
    the outputs would be made from its T)."""
    if front == "numpy":
        base = np.ones(64, np.float32)
        if all_zero:
            return np.broadcast_to(np.float32(1), (1, T, 1, 64))
        return np.lib.stride_tricks.as_strided(base, (1, T, 1, 64), (0, 0, 0, 4), writeable=False)
    return torch.ones(1).expand(1, T, 1, 64) if all_zero else torch.ones(64).expand(1, T, 1, 64)


@pytest.mark.parametrize("all_zero", [True, False], ids=["copied", "taken"])
@pytest.mark.parametrize("front", ["numpy", "torch"])
def test_checked_before_outputs_and_copies(front, all_zero):
    # before: a 64 GiB (numpy) / 256 GiB (torch) allocation failure, the copy of q or o
    T = (1 << 28) if front == "numpy" else (1 << 30)
    q = _huge_q(front, T, all_zero)
    k, v, la = (np.ones(s, np.float32) for s in ((1, 8, 1, 64), (1, 8, 1, 64), (1, 8, 1)))
    if front == "torch":
        k, v, la = (torch.from_numpy(a) for a in (k, v, la))
    f = chunkgen.ssd if front == "numpy" else ct.ssd
    with pytest.raises(ValueError, match=rf"k: shape \(1, 8, 1, 64\) but expected \(1, {T}, 1, 64\)"):
        f(q, k, v, la)


def test_checked_before_copies_sscan():
    x = np.broadcast_to(np.float32(1), (1, 1 << 28, 64))
    d = np.ones((1, 8, 64), np.float32)
    with pytest.raises(ValueError, match=r"delta: shape \(1, 8, 64\) but expected"):
        chunkgen.sscan(x, d, -np.ones((64, 4), np.float32), np.ones((1, 8, 4), np.float32),
                       np.ones((1, 8, 4), np.float32))


# ---------------------------------------------------- settings and the store (#39 items 10, 11)

def test_cache_dir_with_nul_refused(tmp_path):
    chunkgen.set_cache_dir(str(tmp_path))
    try:
        with pytest.raises(ValueError, match=r"path: 'a\\x00b' contains a NUL character"):
            chunkgen.set_cache_dir("a\x00b")  # before: accepted, and cut to "a"
        assert chunkgen.get_cache_dir() == str(tmp_path)
    finally:
        chunkgen.set_cache_dir(None)


def test_import_configs_of_a_directory_without_a_store(tmp_path):
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    (nothing / "notes.txt").write_text("not a store")
    with pytest.raises(RuntimeError, match=re.escape(str(nothing)) + ": not a store directory"):
        chunkgen.import_configs(str(nothing))  # before: an empty report, no error
    (nothing / "configs").mkdir()  # a cache directory whose store is empty: no error
    chunkgen.import_configs(str(nothing), dry_run=True)


# ----------------------------------------------------- CUDA that cannot be used (#33)

@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is usable here")
def test_stream_without_usable_cuda_is_said():
    from chunkgen import _C
    from chunkgen._numpy import _NP
    from chunkgen._ops import OPS
    q, k, v, la = ssd_np()
    # what chunkgen.torch passes for CUDA tensors: a stream; where CUDA cannot be used the
    # tensors cannot be told from host memory, so the library says why instead of running
    with pytest.raises(RuntimeError, match=r"exec.stream: a CUDA stream is given but CUDA cannot be used \(.+\)"):
        _C.call(OPS["ssd_fwd"].index, (q, k, v, la, None), -1, 0, 0, None, False, np.empty, _NP, 0x1000, None)
