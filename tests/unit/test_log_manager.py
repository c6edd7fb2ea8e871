"""LogManager: log directories, checkpoints, clean shutdown and partition lifecycle."""

import os

import pytest

from kpybroker.log import slices
from kpybroker.log.log_config import LogConfig, LogManagerConfig
from kpybroker.log.log_manager import LogDirLockedError, LogManager
from kpybroker.log.metadata_files import InconsistentMetadataError
from kpybroker.log.names import parse_partition_dir, special_dir_kind
from kpybroker.protocol.errors import ErrorCode, KafkaError
from tests.helpers.log_builders import SMALL, Clock, batch, fill, records

CLUSTER = "Qbc2dFl9TyCgSCW8Y9xsPQ"
TOPIC_ID = bytes(range(16))


def manager(*dirs, clock=None, **kwargs) -> LogManager:
    extra = {"time_ms": clock} if clock else {}
    return LogManager(
        list(dirs), broker_id=1, cluster_id=CLUSTER, config_for=lambda _t: SMALL, **extra, **kwargs
    )


def test_partition_directory_names() -> None:
    assert parse_partition_dir("orders-0") == ("orders", 0)
    assert parse_partition_dir("my-topic.v2-17") == ("my-topic.v2", 17)
    assert parse_partition_dir("__consumer_offsets-49") == ("__consumer_offsets", 49)
    assert parse_partition_dir("orders") is None
    assert parse_partition_dir("orders-x") is None
    assert special_dir_kind("a-b-0.0123456789abcdef0123456789abcdef-delete") == "delete"
    assert special_dir_kind("a-b-0") is None


def test_clean_shutdown_and_restart(tmp_path) -> None:
    logs = manager(tmp_path)
    orders = logs.get_or_create("orders", 0, TOPIC_ID)
    other = logs.get_or_create("my-topic.v2", 3, None)
    fill(orders, 5)
    fill(other, 2)
    orders.update_high_watermark(9)
    logs.close()

    assert (
        tmp_path / ".kafka_cleanshutdown"
    ).read_bytes() == b'{"broker_epoch":"-1","version":"0"}'
    assert (
        tmp_path / "recovery-point-offset-checkpoint"
    ).read_bytes() == b"0\n2\norders 0 15\nmy-topic.v2 3 6\n"
    assert (
        tmp_path / "replication-offset-checkpoint"
    ).read_bytes() == b"0\n2\norders 0 9\nmy-topic.v2 3 0\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_bytes() == b"0\n0\n"
    assert (tmp_path / "orders-0" / "partition.metadata").exists()
    assert not (tmp_path / "my-topic.v2-3" / "partition.metadata").exists()

    logs = manager(tmp_path)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # a crash from now on is noticed
    orders = logs.get("orders", 0)
    assert (orders.log_end_offset, orders.high_watermark, orders.topic_id) == (15, 9, TOPIC_ID)
    assert logs.get("my-topic.v2", 3).log_end_offset == 6
    assert logs.get_or_create("orders", 0, TOPIC_ID) is orders
    logs.close()


def test_unclean_restart_recovers(tmp_path) -> None:
    logs = manager(tmp_path)
    log = logs.get_or_create("orders", 0, TOPIC_ID)
    fill(log, 5)
    path = log.active_segment.log_path
    logs.checkpoint()
    log.release_descriptors()
    logs._unlock()  # the process died
    with open(path, "ab") as f:
        f.write(batch(3)[:40])
    logs = manager(tmp_path)
    log = logs.get("orders", 0)
    assert log.log_end_offset == 15 and path.stat().st_size == log.active_segment.size
    logs.close()


def test_log_dir_identity_is_checked(tmp_path) -> None:
    manager(tmp_path).close()
    with pytest.raises(InconsistentMetadataError):
        LogManager([tmp_path], broker_id=1, cluster_id="someOtherClusterIdXXXX")
    with pytest.raises(InconsistentMetadataError):
        LogManager([tmp_path], broker_id=2, cluster_id=CLUSTER)


def test_a_log_dir_is_used_by_one_broker_at_a_time(tmp_path) -> None:
    logs = manager(tmp_path)
    with pytest.raises(LogDirLockedError):
        manager(tmp_path)
    logs.close()
    manager(tmp_path).close()


