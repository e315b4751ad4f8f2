"""chunkgen.torch_cp (context parallelism) over 4 gloo processes: runs torch_cp_check.py in
a fresh process (it spawns the ranks; a rank that hangs is caught by the timeout)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")


def _run(which):
    script = os.path.join(os.path.dirname(__file__), "torch_cp_check.py")
    p = subprocess.run([sys.executable, script, which], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ALL OK" in p.stdout, p.stdout + p.stderr


def test_torch_cp_exact_perturbed_exchange_fails_ranks_that_disagree_raise():
    # one spawn of 4 ranks (their start-up dominates): exact cases, then the exchange and
    # its gradient perturbed (must fail), then ranks that disagree (must raise everywhere)
    _run("all")
