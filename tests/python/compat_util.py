"""Helpers of the compat tests: run one function in two implementations on the same leaf
tensors and compare every output and every gradient (relative max error, float32)."""
from __future__ import annotations

import torch

from ref import rel_err

TOL = 1e-4  # relative max error (max |a - b| / max |b|), outputs and gradients, float32


def leaves(inputs: dict) -> dict:
    """Fresh leaf copies of the floating inputs (requiring grad); other values as they are."""
    return {k: (v.detach().clone().requires_grad_(True) if isinstance(v, torch.Tensor) and v.is_floating_point()
                else v) for k, v in inputs.items()}


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def compare(ours, ref, inputs: dict, tol: float = TOL, seed: int = 7, grads: bool = True) -> dict:
    """ours(**inputs) and ref(**inputs) on separate leaf copies: every output within tol,
    then the gradient of sum(out_i * w_i) (random w_i, the same for both) with respect to
    every floating input within tol. Returns the errors by name."""
    a, b = leaves(inputs), leaves(inputs)
    oa, ob = as_tuple(ours(**a)), as_tuple(ref(**b))
    assert len(oa) == len(ob), (len(oa), len(ob))
    errs = {}
    g = torch.Generator().manual_seed(seed)
    loss_a = loss_b = 0
    for i, (x, y) in enumerate(zip(oa, ob)):
        assert x.shape == y.shape, (i, x.shape, y.shape)
        assert x.dtype == y.dtype, (i, x.dtype, y.dtype)
        errs[f"out{i}"] = rel_err(x, y)
        w = torch.randn(y.shape, generator=g, dtype=y.dtype)
        loss_a = loss_a + (x * w).sum()
        loss_b = loss_b + (y * w).sum()
    if grads:
        names = [k for k, v in a.items() if isinstance(v, torch.Tensor) and v.requires_grad]
        ga = torch.autograd.grad(loss_a, [a[k] for k in names], allow_unused=True)
        gb = torch.autograd.grad(loss_b, [b[k] for k in names], allow_unused=True)
        for k, x, y in zip(names, ga, gb):
            assert (x is None) == (y is None), (k, x is None, y is None)
            if y is not None:
                errs[f"d{k}"] = rel_err(x, y)
    bad = {k: e for k, e in errs.items() if not e <= tol}
    assert not bad, f"errors over {tol}: {bad} (all: {errs})"
    return errs
