"""Process-wide Python-side settings shared by the binding and the CLI wrappers."""
from typing import Optional

cache_dir: Optional[str] = None  # None: the library's default