def test_new_partitions_go_to_the_least_used_dir(tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    logs = manager(a, b)
    for p in range(4):
        logs.get_or_create("t", p, None)
    assert sorted(logs.log_dir_of("t", p).name for p in range(4)) == ["a", "a", "b", "b"]
    logs.close()
    logs = manager(a, b)
    assert len(dict(iter(logs))) == 4
    logs.close()


def test_a_partition_in_two_dirs_is_refused(tmp_path) -> None:
    for d in ("a", "b"):
        logs = manager(tmp_path / d)
        logs.get_or_create("t", 0, None)
        logs.close()
    with pytest.raises(RuntimeError, match="both"):
        manager(tmp_path / "a", tmp_path / "b")


@pytest.mark.parametrize("partitions", [1, 40])
def test_deleting_a_topic_fsyncs_once_per_log_dir_not_per_partition(
    tmp_path, monkeypatch, partitions
) -> None:
    """The deletion runs on the event loop: a topic of many partitions must not cost an
    fsync (or a rewrite of the cleaner checkpoint) per partition."""
    logs = manager(tmp_path / "a", tmp_path / "b")
    for p in range(partitions):
        logs.get_or_create("gone", p, None)
    logs.get_or_create("kept", 0, None)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    assert logs.delete_partitions("gone", range(partitions + 1)) == list(range(partitions))
    used_dirs = min(partitions, 2)
    # Per log dir: the rename, and the cleaner checkpoint's file and directory.
    assert len(synced) == 3 * used_dirs
    assert [p.name for p in (tmp_path / "a").iterdir() if p.name.startswith("gone")] == []
    assert [p.name for p in (tmp_path / "b").iterdir() if p.name.startswith("gone")] == []
    assert logs.get("kept", 0) is not None
    logs.close()


def test_delete_partition(tmp_path) -> None:
    logs = manager(tmp_path)
    fill(logs.get_or_create("t", 0, None), 3)
    assert logs.delete_partition("t", 0)
    assert not logs.delete_partition("t", 0)
    assert not any(p.name.startswith("t-0") for p in tmp_path.iterdir())
    logs.close()
    (tmp_path / "u-1.0123456789abcdef0123456789abcdef-delete").mkdir()
    (tmp_path / "__cluster_metadata-0").mkdir()
    logs = manager(tmp_path)
    assert (
        logs.get("t", 0) is None
        and not (tmp_path / "u-1.0123456789abcdef0123456789abcdef-delete").exists()
    )
    assert logs.get("__cluster_metadata", 0) is None
    logs.close()


def test_a_different_topic_id_is_inconsistent(tmp_path) -> None:
    logs = manager(tmp_path)
    logs.get_or_create("t", 0, TOPIC_ID)
    with pytest.raises(KafkaError) as info:
        logs.get_or_create("t", 0, bytes(16 * [7]))
    assert info.value.code == ErrorCode.INCONSISTENT_TOPIC_ID
    logs.close()


def test_periodic_writes_checkpoints_when_due(tmp_path) -> None:
    clock = Clock()
    logs = manager(tmp_path, clock=clock)
    log = logs.get_or_create("t", 0, None)
    fill(log, 2)
    log.update_high_watermark(6)
    hw_file = tmp_path / "replication-offset-checkpoint"
    logs.periodic()
    assert not hw_file.exists()
    clock.advance(LogManagerConfig().high_watermark_checkpoint_interval_ms)
    logs.periodic()
    logs.drain_checkpoints()  # written by the checkpoint thread
    assert hw_file.read_bytes() == b"0\n1\nt 0 6\n"
    logs.close()


def test_periodic_work_goes_a_slice_of_logs_at_a_time(tmp_path, monkeypatch) -> None:
    """Between slices the event loop serves others, and the logs may change: one
    deleted meanwhile is left out of the rest of the pass and of the checkpoints."""
    monkeypatch.setattr(slices, "HOUSEKEEPING_SLICE", 2)
    clock = Clock()
    logs = manager(tmp_path, clock=clock)
    for index in range(5):
        partition_log = logs.get_or_create("t", index, None)
        fill(partition_log, 1)
        partition_log.update_high_watermark(1)
    clock.advance(LogManagerConfig().high_watermark_checkpoint_interval_ms)
    steps = logs.periodic_steps()
    next(steps)  # the first slice: partitions 0 and 1
    assert logs.delete_partition("t", 3)
    rest = sum(1 for _ in steps)
    # the first pass's other slices (t-2, t-4), then the checkpoint's over 4 logs
    assert rest == 2 + 2
    logs.drain_checkpoints()
    hw = (tmp_path / "replication-offset-checkpoint").read_text().split("\n")[2:-1]
    assert sorted(hw) == ["t 0 1", "t 1 1", "t 2 1", "t 4 1"]
    assert not (tmp_path / "t-3").exists()
    logs.close()


def test_a_failed_background_checkpoint_takes_its_directory_offline(tmp_path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    logs = manager(good, bad)
    logs.get_or_create("t", 0, None)
    (bad / "replication-offset-checkpoint").mkdir()  # the write's rename onto it fails
    (bad / "replication-offset-checkpoint" / "x").touch()
    logs.checkpoint_high_watermarks(in_background=True)
    logs.drain_checkpoints()
    assert logs.failures.offline == set()  # handed back to the owner's thread...
    logs.periodic()
    assert logs.failures.offline == {bad}  # ...which takes the directory offline
    logs.close()


def test_log_start_checkpoint_lists_only_moved_starts(tmp_path) -> None:
    logs = manager(tmp_path)
    log = logs.get_or_create("t", 0, None)
    logs.get_or_create("u", 0, None)
    fill(log, 4)
    log.update_high_watermark(12)
    log.increment_log_start_offset(5)
    logs.close()
    assert (tmp_path / "log-start-offset-checkpoint").read_bytes() == b"0\n1\nt 0 5\n"
    logs = manager(tmp_path)
    assert logs.get("t", 0).log_start_offset == 5
    assert next(r.offset for r in records(logs.get("t", 0).read(5, 1000, 12))) == 3
    logs.close()


def test_update_config_applies_to_every_partition_of_the_topic(tmp_path) -> None:
    logs = manager(tmp_path)
    logs.get_or_create("t", 0, None)
    logs.get_or_create("t", 1, None)
    new = LogConfig(segment_bytes=123_456)
    logs.update_config("t", new)
    assert all(logs.get("t", p).config is new for p in (0, 1))
    logs.close()


def test_a_stray_log_is_set_aside_with_its_files(tmp_path) -> None:
    logs = manager(tmp_path)
    fill(logs.get_or_create("t", 0, TOPIC_ID), 3)
    kept = logs.set_aside_stray("t", 0)
    assert logs.set_aside_stray("t", 0) is None and logs.get("t", 0) is None
    assert kept is not None and special_dir_kind(kept.name) == "stray"
    assert kept.parent == tmp_path and not (tmp_path / "t-0").exists()
    assert (kept / "00000000000000000000.log").stat().st_size > 0
    assert (kept / "partition.metadata").exists()
    logs.close()
    logs = manager(tmp_path)
    assert logs.get("t", 0) is None and kept.exists()  # never loaded, never deleted
    logs.close()
