"""Progress of the log load at start: Kafka's lines per log directory, INFO at a cadence."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kpybroker.log.load_progress import DirLoadProgress
from kpybroker.log.log_manager import LogManager
from tests.helpers.log_builders import SMALL, batch, fill

CLUSTER = "Qbc2dFl9TyCgSCW8Y9xsPQ"
PARTITIONS = 6


def manager(log_dir: Path, **kwargs: object) -> LogManager:
    return LogManager(
        [log_dir], broker_id=1, cluster_id=CLUSTER, config_for=lambda _t: SMALL, **kwargs
    )


def crashed_dir_with_partitions(log_dir: Path) -> None:
    """A log directory of PARTITIONS logs, each with a torn tail, left by a crash."""
    logs = manager(log_dir)
    for p in range(PARTITIONS):
        partition_log = logs.get_or_create("orders", p, None)
        fill(partition_log, 4)
    logs.checkpoint()
    for _, partition_log in logs:
        with open(partition_log.active_segment.log_path, "ab") as segment:
            segment.write(batch(3)[:40])
        partition_log.release_descriptors()
    logs._unlock()  # the process died: no clean shutdown marker


def info_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]


def test_every_log_is_reported_at_info_when_the_interval_is_zero(tmp_path, caplog) -> None:
    crashed_dir_with_partitions(tmp_path)
    with caplog.at_level(logging.INFO, logger="kpybroker.log"):
        manager(tmp_path, load_progress_interval_s=0).close()
    lines = info_lines(caplog)
    assert (
        f"Recovering {PARTITIONS} logs from {tmp_path} since no clean shutdown file was found"
        in lines
    )
    completed = [line for line in lines if line.startswith("Completed load of ")]
    assert [line.rsplit("(", 1)[1] for line in completed] == [
        f"{k}/{PARTITIONS} completed in {tmp_path})" for k in range(1, PARTITIONS + 1)
    ]
    assert completed[0].startswith(
        "Completed load of orders-0 with 1 segments, log-start-offset 0 and log-end-offset 12 in "
    )
    loaded = [line for line in lines if line.startswith("Loaded ")]
    assert len(loaded) == 1
    assert loaded[0].startswith(f"Loaded {PARTITIONS} logs in ")
    assert loaded[0].endswith(f" ms (unclean log dirs = {tmp_path})")


def test_a_quick_load_reports_only_its_end_at_info(tmp_path, caplog) -> None:
    crashed_dir_with_partitions(tmp_path)
    with caplog.at_level(logging.DEBUG, logger="kpybroker.log"):
        manager(tmp_path, load_progress_interval_s=3600).close()
    completed = [r for r in caplog.records if r.getMessage().startswith("Completed load of ")]
    assert [r.levelno for r in completed] == [logging.DEBUG] * (PARTITIONS - 1) + [logging.INFO]
    # The per-partition recovery lines are INFO only where a torn tail was cut.
    recovered = [r for r in caplog.records if r.getMessage().startswith("recovered orders-")]
    assert len(recovered) == PARTITIONS
    assert all(r.levelno == logging.INFO and "40 byte(s) truncated" in r.getMessage()
               for r in recovered)  # fmt: skip


def test_a_clean_or_empty_directory_says_so(tmp_path, caplog) -> None:
    empty = tmp_path / "empty"
    with caplog.at_level(logging.INFO, logger="kpybroker.log"):
        manager(empty).close()
    assert f"No logs found to be loaded in {empty}" in info_lines(caplog)
    assert "Loaded 0 logs in " in info_lines(caplog)[-2]  # before "log manager closed"
    crashed_dir_with_partitions(tmp_path / "clean")
    manager(tmp_path / "clean").close()  # recovers, then shuts down cleanly
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kpybroker.log"):
        manager(tmp_path / "clean").close()
    assert (
        f"Skipping recovery of {PARTITIONS} logs from {tmp_path / 'clean'} since clean shutdown "
        "file was found"
    ) in info_lines(caplog)


def test_progress_is_reported_at_most_once_per_interval(tmp_path, caplog) -> None:
    now = [0.0]
    with caplog.at_level(logging.DEBUG, logger="kpybroker.log"):
        progress = DirLoadProgress(
            tmp_path, 6, clean_shutdown=False, interval_s=10, clock=lambda: now[0]
        )
        for second in (1, 9, 10, 12, 19, 20):
            now[0] = second
            progress.loaded("t-0", 1, 0, 0, 1.0)
    levels = [r.levelno for r in caplog.records if r.getMessage().startswith("Completed")]
    #          1s     9s     10s: due  12s    19s    20s: due, and the last
    assert levels == [logging.DEBUG, logging.DEBUG, logging.INFO, logging.DEBUG,
                      logging.DEBUG, logging.INFO]  # fmt: skip
