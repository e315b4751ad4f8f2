"""fla's chunk_gated_delta_rule / fused_recurrent_gated_delta_rule with fla-core 0.6.0's
arguments, on fla's own naive recurrence (refs/fla_gdr_ref.py, pinned): the reference side
of tests/python/test_compat_fla_gdr.py and of the Gated DeltaNet block test.

The naive functions take q, k, v, g, beta of one head count and already computed gates;
what fla's kernels do around the recurrence is written out here, as fla 0.6.0 does it:
- use_qk_l2norm_in_kernel: fla's l2norm (fla/modules/norm/l2norm.py: x * rsqrt(sum x^2 +
  1e-6) over K, in float32);
- GVA (HV > H): value head j reads q/k head j // (HV // H) (fla's kernels: i_h = i_hv //
  (HV // H)), so q and k are repeated along heads;
- use_gate_in_kernel: g = -exp(A_log) * softplus(g + dt_bias) (fla's naive_gdn_gate,
  fla/ops/gated_delta_rule/gate.py); use_beta_sigmoid_in_kernel: beta = sigmoid(beta), times
  2 with allow_neg_eigval;
- state_v_first: states [N, HV, V, K];
- cu_seqlens: each sequence alone, from its own initial state."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from refs.fla_gdr_ref import naive_chunk_gated_delta_rule, naive_recurrent_gated_delta_rule


def _l2norm(x):
    x = x.float()
    return x * torch.rsqrt(x.square().sum(-1, keepdim=True) + 1e-6)


def _one(q, k, v, g, beta, scale, h0, naive):
    if naive == "chunk":
        return naive_chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=16, scale=scale, initial_state=h0,
                                            output_final_state=True)
    return naive_recurrent_gated_delta_rule(q, k, v, beta, g, scale=scale, initial_state=h0, output_final_state=True)


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                           use_qk_l2norm_in_kernel=False, use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False,
                           state_v_first=False, cu_seqlens=None, use_gate_in_kernel=False, A_log=None, dt_bias=None,
                           naive="recurrent"):
    """fla's semantics on fla's naive recurrence (naive="recurrent") or naive chunked form
    (naive="chunk", its chunk 16). Returns (o in q's dtype, final_state or None)."""
    if use_qk_l2norm_in_kernel:
        q, k = _l2norm(q), _l2norm(k)
    rep = v.shape[2] // q.shape[2]
    q, k = q.repeat_interleave(rep, dim=2), k.repeat_interleave(rep, dim=2)
    if use_gate_in_kernel:
        g = -A_log.float().exp() * F.softplus(g.float() + (0 if dt_bias is None else dt_bias.float()))
    if use_beta_sigmoid_in_kernel:
        beta = beta.sigmoid() * (2 if allow_neg_eigval else 1)
    if scale is None:
        scale = k.shape[-1] ** -0.5
    h0 = initial_state
    if h0 is not None and state_v_first:
        h0 = h0.transpose(-1, -2)
    if cu_seqlens is None:
        o, hT = _one(q, k, v, g, beta, scale, h0, naive)
    else:
        outs, states = [], []
        for i in range(len(cu_seqlens) - 1):
            s, e = int(cu_seqlens[i]), int(cu_seqlens[i + 1])
            oi, hi = _one(q[:, s:e], k[:, s:e], v[:, s:e], g[:, s:e], beta[:, s:e], scale,
                          None if h0 is None else h0[i:i + 1], naive)
            outs.append(oi)
            states.append(hi)
        o, hT = torch.cat(outs, dim=1), torch.cat(states)
    if state_v_first:
        hT = hT.transpose(-1, -2)
    return o.to(q.dtype), (hT if output_final_state else None)


def fused_recurrent_gated_delta_rule(q, k, v, g=None, beta=None, scale=None, initial_state=None,
                                     output_final_state=False, use_qk_l2norm_in_kernel=False, **kw):
    """fla's fused_recurrent form: g None no decay, beta None ones, then as above."""
    if g is None:
        g = torch.zeros(v.shape[:3])
    if beta is None:
        beta = torch.ones(v.shape[:3])
    return chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                                  output_final_state=output_final_state,
                                  use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, **kw)
