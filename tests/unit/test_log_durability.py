"""Flush policies, and what a failing disk (full, I/O error) leaves behind: nothing torn.

The durable setting is ``flush.messages=1`` (``log.flush.interval.messages=1``):
every append is fsynced before ``append`` returns, so before Produce answers.
Disk errors are injected by patching ``os.write``/``os.replace`` where the log
calls them.
"""

from __future__ import annotations

import errno
import os

import pytest

from kpybroker.log import checkpoint as checkpoint_module
from kpybroker.log import index, segment
from kpybroker.log.leader_epoch import LeaderEpochCache
from kpybroker.log.log_config import LogConfig
from kpybroker.log.log_manager import LogManager
from tests.helpers.log_builders import (
    SMALL,
    batch,
    fill,
    log_bytes,
    log_manager,
    offsets_on_disk,
    open_log,
)

DURABLE = LogConfig(flush_interval_messages=1, retention_ms=-1)


def disk_full(*_args: object) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_the_durable_setting_fsyncs_every_append_before_it_returns(tmp_path, monkeypatch) -> None:
    log = open_log(tmp_path / "t-0", DURABLE)
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(segment.os, "fdatasync", lambda fd: (synced.append(fd), real(fd)))
    for expected in (1, 2, 3):
        log.append(batch(2), 0)
        assert len(synced) == expected and synced[-1] == log.active_segment.open_log().fd
        assert log.recovery_point == log.log_end_offset  # a crash now loses nothing


def test_the_default_leaves_flushing_to_the_os_and_maintain(tmp_path, monkeypatch) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    synced: list[int] = []
    monkeypatch.setattr(segment.os, "fdatasync", lambda fd: synced.append(fd))
    fill(log, 5)
    assert synced == [] and log.recovery_point == 0


def test_unchanged_indexes_are_not_fsynced_again(tmp_path, monkeypatch) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    fill(log, 3)  # the third batch got index entries
    log.flush()
    synced: list[int] = []
    monkeypatch.setattr(index.os, "fsync", lambda fd: synced.append(fd))
    log.append(batch(1), 0)  # too soon for another entry
    log.flush()
    assert synced == []
    assert log.recovery_point == log.log_end_offset


def test_a_full_disk_during_the_index_write_leaves_no_trace(tmp_path, monkeypatch) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    fill(log, 3)  # the next batch gets an index entry
    data, end = log_bytes(log), log.log_end_offset
    monkeypatch.setattr(index.os, "write", disk_full)
    with pytest.raises(OSError):
        log.append(batch(3), 0)
    monkeypatch.undo()
    assert (log_bytes(log), log.log_end_offset) == (data, end)
    fill(log, 2)  # later appends carry on at the same offsets
    assert offsets_on_disk(log) == list(range(15))
    log.release_descriptors()
    reopened = open_log(tmp_path / "t-0", SMALL)  # and recovery finds nothing to cut
    assert offsets_on_disk(reopened) == list(range(15))


def test_a_short_write_of_a_batch_is_cut_back(tmp_path, monkeypatch) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    fill(log, 2)
    data = log_bytes(log)
    calls = iter([20])  # 20 bytes reach the file, then the disk is full
    real = os.write

    def short_then_full(fd: int, view: bytes) -> int:
        size = next(calls, None)
        if size is None:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, bytes(view)[:size])

    monkeypatch.setattr(segment.os, "write", short_then_full)
    with pytest.raises(OSError):
        log.append(batch(3), 0)
    monkeypatch.undo()
    assert log_bytes(log) == data and log.log_end_offset == 6


def test_a_failed_epoch_checkpoint_leaves_the_cache_as_it_was(tmp_path, monkeypatch) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    monkeypatch.setattr(checkpoint_module.os, "replace", disk_full)
    with pytest.raises(OSError):
        cache.assign(2, 10)
    monkeypatch.undo()
    assert cache.entries == [(1, 0)]
    cache.assign(2, 10)
    assert LeaderEpochCache(tmp_path).entries == [(1, 0), (2, 10)]


def manager(tmp_path) -> LogManager:
    return log_manager(tmp_path, lambda _: SMALL)


def test_a_failing_checkpoint_takes_its_dir_offline_and_the_other_tasks_go_on(
    tmp_path, monkeypatch
) -> None:
    full, roomy = tmp_path / "full", tmp_path / "roomy"
    logs = LogManager([full, roomy], broker_id=1, cluster_id="c" * 22, config_for=lambda _: SMALL)
    fill(logs.get_or_create("t", 0, None), 3)
    fill(logs.get_or_create("t", 1, None), 3)
    real = checkpoint_module.atomic_write

    def no_room_for_high_watermarks(path, data, **kwargs):
        if path == full / "replication-offset-checkpoint":
            disk_full()
        real(path, data, **kwargs)

    monkeypatch.setattr(checkpoint_module, "atomic_write", no_room_for_high_watermarks)
    logs.periodic(now_ms=2**62)  # every task is due
    logs.drain_checkpoints()  # the checkpoint thread wrote, or failed to
    logs.periodic(now_ms=2**62)  # the failure it handed back takes the directory offline
    assert logs.online_dirs == [roomy]
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
        assert (roomy / name).exists()
        assert not (full / name).exists()
    logs.close()  # the offline directory gets no clean-shutdown marker: it is recovered
    assert (roomy / ".kafka_cleanshutdown").exists()
    assert not (full / ".kafka_cleanshutdown").exists()


def test_checkpoints_are_written_to_a_temp_file_fsynced_and_renamed(tmp_path, monkeypatch) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        checkpoint_module.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))
    )
    monkeypatch.setattr(
        checkpoint_module.os,
        "replace",
        lambda a, b: (events.append(f"rename {os.path.basename(a)}"), real_replace(a, b)),
    )
    checkpoint_module.write_offset_checkpoint(tmp_path / "cp", {("t", 0): 5})
    assert events == ["fsync", "rename cp.tmp", "fsync"]  # file, rename, then the directory
