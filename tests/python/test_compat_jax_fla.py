"""chunkgen.compat.jax_fla against fla's naive gated delta rule (refs/fla_gdr_ref.py via
fla_gdr_naive.py): the same float32 inputs as numpy arrays, outputs and every gradient
(jax.vjp under jax.jit) within 1e-4 of the reference's (torch autograd)."""
import pytest
import torch

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import fla_gdr_naive as naive  # noqa: E402
from test_compat_fla_gdr import _inputs  # noqa: E402
from test_compat_jax_mamba import _jax_compare  # noqa: E402

from chunkgen.compat import jax_fla as jf  # noqa: E402


@pytest.mark.parametrize("T,init,l2", [(37, True, True), (1, True, False), (66, False, True)])
def test_jax_chunk_gated_delta_rule_vs_naive(T, init, l2):
    t = _inputs(T=T, init=init, l2=l2, seed=T + 1)
    kw = dict(output_final_state=True, use_qk_l2norm_in_kernel=l2)
    _jax_compare(lambda **a: jf.chunk_gated_delta_rule(**a, **kw), lambda **a: naive.chunk_gated_delta_rule(**a, **kw),
                 t)


def test_jax_varlen_and_gates_in_kernel():
    t = _inputs(B=1, T=30, H=1, HV=3, K=7, V=5, seed=21)
    t["initial_state"] = torch.randn(3, 3, 5, 7, generator=torch.Generator().manual_seed(2)) * 0.3  # state_v_first
    gen = torch.Generator().manual_seed(3)
    t["g"], t["beta"] = torch.randn(1, 30, 3, generator=gen), torch.randn(1, 30, 3, generator=gen)
    t["A_log"], t["dt_bias"] = torch.rand(3, generator=gen).log(), torch.randn(3, generator=gen)
    t["cu_seqlens"] = torch.tensor([0, 11, 12, 30], dtype=torch.int32)
    kw = dict(output_final_state=True, use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True,
              state_v_first=True, use_gate_in_kernel=True)
    for ours in (jf.chunk_gated_delta_rule, jf.fused_recurrent_gated_delta_rule):
        _jax_compare(lambda **a: ours(**a, **kw), lambda **a: naive.chunk_gated_delta_rule(**a, **kw), t)


def test_jax_returns_and_errors():
    t = {n: jnp.asarray(x.numpy()) for n, x in _inputs(B=2, T=5, H=1, HV=2, K=4, V=3, init=False).items()}
    o, h = jf.chunk_gated_delta_rule(**t)
    assert h is None and o.shape == (2, 5, 2, 3) and o.dtype == jnp.float32
    o2, h2 = jf.fused_recurrent_gdn(t["q"], t["k"], t["v"], output_final_state=True)
    assert o2.shape == o.shape and h2.shape == (2, 2, 4, 3)
    with pytest.raises(ValueError, match=r"^For GVA, num_v_heads \(HV=2\)"):
        jf.chunk_gated_delta_rule(t["q"][:, :, [0, 0, 0]], t["k"][:, :, [0, 0, 0]], t["v"], t["g"], t["beta"])
    with pytest.raises(ValueError, match=r"^The batch size is expected to be 1 rather than 2"):
        jf.chunk_gated_delta_rule(**t, cu_seqlens=jnp.array([0, 2, 5]))
    with pytest.raises(ValueError, match=r"^gk: given"):
        jf.fused_recurrent_gated_delta_rule(t["q"], t["k"], t["v"], gk=jnp.zeros((2, 5, 2, 4)))
    with pytest.raises(TypeError, match="unexpected keyword argument.*bogus"):
        jf.chunk_gated_delta_rule(**t, bogus=1)
