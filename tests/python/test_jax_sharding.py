"""chunkgen.jax with inputs sharded over a CPU device mesh: runs jax_sharding_check.py in
a fresh process with 4 host devices (XLA_FLAGS must be set before jax is imported)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")


def test_sharded_over_batch_and_heads_no_all_gather():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    script = os.path.join(os.path.dirname(__file__), "jax_sharding_check.py")
    p = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ALL OK" in p.stdout
