"""The 5-minute form of ``scripts/soak`` (issue 18): producers, a group that rebalances,
retention and compaction at work, and a kill -9 every minute; nothing acknowledged lost,
duplicated or reordered, compaction kept every key's last value, no ERROR in the log.

The hour-long form is run by hand (``scripts/soak``); docs/soak.md has its figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.process import REPO_ROOT

#: Five minutes: it starts ahead of the other files (tests/conftest.py).
pytestmark = pytest.mark.starts_first


def test_five_minutes_of_use_with_a_kill_every_minute(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "scripts" / "soak"),
            "--minutes=5",
            "--kill-every=60",
            "--churn-every=30",
            "--sample-every=15",
            f"--output={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = run.stdout[-6000:]
    assert run.returncode == 0, f"{summary}\n--- stderr ---\n{run.stderr[-3000:]}"
    report = json.loads((tmp_path / "report.json").read_text())
    print(summary)
    assert report["kills"] >= 3
    assert report["group_changes"] >= 5
    assert report["retained"]["acknowledged"] > 0
    assert report["samples"], "the broker was never sampled"
