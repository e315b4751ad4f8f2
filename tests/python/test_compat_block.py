"""The Done-when test of Mamba-2: a small Mamba-2 block written against mamba_ssm's function
(tests/python/mamba2_block.py) trains a few SGD steps on the CPU with only its import line
changed -- mamba_ssm's reference (refs/mamba_ref.py: ssd_chunk_scan_combined_ref, which
takes mamba_chunk_scan_combined's leading arguments) vs chunkgen.compat.mamba -- and the
losses, every parameter's gradient at every step and the trained parameters match within
1e-4."""
import pathlib
import types

import pytest
import torch

from compat_util import TOL
from ref import rel_err

SRC = pathlib.Path(__file__).with_name("mamba2_block.py")
REF_IMPORT = "from refs.mamba_ref import ssd_chunk_scan_combined_ref as mamba_chunk_scan_combined"


def _load(import_line=None):
    """mamba2_block.py as a module, its import line replaced by import_line if given."""
    src = SRC.read_text()
    mod = types.ModuleType("mamba2_block_variant")
    if import_line is not None:
        line = src.split("IMPORT_LINE = ")[1].split("\n")[0].strip('"')
        assert src.count(line + "  #") == 1, "the block's import line"
        src = src.replace(line + "  #", import_line + "  #", 1)
    exec(compile(src, str(SRC), "exec"), mod.__dict__)
    return mod


def _train(block, u, target, steps=4, lr=0.05):
    opt = torch.optim.SGD(block.parameters(), lr=lr)
    losses, grads = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = (block(u) - target).square().mean()
        loss.backward()
        losses.append(loss.detach())
        grads.append({n: p.grad.detach().clone() for n, p in block.named_parameters()})
        opt.step()
    return losses, grads


@pytest.mark.parametrize("rmsnorm", [True, False])
def test_mamba2_block_trains_the_same_with_one_import_changed(rmsnorm):
    ours, theirs = _load(), _load(REF_IMPORT)
    assert ours.mamba_chunk_scan_combined.__module__ == "chunkgen.compat.mamba"
    assert theirs.mamba_chunk_scan_combined.__name__ == "ssd_chunk_scan_combined_ref"
    a = ours.Mamba2Block(rmsnorm=rmsnorm)
    b = theirs.Mamba2Block(rmsnorm=rmsnorm)
    b.load_state_dict(a.state_dict())
    g = torch.Generator().manual_seed(1)
    u = torch.randn(2, 32, 16, generator=g)
    target = torch.randn(2, 32, 16, generator=g)
    la, ga = _train(a, u, target)
    lb, gb = _train(b, u, target)
    assert lb[-1] < lb[0]  # it trains
    for step, (x, y) in enumerate(zip(la, lb)):
        assert rel_err(x, y) <= TOL, (step, float(x), float(y))
    for step, (x, y) in enumerate(zip(ga, gb)):
        errs = {n: rel_err(x[n], y[n]) for n in y}
        assert max(errs.values()) <= TOL, (step, errs)
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert rel_err(p, q) <= TOL, n
