"""The Python package on a GPU (skipped without one; bench/device-check.sh runs these there):
chunkgen.torch on CUDA tensors (forward and every gradient against the float64 recurrence,
float32 and bf16), torch.compile(fullgraph=True) on CUDA, a varlen call captured in a CUDA
graph and replayed on new inputs, and chunkgen.jax under jit and grad on the GPU."""
import itertools

import pytest
import torch

import chunkgen.torch as ct
from conftest import cuda
from ref import TOL_BWD, TOL_FWD, rel_err, sscan_ref, ssd_ref

B, T, G, H, DK, DV = 2, 77, 1, 2, 40, 24


def ssd_leaves(device, dtype=torch.float32, seed=0, T=T, Bsz=B):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    t = dict(q=r(Bsz, T, G, DK) / DK ** 0.5, k=r(Bsz, T, G, DK) / DK ** 0.5, v=r(Bsz, T, H, DV),
             log_alpha=-torch.rand(Bsz, T, H, generator=g, dtype=torch.float64) * 0.5)
    half = ("q", "k", "v")
    return {n: x.to(device=device, dtype=dtype if n in half else torch.float32).requires_grad_()
            for n, x in t.items()}


def grads(loss, leaves):
    return dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))


@cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_torch_ssd_forward_and_grads(dtype):
    x = ssd_leaves("cuda", dtype)
    x64 = {n: t.detach().double().cpu().requires_grad_() for n, t in x.items()}
    o, hT = ct.ssd(x["q"], x["k"], x["v"], x["log_alpha"])
    assert o.is_cuda and o.dtype == dtype and hT.dtype == torch.float32
    o64, hT64 = ssd_ref(x64["q"], x64["k"], x64["v"], x64["log_alpha"])
    tol_f, tol_b = (TOL_FWD, TOL_BWD) if dtype == torch.float32 else (1e-2, 2e-2)
    assert rel_err(o, o64) <= tol_f and rel_err(hT, hT64) <= max(tol_f, TOL_FWD)
    w = torch.randn(o.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    g = grads((o.float() * w.to("cuda", torch.float32)).sum() + hT.sum(), x)
    g64 = grads((o64 * w).sum() + hT64.sum(), x64)
    for n in x:
        assert g[n].dtype == x[n].dtype and g[n].is_cuda, n
        assert rel_err(g[n], g64[n]) <= tol_b, (n, rel_err(g[n], g64[n]))


@cuda
def test_gpu_torch_sscan_forward_and_grads():
    gen = torch.Generator().manual_seed(5)
    L, D, N = 45, 24, 7
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    t = dict(x=r(B, L, D), delta=r(B, L, D) * 0.5, A=-torch.rand(D, N, generator=gen, dtype=torch.float64) - 0.1,
             Bm=r(B, L, N), C=r(B, L, N), D=r(D), z=r(B, L, D), delta_bias=r(D) * 0.1)
    x = {n: v.to("cuda", torch.float32).requires_grad_() for n, v in t.items()}
    x64 = {n: v.clone().requires_grad_() for n, v in t.items()}
    y, hT = ct.sscan(x["x"], x["delta"], x["A"], x["Bm"], x["C"], x["D"], x["z"], x["delta_bias"], None,
                     delta_softplus=True)
    y64, hT64 = sscan_ref(x64["x"], x64["delta"], x64["A"], x64["Bm"], x64["C"], x64["D"], x64["z"],
                          x64["delta_bias"], None, delta_softplus=True)
    assert y.is_cuda and rel_err(y, y64) <= TOL_FWD and rel_err(hT, hT64) <= TOL_FWD
    g, g64 = grads(y.sum() + hT.sum(), x), grads(y64.sum() + hT64.sum(), x64)
    for n in x:
        assert rel_err(g[n], g64[n]) <= TOL_BWD, (n, rel_err(g[n], g64[n]))


@cuda
def test_gpu_torch_compile_fullgraph():
    x = {n: t.detach() for n, t in ssd_leaves("cuda").items()}

    def f(q, k, v, la):
        o, hT = ct.ssd(q, k, v, la)
        return o * 2.0, hT

    eager = f(x["q"], x["k"], x["v"], x["log_alpha"])
    compiled = torch.compile(f, fullgraph=True)(x["q"], x["k"], x["v"], x["log_alpha"])
    for a, b in zip(eager, compiled):
        assert b.is_cuda and torch.equal(a, b)


@cuda
def test_gpu_cuda_graph_varlen():
    lengths = [1, 37, 64, 200, 0, 5]
    cu = torch.tensor([0] + list(itertools.accumulate(lengths)), dtype=torch.int32, device="cuda")
    Tp = sum(lengths)
    static = {n: t.detach() for n, t in ssd_leaves("cuda", T=Tp, Bsz=1, seed=7).items()}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # first use on the capture stream: compile, load, size
        ct.ssd(static["q"], static["k"], static["v"], static["log_alpha"], cu_seqlens=cu)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o_g, hT_g = ct.ssd(static["q"], static["k"], static["v"], static["log_alpha"], cu_seqlens=cu)
    fresh = {n: t.detach() for n, t in ssd_leaves("cuda", T=Tp, Bsz=1, seed=8).items()}
    for n in static:
        static[n].copy_(fresh[n])
    graph.replay()
    torch.cuda.synchronize()
    o_e, hT_e = ct.ssd(fresh["q"], fresh["k"], fresh["v"], fresh["log_alpha"], cu_seqlens=cu)
    assert hT_g.shape[0] == len(lengths)
    assert torch.equal(o_g, o_e) and torch.equal(hT_g, hT_e)
    # and the replay is right: the packed sequences against the float64 recurrence, one by one
    off = 0
    for i, n in enumerate(lengths):
        if n:
            sl = {k: v[:, off:off + n].double().cpu() for k, v in fresh.items()}
            o64, hT64 = ssd_ref(sl["q"], sl["k"], sl["v"], sl["log_alpha"])
            assert rel_err(o_g[:, off:off + n], o64) <= TOL_FWD and rel_err(hT_g[i:i + 1], hT64) <= TOL_FWD
        off += n


def _jax_gpu():
    try:
        import jax
        return jax, [d for d in jax.devices() if d.platform == "gpu"]
    except Exception:  # no jax, or no GPU backend
        return None, []


@pytest.mark.skipif(not _jax_gpu()[1], reason="needs JAX with a GPU")
def test_gpu_jax_jit_grad():
    jax, gpus = _jax_gpu()
    import jax.numpy as jnp

    import chunkgen.jax as cj
    from jax_ref import rel_err as jrel
    from jax_ref import ssd_scan

    jax.config.update("jax_enable_x64", True)  # the reference in float64 (tests/python/test_jax.py does the same)
    ks = jax.random.split(jax.random.key(0), 5)
    q, k = (jax.random.normal(s, (B, G, T, DK), jnp.float32) / DK ** 0.5 for s in ks[:2])
    v = jax.random.normal(ks[2], (B, H, T, DV), jnp.float32)
    la = -0.5 * jax.random.uniform(ks[3], (B, H, T), jnp.float32)
    args = [jax.device_put(a, gpus[0]) for a in (q, k, v, la)]

    def loss(f):
        return lambda q, k, v, la: (f(q, k, v, la)[0] ** 2).sum() + f(q, k, v, la)[1].sum()

    o, hT = jax.jit(cj.ssd)(*args)
    assert o.dtype == jnp.float32 and list(o.devices())[0].platform == "gpu"
    a64 = [jax.device_put(jnp.asarray(a, jnp.float64), jax.devices("cpu")[0]) for a in (q, k, v, la)]
    o64, hT64 = ssd_scan(*a64)
    g64 = jax.grad(loss(ssd_scan), argnums=(0, 1, 2, 3))(*a64)
    assert jrel(o, o64) <= TOL_FWD and jrel(hT, hT64) <= TOL_FWD
    g = jax.jit(jax.grad(loss(cj.ssd), argnums=(0, 1, 2, 3)))(*args)
    for a, b in zip(g, g64):
        assert jrel(a, b) <= TOL_BWD
