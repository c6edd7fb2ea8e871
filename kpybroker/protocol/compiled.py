"""The compiled record walks (``_record_walks.c``), or None: the one switch between them and
the Python walks they mirror.

Two per-record loops, ``record_framing.check_framing`` (every compressed batch produced)
and ``records.scan_record_keys`` (every record the cleaner compacts), cost about a
microsecond a record in Python, so setup.py also builds them in C where a compiler is
there. ``walks`` is that module, or None when it was not built or the environment sets
``KPYBROKER_PURE_PYTHON=1`` (to compare the two, or to rule the extension out); the
modules that use it fall back to their Python walks then.
"""

from __future__ import annotations

import os
from types import ModuleType


def _load() -> ModuleType | None:
    """The compiled module, unless it is missing or refused by the environment."""
    if os.environ.get("KPYBROKER_PURE_PYTHON") == "1":
        return None
    try:
        from . import _record_walks
    except ImportError:  # built without a C compiler: the Python walks serve
        return None
    return _record_walks


walks = _load()
