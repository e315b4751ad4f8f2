"""The gated delta rule's decode step in PyTorch and JAX (issue #36): chunkgen.torch.gdr_step
/ chunkgen.jax.gdr_step update the state cache in place (JAX: an aliased, donated result),
equal the chunked forward (chunkgen.torch.gdr / chunkgen.jax.gdr) over the same tokens with
a padding entry, with and without the L2 norm and with a given scale; torch.compile sees the
write; bad indices leave the cache untouched. And the layers' step (chunkgen.nn.Mamba2Mixer,
chunkgen.jax_nn): T steps equal the forward over the T tokens."""
import pytest

torch = pytest.importorskip("torch")
import chunkgen.torch as cgt  # noqa: E402
from step_util import check_steps, h0_of  # noqa: E402

B, T, G, H, DK, DV, S = 4, 5, 2, 6, 48, 40, 9
SLOTS = [3, -1, 0, 7]  # entry 1 is padding


def _data(seed=0, l2=False):
    g = torch.Generator().manual_seed(seed)
    kr = 1.0 if l2 else 0.15  # a contractive recurrence without the norm (ops.c)
    q = torch.rand(B, T, G, DK, generator=g) * 2 - 1
    k = (torch.rand(B, T, G, DK, generator=g) * 2 - 1) * kr
    v = torch.rand(B, T, H, DV, generator=g) * 2 - 1
    gg = -0.3 * torch.rand(B, T, H, generator=g)
    beta = torch.rand(B, T, H, generator=g)
    cache = torch.rand(S, H, DK, DV, generator=g) * 2 - 1
    return q, k, v, gg, beta, cache


@pytest.mark.parametrize("l2,scale", [(False, None), (True, 0.3)])
def test_gdr_step_equals_chunked_forward(l2, scale):
    q, k, v, g, beta, cache0 = _data(0, l2)
    cache = cache0.clone()
    idx = torch.tensor(SLOTS, dtype=torch.int32)
    o = torch.cat([cgt.gdr_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], g[:, t:t + 1], beta[:, t:t + 1], cache,
                                idx, scale=scale, use_qk_l2norm=l2) for t in range(T)], 1)
    of, hT = cgt.gdr(q, k, v, g, beta, h0_of(cache0, SLOTS), scale=scale, use_qk_l2norm=l2)
    check_steps(o, cache, of, hT, cache0, SLOTS)


def test_gdr_step_compiled_mutates_the_cache():
    q, k, v, g, beta, cache0 = _data(2)
    idx = torch.tensor(SLOTS, dtype=torch.int64)
    eager = cache0.clone()
    o_eager = cgt.gdr_step(q[:, :1], k[:, :1], v[:, :1], g[:, :1], beta[:, :1], eager, idx, use_qk_l2norm=True)

    def step(q, k, v, g, beta, cache, idx):
        return cgt.gdr_step(q, k, v, g, beta, cache, idx, use_qk_l2norm=True) * 2

    compiled = cache0.clone()
    o = torch.compile(step, fullgraph=True)(q[:, :1], k[:, :1], v[:, :1], g[:, :1], beta[:, :1], compiled, idx)
    torch.testing.assert_close(o, 2 * o_eager)
    assert torch.equal(compiled, eager)


def test_gdr_step_opcheck():
    q, k, v, g, beta, cache = _data(3)
    idx = torch.tensor(SLOTS, dtype=torch.int32)
    torch.library.opcheck(cgt.gdr_step_op, (q[:, :1], k[:, :1], v[:, :1], g[:, :1], beta[:, :1], cache, idx, None,
                                            False), test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("slots,word", [([0, 1, S, 2], "state_indices[2] = 9"),
                                        ([4, -1, 2, 4], "state_indices[3] = 4")])
def test_gdr_step_bad_indices_leave_the_cache(slots, word):
    q, k, v, g, beta, cache0 = _data(4)
    cache = cache0.clone()
    with pytest.raises(ValueError, match=word.replace("[", r"\[").replace("]", r"\]")):
        cgt.gdr_step(q[:, :1], k[:, :1], v[:, :1], g[:, :1], beta[:, :1], cache, torch.tensor(slots, dtype=torch.int32))
    assert torch.equal(cache, cache0)


def test_mamba2_mixer_step_equals_forward():
    from chunkgen.nn import Mamba2Mixer
    torch.manual_seed(0)
    m = Mamba2Mixer(32, heads=4, groups=2, d_state=8, head_dim=6)
    u = torch.randn(3, 7, 32) * 0.5
    with torch.no_grad():
        y = m(u)
        cache = torch.zeros(m.cache_shape(5))
        idx = torch.tensor([4, -1, 0], dtype=torch.int32)
        ys = torch.cat([m.step(u[:, t:t + 1], cache, idx) for t in range(7)], 1)
    torch.testing.assert_close(ys[0], y[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(ys[2], y[2], rtol=0, atol=1e-5)
    assert torch.all(cache[[1, 2, 3]] == 0)


# ------------------------------------------------------------------ JAX

def test_jax_gdr_step_equals_chunked_forward_donated():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np
    cgj = pytest.importorskip("chunkgen.jax")
    q, k, v, g, beta, cache0 = (jnp.asarray(t.numpy()) for t in _data(6, True))
    idx = jnp.asarray(np.array(SLOTS, dtype=np.int32))
    step = jax.jit(lambda q, k, v, g, beta, cache, idx: cgj.gdr_step(q, k, v, g, beta, cache, idx, scale=0.2,
                                                                      use_qk_l2norm=True), donate_argnums=(5,))
    cache = jnp.array(cache0)  # a copy: donated below
    os = []
    for t in range(T):
        o, cache = step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], g[:, t:t + 1], beta[:, t:t + 1], cache, idx)
        os.append(o)
    o = jnp.concatenate(os, 1)
    h0 = h0_of(torch.from_numpy(np.array(cache0)), SLOTS).numpy()
    of, hT = cgj.gdr(q, k, v, g, beta, jnp.asarray(h0), scale=0.2, use_qk_l2norm=True)
    check_steps(*(torch.from_numpy(np.array(x)) for x in (o, cache, of, hT, cache0)), SLOTS)


def test_jax_nn_apply_step_equals_apply():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np
    from chunkgen import jax_nn
    c = jax_nn.Config(d_model=16, heads=2, groups=1, dk=8, dv=6, layers=2)
    params = jax_nn.init(jax.random.key(0), c)
    x = jax.random.normal(jax.random.key(1), (2, 5, 16)) * 0.5
    y = jax_nn.apply(params, x, c)
    caches = [jnp.zeros(jax_nn.cache_shape(c, 3))] * c.layers
    idx = jnp.asarray(np.array([2, 0], dtype=np.int32))
    ys = []
    for t in range(5):
        yt, caches = jax_nn.apply_step(params, x[:, t:t + 1], c, caches, idx)
        ys.append(yt)
    np.testing.assert_allclose(np.asarray(jnp.concatenate(ys, 1)), np.asarray(y), rtol=0, atol=1e-5)
    assert np.all(np.asarray(caches[0])[1] == 0)
