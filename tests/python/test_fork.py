"""A forked child's calls after the parent used the multithreaded CPU path (issue #39
item 1): `multiprocessing` with the fork start method and a PyTorch DataLoader with 2
workers. Before the fix the child's first call waited forever on the parent's thread
pool, whose workers do not exist in the child. Every wait has a deadline, so a
regression fails (the child is killed) instead of hanging the suite."""
import multiprocessing as mp

import numpy as np
import pytest
import torch

import chunkgen
import chunkgen.torch as ct

DEADLINE = 60  # seconds; the calls take milliseconds

# the shape: B=2, T=300, G=2, H=4, dk=8, dv=5
_rng = np.random.default_rng(0)
Q, K = (_rng.standard_normal((2, 300, 2, 8), dtype=np.float32) for _ in range(2))
V = _rng.standard_normal((2, 300, 4, 5), dtype=np.float32)
LA = -_rng.random((2, 300, 4), dtype=np.float32)


@pytest.fixture
def pool_threads():
    """A pool with workers whatever the core count (the default is all cores)."""
    chunkgen.set_threads(2)
    yield
    chunkgen.set_threads(0)  # (the default: all cores)


def _child_numpy(want_o, queue):
    o, hT = chunkgen.ssd(Q, K, V, LA)
    queue.put(bool(np.array_equal(o, want_o)))


def _child_torch(want_o, queue):
    o, _ = ct.ssd(*(torch.from_numpy(a) for a in (Q, K, V, LA)))
    queue.put(bool(torch.equal(o, torch.from_numpy(want_o))))


@pytest.mark.parametrize("child", [_child_numpy, _child_torch], ids=["numpy", "torch"])
def test_fork_child_after_parent_used_pool(pool_threads, child):
    want_o, _ = chunkgen.ssd(Q, K, V, LA)  # the parent's pool has its workers now
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=child, args=(want_o, queue))
    p.start()
    p.join(DEADLINE)
    hung = p.is_alive()
    if hung:
        p.kill()
        p.join()
    assert not hung, "the forked child's first chunkgen call did not return (the parent's thread pool)"
    assert p.exitcode == 0
    assert queue.get(timeout=5), "the child's result differs from the parent's"


class _SsdItems(torch.utils.data.Dataset):
    """Each item: chunkgen.torch.ssd on one slice of the inputs (run in a worker)."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        q, k, v, la = (torch.from_numpy(a) for a in (Q, K, V, LA))
        o, hT = ct.ssd(q, k, v * (i + 1), la)
        return o, hT


def test_dataloader_two_workers(pool_threads):
    want = [_SsdItems()[i] for i in range(len(_SsdItems()))]  # the parent uses the pool first
    loader = torch.utils.data.DataLoader(_SsdItems(), batch_size=None, num_workers=2,
                                         multiprocessing_context="fork", timeout=DEADLINE)
    got = list(loader)  # a hung worker: RuntimeError after DEADLINE seconds
    assert len(got) == len(want)
    for (o, hT), (wo, whT) in zip(got, want):
        assert torch.equal(o, wo) and torch.equal(hT, whT)
