"""The library's log callback (cg_set_log_callback) reaches Python's logging: the logger
"chunkgen" gets the library's warnings and the dispatch lines of verbose calls."""
import logging
import pathlib

import numpy as np
import pytest

import chunkgen

SHAPE = (1, 8, 1, 1, 8, 8)  # B, T, G, H, dk, dv


def arrays():
    B, T, G, H, dk, dv = SHAPE
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return r(B, T, G, dk), r(B, T, G, dk), r(B, T, H, dv), -np.abs(r(B, T, H))


@pytest.fixture
def cache(tmp_path):
    chunkgen.set_cache_dir(str(tmp_path))
    chunkgen.set_threads(1)
    yield tmp_path
    chunkgen.set_cache_dir(None)
    chunkgen.set_threads(0)


def test_corrupt_tuned_entry_warns_through_logging(cache, caplog):
    # A real warning path: the tuned-config entry of the call's key is not valid JSON, so
    # the lookup skips it (the call runs on the default config) and says so.
    chunkgen.tune("ssd", [SHAPE], dir="fwd", backend="cpu", budget=5, max_candidates=2, threads=1)
    entries = list(pathlib.Path(cache, "configs").glob("*.json"))
    assert len(entries) == 1
    entries[0].write_text('{"broken": ')
    with caplog.at_level(logging.INFO, logger="chunkgen"):
        chunkgen.ssd(*arrays())
    assert "source=default" in chunkgen.last_dispatch()
    warnings = [r for r in caplog.records if r.name == "chunkgen" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, caplog.records
    assert "ignoring tuned-config entry" in warnings[0].getMessage()
    assert str(entries[0]) in warnings[0].getMessage()


def test_verbose_dispatch_line_is_info(cache, caplog):
    with caplog.at_level(logging.INFO, logger="chunkgen"):
        chunkgen.ssd(*arrays())
        assert not [r for r in caplog.records if r.name == "chunkgen"]
        chunkgen.ssd(*arrays(), verbose=True)
    infos = [r for r in caplog.records if r.name == "chunkgen" and r.levelno == logging.INFO]
    assert len(infos) == 1 and infos[0].getMessage().startswith("ssd_fwd backend=cpu")
    assert infos[0].getMessage() in chunkgen.last_dispatch() or chunkgen.last_dispatch() in infos[0].getMessage()


def test_without_logging_config_writes_stderr(cache, capfd, monkeypatch):
    # No handler on the way up (the logger does not propagate to pytest's root handlers):
    # the C library's own format on stderr, nothing is lost.
    monkeypatch.setattr(logging.getLogger("chunkgen"), "propagate", False)
    assert not logging.getLogger("chunkgen").hasHandlers()
    chunkgen.ssd(*arrays(), verbose=True)
    err = capfd.readouterr().err
    assert err.startswith("chunkgen: ssd_fwd backend=cpu")
