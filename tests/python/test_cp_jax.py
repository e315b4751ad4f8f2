"""chunkgen.jax_cp (context parallelism) on 4 simulated CPU devices: runs jax_cp_check.py
in a fresh process (XLA_FLAGS must be set before jax is imported)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")


def _run(which):
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    script = os.path.join(os.path.dirname(__file__), "jax_cp_check.py")
    p = subprocess.run([sys.executable, script, which], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ALL OK" in p.stdout, p.stdout


def test_jax_cp_exact_and_perturbed_exchange_fails():
    # one process (JAX's start-up and compiles dominate): SSD and sscan cases, then the
    # exchange perturbed, which must fail
    _run("all")
