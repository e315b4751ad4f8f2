"""Tuning and the config store from Python: chunkgen.tune, export_configs, import_configs.

The C API has no entry for these (they live in the autotuner behind the CLI), so they
run the `chunkgen` CLI installed inside this package (chunkgen/bin/chunkgen), on the
same store and keys as every other process: the cache directory set with
chunkgen.set_cache_dir, else the library's default ($CHUNKGEN_CACHE_DIR, else the XDG
cache).
"""
from __future__ import annotations

import json
import os
import subprocess
from typing import Iterable, Optional, Sequence, Union

from . import _C, _state

CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "chunkgen")

ShapeLike = Union[str, Sequence[int]]


def cli(*args: str, input: Optional[str] = None) -> str:
    """Run the package's `chunkgen` CLI with args (plus --cache-dir when one is set);
    return its stdout. A non-zero exit raises RuntimeError with its stderr."""
    cmd = [CLI, *args]
    if _state.cache_dir is not None:
        cmd += ["--cache-dir", _state.cache_dir]
    if not os.access(CLI, os.X_OK):
        raise RuntimeError(f"chunkgen CLI not found at {CLI} (reinstall the package)")
    p = subprocess.run(cmd, input=input, capture_output=True, text=True)
    if args[0] in ("tune", "import", "cache"):
        _C.configs_changed()  # it may have written the store: seen by the next call at once
    if p.returncode != 0:
        raise RuntimeError(f"chunkgen {args[0]} failed (exit {p.returncode}): {p.stderr.strip()}")
    return p.stdout


def main() -> int:
    """The `chunkgen` console script (and `python -m chunkgen`): the package's CLI binary with
    this process's arguments, exec'd in place (same exit status, stdin/stdout/stderr)."""
    import sys

    if not os.access(CLI, os.X_OK):
        print(f"chunkgen: CLI binary not found at {CLI} (reinstall the package)", file=sys.stderr)
        return 127
    os.execv(CLI, [CLI, *sys.argv[1:]])
    return 127  # not reached


def _shape_arg(op: str, s: ShapeLike) -> str:
    text = s if isinstance(s, str) else ",".join(str(int(d)) for d in s)
    return f"{op}:{text}" if op in ("ssd", "sscan") and ":" not in text else text


def tune(op: str = "all", shapes: Optional[Iterable[ShapeLike]] = None, *, dir: str = "all", backend: str = "auto",
         budget: Optional[float] = None, force: bool = False, threads: Optional[int] = None,
         max_candidates: Optional[int] = None) -> str:
    """Tune configs into the store (`chunkgen tune`). shapes: B,T,G,H,dk,dv for ssd or
    B,L,D,N[,G] for sscan, as tuples or strings; None: the built-in set. Returns the
    CLI's report."""
    args = ["tune", "--op", op, "--dir", dir, "--backend", backend, "--quiet"]
    for s in shapes or ():
        args += ["--shape", _shape_arg(op, s)]
    if budget is not None:
        args += ["--budget", repr(float(budget))]
    if force:
        args.append("--force")
    if threads is not None:
        args += ["--threads", str(int(threads))]
    if max_candidates is not None:
        args += ["--max-candidates", str(int(max_candidates))]
    return cli(*args)


def export_configs(path: Optional[str] = None, **filters: str):
    """Export tuned entries (`chunkgen export`). With path: write that file and return
    None; without: return the document as a dict. filters: backend, op, dir, device."""
    args = ["export", "--json", path if path is not None else "-"]
    for k, v in filters.items():
        args += [f"--{k}", str(v)]
    out = cli(*args)
    return None if path is not None else json.loads(out)


def import_configs(src, *, allow_foreign: bool = False, dry_run: bool = False) -> str:
    """Merge entries written by export_configs (a file path, or the dict it returned)
    into the store (`chunkgen import`). Returns the CLI's report; raises RuntimeError
    when any entry was rejected."""
    args = ["import"]
    text = None
    if isinstance(src, (dict, list)):
        args.append("-")
        text = json.dumps(src)
    else:
        args.append(os.fspath(src))
    if allow_foreign:
        args.append("--allow-foreign")
    if dry_run:
        args.append("--dry-run")
    return cli(*args, input=text)
