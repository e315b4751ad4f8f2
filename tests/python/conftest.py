"""pytest setup for the Python package tests: a private cache directory, small thread count."""
import os
import tempfile

# Before chunkgen is imported: never use (or leave files in) a user's caches.
if "CHUNKGEN_CACHE_DIR" not in os.environ:
    os.environ["CHUNKGEN_CACHE_DIR"] = tempfile.mkdtemp(prefix="chunkgen-pytest-")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
