"""chunkgen: chunked linear recurrences (Mamba-2 SSD, Mamba-1 selective scan).

numpy calls: ssd, ssd_bwd, sscan, sscan_bwd (this module); PyTorch ops with autograd
and torch.compile support: chunkgen.torch.ssd, chunkgen.torch.sscan.

Workspace: the numpy calls let the library keep its own scratch; chunkgen.torch's CUDA
calls take it from PyTorch's caching allocator (cg_workspace_size, cg_exec.workspace).

Messages: the library's log (warnings such as a corrupt tuned-config entry skipped, and
the dispatch lines of calls with verbose=True) goes to the logger "chunkgen" (WARNING,
INFO; ERROR before an abort). Until logging is configured (no handler on the way to the
root logger) each is written to stderr as the C library does ("chunkgen: warning: ...").
"""
from __future__ import annotations

import atexit
import logging
import os
import sys
from typing import Optional

from . import _C, _state
from ._cli import export_configs, import_configs, tune
from ._numpy import sscan, sscan_bwd, ssd, ssd_bwd

__version__ = _C.version

logger = logging.getLogger("chunkgen")
_LEVELS = (logging.ERROR, logging.WARNING, logging.INFO)  # cg_log_level order
_PREFIX = ("error: ", "warning: ", "")


def _log(level: int, msg: str) -> None:
    """The library's log callback (any thread, GIL held): the "chunkgen" logger."""
    if logger.hasHandlers():
        logger.log(_LEVELS[level] if 0 <= level < len(_LEVELS) else logging.WARNING, msg)
    else:
        sys.stderr.write(f"chunkgen: {_PREFIX[level] if 0 <= level < len(_PREFIX) else ''}{msg}\n")


_C.set_log_handler(_log)
atexit.register(_C.set_log_handler, None)  # the library's own default after Python is gone

__all__ = ["ssd", "ssd_bwd", "sscan", "sscan_bwd", "tune", "export_configs", "import_configs", "last_dispatch",
           "set_threads", "set_cache_dir", "get_cache_dir", "set_tune_on_miss"]


def last_dispatch() -> str:
    """The line describing this thread's last successful call: backend, kernel or path,
    config and where the config came from (cg_last_dispatch)."""
    return _C.last_dispatch()


def set_threads(threads: int) -> None:
    """Default number of CPU threads for every call (0 = all online cores)."""
    _C.set_threads(int(threads))


def set_cache_dir(path: Optional[str]) -> None:
    """Directory of the on-disk caches (tuned configs, kernels) for every call and for
    tune/export/import. None restores the default ($CHUNKGEN_CACHE_DIR, else
    $XDG_CACHE_HOME/chunkgen, else ~/.cache/chunkgen)."""
    p = None if path is None else os.fspath(path)
    _C.set_cache_dir(p)
    _state.cache_dir = p


def get_cache_dir() -> Optional[str]:
    """The directory set with set_cache_dir, or None (the library's default)."""
    return _state.cache_dir


def set_tune_on_miss(on: Optional[bool]) -> None:
    """Tune a call's exact key on a miss (True), never (False), or follow
    $CHUNKGEN_TUNE_ON_MISS (None)."""
    _C.set_tune_on_miss(-1 if on is None else int(bool(on)))
