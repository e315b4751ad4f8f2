"""chunkgen.torch_cp (context parallelism) over 4 gloo processes: runs torch_cp_check.py and
torch_cp_grad_check.py in fresh processes (they spawn the ranks; a rank that hangs is caught
by the timeout)."""
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("torch")


def _run(which, script="torch_cp_check.py", timeout=300):
    # (its own session: on a timeout the spawned ranks are killed with it, none is left waiting)
    p = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), script), which],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise AssertionError(f"{script} {which}: no result in {timeout} s (a hang)\n{out}{err}")
    assert p.returncode == 0, out + err
    assert "ALL OK" in out, out + err


def test_torch_cp_backward_runs_on_every_rank_whichever_inputs_require_grad():
    # gates (log_alpha, delta, g, beta) or everything but h0 not requiring grad, varlen with
    # ranks that have no outgoing pair: exact, one backward collective per exchange on every
    # rank; one rank without grad raises on every rank. A hang fails within the deadline.
    _run("all", "torch_cp_grad_check.py", timeout=180)


def test_torch_cp_exact_perturbed_exchange_fails_ranks_that_disagree_raise():
    # one spawn of 4 ranks (their start-up dominates): exact cases, then the exchange and
    # its gradient perturbed (must fail), then ranks that disagree (must raise everywhere)
    _run("all")
