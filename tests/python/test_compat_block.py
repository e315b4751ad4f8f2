"""The Done-when tests: a small Mamba-2 block written against mamba_ssm's function
(tests/python/mamba2_block.py) and a small Gated DeltaNet block written against fla's
(tests/python/gdn_block.py) train a few SGD steps on the CPU with only their import line
changed -- mamba_ssm's reference (refs/mamba_ref.py: ssd_chunk_scan_combined_ref, which
takes mamba_chunk_scan_combined's leading arguments) vs chunkgen.compat.mamba; fla's naive
recurrence with fla's argument handling (fla_gdr_naive.py) vs chunkgen.compat.fla -- and the
losses, every parameter's gradient at every step and the trained parameters match within
1e-4."""
import pathlib
import types

import pytest
import torch

from compat_util import TOL
from ref import rel_err

HERE = pathlib.Path(__file__).parent
REF_IMPORT = "from refs.mamba_ref import ssd_chunk_scan_combined_ref as mamba_chunk_scan_combined"
FLA_REF_IMPORT = "from fla_gdr_naive import chunk_gated_delta_rule"


def _load(import_line=None, name="mamba2_block.py"):
    """A block file as a module, its import line replaced by import_line if given."""
    path = HERE / name
    src = path.read_text()
    mod = types.ModuleType(name[:-3] + "_variant")
    if import_line is not None:
        line = src.split("IMPORT_LINE = ")[1].split("\n")[0].strip('"')
        assert src.count(line + "  #") == 1, "the block's import line"
        src = src.replace(line + "  #", import_line + "  #", 1)
    exec(compile(src, str(path), "exec"), mod.__dict__)
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


def _train_both(a, b, T=32):
    """Both blocks from a's parameters, trained on the same data; every step compared."""
    b.load_state_dict(a.state_dict())
    g = torch.Generator().manual_seed(1)
    u = torch.randn(2, T, 16, generator=g)
    target = torch.randn(2, T, 16, generator=g)
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


@pytest.mark.parametrize("rmsnorm", [True, False])
def test_mamba2_block_trains_the_same_with_one_import_changed(rmsnorm):
    ours, theirs = _load(), _load(REF_IMPORT)
    assert ours.mamba_chunk_scan_combined.__module__ == "chunkgen.compat.mamba"
    assert theirs.mamba_chunk_scan_combined.__name__ == "ssd_chunk_scan_combined_ref"
    _train_both(ours.Mamba2Block(rmsnorm=rmsnorm), theirs.Mamba2Block(rmsnorm=rmsnorm))


@pytest.mark.parametrize("conv,in_kernel,neg", [(True, True, False), (False, False, True)])
def test_gated_deltanet_block_trains_the_same_with_one_import_changed(conv, in_kernel, neg):
    """fla 0.6.0's GatedDeltaNet structure (GVA: 2 q/k heads, 4 value heads; K 6, V 9), T 37."""
    ours, theirs = _load(name="gdn_block.py"), _load(FLA_REF_IMPORT, name="gdn_block.py")
    assert ours.chunk_gated_delta_rule.__module__ == "chunkgen.compat.fla"
    assert theirs.chunk_gated_delta_rule.__module__ == "fla_gdr_naive"
    kw = dict(use_short_conv=conv, gates_in_kernel=in_kernel, allow_neg_eigval=neg)
    _train_both(ours.GatedDeltaNetBlock(**kw), theirs.GatedDeltaNetBlock(**kw), T=37)
