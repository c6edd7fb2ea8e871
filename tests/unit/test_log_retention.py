"""Retention (time, size, log start offset), DeleteRecords, and time-based rolls.

Batches are single records of equal size ``ONE``; segments hold ``PER_SEGMENT``
of them, so which offsets survive can be stated exactly.
"""

from __future__ import annotations

import dataclasses

import pytest

from kpybroker.config import BrokerConfig, effective_topic_config
from kpybroker.log.log_config import CleanerConfig, LogConfig, LogManagerConfig
from kpybroker.log.retention import deletable_segments
from kpybroker.protocol.errors import ErrorCode, KafkaError
from tests.helpers.log_builders import (
    NOW,
    ONE,
    PER_SEGMENT,
    Clock,
    append_committed,
    keyed,
    log_manager,
    offsets_on_disk,
    open_log,
    records,
)

DELETING = LogConfig(segment_bytes=PER_SEGMENT * ONE, retention_ms=-1)


def deleting(**changes: object) -> LogConfig:
    return dataclasses.replace(DELETING, **changes)


def write(log, count: int, timestamp: int = NOW) -> None:
    for i in range(count):
        append_committed(log, keyed((b"k0", f"v{i % 100:02d}".encode()), timestamp=timestamp))


def test_retention_bytes_deletes_whole_oldest_segments_down_to_the_limit(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", deleting(retention_bytes=5 * ONE))
    write(log, 10)  # [0-3] [4-7] active [8-9]: 10 batches, 5 over the limit
    assert log.delete_old_segments() == 1  # [4-7] must stay: without it only 2 would be left
    assert offsets_on_disk(log) == list(range(4, 10))
    assert log.log_start_offset == 4
    with pytest.raises(KafkaError) as info:
        log.read(3, 100, 10)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_retention_ms_deletes_segments_whose_newest_record_is_too_old(tmp_path) -> None:
    clock = Clock(NOW)
    log = open_log(tmp_path / "t-0", deleting(retention_ms=60_000), time_ms=clock)
    write(log, 8, timestamp=NOW - 120_000)  # [0-3] [4-7], two minutes old
    write(log, 5, timestamp=NOW)  # [8-11], active [12]
    assert log.delete_old_segments() == 2
    assert offsets_on_disk(log) == list(range(8, 13))
    clock.advance(61_000)  # now everything is too old, the active segment included
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == log.log_end_offset == 13
    assert [s.base_offset for s in log.segments] == [13]  # the log rolled to stay non-empty
    write(log, 1)
    assert [r.offset for r in records(log.read(13, 100, 14))] == [13]


def test_retention_never_passes_the_high_watermark(tmp_path) -> None:
    clock = Clock(NOW)
    log = open_log(tmp_path / "t-0", deleting(retention_ms=1), time_ms=clock)
    write(log, 10, timestamp=NOW - 10_000)
    log.update_high_watermark(5)  # [0-3] is below it, [4-7] reaches past it
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 4


def test_deletable_segments_stops_at_the_first_kept_segment(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", DELETING)
    write(log, 12)  # [0-3] [4-7] and the active [8-11]
    asked = []

    def every_other(segment, _following) -> bool:
        asked.append(segment.base_offset)
        return segment.base_offset != 4

    doomed = deletable_segments(log.segments, every_other, log.high_watermark, log.log_end_offset)
    assert [s.base_offset for s in doomed] == [0]
    assert asked == [0, 4]  # the predicate is not asked past the first refusal
    log.roll()
    everything = deletable_segments(log.segments, lambda *_: True, 12, 12)
    assert [s.base_offset for s in everything] == [0, 4, 8]  # never the empty active one


def test_a_compact_only_log_deletes_only_below_its_log_start(tmp_path) -> None:
    clock = Clock(NOW)
    config = deleting(cleanup_policy=("compact",), retention_ms=1, retention_bytes=0)
    log = open_log(tmp_path / "t-0", config, time_ms=clock)
    write(log, 10, timestamp=NOW - 10_000)
    assert log.delete_old_segments() == 0  # neither time nor size applies
    log.close()
    # A log start offset found in the checkpoint (from when the topic was not compacted).
    log = open_log(tmp_path / "t-0", config, time_ms=clock, log_start_offset=5, high_watermark=10)
    assert log.delete_old_segments() == 1
    assert log.segments[0].base_offset == 4


def test_delete_records(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", DELETING)
    write(log, 10)
    assert log.delete_records(6) == 6
    assert log.delete_records(2) == 6  # never backwards
    with pytest.raises(KafkaError) as info:
        log.read(5, 100, 10)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert records(log.read(6, 100, 10))[0].offset == 6
    assert log.delete_old_segments() == 1  # [0-3] is wholly below 6; [4-7] holds 6
    assert log.delete_records(-1) == 10  # -1: up to the high watermark
    for bad in (-2, 11):
        with pytest.raises(KafkaError) as info:
            log.delete_records(bad)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.config = deleting(cleanup_policy=("compact",))
    with pytest.raises(KafkaError) as info:
        log.delete_records(10)
    assert info.value.code == ErrorCode.POLICY_VIOLATION
    assert info.value.message == (
        "Records of partition t-0 can not be deleted due to the configured policy"
    )


def test_the_log_start_offset_survives_a_crash_once_checkpointed(tmp_path) -> None:
    logs = log_manager(tmp_path, lambda _: DELETING)
    log = logs.get_or_create("t", 0, None, DELETING)
    write(log, 10)
    log.delete_records(6)
    logs.checkpoint_log_start_offsets()
    log.release_descriptors()  # a crash: no clean shutdown, no other checkpoint
    logs._unlock()
    logs = log_manager(tmp_path, lambda _: DELETING)
    assert logs.get("t", 0).log_start_offset == 6
    logs.close()


def test_retention_runs_at_log_retention_check_interval_ms(tmp_path) -> None:
    clock = Clock(NOW)
    settings = LogManagerConfig(retention_check_interval_ms=30_000)
    config = deleting(retention_bytes=ONE)
    logs = log_manager(
        tmp_path,
        lambda _: config,
        time_ms=clock,
        settings=settings,
    )
    log = logs.get_or_create("t", 0, None, config)
    write(log, 10)
    clock.advance(29_999)
    logs.periodic()
    assert log.log_start_offset == 0
    clock.advance(1)
    logs.periodic()
    assert log.log_start_offset == 8
    logs.close()


def test_a_compacted_log_rolls_within_max_compaction_lag_ms(tmp_path) -> None:
    config = deleting(cleanup_policy=("compact",), segment_bytes=10**6, max_compaction_lag_ms=1000)
    assert config.max_segment_ms == 1000 < config.segment_ms
    log = open_log(tmp_path / "t-0", config)
    write(log, 2, timestamp=NOW)
    write(log, 1, timestamp=NOW + 1001)  # by record time, the segment is now too old
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_settings_come_from_kafkas_broker_config_names() -> None:
    broker = BrokerConfig(
        {
            "log.retention.check.interval.ms": "1234",
            "log.flush.offset.checkpoint.interval.ms": "2000",
            "log.flush.start.offset.checkpoint.interval.ms": "3000",
            "replica.high.watermark.checkpoint.interval.ms": "4000",
            "log.cleaner.enable": "false",
            "log.cleaner.backoff.ms": "50",
            "log.cleaner.dedupe.buffer.size": "1048576",
            "log.cleaner.io.max.bytes.per.second": "1000000",
        }
    )
    settings = LogManagerConfig.from_broker_config(broker.get)
    assert settings == LogManagerConfig(
        retention_check_interval_ms=1234,
        recovery_point_checkpoint_interval_ms=2000,
        log_start_checkpoint_interval_ms=3000,
        high_watermark_checkpoint_interval_ms=4000,
        cleaner=CleanerConfig(
            enable=False,
            backoff_ms=50,
            dedupe_buffer_size=1_048_576,
            max_io_bytes_per_second=1_000_000.0,
        ),
    )


def test_broker_defaults_reach_the_log_config_and_topic_overrides_win() -> None:
    broker = BrokerConfig({"log.retention.minutes": "2", "log.roll.hours": "1"})
    defaults = LogConfig.from_topic_config(effective_topic_config(broker, {}))
    assert (defaults.retention_ms, defaults.segment_ms) == (120_000, 3_600_000)
    topic = LogConfig.from_topic_config(effective_topic_config(broker, {"retention.ms": "5000"}))
    assert topic.retention_ms == 5000
