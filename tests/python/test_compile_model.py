"""torch.compile(fullgraph=True) through the custom ops, and a few training steps of a
tiny Mamba-2 style model against the same model on a pure-PyTorch recurrence."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import chunkgen.torch as ct
from chunkgen.nn import Mamba2Mixer
from ref import ssd_ref


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g).requires_grad_()  # noqa: E731
    ssd = [r(1, 9, 2, 5), r(1, 9, 2, 5), r(1, 9, 4, 3), (-torch.rand(1, 9, 4, generator=g)).requires_grad_(),
           r(1, 4, 5, 3)]
    sscan = [r(1, 9, 6), torch.rand(1, 9, 6, generator=g).requires_grad_(), (-torch.rand(6, 4, generator=g) - 0.1),
             r(1, 9, 4), r(1, 9, 4), r(6), r(1, 9, 6)]
    sscan[2].requires_grad_()
    return ssd, sscan


def f(ssd_args, sscan_args):
    q, k, v, la, h0 = ssd_args
    o, hT = ct.ssd(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), la.transpose(1, 2), h0, layout="head")
    x, delta, A, B, C, D, z = sscan_args
    y, yT = ct.sscan(x, delta, A, B, C, D, z, delta_softplus=True)
    return (o * o).sum() + hT.sum() + (y * y).sum() + yT.sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(backend):
    torch._dynamo.reset()
    ssd, sscan = _inputs()
    loss = f(ssd, sscan)
    grads = torch.autograd.grad(loss, ssd + sscan)
    cf = torch.compile(f, fullgraph=True, backend=backend)
    loss_c = cf(ssd, sscan)
    grads_c = torch.autograd.grad(loss_c, ssd + sscan)
    torch.testing.assert_close(loss_c, loss, rtol=1e-6, atol=1e-6)
    for a, b in zip(grads_c, grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_training_matches_pure_pytorch():
    torch.manual_seed(0)
    ours = nn.Sequential(*(Mamba2Mixer(16, heads=4, groups=2, d_state=8, head_dim=6) for _ in range(2)))
    assert all(m.scan is ct.ssd for m in ours)
    theirs = copy.deepcopy(ours)
    for m in theirs:
        m.scan = ssd_ref
    opt_a = torch.optim.Adam(ours.parameters(), lr=1e-2)
    opt_b = torch.optim.Adam(theirs.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    u = torch.randn(3, 29, 16, generator=g)
    target = torch.randn(3, 29, 16, generator=g)
    losses = []
    for _ in range(6):
        la = F.mse_loss(ours(u), target)
        lb = F.mse_loss(theirs(u), target)
        for opt, loss in ((opt_a, la), (opt_b, lb)):
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses.append((la.item(), lb.item()))
    for la, lb in losses:
        assert abs(la - lb) <= 1e-4, losses
    assert losses[-1][0] < losses[0][0]  # it trains
    for pa, pb in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-3, atol=1e-4)


def test_compile_dynamic_shapes():
    # dynamic=True: the fake implementations get symbolic sizes (the output shapes from the
    # C op table take them as they are); two sequence lengths, one graph, eager's values
    # and gradients.
    def g(q, k, v, la):
        o, hT = ct.ssd(q, k, v, la)
        return (o * o).sum() + hT.sum()

    cg = torch.compile(g, fullgraph=True, dynamic=True)
    for T in (5, 11):
        gen = torch.Generator().manual_seed(T)
        x = [torch.randn(2, T, 1, 4, generator=gen), torch.randn(2, T, 1, 4, generator=gen),
             torch.randn(2, T, 2, 3, generator=gen), -torch.rand(2, T, 2, generator=gen)]
        x = [t.requires_grad_() for t in x]
        a = cg(*x)
        ga = torch.autograd.grad(a, x)
        b = g(*x)
        gb = torch.autograd.grad(b, x)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        for u, w in zip(ga, gb):
            torch.testing.assert_close(u, w, rtol=1e-5, atol=1e-5)
