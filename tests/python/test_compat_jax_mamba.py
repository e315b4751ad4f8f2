"""chunkgen.compat.jax_mamba against mamba_ssm's pure-PyTorch references (tests/python/refs/
mamba_ref.py): the same float32 inputs as numpy arrays, outputs and every gradient (jax.vjp
under jax.jit) within 1e-4 of the reference's (torch autograd)."""
import numpy as np
import pytest
import torch

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from compat_util import TOL, leaves  # noqa: E402
from ref import rel_err  # noqa: E402
from refs.mamba_ref import ssd_chunk_scan_combined_ref, ssd_selective_scan  # noqa: E402
from test_compat_mamba import _inputs, _minimal, _per_sequence  # noqa: E402

from chunkgen.compat import jax_mamba as jm  # noqa: E402


def _jax_compare(jfn, ref, inputs: dict, seed: int = 7):
    """jfn(**arrays) (under jax.jit) and ref(**tensors) on the same values: every output,
    then the vjp of random cotangents (the same for both) for every floating input."""
    names = [k for k, v in inputs.items() if v.is_floating_point()]
    fixed = {k: jnp.asarray(v.numpy()) for k, v in inputs.items() if not v.is_floating_point()}
    b = leaves(inputs)
    ob = ref(**b)
    ob = ob if isinstance(ob, tuple) else (ob,)

    def f(*xs):
        out = jfn(**dict(zip(names, xs)), **fixed)
        return out if isinstance(out, tuple) else (out,)

    arrays = [jnp.asarray(inputs[k].numpy()) for k in names]
    oa, vjp = jax.vjp(jax.jit(f), *arrays)
    assert len(oa) == len(ob)
    g = torch.Generator().manual_seed(seed)
    ws = [torch.randn(y.shape, generator=g, dtype=y.dtype) for y in ob]
    errs = {f"out{i}": rel_err(torch.from_numpy(np.array(x)), y) for i, (x, y) in enumerate(zip(oa, ob))}
    ga = vjp(tuple(jnp.asarray(w.numpy()) for w in ws))
    gb = torch.autograd.grad(sum((y * w).sum() for y, w in zip(ob, ws)), [b[k] for k in names])
    errs.update({f"d{k}": rel_err(torch.from_numpy(np.array(x)), y) for k, x, y in zip(names, ga, gb)})
    bad = {k: e for k, e in errs.items() if not e <= TOL}
    assert not bad, f"errors over {TOL}: {bad} (all: {errs})"


def test_jax_chunk_scan_vs_ssd_minimal_discrete():
    t = _inputs(seqlen=50, nheads=6, headdim=48, ngroups=2, dstate=40, init=True, seed=1)
    _jax_compare(lambda **a: jm.mamba_chunk_scan_combined(chunk_size=64, return_final_states=True, **a),
                 lambda **a: _minimal(block_len=25, **a), t)


def test_jax_chunk_scan_vs_chunked_reference():
    t = _inputs(seqlen=32, nheads=4, headdim=6, ngroups=2, dstate=5, D="1d", z=True, dt_bias=True, raw_dt=True,
                seed=2)
    _jax_compare(lambda **a: jm.mamba_chunk_scan_combined(chunk_size=64, dt_softplus=True, **a),
                 lambda **a: ssd_chunk_scan_combined_ref(chunk_size=32, dt_softplus=True, **a), t)


def test_jax_chunk_scan_dt_limit():
    t = _inputs(batch=2, seqlen=21, nheads=4, headdim=6, ngroups=2, dstate=5, D="2d", z=True, dt_bias=True,
                raw_dt=True, seed=5)
    _jax_compare(lambda **a: jm.mamba_chunk_scan_combined(chunk_size=16, dt_softplus=True, dt_limit=(0.2, 1.5), **a),
                 lambda **a: ssd_selective_scan(dt_softplus=True, dt_limit=(0.2, 1.5), **a), t)


def test_jax_chunk_scan_seq_idx_and_varlen():
    t = _inputs(batch=2, seqlen=30, nheads=4, headdim=6, ngroups=2, dstate=5, init=True, seed=11)
    t["seq_idx"] = torch.tensor([[0] * 12 + [1] * 18, [0] * 3 + [1] * 20 + [2] * 7], dtype=torch.int32)
    _jax_compare(lambda **a: jm.mamba_chunk_scan_combined(chunk_size=8, return_final_states=True, **a),
                 lambda **a: _per_sequence(**a)[:2], t)
    v = _inputs(batch=1, seqlen=30, nheads=4, headdim=6, ngroups=2, dstate=5, init=True, seed=12)
    cu = torch.tensor([0, 11, 30], dtype=torch.int32)
    v["seq_idx"] = torch.repeat_interleave(torch.arange(2, dtype=torch.int32), cu.diff())[None]
    v["cu_seqlens"] = cu
    _jax_compare(lambda **a: jm.mamba_chunk_scan_combined(chunk_size=8, return_final_states=True,
                                                          return_varlen_states=True, **a),
                 lambda cu_seqlens, **a: _per_sequence(**a), v)
    with pytest.raises(ValueError, match=r"^seq_idx: None with return_varlen_states=True"):
        jm.mamba_chunk_scan_combined(**{k: jnp.asarray(x.detach().numpy()) for k, x in v.items() if k != "seq_idx"},
                                     chunk_size=8, return_varlen_states=True)
