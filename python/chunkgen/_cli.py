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
    """Export tuned entries (the library's cg_config_export, as `chunkgen export`). With
    path: write that file and return None; without: return the document as a dict.
    filters: backend, op, dir, device."""
    unknown = set(filters) - {"backend", "op", "dir", "device"}
    if unknown:
        raise TypeError(f"export_configs: unknown filter(s) {sorted(unknown)} (expected backend, op, dir, device)")
    args = [None if filters.get(k) is None else str(filters[k]) for k in ("backend", "op", "dir", "device")]
    text = _C.config_export(None if path is None else os.fspath(path), *args)
    return None if path is not None else json.loads(text)


def import_configs(src, *, allow_foreign: bool = False, dry_run: bool = False) -> str:
    """Merge entries written by export_configs (a file path, a store directory, or the dict
    it returned) into the store (the library's cg_config_import, as `chunkgen import`).
    Returns the report; raises RuntimeError when any entry was rejected."""
    if isinstance(src, (dict, list)):
        added, replaced, kept, rejected, messages = _C.config_import(None, json.dumps(src), allow_foreign, dry_run)
    else:
        added, replaced, kept, rejected, messages = _C.config_import((os.fspath(src),), None, allow_foreign, dry_run)
    report = "".join(f"chunkgen import: {m}\n" for m in messages) + (
        f"chunkgen import: {'(dry run) ' if dry_run else ''}{added} added, {replaced} replaced, {kept} kept "
        f"(the merge rule kept another entry), {rejected} rejected\n")
    if rejected:
        raise RuntimeError(f"chunkgen import: {rejected} entr{'y' if rejected == 1 else 'ies'} rejected:\n{report}")
    return report
