"""A small Gated DeltaNet block written against fla's function name, after fla 0.6.0's
fla/layers/gated_deltanet.py (GatedDeltaNet.forward in 'chunk' mode, no cache): q/k/v
projections -> short causal depthwise conv + SiLU (or SiLU alone) -> chunk_gated_delta_rule
with the L2 norm in the kernel, the gate g = -exp(A_log) * softplus(a + dt_bias) and
beta = sigmoid(b) (in the kernel, as fla 0.6.0's layer, or computed before the call, as its
earlier layers) -> gated RMSNorm per head (output gate SiLU(g_proj)) -> o_proj.
tests/python/test_compat_block.py runs this file twice with only the import line changed:
fla's naive reference (fla_gdr_naive.py) vs chunkgen.compat.fla's."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from chunkgen.compat.fla import chunk_gated_delta_rule  # the one line a user changes

IMPORT_LINE = "from chunkgen.compat.fla import chunk_gated_delta_rule"


class ShortConvolution(nn.Conv1d):
    """fla's ShortConvolution on [B, T, D]: a causal depthwise conv1d, then SiLU."""

    def __init__(self, hidden_size, kernel_size=4):
        super().__init__(hidden_size, hidden_size, kernel_size, groups=hidden_size, padding=kernel_size - 1,
                         bias=False)

    def forward(self, x):
        return F.silu(super().forward(x.transpose(1, 2))[..., :x.shape[1]].transpose(1, 2))


class GatedDeltaNetBlock(nn.Module):
    def __init__(self, hidden_size=16, head_dim=6, expand_v=1.5, num_heads=2, num_v_heads=4, use_short_conv=True,
                 gates_in_kernel=True, allow_neg_eigval=False, conv_size=4, norm_eps=1e-5, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.head_k_dim, self.head_v_dim = head_dim, int(head_dim * expand_v)
        self.key_dim, self.value_dim = num_heads * head_dim, num_v_heads * self.head_v_dim
        self.use_short_conv, self.gates_in_kernel, self.allow_neg_eigval = use_short_conv, gates_in_kernel, \
            allow_neg_eigval
        self.norm_eps = norm_eps
        self.q_proj = nn.Linear(hidden_size, self.key_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, self.key_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, self.value_dim, bias=False)
        self.a_proj = nn.Linear(hidden_size, num_v_heads, bias=False)
        self.b_proj = nn.Linear(hidden_size, num_v_heads, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.empty(num_v_heads).uniform_(0, 16)))
        dt = torch.exp(torch.rand(num_v_heads) * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).clamp(min=1e-4)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt), as fla
        if use_short_conv:
            self.q_conv1d = ShortConvolution(self.key_dim, conv_size)
            self.k_conv1d = ShortConvolution(self.key_dim, conv_size)
            self.v_conv1d = ShortConvolution(self.value_dim, conv_size)
        self.g_proj = nn.Linear(hidden_size, self.value_dim, bias=False)
        self.o_norm_weight = nn.Parameter(torch.ones(self.head_v_dim))
        self.o_proj = nn.Linear(self.value_dim, hidden_size, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        if self.use_short_conv:
            q, k, v = self.q_conv1d(self.q_proj(x)), self.k_conv1d(self.k_proj(x)), self.v_conv1d(self.v_proj(x))
        else:
            q, k, v = F.silu(self.q_proj(x)), F.silu(self.k_proj(x)), F.silu(self.v_proj(x))
        q, k = q.view(b, t, -1, self.head_k_dim), k.view(b, t, -1, self.head_k_dim)
        v = v.view(b, t, -1, self.head_v_dim)
        if self.gates_in_kernel:  # fla 0.6.0's layer
            o, _ = chunk_gated_delta_rule(q=q, k=k, v=v, g=self.a_proj(x), beta=self.b_proj(x),
                                          use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                                          allow_neg_eigval=self.allow_neg_eigval, state_v_first=True,
                                          use_gate_in_kernel=True, A_log=self.A_log, dt_bias=self.dt_bias)
        else:  # the gates computed first (fla's earlier layers)
            beta = self.b_proj(x).sigmoid() * (2.0 if self.allow_neg_eigval else 1.0)
            g = -self.A_log.float().exp() * F.softplus(self.a_proj(x).float() + self.dt_bias)
            o, _ = chunk_gated_delta_rule(q=q, k=k, v=v, g=g, beta=beta, use_qk_l2norm_in_kernel=True)
        gate = self.g_proj(x).view(b, t, -1, self.head_v_dim)  # FusedRMSNormGated, activation swish
        o = o * torch.rsqrt(o.square().mean(-1, keepdim=True) + self.norm_eps) * self.o_norm_weight * F.silu(gate)
        return self.o_proj(o.reshape(b, t, self.value_dim))
