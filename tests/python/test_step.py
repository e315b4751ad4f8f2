"""Decode steps in PyTorch (issue #36): chunkgen.torch.ssd_step / sscan_step update the
state cache in place, equal the chunked forward over the same tokens, are declared as
mutating to torch.library (torch.compile sees the write), and refuse bad indices before
touching the cache."""
import pytest

torch = pytest.importorskip("torch")
import chunkgen.torch as cgt  # noqa: E402
from step_util import check_steps, h0_of  # noqa: E402

B, T, G, H, DK, DV, S = 4, 5, 2, 6, 48, 40, 9
SLOTS = [3, -1, 0, 7]  # entry 1 is padding


def _ssd_data(seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.rand(B, T, G, DK, generator=g) * 2 - 1
    k = torch.rand(B, T, G, DK, generator=g) * 2 - 1
    v = torch.rand(B, T, H, DV, generator=g) * 2 - 1
    la = -0.3 * torch.rand(B, T, H, generator=g)
    cache = torch.rand(S, H, DK, DV, generator=g) * 2 - 1
    return q, k, v, la, cache


def test_ssd_step_equals_chunked_forward():
    q, k, v, la, cache0 = _ssd_data()
    cache = cache0.clone()
    idx = torch.tensor(SLOTS, dtype=torch.int32)
    o = torch.stack([cgt.ssd_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], la[:, t:t + 1], cache, idx)[:, 0]
                     for t in range(T)], 1)
    of, hT = cgt.ssd(q, k, v, la, h0_of(cache0, SLOTS))
    check_steps(o, cache, of, hT, cache0, SLOTS)


def test_sscan_step_equals_chunked_forward():
    D, N, L = 6, 5, 5
    g = torch.Generator().manual_seed(1)
    x, delta, z = (torch.rand(B, L, D, generator=g) * 2 - 1 for _ in range(3))
    A = -0.1 - 1.9 * torch.rand(D, N, generator=g)
    Bm, Cm = (torch.rand(B, L, 2, N, generator=g) * 2 - 1 for _ in range(2))
    Dv, bias = torch.rand(D, generator=g), -torch.rand(D, generator=g)
    cache0 = torch.rand(S, D, N, generator=g)
    cache = cache0.clone()
    idx = torch.tensor(SLOTS, dtype=torch.int64)
    y = torch.cat([cgt.sscan_step(x[:, t:t + 1], delta[:, t:t + 1], A, Bm[:, t:t + 1], Cm[:, t:t + 1], cache, idx,
                                  D=Dv, z=z[:, t:t + 1], delta_bias=bias, delta_softplus=True) for t in range(L)], 1)
    yf, hT = cgt.sscan(x, delta, A, Bm, Cm, Dv, z, bias, h0_of(cache0, SLOTS), delta_softplus=True)
    check_steps(y, cache, yf, hT, cache0, SLOTS)


def test_ssd_step_compiled_mutates_the_cache():
    q, k, v, la, cache0 = _ssd_data(2)
    idx = torch.tensor(SLOTS, dtype=torch.int32)
    eager = cache0.clone()
    o_eager = cgt.ssd_step(q[:, :1], k[:, :1], v[:, :1], la[:, :1], eager, idx)

    def step(q, k, v, la, cache, idx):
        return cgt.ssd_step(q, k, v, la, cache, idx) * 2

    compiled = cache0.clone()
    o = torch.compile(step, fullgraph=True)(q[:, :1], k[:, :1], v[:, :1], la[:, :1], compiled, idx)
    torch.testing.assert_close(o, 2 * o_eager)
    assert torch.equal(compiled, eager)  # the in-place write is seen by the compiled graph


