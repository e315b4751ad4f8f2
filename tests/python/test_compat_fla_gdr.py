"""chunkgen.compat.fla's gated delta rule (chunk_gated_delta_rule,
fused_recurrent_gated_delta_rule) against fla's own naive references (refs/fla_gdr_ref.py,
pinned from fla-core 0.6.0, wrapped with fla's argument handling in fla_gdr_naive.py): the
same inputs through fla's convention, every output and every gradient (q, k, v, g, beta,
initial_state; A_log and dt_bias with the in-kernel gate) within 1e-4 (float32), on odd
shapes: K 48, V 40, H 2 / HV 6, T not a multiple of 64 and T = 1, varlen."""
import pytest
import torch
import torch.nn.functional as F

import fla_gdr_naive as naive
from compat_util import compare

from chunkgen.compat import fla as cf


def _inputs(B=2, T=37, H=2, HV=6, K=48, V=40, seed=0, init=True, l2=True):
    """fla's inputs: q, k [B, T, H, K] (k unit-norm when the kernel does not normalise it),
    v [B, T, HV, V], g = logsigmoid(.) and beta = sigmoid(.) [B, T, HV], initial_state
    [B, HV, K, V]."""
    gen = torch.Generator().manual_seed(seed)
    r = (lambda *s: torch.randn(*s, generator=gen))
    k = r(B, T, H, K)
    t = dict(q=r(B, T, H, K), k=k if l2 else F.normalize(k, dim=-1), v=r(B, T, HV, V),
             g=F.logsigmoid(r(B, T, HV) + 3.0), beta=torch.sigmoid(r(B, T, HV)))
    if init:
        t["initial_state"] = r(B, HV, K, V) * 0.3
    return t


@pytest.mark.parametrize("T,H,HV,init,l2,scale", [
    (37, 2, 6, True, True, None),    # GVA, T not a multiple of 64, l2norm in kernel
    (70, 2, 6, False, False, 0.3),   # across a 64-token chunk, a given scale, no state
    (1, 2, 6, True, False, None),    # one token
    (45, 3, 3, True, True, 1.0),     # H == HV
])
def test_chunk_gated_delta_rule_vs_naive_recurrent(T, H, HV, init, l2, scale):
    t = _inputs(B=1 if T > 64 else 2, T=T, H=H, HV=HV, init=init, l2=l2, seed=T)
    kw = dict(scale=scale, output_final_state=True, use_qk_l2norm_in_kernel=l2)
    compare(lambda **a: cf.chunk_gated_delta_rule(**a, **kw), lambda **a: naive.chunk_gated_delta_rule(**a, **kw), t)


def test_chunk_gated_delta_rule_vs_naive_chunk():
    """fla's naive chunked form (its chunk 16), chunk_size=32 passed as a hint."""
    t = _inputs(B=1, T=50, seed=3)
    compare(lambda **a: cf.chunk_gated_delta_rule(**a, output_final_state=True, use_qk_l2norm_in_kernel=True,
                                                  chunk_size=32),
            lambda **a: naive.chunk_gated_delta_rule(**a, output_final_state=True, use_qk_l2norm_in_kernel=True,
                                                     naive="chunk"), t)


def test_chunk_gated_delta_rule_varlen():
    """cu_seqlens (batch 1): each sequence (13, 1, 0 and 26 tokens) as fla's naive recurrence
    alone, from its own initial state."""
    t = _inputs(B=1, T=40, seed=6)
    t["initial_state"] = torch.randn(4, 6, 48, 40, generator=torch.Generator().manual_seed(1)) * 0.3
    cu = torch.tensor([0, 13, 14, 14, 40], dtype=torch.int64)
    kw = dict(output_final_state=True, use_qk_l2norm_in_kernel=True, cu_seqlens=cu)
    compare(lambda **a: cf.chunk_gated_delta_rule(**a, **kw), lambda **a: naive.chunk_gated_delta_rule(**a, **kw), t)


def test_gates_in_kernel_and_state_v_first():
    """fla 0.6.0's GatedDeltaNet call: raw a and b with use_gate_in_kernel (A_log, dt_bias),
    use_beta_sigmoid_in_kernel, allow_neg_eigval, state_v_first; gradients reach A_log and
    dt_bias."""
    gen = torch.Generator().manual_seed(9)
    t = _inputs(B=2, T=21, H=1, HV=3, K=7, V=5, seed=9)
    t["initial_state"] = t["initial_state"].transpose(-1, -2).contiguous()
    t["g"], t["beta"] = torch.randn(2, 21, 3, generator=gen), torch.randn(2, 21, 3, generator=gen)
    t["A_log"], t["dt_bias"] = torch.rand(3, generator=gen).log(), torch.randn(3, generator=gen)
    kw = dict(output_final_state=True, use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True,
              allow_neg_eigval=True, state_v_first=True, use_gate_in_kernel=True)
    for ours in (cf.chunk_gated_delta_rule, cf.fused_recurrent_gated_delta_rule):
        compare(lambda **a: ours(**a, **kw), lambda **a: naive.chunk_gated_delta_rule(**a, **kw), t)


