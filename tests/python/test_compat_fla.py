"""chunkgen.compat.fla against fla's own naive simple GLA (tests/python/refs/fla_ref.py,
pinned from fla-core 0.6.0): same inputs through fla's convention, every output and every
gradient within 1e-4 (float32) on odd shapes."""
import pytest
import torch
import torch.nn.functional as F

from compat_util import compare
from refs.fla_ref import naive_chunk_simple_gla, naive_recurrent_simple_gla

from chunkgen.compat import fla as cf


def _inputs(B=2, T=45, H=3, K=40, V=48, seed=0, init=True):
    g = torch.Generator().manual_seed(seed)
    r = (lambda *s: torch.randn(*s, generator=g))
    t = dict(q=r(B, T, H, K), k=r(B, T, H, K), v=r(B, T, H, V), g=F.logsigmoid(r(B, T, H) + 2.0))
    if init:
        t["initial_state"] = r(B, H, K, V) * 0.3
    return t


@pytest.mark.parametrize("T,scale,init", [(45, None, True), (1, None, True), (64, 0.5, False), (70, 1.0, True)])
def test_chunk_simple_gla_vs_naive_recurrent(T, scale, init):
    t = _inputs(T=T, init=init, seed=T)
    compare(lambda **a: cf.chunk_simple_gla(scale=scale, output_final_state=True, **a),
            lambda **a: naive_recurrent_simple_gla(scale=scale, output_final_state=True, **a), t)


def test_chunk_simple_gla_vs_naive_chunk():
    """fla's naive chunked form (its chunk 16; chunkgen's chunk is its own), output and
    final state, default scale K^-0.5."""
    t = _inputs(T=50, seed=4)
    compare(lambda **a: cf.chunk_simple_gla(output_final_state=True, chunk_size=64, **a),
            lambda **a: naive_chunk_simple_gla(output_final_state=True, chunk_size=16, **a), t)


def test_chunk_simple_gla_varlen():
    """cu_seqlens (batch 1, fla's convention): each sequence as fla's naive recurrence
    alone, from its own initial state."""
    t = _inputs(B=1, T=40, seed=6)
    cu = torch.tensor([0, 13, 14, 40], dtype=torch.int64)
    t["initial_state"] = torch.randn(3, 3, 40, 48, generator=torch.Generator().manual_seed(1)) * 0.3

    def per_sequence(q, k, v, g, initial_state):
        outs, states = [], []
        for i in range(len(cu) - 1):
            s, e = int(cu[i]), int(cu[i + 1])
            o, h = naive_recurrent_simple_gla(q[:, s:e], k[:, s:e], v[:, s:e], g[:, s:e],
                                              initial_state=initial_state[i:i + 1], output_final_state=True)
            outs.append(o)
            states.append(h)
        return torch.cat(outs, dim=1), torch.cat(states)

    compare(lambda **a: cf.chunk_simple_gla(output_final_state=True, cu_seqlens=cu, **a), per_sequence, t)


def test_chunk_simple_gla_state_v_first_g_gamma_and_returns():
    t = _inputs(B=1, T=9, H=2, K=5, V=7, seed=8)
    o, h = cf.chunk_simple_gla(t["q"], t["k"], t["v"], t["g"], initial_state=t["initial_state"],
                               output_final_state=True)
    o2, h2 = cf.chunk_simple_gla(t["q"], t["k"], t["v"], t["g"], initial_state=t["initial_state"].transpose(-1, -2),
                                 output_final_state=True, state_v_first=True)
    assert h2.shape == (1, 2, 7, 5) and torch.allclose(h2.transpose(-1, -2), h) and torch.allclose(o, o2)
    o3, h3 = cf.chunk_simple_gla(t["q"], t["k"], t["v"], t["g"])
    assert h3 is None and o3.shape == t["v"].shape
    gamma = torch.tensor([-0.1, -0.7])
    compare(lambda **a: cf.chunk_simple_gla(a["q"], a["k"], a["v"], g_gamma=a["gamma"], output_final_state=True),
            lambda **a: naive_recurrent_simple_gla(a["q"], a["k"], a["v"], a["gamma"].expand(1, 9, 2),
                                                   output_final_state=True),
            dict(q=t["q"], k=t["k"], v=t["v"], gamma=gamma))


def test_chunk_simple_gla_errors():
    t = _inputs(B=2, T=9, H=2, K=5, V=7, init=False)
    with pytest.raises(ValueError, match=r"^The batch size is expected to be 1 rather than 2"):
        cf.chunk_simple_gla(**t, cu_seqlens=torch.tensor([0, 4, 9]))
    with pytest.raises(DeprecationWarning, match="head_first"):
        cf.chunk_simple_gla(**t, head_first=False)
    with pytest.raises(TypeError, match="unexpected keyword argument.*bogus"):
        cf.chunk_simple_gla(**t, bogus=1)
    with pytest.raises(ValueError, match=r"^g, g_gamma: both given"):
        cf.chunk_simple_gla(**t, g_gamma=torch.zeros(2))
