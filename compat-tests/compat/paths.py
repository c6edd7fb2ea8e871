"""Where things live: the repository, the suites, the results and the download cache."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
COMPAT_ROOT = REPO_ROOT / "compat-tests"
SUITES_ROOT = COMPAT_ROOT / "suites"
#: Machine-readable results, one JSON file per suite (gitignored).
RESULTS_ROOT = COMPAT_ROOT / "results"
#: The report card generated from the results.
REPORT_PATH = REPO_ROOT / "docs" / "compatibility.md"
#: The command a developer types; the report quotes it.
RUN_COMMAND = "compat-tests/run"


def cache_root() -> Path:
    """The download cache shared with ``compat-tests/java/fetch-jars``.

    ``$KPYBROKER_CACHE`` or ``~/.cache/kpybroker``; it survives between runs
    so that a second run installs nothing.
    """
    return Path(os.environ.get("KPYBROKER_CACHE") or Path.home() / ".cache" / "kpybroker")


def compat_cache() -> Path:
    """The part of the cache owned by the compat runner (venvs, npm trees, sdists)."""
    path = cache_root() / "compat"
    path.mkdir(parents=True, exist_ok=True)
    return path
