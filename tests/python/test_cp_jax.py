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


def test_jax_cp_two_processes_exact_and_disagreement_raises_on_both():
    # multi-controller JAX: 2 processes x 2 CPU devices over gloo; process 1 then calls with
    # another dk and both processes raise the descriptor's message
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
    script = os.path.join(os.path.dirname(__file__), "jax_cp_multiprocess.py")
    procs = [subprocess.Popen([sys.executable, script, str(i), port], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=300)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
        assert "ALL OK" in out and "the ranks disagree" in out, out
