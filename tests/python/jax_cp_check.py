"""Run by test_cp_jax.py in a fresh process with 4 host CPU devices
(XLA_FLAGS=--xla_force_host_platform_device_count=4 must be set before jax is imported):
chunkgen.jax_cp (context parallelism: T split over a mesh axis) against one device's
chunkgen.jax call, float32, forward, final state and every gradient within 1e-5 relative,
on odd shapes (dk 48, dv 40, T not a multiple of the chunk nor of the devices, a
sequence spanning three devices, grouped heads, both layouts, 2-D meshes, varlen); then
the same with the exchanged state perturbed, which must fail."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import chunkgen.jax as cj  # noqa: E402
import chunkgen.jax_cp as cp  # noqa: E402

assert jax.device_count() == 4, jax.devices()
rng = np.random.default_rng(0)
TOL = 1e-5


def r(*s, scale=0.5):
    return jnp.asarray(rng.standard_normal(s) * scale, jnp.float32)


def fit(spec, shape, mesh):
    """spec without the mesh axes that do not divide their dimension (JAX refuses uneven
    shardings: a T that does not divide by the devices comes in unsplit, and the wrapper
    pads and splits it under jit)."""
    axes = tuple(spec) + (None,) * (len(shape) - len(spec))
    return P(*(a if a is None or shape[i] % mesh.shape[a] == 0 else None for i, a in enumerate(axes)))


def errors(f_cp, f_one, args, shardings, mesh):
    """Max relative error of the outputs and of every gradient (of a random linear loss of
    every output: the VJP with random cotangents), f_cp under jit with sharded inputs
    against f_one on one device; each side is one jitted program (outputs and VJP)."""
    outs = jax.eval_shape(f_one, *args)
    ws = tuple(r(*o.shape).astype(o.dtype) for o in outs)
    diff = tuple(i for i, a in enumerate(args) if a is not None and jnp.issubdtype(a.dtype, jnp.floating))

    def both(f):
        def g(*a):
            def part(*d):
                full = list(a)
                for i, x in zip(diff, d):
                    full[i] = x
                return f(*full)

            out, pull = jax.vjp(part, *(a[i] for i in diff))
            return out, pull(ws)

        return jax.jit(g)

    placed = [jax.device_put(a, NamedSharding(mesh, fit(s, a.shape, mesh))) if a is not None else None
              for a, s in zip(args, shardings)]
    got, g_got = both(f_cp)(*placed)
    want, g_want = both(f_one)(*args)
    errs = {}
    for name, a, b in [(f"out{i}", a, b) for i, (a, b) in enumerate(zip(got, want))] + \
            [(f"grad{i}", a, b) for i, a, b in zip(diff, g_got, g_want)]:
        errs[name] = float(jnp.abs(a - b).max() / (jnp.abs(b).max() + 1e-30))
    return errs


def check(name, f_cp, f_one, args, shardings, mesh, expect_fail=False):
    errs = errors(f_cp, f_one, args, shardings, mesh)
    worst = max(errs.values())
    ok = worst < TOL
    print(f"{name}: worst {worst:.2e} {errs if not ok or expect_fail else ''}")
    if expect_fail:
        assert not ok, (name, "the perturbed exchange went unnoticed", errs)
    else:
        assert ok, (name, errs)


def shapes(layout, B, T, G, H, dk, dv, cu):
    """(head-major?, q/k shape, v shape, per-head gate shape, number of states)"""
    head = layout == "head"
    qs = (B, G, T, dk) if head else (B, T, G, dk)
    vs = (B, H, T, dv) if head else (B, T, H, dv)
    ls = (B, H, T) if head else (B, T, H)
    return head, qs, vs, ls, (len(cu) - 1) if cu is not None else B


def specs(head, seq_axis, batch_axis, head_axis):
    """The shardings of q, k, v and of the per-head gates."""
    if head:
        return P(batch_axis, head_axis, seq_axis, None), P(batch_axis, head_axis, seq_axis)
    return P(batch_axis, seq_axis, head_axis, None), P(batch_axis, seq_axis, head_axis)


def ssd_case(name, mesh, seq_axis, batch_axis, head_axis, layout, B, T, G, H, dk, dv, h0=True, cu=None,
             expect_fail=False):
    head, qs, vs, ls, nst = shapes(layout, B, T, G, H, dk, dv, cu)
    q, k, v = r(*qs), r(*qs), r(*vs)
    la = -jnp.abs(r(*ls, scale=0.01))  # weak decay: the state crosses devices
    hh = r(nst, H, dk, dv) if h0 else None
    cuj = jnp.asarray(cu, jnp.int32) if cu is not None else None
    one = lambda q, k, v, la, h, c: cj.ssd(q, k, v, la, h, layout=layout, cu_seqlens=c)  # noqa: E731
    sh = cp.shard_ssd(mesh, seq_axis, batch_axis, head_axis, layout=layout)
    sq, sl = specs(head, seq_axis, batch_axis, head_axis)
    check(name, lambda *a: sh(*a), one, (q, k, v, la, hh, cuj), (sq, sq, sq, sl, P(), P()), mesh, expect_fail)


def sscan_case(name, mesh, seq_axis, batch_axis, B, L, D, N, G=None, cu=None, softplus=True, full=True):
    bc = (B, L, G, N) if G else (B, L, N)
    nst = (len(cu) - 1) if cu is not None else B
    x, delta, z = r(B, L, D), r(B, L, D, scale=0.3), r(B, L, D)
    A = -0.02 * jnp.exp(r(D, N, scale=0.5))  # weak decay: the state crosses devices
    Bm, Cm = r(*bc), r(*bc)
    Dp, bias = (r(D), r(D, scale=0.2)) if full else (None, None)
    h0 = r(nst, D, N)
    cuj = jnp.asarray(cu, jnp.int32) if cu is not None else None
    if not softplus:
        delta = jnp.abs(delta)

    def one(x, delta, A, Bm, Cm, Dp, z, bias, h0, c):
        return cj.sscan(x, delta, A, Bm, Cm, Dp, z if full else None, bias, h0, delta_softplus=softplus, cu_seqlens=c)

    sh = cp.shard_sscan(mesh, seq_axis, batch_axis, delta_softplus=softplus)

    def many(x, delta, A, Bm, Cm, Dp, z, bias, h0, c):
        return sh(x, delta, A, Bm, Cm, Dp, z if full else None, bias, h0, c)

    s3 = P(batch_axis, seq_axis, None)
    s4 = P(batch_axis, seq_axis, None, None)
    sbc = s4 if G else s3
    check(name, many, one, (x, delta, A, Bm, Cm, Dp, z, bias, h0, cuj),
          (s3, s3, P(), sbc, sbc, P(), s3, P(), P(), P()), mesh)


devs = np.array(jax.devices())
m1 = Mesh(devs, ("sp",))
m2 = Mesh(devs.reshape(2, 2), ("dp", "sp"))
which = sys.argv[1] if len(sys.argv) > 1 else "all"

if which in ("all", "ssd"):
    # T = 203: not a multiple of the chunk (64) nor of 4 devices; grouped heads G=1, H=2
    ssd_case("ssd head 1-D h0", m1, "sp", None, None, "head", 2, 203, 1, 2, 48, 40)
    ssd_case("ssd token 2-D batch", m2, "sp", "dp", None, "token", 2, 130, 2, 4, 48, 40, h0=False)
    ssd_case("ssd head 2-D heads", m2, "sp", None, "dp", "head", 1, 97, 2, 4, 48, 40)
    # a sequence [17, 150) spanning devices 0..2 (51 tokens each), an empty one, padding
    ssd_case("ssd varlen token", m1, "sp", None, None, "token", 1, 203, 1, 2, 48, 40, cu=[0, 17, 17, 150, 203])
    ssd_case("ssd varlen head boundary at a device edge", m1, "sp", None, None, "head", 1, 200, 2, 2, 48, 40,
             cu=[0, 50, 120, 200], h0=False)
def gdr_case(name, mesh, seq_axis, batch_axis, head_axis, layout, B, T, G, H, dk, dv, h0=True, cu=None,
             l2=True, scale=None, expect_fail=False):
    head, qs, vs, ls, nst = shapes(layout, B, T, G, H, dk, dv, cu)
    q, k, v = r(*qs), r(*qs), r(*vs)
    g = -jnp.abs(r(*ls, scale=0.02))  # weak decay: the state crosses devices
    beta = jax.nn.sigmoid(r(*ls, scale=1.0))
    hh = r(nst, H, dk, dv) if h0 else None
    cuj = jnp.asarray(cu, jnp.int32) if cu is not None else None

    def one(q, k, v, g, beta, h, c):
        return cj.gdr(q, k, v, g, beta, h, scale=scale, use_qk_l2norm=l2, layout=layout, cu_seqlens=c)

    sh = cp.shard_gdr(mesh, seq_axis, batch_axis, head_axis, scale=scale, use_qk_l2norm=l2, layout=layout)
    sq, sl = specs(head, seq_axis, batch_axis, head_axis)
    check(name, lambda *a: sh(*a), one, (q, k, v, g, beta, hh, cuj), (sq, sq, sq, sl, sl, P(), P()), mesh,
          expect_fail)


def nan_isolation():
    """A NaN in sequence 0 (which crosses device 0 -> 1, where sequence 1 starts) must not
    reach sequence 1, as in the one-device call (the chain is cut, never 0 x NaN)."""
    T = 203
    q, v = r(1, T, 1, 48), np.array(r(1, T, 2, 40))
    v[0, 5] = np.nan
    v = jnp.asarray(v)
    la = -jnp.abs(r(1, T, 2, scale=0.01))
    cu = jnp.asarray([0, 60, 203], jnp.int32)
    o, hT = jax.jit(cp.shard_ssd(m1, "sp", layout="token"))(q, q, v, la, None, cu)
    o1, h1 = cj.ssd(q, q, v, la, layout="token", cu_seqlens=cu)
    assert bool(jnp.isnan(o[0, :60]).any()) and not bool(jnp.isnan(o[0, 60:]).any())
    err = float(jnp.abs(o[0, 60:] - o1[0, 60:]).max() / jnp.abs(o1[0, 60:]).max())
    assert err < TOL and float(jnp.abs(hT[1] - h1[1]).max() / jnp.abs(h1[1]).max()) < TOL, err
    print(f"ssd varlen, a NaN in the sequence before: isolated, worst {err:.2e}")


if which in ("all", "ssd"):
    nan_isolation()
if which in ("all", "sscan"):
    sscan_case("sscan 1-D padded", m1, "sp", None, 2, 203, 40, 12)
    sscan_case("sscan 2-D grouped, no softplus", m2, "sp", "dp", 2, 96, 24, 7, G=2, softplus=False, full=False)
    sscan_case("sscan varlen", m1, "sp", None, 1, 203, 40, 12, cu=[0, 17, 17, 150, 203])
if which in ("all", "gdr"):
    # T = 203 (not a multiple of the chunk nor of 4 devices), dk 48, dv 40, L2 norm, G = 1, H = 2
    gdr_case("gdr token 1-D h0 l2norm", m1, "sp", None, None, "token", 2, 203, 1, 2, 48, 40, scale=0.3)
    gdr_case("gdr head 2-D batch", m2, "sp", "dp", None, "head", 2, 130, 2, 4, 48, 40, h0=False)
    # a sequence [17, 150) spanning devices 0..2 (51 tokens each), an empty one, padding
    gdr_case("gdr varlen token", m1, "sp", None, None, "token", 1, 203, 1, 2, 48, 40, cu=[0, 17, 17, 150, 203])
if which in ("all", "perturb"):
    cp._PERTURB = lambda g: g * (1.0 + 1e-3)
    ssd_case("ssd with the exchange perturbed", m1, "sp", None, None, "head", 2, 203, 1, 2, 48, 40,
             expect_fail=True)
    gdr_case("gdr with the exchange perturbed", m1, "sp", None, None, "token", 1, 203, 1, 2, 48, 40,
             expect_fail=True)
    cp._PERTURB = None
print("ALL OK")
