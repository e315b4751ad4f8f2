"""Run by test_jax_gdr.py::test_gdr_sharded_no_all_gather in a fresh process with 4 host
CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=4 set before jax is
imported): chunkgen.jax.gdr under plain jit on inputs sharded over batch and/or heads (the
op table's partitioning rule, jax_partition.py) gives the unsharded results, forward and
every gradient, keeps the outputs sharded like the inputs, and its compiled HLO has no
all-gather (the sequence is never gathered)."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

jax.config.update("jax_enable_x64", True)
import chunkgen.jax as cj  # noqa: E402

assert jax.device_count() == 4, jax.devices()
rng = np.random.default_rng(0)


def r(*s):
    return jnp.asarray(rng.standard_normal(s) * 0.3)


def check(name, f, args, shardings):
    placed = [jax.device_put(a, s) for a, s in zip(args, shardings)]
    loss = lambda *a: sum((o * o).sum() for o in f(*a))  # noqa: E731
    grad = jax.grad(loss, argnums=tuple(range(len(args))))
    for what, g in (("fwd", f), ("grad", grad)):
        jg = jax.jit(g)
        out, want = jg(*placed), g(*args)  # the unsharded call: the same op on whole arrays
        for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(want)):
            err = float(jnp.abs(a - b).max() / jnp.abs(b).max())
            assert err < 1e-12, (name, what, err)
        hlo = jg.lower(*placed).compile().as_text()
        assert "all-gather" not in hlo, (name, what, "all-gather in the compiled HLO")
        assert hlo.count('custom_call_target="chunkgen"') >= 1, (name, what)
    o, hT = jax.jit(f)(*placed)
    assert o.sharding.is_equivalent_to(shardings[2], o.ndim), (name, o.sharding)  # o like v
    if len(args) > 5:
        assert hT.sharding.is_equivalent_to(shardings[5], hT.ndim), (name, hT.sharding)  # hT like h0
    print(name, "ok")


B, T, G, H, dk, dv = 4, 13, 2, 4, 8, 6  # token-major, fla's order; value head j reads q/k head j // 2
q, k, v = r(B, T, G, dk), r(B, T, G, dk), r(B, T, H, dv)
g, beta, h0 = -jnp.abs(r(B, T, H)), jax.nn.sigmoid(r(B, T, H)) * 1.5, r(B, H, dk, dv)
gdr = lambda *a: cj.gdr(*a, scale=0.4, use_qk_l2norm=True)  # noqa: E731

for axes, mesh in ((("b", "h"), jax.make_mesh((2, 2), ("b", "h"))), (("b", None), jax.make_mesh((4,), ("b",))),
                   ((None, "h"), jax.make_mesh((2,), ("h",)))):
    b, h = axes
    s4, s3, st = (NamedSharding(mesh, P(b, None, h, None)), NamedSharding(mesh, P(b, None, h)),
                  NamedSharding(mesh, P(b, h, None, None)))
    check(f"jit gdr token b={b} h={h}", gdr, (q, k, v, g, beta, h0), (s4, s4, s4, s3, s3, st))
    check(f"jit gdr token b={b} h={h} no h0", lambda *a: cj.gdr(*a), (q, k, v, g, beta), (s4, s4, s4, s3, s3))
    # head-major views
    t = lambda a: jnp.swapaxes(a, 1, 2)  # noqa: E731
    hs4, hs3 = NamedSharding(mesh, P(b, h, None, None)), NamedSharding(mesh, P(b, h, None))
    check(f"jit gdr head b={b} h={h}", lambda *a: cj.gdr(*a, layout="head"),
          (t(q), t(k), t(v), t(g), t(beta), h0), (hs4, hs4, hs4, hs3, hs3, st))

mesh_b = jax.make_mesh((4,), ("b",))
b4, b3 = NamedSharding(mesh_b, P("b", None, None, None)), NamedSharding(mesh_b, P("b", None, None))
check("jit gdr G=1 batch 4", lambda *a: cj.gdr(*a), (q[:, :, :1], k[:, :, :1], v, g, beta), (b4, b4, b4, b3, b3))
print("ALL OK")
sys.exit(0)
