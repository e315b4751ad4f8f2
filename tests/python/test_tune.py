"""Tuning and the config store from Python: chunkgen.tune, export/import, and a call
picking up the tuned config (same store and keys as the CLI)."""
import numpy as np
import pytest

import chunkgen


@pytest.fixture
def cache(tmp_path):
    chunkgen.set_cache_dir(str(tmp_path / "a"))
    yield tmp_path
    chunkgen.set_cache_dir(None)
    chunkgen.set_threads(0)


def call(T=64):
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    chunkgen.ssd(r(1, T, 1, 8), r(1, T, 1, 8), r(1, T, 2, 8), -np.abs(r(1, T, 2)))
    return chunkgen.last_dispatch()


def test_tune_export_import(cache):
    chunkgen.set_threads(1)
    assert "source=default" in call()
    chunkgen.tune("ssd", [(1, 64, 1, 2, 8, 8)], dir="fwd", backend="cpu", budget=20, max_candidates=3, threads=1)
    assert "source=exact" in call()
    doc = chunkgen.export_configs()
    assert len(doc["entries"]) == 1
    path = cache / "configs.json"
    chunkgen.export_configs(str(path), op="ssd")
    # a fresh store: nothing tuned, then the imported entry is used
    chunkgen.set_cache_dir(str(cache / "b"))
    assert chunkgen.export_configs()["entries"] == [] and "source=default" in call()
    chunkgen.import_configs(str(path))
    assert "source=exact" in call()
    chunkgen.set_cache_dir(str(cache / "c"))
    chunkgen.import_configs(doc, dry_run=True)
    assert chunkgen.export_configs()["entries"] == []


def test_cli_errors_raise(cache):
    with pytest.raises(RuntimeError, match="tune"):
        chunkgen.tune("ssd", ["1,2,3"], backend="cpu")
    with pytest.raises(RuntimeError, match="import"):
        chunkgen.import_configs(str(cache / "missing.json"))


def test_console_script_runs_the_cli(cache):
    """`chunkgen` on PATH (pyproject's [project.scripts]) and `python -m chunkgen` are the
    package's CLI: same version line, the CLI's exit status for a bad command."""
    import os
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(sys.executable), "chunkgen")
    want = subprocess.run([chunkgen._cli.CLI, "--version"], capture_output=True, text=True)
    assert want.returncode == 0 and want.stdout.strip()
    for cmd in ([script], [sys.executable, "-m", "chunkgen"]):
        got = subprocess.run(cmd + ["--version"], capture_output=True, text=True)
        assert (got.returncode, got.stdout) == (0, want.stdout), (cmd, got.stderr)
        bad = subprocess.run(cmd + ["no-such-command"], capture_output=True, text=True)
        assert bad.returncode != 0 and "no-such-command" in bad.stderr, (cmd, bad.stderr)
