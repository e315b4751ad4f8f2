"""Tuning and the config store from Python: chunkgen.tune, export_configs, import_configs,
and the `chunkgen` console script.

The three run the library's own calls (cg_tune, cg_config_export, cg_config_import) in
this process, on the same store and keys as every other process: the cache directory set
with chunkgen.set_cache_dir, else the library's default ($CHUNKGEN_CACHE_DIR, else the
XDG cache). What they write is seen by this process's next call at once. main() is the
`chunkgen` CLI installed inside this package (chunkgen/bin/chunkgen).
"""
from __future__ import annotations

import json
import os
from typing import Iterable, Optional, Sequence, Union

from . import _C

CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "chunkgen")

ShapeLike = Union[str, Sequence[int]]


def main() -> int:
    """The `chunkgen` console script (and `python -m chunkgen`): the package's CLI binary with
    this process's arguments, exec'd in place (same exit status, stdin/stdout/stderr)."""
    import sys

    if not os.access(CLI, os.X_OK):
        print(f"chunkgen: CLI binary not found at {CLI} (reinstall the package)", file=sys.stderr)
        return 127
    os.execv(CLI, [CLI, *sys.argv[1:]])
    return 127  # not reached


# The deprecated positional form of a shape (numbers only), per family, as `chunkgen tune` read it.
_POSITIONAL = {"ssd": ("B", "T", "G", "H", "dk", "dv"), "sscan": ("B", "L", "D", "N", "G")}


def _shape_text(op: str, s: ShapeLike) -> str:
    """The `OP:ITEM,...` or `FAMILY:ITEM,...` text (the shape syntax of every command) of one
    shape of tune(); a family stands for its ops of tune()'s dir."""
    text = s if isinstance(s, str) else ",".join(str(int(d)) for d in s)
    prefix, _, body = text.rpartition(":") if ":" in text else ("", "", text)
    fam = prefix or (op if op != "all" else None)
    if body.replace(",", "").isdigit():  # deprecated: positional numbers
        nums = body.split(",")
        fam = fam or ("ssd" if len(nums) == 6 else "sscan")
        names = _POSITIONAL.get(fam)
        if names is None or not (len(names) - (fam == "sscan") <= len(nums) <= len(names)):
            order = ",".join(names or ())
            raise RuntimeError(f"chunkgen tune: shape {text!r}: expected {order} (positive integers) for {fam}")
        body = ",".join(f"{n}={v}" for n, v in zip(names, nums) if not (n == "G" and fam == "sscan" and v == "1"))
    if fam is None:
        raise RuntimeError(f"chunkgen tune: shape {text!r}: give the op in front (ssd_fwd:B=...) or op=")
    return f"{fam}:{body}"


def tune(op: str = "all", shapes: Optional[Iterable[ShapeLike]] = None, *, dir: str = "all", backend: str = "auto",
         budget: Optional[float] = None, force: bool = False, threads: Optional[int] = None,
         max_candidates: Optional[int] = None) -> str:
    """Tune configs into the store (the library's cg_tune, as `chunkgen tune`), in this
    process. shapes: texts in the shape syntax ("ssd_fwd:B=1,T=64,G=1,H=2,dk=8,dv=8", or
    "ssd:..." for the directions of dir), or (deprecated) positional B,T,G,H,dk,dv for ssd /
    B,L,D,N[,G] for sscan as tuples or strings; None: the built-in set. Returns the report."""
    texts = tuple(_shape_text(op, s) for s in shapes or ())
    dirs = {"fwd": 1, "bwd": 2, "all": 3}.get(dir)
    if dirs is None:
        raise RuntimeError(f"chunkgen tune: dir {dir!r} (expected fwd, bwd or all)")
    r = _C.tune(texts, backend, None if op == "all" else op, dirs, float(budget or 0), force,
                -1 if threads is None else int(threads), int(max_candidates or 0))
    return (f"chunkgen tune: {r['keys']} key(s) on {r['backend']}: {r['tuned']} tuned ({r['resumed']} resumed), "
            f"{r['cached']} already tuned, {r['unsupported']} not supported by the backend, {r['failed']} failed, "
            f"{r['skipped_budget']} left for a rerun; {r['candidates']} candidates measured, {r['rejected']} rejected; "
            f"{r['seconds']:.1f} s\n")


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