def test_ssd_step_opcheck():
    q, k, v, la, cache = _ssd_data(3)
    idx = torch.tensor(SLOTS, dtype=torch.int32)
    torch.library.opcheck(cgt.ssd_step_op, (q[:, :1], k[:, :1], v[:, :1], la[:, :1], cache, idx),
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("slots,word", [([0, 1, S, 2], "state_indices[2] = 9"),
                                        ([4, -1, 2, 4], "state_indices[3] = 4"),
                                        ([0, -2, 1, 2], "state_indices[1] = -2")])
def test_ssd_step_bad_indices_leave_the_cache(slots, word):
    q, k, v, la, cache0 = _ssd_data(4)
    cache = cache0.clone()
    with pytest.raises(ValueError, match=word.replace("[", r"\[").replace("]", r"\]")):
        cgt.ssd_step(q[:, :1], k[:, :1], v[:, :1], la[:, :1], cache, torch.tensor(slots, dtype=torch.int32))
    assert torch.equal(cache, cache0)


def test_ssd_step_float_indices_refused():
    q, k, v, la, cache = _ssd_data(5)
    with pytest.raises(ValueError, match="state_indices"):
        cgt.ssd_step(q[:, :1], k[:, :1], v[:, :1], la[:, :1], cache, torch.tensor(SLOTS, dtype=torch.float32))


# ------------------------------------------------------------------ JAX

def test_jax_ssd_step_equals_chunked_forward_donated():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np
    cgj = pytest.importorskip("chunkgen.jax")
    q, k, v, la, cache0 = (jnp.asarray(t.numpy()) for t in _ssd_data(6))
    idx = jnp.asarray(np.array(SLOTS, dtype=np.int32))
    step = jax.jit(cgj.ssd_step, donate_argnums=(4,))
    cache = jnp.array(cache0)  # a copy: donated below
    os = []
    for t in range(T):
        o, cache = step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], la[:, t:t + 1], cache, idx)
        os.append(o)
    o = jnp.concatenate(os, 1)
    h0 = h0_of(torch.from_numpy(np.array(cache0)), SLOTS).numpy()
    of, hT = cgj.ssd(q, k, v, la, jnp.asarray(h0), layout="token")
    check_steps(*(torch.from_numpy(np.array(x)) for x in (o, cache, of, hT, cache0)), SLOTS)


def test_jax_step_keeps_the_operand_without_donation():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np
    cgj = pytest.importorskip("chunkgen.jax")
    q, k, v, la, cache0 = (jnp.asarray(t.numpy()) for t in _ssd_data(7))
    idx = jnp.asarray(np.array(SLOTS, dtype=np.int64))
    before = np.asarray(cache0).copy()
    _, new = jax.jit(cgj.ssd_step)(q[:, :1], k[:, :1], v[:, :1], la[:, :1], cache0, idx)
    np.testing.assert_array_equal(np.asarray(cache0), before)  # not donated: XLA copied it
    assert not np.array_equal(np.asarray(new)[SLOTS[0]], before[SLOTS[0]])


def test_jax_sscan_step_runs():
    pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np
    cgj = pytest.importorskip("chunkgen.jax")
    rng = np.random.default_rng(0)
    D, N = 6, 5
    x, delta = (jnp.asarray(rng.uniform(-1, 1, (B, 1, D)).astype(np.float32)) for _ in range(2))
    A = jnp.asarray(-rng.uniform(0.1, 2, (D, N)).astype(np.float32))
    Bm, Cm = (jnp.asarray(rng.uniform(-1, 1, (B, 1, N)).astype(np.float32)) for _ in range(2))
    cache = jnp.asarray(rng.uniform(-1, 1, (S, D, N)).astype(np.float32))
    idx = jnp.asarray(np.array(SLOTS, dtype=np.int32))
    y, new = cgj.sscan_step(x, delta, A, Bm, Cm, cache, idx, delta_softplus=True)
    # against chunkgen.jax.sscan over the one token from h0 = the slots' states
    h0 = np.zeros((B, D, N), np.float32)
    for b, s in enumerate(SLOTS):
        if s >= 0:
            h0[b] = np.asarray(cache)[s]
    yf, hT = cgj.sscan(x, delta, A, Bm, Cm, h0=jnp.asarray(h0), delta_softplus=True)
    for b, s in enumerate(SLOTS):
        if s < 0:
            assert np.all(np.asarray(y[b]) == 0)
            continue
        np.testing.assert_allclose(y[b], yf[b], rtol=0, atol=1e-5)
        np.testing.assert_allclose(new[s], hT[b], rtol=0, atol=1e-5)
