"""Plain PyTorch sequential recurrences (the tests' ground truth, run in float64 and
differentiated by autograd). Token-major SSD layout; sscan in its logical order."""
import torch
import torch.nn.functional as F


def ssd_ref(q, k, v, log_alpha, h0=None):
    """q, k [B, T, G, dk]; v [B, T, H, dv]; log_alpha [B, T, H]; h0 [B, H, dk, dv]."""
    B, T, G, dk = q.shape
    H, dv = v.shape[2], v.shape[3]
    qh = q.repeat_interleave(H // G, dim=2)
    kh = k.repeat_interleave(H // G, dim=2)
    S = h0 if h0 is not None else q.new_zeros(B, H, dk, dv)
    outs = []
    for t in range(T):
        S = torch.exp(log_alpha[:, t])[..., None, None] * S + kh[:, t, :, :, None] * v[:, t, :, None, :]
        outs.append(torch.einsum("bhk,bhkv->bhv", qh[:, t], S))
    return torch.stack(outs, 1), S


def sscan_ref(x, delta, A, B, C, D=None, z=None, delta_bias=None, h0=None, delta_softplus=False):
    """x, delta, z [B, L, D]; A [D, N]; B, C [B, L, N] or [B, L, G, N]; D, delta_bias [D]."""
    Bsz, L, Dd = x.shape
    N = A.shape[1]
    dt = delta + delta_bias if delta_bias is not None else delta
    if delta_softplus:
        dt = F.softplus(dt)

    def per_channel(M):
        if M.dim() == 4:
            return M.repeat_interleave(Dd // M.shape[2], dim=2)
        return M[:, :, None, :].expand(Bsz, L, Dd, N)

    Bc, Cc = per_channel(B), per_channel(C)
    h = h0 if h0 is not None else x.new_zeros(Bsz, Dd, N)
    ys = []
    for t in range(L):
        h = torch.exp(dt[:, t, :, None] * A) * h + (dt[:, t] * x[:, t])[:, :, None] * Bc[:, t]
        y = (Cc[:, t] * h).sum(-1)
        if D is not None:
            y = y + D * x[:, t]
        ys.append(y)
    y = torch.stack(ys, 1)
    if z is not None:
        y = y * F.silu(z)
    return y, h


# The C tests' tolerance table (runtime/ops.c cg__tol): forward and backward outputs.
TOL_FWD, TOL_BWD = 1e-5, 1e-4


def rel_err(a, b):
    """max |a - b| / max |b| (max |a - b| when b is all zero; inf on a NaN), as the C
    tests' relative-error helper."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    d = (a - b).abs()
    if torch.isnan(d).any():
        return float("inf")
    m = b.abs().max().item()
    return d.max().item() / m if m > 0 else d.max().item()
