"""Retention, time-based rolls and DeleteRecords against a real broker process.

One broker serves the module, with the retention check every 100 ms (the
broker's housekeeping runs once a second, so effects show within ~2 s).
Records go one per batch with equal sizes, so ``segment.bytes = 3 * SIZE``
puts exactly three batches in a segment and the surviving offsets are known.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kafka.errors import OffsetOutOfRangeError

from tests.helpers.brokers import ManagedBroker, launcher
from tests.helpers.log_life import (
    FAST_LOG_TASKS,
    batch_size,
    consume_all,
    create_topic,
    offsets_of,
    partition_dir,
    produce_each,
    wait_until,
    watermarks,
)

KEY, VALUE = b"key", b"value-0000"
SIZE = batch_size(KEY, VALUE)


def records(count: int) -> list[tuple[bytes, bytes]]:
    return [(KEY, f"value-{i:04d}".encode()) for i in range(count)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedBroker]:
    overrides = {**FAST_LOG_TASKS, "log.flush.offset.checkpoint.interval.ms": 600_000}
    with launcher(tmp_path_factory.mktemp("retention")) as brokers:
        yield brokers(overrides)


def now_ms() -> int:
    return int(time.time() * 1000)


def test_retention_bytes_deletes_exactly_the_oldest_whole_segments(broker) -> None:
    create_topic(
        broker.bootstrap, "by-size", {"segment.bytes": 3 * SIZE, "retention.bytes": 5 * SIZE}
    )
    produce_each(broker.bootstrap, "by-size", records(10))  # [0-2] [3-5] [6-8] active [9]
    # 10 batches, 5 over: [0-2] goes; [3-5] stays, or only 4 would be left.
    wait_until(lambda: watermarks(broker.bootstrap, "by-size") == (3, 10), "log start 3")
    assert offsets_of(consume_all(broker.bootstrap, "by-size")) == list(range(3, 10))
    assert sorted(p.name for p in partition_dir(broker, "by-size").glob("*.log")) == [
        f"{base:020d}.log" for base in (3, 6, 9)
    ]


def test_retention_ms_deletes_old_segments_and_then_an_idle_partition(broker) -> None:
    config = {"segment.bytes": 3 * SIZE, "retention.ms": 60_000}
    create_topic(broker.bootstrap, "by-time", config)
    produce_each(broker.bootstrap, "by-time", records(6), timestamp=now_ms() - 600_000)
    produce_each(broker.bootstrap, "by-time", records(2), timestamp=now_ms())
    wait_until(lambda: watermarks(broker.bootstrap, "by-time") == (6, 8), "log start 6")
    assert offsets_of(consume_all(broker.bootstrap, "by-time")) == [6, 7]

    # Everything too old, the active segment included: the log rolls and empties.
    create_topic(broker.bootstrap, "all-old", config)
    produce_each(broker.bootstrap, "all-old", records(4), timestamp=now_ms() - 600_000)
    wait_until(lambda: watermarks(broker.bootstrap, "all-old") == (4, 4), "an empty log at 4")
    assert produce_each(broker.bootstrap, "all-old", records(1)) == [4]


def test_segment_ms_rolls_by_record_time(broker) -> None:
    create_topic(broker.bootstrap, "by-roll", {"segment.ms": 1000})
    start = now_ms()
    produce_each(broker.bootstrap, "by-roll", records(2), timestamp=start)
    produce_each(broker.bootstrap, "by-roll", records(1), timestamp=start + 1500)
    produce_each(broker.bootstrap, "by-roll", records(1), timestamp=start + 1600)
    bases = sorted(p.name for p in partition_dir(broker, "by-roll").glob("*.log"))
    assert bases == [f"{0:020d}.log", f"{2:020d}.log"]


def test_delete_records_moves_the_log_start_and_survives_a_crash(broker) -> None:
    create_topic(broker.bootstrap, "trim", {"segment.bytes": 3 * SIZE}, partitions=2)
    for partition in (0, 1):
        produce_each(broker.bootstrap, "trim", records(10), partition=partition)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.delete_records([TopicPartition("trim", 0, 4), TopicPartition("trim", 1, -1)])
    low = {tp.partition: f.result(timeout=30).low_watermark for tp, f in futures.items()}
    assert low == {0: 4, 1: 10}  # -1 means the high watermark
    assert watermarks(broker.bootstrap, "trim", 0) == (4, 10)  # ListOffsets -2
    assert offsets_of(consume_all(broker.bootstrap, "trim", 0)) == list(range(4, 10))

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="none", enable_auto_commit=False
    )
    try:
        consumer.assign([KTP("trim", 0)])
        consumer.seek(KTP("trim", 0), 2)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(20):
                consumer.poll(timeout_ms=500)
    finally:
        consumer.close()

    # Retention removes the segment wholly below 4; the start itself survives a SIGKILL.
    wait_until(
        lambda: not (partition_dir(broker, "trim") / f"{0:020d}.log").exists(), "[0-2] deleted"
    )
    broker.kill()
    broker.start()
    assert watermarks(broker.bootstrap, "trim", 0)[0] == 4
    assert watermarks(broker.bootstrap, "trim", 1)[0] == 10
    assert produce_each(broker.bootstrap, "trim", records(1)) == [10]
    assert offsets_of(consume_all(broker.bootstrap, "trim", 0)) == list(range(4, 11))


def test_delete_records_on_a_compact_only_topic_is_a_policy_violation(broker) -> None:
    create_topic(broker.bootstrap, "kept", {"cleanup.policy": "compact"})
    produce_each(broker.bootstrap, "kept", records(3))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.delete_records([TopicPartition("kept", 0, 2)]).values()
    with pytest.raises(Exception) as info:
        future.result(timeout=30)
    assert "POLICY_VIOLATION" in str(info.value) or "policy" in str(info.value).lower()
    assert watermarks(broker.bootstrap, "kept") == (0, 3)


def test_the_log_dir_holds_kafkas_checkpoint_files(broker: ManagedBroker) -> None:
    log_dir: Path = broker.log_dir
    broker.restart()  # a clean shutdown writes every checkpoint and the marker
    for name in (
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
    ):
        assert (log_dir / name).read_text().startswith("0\n")
    assert "trim 0 4" in (log_dir / "log-start-offset-checkpoint").read_text().splitlines()
