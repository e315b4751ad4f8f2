"""Shared by the decode-step tests (test_step.py, test_gdr_step.py): the chunked forward's
initial state from a cache's slots, and the check that T steps over the cache equal that
forward (padding entries zero, written slots equal the final state, the others untouched)."""
import torch


def h0_of(cache, slots):
    """The initial state [B, ...] of the chunked forward: cache[slot], zero for padding."""
    h0 = torch.zeros((len(slots),) + tuple(cache.shape[1:]), dtype=cache.dtype)
    for b, s in enumerate(slots):
        if s >= 0:
            h0[b] = cache[s]
    return h0


def check_steps(o, cache, of, hT, cache0, slots):
    """o, cache: the steps' outputs and cache after them; of, hT: the chunked forward's."""
    o, cache, of, hT, cache0 = (torch.as_tensor(x) for x in (o, cache, of, hT, cache0))
    for b, s in enumerate(slots):
        if s < 0:
            assert torch.all(o[b] == 0)
            continue
        torch.testing.assert_close(o[b], of[b], rtol=0, atol=1e-5 * of.abs().max().item())
        torch.testing.assert_close(cache[s], hT[b], rtol=0, atol=1e-5 * hT.abs().max().item())
    untouched = [s for s in range(cache.shape[0]) if s not in slots]
    assert torch.equal(cache[untouched], cache0[untouched])
