"""Which code a result belongs to, read from git without touching the index."""

from __future__ import annotations

import os
import subprocess

from compat.paths import REPO_ROOT


def _git(*args: str) -> str:
    """Run a read-only git command; "" when git or the repository is not there."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # never refresh (write) the index
    try:
        proc = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args],
            capture_output=True, text=True, timeout=30, env=env, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def describe_commit() -> str:
    """``<short sha>``, with ``+local changes`` when tracked files differ from it."""
    sha = _git("rev-parse", "--short=12", "HEAD")
    if not sha:
        return "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return f"{sha}+local changes" if dirty else sha
