"""Run by test_jax_sharding.py in a fresh process with 4 host
CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=4 set before jax is
imported): chunkgen.jax.gdr under plain jit on inputs sharded over batch and/or heads (the
op table's partitioning rule, jax_partition.py) gives the unsharded results, forward and
every gradient, keeps the outputs sharded like the inputs, and its compiled HLO has no
all-gather (the sequence is never gathered)."""
import sys

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from jax_sharding_lib import check, r
import chunkgen.jax as cj  # noqa: E402


def check_gdr(name, f, args, shardings):
    """f under jit on the placed inputs against f on whole arrays; o kept sharded like v,
    hT like h0 when given."""
    check(name, f, f, args, shardings, like=((0, 2), (1, 5)) if len(args) > 5 else ((0, 2),), tol=1e-12)


B, T, G, H, dk, dv = 4, 13, 2, 4, 8, 6  # token-major, fla's order; value head j reads q/k head j // 2
q, k, v = r(B, T, G, dk), r(B, T, G, dk), r(B, T, H, dv)
g, beta, h0 = -jnp.abs(r(B, T, H)), jax.nn.sigmoid(r(B, T, H)) * 1.5, r(B, H, dk, dv)
gdr = lambda *a: cj.gdr(*a, scale=0.4, use_qk_l2norm=True)  # noqa: E731

for axes, mesh in ((("b", "h"), jax.make_mesh((2, 2), ("b", "h"))), (("b", None), jax.make_mesh((4,), ("b",))),
                   ((None, "h"), jax.make_mesh((2,), ("h",)))):
    b, h = axes
    s4, s3, st = (NamedSharding(mesh, P(b, None, h, None)), NamedSharding(mesh, P(b, None, h)),
                  NamedSharding(mesh, P(b, h, None, None)))
    check_gdr(f"jit gdr token b={b} h={h}", gdr, (q, k, v, g, beta, h0), (s4, s4, s4, s3, s3, st))
    check_gdr(f"jit gdr token b={b} h={h} no h0", lambda *a: cj.gdr(*a), (q, k, v, g, beta), (s4, s4, s4, s3, s3))
    # head-major views
    t = lambda a: jnp.swapaxes(a, 1, 2)  # noqa: E731
    hs4, hs3 = NamedSharding(mesh, P(b, h, None, None)), NamedSharding(mesh, P(b, h, None))
    check_gdr(f"jit gdr head b={b} h={h}", lambda *a: cj.gdr(*a, layout="head"),
              (t(q), t(k), t(v), t(g), t(beta), h0), (hs4, hs4, hs4, hs3, hs3, st))

mesh_b = jax.make_mesh((4,), ("b",))
b4, b3 = NamedSharding(mesh_b, P("b", None, None, None)), NamedSharding(mesh_b, P("b", None, None))
check_gdr("jit gdr G=1 batch 4", lambda *a: cj.gdr(*a), (q[:, :, :1], k[:, :, :1], v, g, beta), (b4, b4, b4, b3, b3))
print("ALL OK")
sys.exit(0)
