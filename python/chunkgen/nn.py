"""torch.nn modules on chunkgen's ops."""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import torch as ct

__all__ = ["Mamba2Mixer"]

_HALF = (torch.bfloat16, torch.float16)


def _float32_if_half(t: torch.Tensor) -> torch.Tensor:
    """t in float32 when it is 16-bit (chunkgen's float32-only tensors); else t as it is."""
    return t.float() if t.dtype in _HALF else t


class Mamba2Mixer(nn.Module):
    """A Mamba-2 style SSD mixer (residual block) over [batch, tokens, d_model].

    in_proj gives z, x (heads x head_dim), B and C (groups x d_state) and dt (heads);
    dt = softplus(dt + dt_bias); the SSD scan runs with v = x * dt, k = B, q = C and the
    per-head decay log_alpha = -dt * exp(A_log); then a D skip, gating by silu(z), a
    LayerNorm and out_proj, added to the input. No convolution.
    `scan` (default chunkgen.torch.ssd) takes (q, k, v, log_alpha) and returns (o, hT);
    any function of that signature can stand in (e.g. a pure-PyTorch recurrence).
    In a bfloat16 / float16 module (or under autocast) q, k, v stay 16-bit and the decay
    log_alpha is computed in float32 (chunkgen keeps it float32, as mamba_ssm keeps dt).
    """

    def __init__(self, d_model: int, heads: int = 4, groups: int = 1, d_state: int = 16,
                 head_dim: Optional[int] = None, scan: Optional[Callable] = None):
        super().__init__()
        if heads % groups:
            raise ValueError(f"heads: {heads} is not a multiple of groups = {groups}")
        self.h, self.g, self.n = heads, groups, d_state
        self.p = head_dim if head_dim is not None else max(1, 2 * d_model // heads)
        hp, gn = self.h * self.p, self.g * self.n
        self.in_proj = nn.Linear(d_model, 2 * hp + 2 * gn + heads)
        self.A_log = nn.Parameter(torch.log(torch.linspace(0.5, 2.0, heads)))
        self.dt_bias = nn.Parameter(torch.zeros(heads))
        self.D = nn.Parameter(torch.ones(heads))
        self.norm = nn.LayerNorm(hp)
        self.out_proj = nn.Linear(hp, d_model)
        self.scan = scan if scan is not None else ct.ssd

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self._mix(u, lambda q, k, v, la: self.scan(q, k, v, la)[0])

    def cache_shape(self, slots: int) -> Tuple[int, int, int, int]:
        """The shape of a state cache of `slots` sequences for step: [slots, heads, d_state, head_dim]."""
        return (slots, self.h, self.n, self.p)

    def step(self, u: torch.Tensor, cache: torch.Tensor, state_indices: torch.Tensor,
             dst_indices: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Decoding: the block on u [B, T, d_model] (T = 1 per step; more for speculative
        decoding) from the states cache[state_indices[b]] (chunkgen.torch.ssd_step; -1 a
        padding entry), written back in place (or to dst_indices [B, T]). cache:
        cache_shape(slots), float32 (zeros for a new sequence). T steps equal forward over
        the same T tokens from zero states."""
        return self._mix(u, lambda q, k, v, la: ct.ssd_step(q, k, v, la, cache, state_indices, dst_indices))

    def _mix(self, u: torch.Tensor, run: Callable) -> torch.Tensor:
        b, t, _ = u.shape
        hp, gn = self.h * self.p, self.g * self.n
        z, x, B, C, dt = torch.split(self.in_proj(u), [hp, hp, gn, gn, self.h], dim=-1)
        x = x.reshape(b, t, self.h, self.p)
        dt = F.softplus(dt + self.dt_bias)
        log_alpha = -_float32_if_half(dt) * torch.exp(_float32_if_half(self.A_log))
        y = run(C.reshape(b, t, self.g, self.n), B.reshape(b, t, self.g, self.n), x * dt[..., None], log_alpha)
        y = y + x * self.D[:, None]
        y = self.norm(y.reshape(b, t, hp) * F.silu(z))
        return u + self.out_proj(y)
