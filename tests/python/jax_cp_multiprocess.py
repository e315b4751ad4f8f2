"""Run by test_cp_jax.py as 2 processes x 2 CPU devices (multi-controller JAX over gloo,
XLA_FLAGS=--xla_force_host_platform_device_count=2): chunkgen.jax_cp.shard_ssd over the
4 global devices gives one device's result, and shard_gdr its forward and gradients; then
process 1 calls with another dk and both processes raise the descriptor's error (no hang).
argv: process id, port."""
import sys

import jax

jax.config.update("jax_cpu_collectives_implementation", "gloo")
pid, port = int(sys.argv[1]), sys.argv[2]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=pid)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils as mu  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import chunkgen.jax as cj  # noqa: E402
import chunkgen.jax_cp as cp  # noqa: E402

assert jax.device_count() == 4 and jax.process_count() == 2
mesh = Mesh(np.array(jax.devices()), ("sp",))
rng = np.random.default_rng(0)


def arrays(dk, T=200):
    q = rng.standard_normal((1, 1, T, dk)).astype(np.float32)
    v = rng.standard_normal((1, 2, T, 40)).astype(np.float32)
    la = -np.abs(rng.standard_normal((1, 2, T)) * 0.01).astype(np.float32)
    return q, q * 0.5, v, la


q, k, v, la = arrays(48)
f = jax.jit(cp.shard_ssd(mesh, "sp"))
spec = lambda a: NamedSharding(mesh, P(None, None, "sp", *([None] * (a.ndim - 3))))  # noqa: E731  (T is axis 2)
glob = [mu.host_local_array_to_global_array(a, mesh, P()) for a in (q, k, v, la)]
o, hT = f(*[jax.device_put(a, spec(a)) for a in glob])
o1, hT1 = cj.ssd(q, k, v, la)
o, hT = (np.asarray(mu.process_allgather(x, tiled=True)) for x in (o, hT))
err = max(np.abs(o - np.asarray(o1)).max() / np.abs(np.asarray(o1)).max(),
          np.abs(hT - np.asarray(hT1)).max() / np.abs(np.asarray(hT1)).max())
assert err < 1e-5, err
print(f"process {pid}: two processes, four devices: worst {err:.2e}", flush=True)

# the gated delta rule (token layout, T on axis 1, the L2 norm): forward, hT and the
# gradients of q, v, g and beta through the sharded call
T = 200
gq = rng.standard_normal((1, T, 1, 48)).astype(np.float32)
gv = rng.standard_normal((1, T, 2, 40)).astype(np.float32)
gg = -np.abs(rng.standard_normal((1, T, 2)) * 0.02).astype(np.float32)
gb = (1 / (1 + np.exp(-rng.standard_normal((1, T, 2))))).astype(np.float32)
gw = rng.standard_normal((1, T, 2, 40)).astype(np.float32)
fg = cp.shard_gdr(mesh, "sp", use_qk_l2norm=True)
tspec = lambda a: NamedSharding(mesh, P(None, "sp", *([None] * (a.ndim - 2))))  # noqa: E731  (T is axis 1)


def loss(fn, q, v, g, b, w):
    o, hT = fn(q, q * 0.5, v, g, b)
    return (o * w).sum() + (hT * hT).sum(), (o, hT)


ggrad = jax.jit(jax.grad(lambda *a: loss(fg, *a), argnums=(0, 1, 2, 3), has_aux=True))
glob = [mu.host_local_array_to_global_array(a, mesh, P()) for a in (gq, gv, gg, gb, gw)]
grads, (o, hT) = ggrad(*[jax.device_put(a, tspec(a)) for a in glob])
one = lambda *a: cj.gdr(*a, use_qk_l2norm=True)  # noqa: E731
grads1, (o1, hT1) = jax.grad(lambda *a: loss(one, *a), argnums=(0, 1, 2, 3), has_aux=True)(gq, gv, gg, gb, gw)
err = 0.0
for name, a, b in zip(("o", "hT", "dq", "dv", "dg", "dbeta"), (o, hT) + tuple(grads), (o1, hT1) + tuple(grads1)):
    a, b = np.asarray(mu.process_allgather(a, tiled=True)), np.asarray(b)
    err = max(err, np.abs(a - b).max() / np.abs(b).max())
assert err < 1e-5, err
print(f"process {pid}: gdr, two processes, four devices, forward and gradients: worst {err:.2e}", flush=True)
q2, k2, v2, la2 = arrays(40 if pid == 1 else 48)
try:
    # (a fresh jit: both processes trace the call, where the descriptors are exchanged)
    jax.jit(cp.shard_ssd(mesh, "sp"))(*[mu.host_local_array_to_global_array(a, mesh, P()) for a in (q2, k2, v2, la2)])
except ValueError as e:
    want = "rank 1 has q float32 shape (1, 1, 200, 40) but rank 0 has q float32 shape (1, 1, 200, 48)"
    assert want in str(e), str(e)
    print(f"process {pid} raised: {e}", flush=True)
    print("ALL OK", flush=True)
    sys.exit(0)
raise AssertionError(f"process {pid} raised nothing")
