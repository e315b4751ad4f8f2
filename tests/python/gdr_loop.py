"""fla's gated delta rule recurrence (MATH_GDN.md 4.1) as a plain loop over the tokens,
written once for PyTorch and JAX: the float64 reference of test_torch_gdr.py and
test_jax_gdr.py, differentiated by either framework's autodiff."""


def gdr_loop(xp, q, k, v, g, beta, h0=None, scale=None, l2norm=False):
    """xp: torch or jax.numpy. Token-major q, k [B, T, G, dk]; v [B, T, H, dv]; g, beta
    [B, T, H]; h0 [B, H, dk, dv]; value head h reads q/k head h // (H / G). Returns o
    [B, T, H, dv] and hT [B, H, dk, dv]."""
    B, T, G, dk = q.shape
    H, dv = v.shape[2], v.shape[3]
    if l2norm:
        q = q / xp.sqrt((q * q).sum(-1)[..., None] + 1e-6)
        k = k / xp.sqrt((k * k).sum(-1)[..., None] + 1e-6)
    s = dk ** -0.5 if not scale else scale
    heads = [h // (H // G) for h in range(H)]
    qh, kh = q[:, :, heads], k[:, :, heads]
    S = h0 if h0 is not None else xp.zeros((B, H, dk, dv), dtype=q.dtype)
    outs = []
    for t in range(T):
        S = xp.exp(g[:, t])[..., None, None] * S
        u = beta[:, t, :, None] * (v[:, t] - xp.einsum("bhkv,bhk->bhv", S, kh[:, t]))
        S = S + kh[:, t, :, :, None] * u[:, :, None, :]
        outs.append(xp.einsum("bhkv,bhk->bhv", S, s * qh[:, t]))
    return xp.stack(outs, 1), S
