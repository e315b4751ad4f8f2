"""Run by test_jax_sharding.py in a fresh process with 4 host CPU devices
(XLA_FLAGS=--xla_force_host_platform_device_count=4 must be set before jax is imported):
on inputs sharded over batch and heads, chunkgen.jax.ssd under plain jit (its
custom_partitioning rule) and chunkgen.jax.shard_ssd / shard_sscan (shard_map) give the
unsharded results, forward and gradients, and the compiled HLO has no all-gather."""
import sys

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from jax_sharding_lib import check, r
import chunkgen.jax as cj  # noqa: E402


B, G, H, T, dk, dv = 4, 2, 4, 13, 8, 6
q, k, v, la, h0 = r(B, G, T, dk), r(B, G, T, dk), r(B, H, T, dv), -jnp.abs(r(B, H, T)), r(B, H, dk, dv)
plain = lambda *a: cj.ssd(*a)  # noqa: E731

mesh = jax.make_mesh((2, 2), ("b", "h"))
s4, s3 = NamedSharding(mesh, P("b", "h", None, None)), NamedSharding(mesh, P("b", "h", None))
check("ssd batch+heads 2x2", cj.shard_ssd(mesh, "b", "h"), plain, (q, k, v, la, h0), (s4, s4, s4, s3, s4))

mesh_b = jax.make_mesh((4,), ("b",))
b4, b3 = NamedSharding(mesh_b, P("b", None, None, None)), NamedSharding(mesh_b, P("b", None, None))
check("ssd batch 4", cj.shard_ssd(mesh_b, "b"), plain, (q, k, v, la), (b4, b4, b4, b3))

mesh_h = jax.make_mesh((2,), ("h",))
h4, h3 = NamedSharding(mesh_h, P(None, "h", None, None)), NamedSharding(mesh_h, P(None, "h", None))
check("ssd heads 2", cj.shard_ssd(mesh_h, head_axis="h"), plain, (q, k, v, la), (h4, h4, h4, h3))

tq, tv = jnp.swapaxes(q, 1, 2), jnp.swapaxes(v, 1, 2)
t4, t3 = NamedSharding(mesh, P("b", None, "h", None)), NamedSharding(mesh, P("b", None, "h"))
check("ssd token layout 2x2", cj.shard_ssd(mesh, "b", "h", layout="token"),
      lambda *a: cj.ssd(*a, layout="token"), (tq, jnp.swapaxes(k, 1, 2), tv, jnp.swapaxes(la, 1, 2)),
      (t4, t4, t4, t3))

# plain jit: the custom_partitioning rule
check("jit ssd batch+heads 2x2", plain, plain, (q, k, v, la, h0), (s4, s4, s4, s3, s4))
check("jit ssd batch 4", plain, plain, (q, k, v, la), (b4, b4, b4, b3))
check("jit ssd heads 2", plain, plain, (q, k, v, la, h0), (h4, h4, h4, h3, h4))
check("jit ssd token layout 2x2", lambda *a: cj.ssd(*a, layout="token"), lambda *a: cj.ssd(*a, layout="token"),
      (tq, jnp.swapaxes(k, 1, 2), tv, jnp.swapaxes(la, 1, 2)), (t4, t4, t4, t3))
q1, k1 = q[:, :1], k[:, :1]  # G = 1 < H = 4: batch-sharded
check("jit ssd G=1 batch 4", plain, plain, (q1, k1, v, la), (b4, b4, b4, b3))

L, D, N = 9, 6, 4
x, dl, A, Bm, Cm = r(B, L, D), r(B, L, D), -jnp.abs(r(D, N)) - 0.5, r(B, L, N), r(B, L, N)
rep = NamedSharding(mesh_b, P())
check("sscan batch 4", cj.shard_sscan(mesh_b, "b"), lambda *a: cj.sscan(*a), (x, dl, A, Bm, Cm),
      (b3, b3, rep, b3, b3), like=((0, 0),))
print("ALL OK")
sys.exit(0)
