"""A small Mamba-2 block written against mamba_ssm's function name, after mamba_ssm's
modules/mamba2.py (Mamba2.forward without the fused paths): in_proj -> depthwise causal
conv1d + SiLU on (x, B, C) -> mamba_chunk_scan_combined (dt_bias, softplus, D skip; the z
gate inside it, or a gated RMSNorm after it as Mamba2's rmsnorm=True) -> out_proj.
tests/python/test_compat_block.py runs this file twice with only the import line changed:
mamba_ssm's reference function vs chunkgen.compat.mamba's."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from chunkgen.compat.mamba import mamba_chunk_scan_combined  # the one line a user changes

IMPORT_LINE = "from chunkgen.compat.mamba import mamba_chunk_scan_combined"


class Mamba2Block(nn.Module):
    def __init__(self, d_model=16, d_state=12, headdim=6, ngroups=2, expand=3, d_conv=4, chunk_size=16,
                 rmsnorm=True, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.d_inner = expand * d_model
        self.nheads = self.d_inner // headdim
        self.headdim, self.ngroups, self.d_state, self.chunk_size, self.rmsnorm = headdim, ngroups, d_state, \
            chunk_size, rmsnorm
        conv_dim = self.d_inner + 2 * ngroups * d_state
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner + 2 * ngroups * d_state + self.nheads, bias=False)
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, d_conv, groups=conv_dim, padding=d_conv - 1)
        dt = torch.exp(torch.rand(self.nheads) * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).clamp(min=1e-4)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt), as Mamba2
        self.A_log = nn.Parameter(torch.log(torch.empty(self.nheads).uniform_(1, 16)))
        self.D = nn.Parameter(torch.ones(self.nheads))
        self.norm_weight = nn.Parameter(torch.ones(self.d_inner)) if rmsnorm else None
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=False)

    def forward(self, u):
        b, l, _ = u.shape
        gn = self.ngroups * self.d_state
        z, xBC, dt = torch.split(self.in_proj(u), [self.d_inner, self.d_inner + 2 * gn, self.nheads], dim=-1)
        xBC = F.silu(self.conv1d(xBC.transpose(1, 2))[..., :l].transpose(1, 2))
        x, B, C = torch.split(xBC, [self.d_inner, gn, gn], dim=-1)
        z = z.reshape(b, l, self.nheads, self.headdim)
        y = mamba_chunk_scan_combined(
            x.reshape(b, l, self.nheads, self.headdim), dt, -torch.exp(self.A_log),
            B.reshape(b, l, self.ngroups, self.d_state), C.reshape(b, l, self.ngroups, self.d_state),
            self.chunk_size, D=self.D, z=None if self.rmsnorm else z, dt_bias=self.dt_bias, dt_softplus=True)
        y = y.reshape(b, l, self.d_inner)
        if self.rmsnorm:  # RMSNormGated(norm_before_gate=False): RMSNorm(y * silu(z))
            y = y * F.silu(z.reshape(b, l, self.d_inner))
            y = y * torch.rsqrt(y.square().mean(-1, keepdim=True) + 1e-5) * self.norm_weight
        return self.out_proj(y)
