"""chunkgen.jax with inputs sharded over a CPU device mesh: each script in a fresh process
with 4 host devices (XLA_FLAGS must be set before jax is imported): jax_sharding_check.py
(SSD and sscan: plain jit and shard_map) and jax_sharding_gdr_check.py (the gated delta
rule under plain jit, over batch and/or heads, both layouts); results equal to the
unsharded call, no all-gather."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")


@pytest.mark.parametrize("script", ["jax_sharding_check.py", "jax_sharding_gdr_check.py"])
def test_sharded_over_batch_and_heads_no_all_gather(script):
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    p = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), script)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ALL OK" in p.stdout
