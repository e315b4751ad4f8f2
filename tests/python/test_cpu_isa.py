"""_C.cpu_isa(): the CPU path's variant this process runs, from the public device report
(cg_device_query), and CHUNKGEN_CPU_ISA choosing it (read once per process)."""
import os
import subprocess
import sys

from chunkgen import _C


def test_cpu_isa_is_a_variant():
    assert _C.cpu_isa() in ("avx512", "avx2", "baseline")


def test_cpu_isa_follows_the_environment():
    env = dict(os.environ, CHUNKGEN_CPU_ISA="baseline")
    out = subprocess.run([sys.executable, "-c", "from chunkgen import _C; print(_C.cpu_isa())"], env=env,
                         capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "baseline", out.stderr