def test_fused_recurrent_decode_continues_prefill():
    """Prefill with chunk_gated_delta_rule, then three one-token steps with
    fused_recurrent_gated_delta_rule carrying the state: the same outputs, final state and
    gradients as fla's naive recurrence over the whole sequence."""
    t = _inputs(B=2, T=20, seed=11)

    def ours(q, k, v, g, beta, initial_state):
        o, h = cf.chunk_gated_delta_rule(q[:, :17], k[:, :17], v[:, :17], g[:, :17], beta[:, :17],
                                         initial_state=initial_state, output_final_state=True,
                                         use_qk_l2norm_in_kernel=True)
        outs = [o]
        for s in range(17, 20):
            o, h = cf.fused_recurrent_gated_delta_rule(q[:, s:s + 1], k[:, s:s + 1], v[:, s:s + 1], g[:, s:s + 1],
                                                       beta=beta[:, s:s + 1], initial_state=h,
                                                       output_final_state=True, use_qk_l2norm_in_kernel=True)
            outs.append(o)
        return torch.cat(outs, dim=1), h

    compare(ours, lambda **a: naive.chunk_gated_delta_rule(**a, output_final_state=True,
                                                           use_qk_l2norm_in_kernel=True), t)


def test_fused_recurrent_defaults_and_returns():
    """fused_recurrent's g None (no decay) and beta None (ones); final_state None unless
    asked; o in q's dtype [B, T, HV, V]; chunk_gdn / fused_recurrent_gdn are fla's aliases."""
    t = _inputs(B=1, T=6, H=1, HV=2, K=5, V=3, seed=12, init=False, l2=False)
    compare(lambda q, k, v: cf.fused_recurrent_gated_delta_rule(q, k, v, output_final_state=True),
            lambda q, k, v: naive.fused_recurrent_gated_delta_rule(q, k, v, output_final_state=True),
            dict(q=t["q"], k=t["k"], v=t["v"]))
    o, h = cf.chunk_gated_delta_rule(t["q"], t["k"], t["v"], t["g"], t["beta"])
    assert h is None and o.shape == (1, 6, 2, 3) and o.dtype == torch.float32
    o2, _ = cf.chunk_gdn(t["q"], t["k"], t["v"], t["g"], t["beta"])
    o3, _ = cf.fused_recurrent_gdn(t["q"], t["k"], t["v"], t["g"], beta=t["beta"])
    assert torch.equal(o, o2) and torch.allclose(o, o3)


def test_gated_delta_rule_errors():
    t = _inputs(B=2, T=9, H=2, HV=4, K=5, V=7, init=False)
    f, r = cf.chunk_gated_delta_rule, cf.fused_recurrent_gated_delta_rule
    with pytest.raises(ValueError, match=r"^q and k must have the same number of heads"):
        f(t["q"], t["k"][:, :, :1], t["v"], t["g"], t["beta"])
    with pytest.raises(ValueError, match=r"^For GVA, num_v_heads \(HV=4\) must be evenly divisible by num_heads "
                                         r"\(H=3\)"):
        f(t["q"][:, :, [0, 1, 1]], t["k"][:, :, [0, 1, 1]], t["v"], t["g"], t["beta"])
    with pytest.raises(ValueError, match=r"^The batch size is expected to be 1 rather than 2"):
        f(**t, cu_seqlens=torch.tensor([0, 4, 9]))
    with pytest.raises(ValueError, match=r"^The number of initial states is expected"):
        f(**{n: x[:1] for n, x in t.items()}, cu_seqlens=torch.tensor([0, 4, 9]),
          initial_state=torch.zeros(3, 4, 5, 7))
    with pytest.raises(DeprecationWarning, match="head_first"):
        f(**t, head_first=False)
    with pytest.raises(TypeError, match="unexpected keyword argument.*bogus"):
        f(**t, bogus=1)
    with pytest.raises(ValueError, match=r"^cp_context: given"):
        f(**t, cp_context=object())
    with pytest.raises(ValueError, match=r"allow_neg_eigval=True. requires"):
        f(**t, allow_neg_eigval=True)
    with pytest.raises(ValueError, match=r"^`A_log` must be provided"):
        f(**t, use_gate_in_kernel=True)
    with pytest.raises(ValueError, match=r"^gk: given"):
        r(t["q"], t["k"], t["v"], gk=torch.zeros(2, 9, 4, 5))
    with pytest.raises(ValueError, match=r"^gv: given"):
        r(t["q"], t["k"], t["v"], gv=torch.zeros(2, 9, 4, 7))
    with pytest.raises(ValueError, match=r"^beta: shape \(2, 9, 4, 7\) \(a beta per value channel\)"):
        r(t["q"], t["k"], t["v"], t["g"], beta=torch.ones(2, 9, 4, 7))
    with pytest.raises(ValueError, match=r"^g: shape \(2, 9, 2\) but expected \(2, 9, 4\)"):
        f(t["q"], t["k"], t["v"], t["g"][:, :, :2], t["beta"])
    with pytest.warns(DeprecationWarning, match="transpose_state_layout"):
        _, h = f(**t, output_final_state=True, transpose_state_layout=True)
    assert h.shape == (2, 4, 7, 5)
