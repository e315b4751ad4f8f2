"""What jax_sharding_check.py (SSD, sscan) and jax_sharding_gdr_check.py (the gated delta
rule) share, run in a fresh process with 4 host CPU devices: the inputs' draw and the check
of one sharded call against the unsharded one."""
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

assert jax.device_count() == 4, jax.devices()
rng = np.random.default_rng(0)


def r(*s):
    return jnp.asarray(rng.standard_normal(s) * 0.3)


def check(name, sharded, plain, args, shardings, like=((0, 2),), tol=1e-10):
    """jit(sharded) on the inputs placed by `shardings` against plain on whole arrays,
    forward and every gradient of sum(o * o): equal within tol, no all-gather in the
    compiled HLO, the chunkgen custom call in it; like: (output, input) pairs, the output
    kept sharded like the input."""
    placed = [jax.device_put(a, s) for a, s in zip(args, shardings)]
    fwd = jax.jit(sharded)
    loss = lambda f: (lambda *a: sum((o * o).sum() for o in f(*a)))  # noqa: E731
    grad = jax.jit(jax.grad(loss(sharded), argnums=tuple(range(len(args)))))
    for what, f, ref in (("fwd", fwd, plain), ("grad", grad, jax.grad(loss(plain), argnums=tuple(range(len(args)))))):
        out, want = f(*placed), ref(*args)
        for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(want)):
            err = float(jnp.abs(a - b).max() / jnp.abs(b).max())
            assert err < tol, (name, what, err)
        hlo = f.lower(*placed).compile().as_text()
        assert "all-gather" not in hlo, (name, what, "all-gather in the compiled HLO")
        assert hlo.count("custom_call_target=\"chunkgen\"") >= 1, (name, what)
    outs = fwd(*placed)
    for o_i, a_i in like:
        o = outs[o_i]
        assert o.sharding.is_equivalent_to(shardings[a_i], o.ndim), (name, o_i, o.sharding)
    print(name, "ok")
