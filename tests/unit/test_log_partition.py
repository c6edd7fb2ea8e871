"""PartitionLog on real files: appends, rolls, index placement, reads and offset lookups."""

import struct

import pytest

from kpybroker.log.log_config import LogConfig
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.records import iter_batches, iter_records, parse_header, validate_batch
from tests.helpers.log_builders import (
    SMALL,
    Clock,
    batch,
    fill,
    log_bytes,
    open_log,
    records,
    stored_records,
)


def test_appends_stamp_contiguous_offsets_and_the_leader_epoch(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    results = [log.append(batch(3), 4) for _ in range(3)]
    assert [(r.base_offset, r.last_offset) for r in results] == [(0, 2), (3, 5), (6, 8)]
    assert all(r.log_append_time == -1 and not r.duplicate for r in results)
    assert log.log_end_offset == 9
    headers = [h for _, h in iter_batches(log_bytes(log))]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 4), (3, 4), (6, 4)]
    for pos, _ in iter_batches(data := log_bytes(log)):
        validate_batch(data, pos, from_client=False)  # the CRC still holds


def test_segments_roll_at_segment_bytes(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 40)
    assert len(log.segments) > 3
    bases = [s.base_offset for s in log.segments]
    for segment, next_base in zip(log.segments, [*bases[1:], log.log_end_offset], strict=True):
        assert segment.size <= SMALL.segment_bytes
        assert segment.next_offset() == next_base
        assert segment.log_path.name == f"{segment.base_offset:020d}.log"
    # A batch that would not fit is what started each new segment.
    first = log.segments[0]
    assert first.size + len(batch(3)) > SMALL.segment_bytes


def test_index_entries_follow_kafkas_interval_rule(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 30)
    for segment in log.segments:
        expected, since_last = [], 0
        for pos, header in iter_batches(segment.log_path.read_bytes()):
            if since_last > SMALL.index_interval_bytes:
                expected.append((header.last_offset - segment.base_offset, pos))
                since_last = 0
            since_last += header.size
        raw = segment.offset_index.path.read_bytes()
        assert list(struct.iter_unpack(">ii", raw)) == expected


def test_every_offset_reads_from_its_batch_across_segments(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 40)
    for offset in range(log.log_end_offset):
        got = records(log.read(offset, 1, log.log_end_offset))
        assert got[0].offset <= offset <= got[-1].offset
        assert len({r.offset // 3 for r in got}) == 1  # exactly one whole batch


def test_reads_are_whole_batches_within_max_bytes(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 8)
    size = len(batch(3))
    result = log.read(0, size * 3 + size // 2, log.log_end_offset)
    assert len(result) == size * 3
    assert [r.offset for r in records(result)] == list(range(9))
    assert len(result.parts) == 1 and result.parts[0].file.source is log.segments[0].log_file


def test_min_one_message_returns_a_batch_larger_than_max_bytes(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 2)
    assert [r.offset for r in records(log.read(0, 10, 6))] == [0, 1, 2]
    assert len(log.read(0, 10, 6, min_one_message=False)) == 0


def test_reads_stop_before_batches_reaching_max_offset(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 4)  # batches 0-2, 3-5, 6-8, 9-11
    assert [r.offset for r in records(log.read(0, 10_000, 6))] == list(range(6))
    assert [r.offset for r in records(log.read(0, 10_000, 7))] == list(range(6))
    assert len(log.read(7, 10_000, 7)) == 0  # between the high watermark and the log end
    assert len(log.read(12, 10_000, 12)) == 0  # at the log end


def test_a_read_stays_in_one_segment(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 30)
    first = log.segments[0]
    result = log.read(0, 1 << 20, log.log_end_offset)
    assert len(result) == first.size
    assert records(result)[-1].offset == log.segments[1].base_offset - 1


@pytest.mark.parametrize("offset", [-1, 13])
def test_offsets_outside_the_log_are_out_of_range(tmp_path, offset) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 4)
    with pytest.raises(KafkaError) as info:
        log.read(offset, 100, 12)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_offset_for_timestamp_at_every_timestamp(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    # Record timestamps are out of order inside each batch: 30 20 10 / 60 50 40 / ...
    for b in range(40):
        stamps = [(3 * b + 3 - i) * 10 for i in range(3)]
        log.append(batch(3, timestamps=stamps), 0)
    stored = [(r.timestamp, r.offset) for r in stored_records(log)]
    for target in range(0, 1250, 5):
        expected = next(((ts, off) for ts, off in stored if ts >= target), None)
        assert log.offset_for_timestamp(target) == expected, target


def test_max_timestamp_lookup(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.max_timestamp_and_offset() is None
    fill(log, 10)
    log.append(batch(3, timestamps=[5, 99_999, 7]), 0)
    fill(log, 10)
    assert log.max_timestamp_and_offset() == (99_999, 31)


def test_log_append_time_is_stamped_by_the_broker(tmp_path) -> None:
    clock = Clock()
    log = open_log(
        tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), time_ms=clock
    )
    result = log.append(batch(2, timestamp=5), 0)
    assert result.log_append_time == clock.now
    data = log_bytes(log)
    header = validate_batch(data, 0, from_client=False)
    assert header.timestamp_type == 1 and header.max_timestamp == clock.now
    assert [r.timestamp for r in iter_records(data)] == [clock.now, clock.now]
    assert log.offset_for_timestamp(clock.now) == (clock.now, 0)


def test_timestamps_outside_the_configured_window_are_rejected(tmp_path) -> None:
    clock = Clock()
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)
    log = open_log(tmp_path / "t-0", config, time_ms=clock)
    log.append(batch(timestamp=clock.now - 999), 0)
    for stamp in (clock.now - 1001, clock.now + 1001):
        with pytest.raises(KafkaError) as info:
            log.append(batch(timestamp=stamp), 0)
        assert info.value.code == ErrorCode.INVALID_TIMESTAMP
    assert log.log_end_offset == 1


def test_size_limits(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=200, segment_bytes=150))
    big = batch(value=b"x" * 300)
    with pytest.raises(KafkaError) as info:
        log.append(big, 0)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
    with pytest.raises(KafkaError) as info:
        log.append(batch(value=b"x" * 100), 0)
    assert info.value.code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_segment_ms_rolls_by_record_time(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000))
    log.append(batch(timestamp=10_000), 0)
    log.append(batch(timestamp=10_900), 0)
    assert len(log.segments) == 1
    log.append(batch(timestamp=11_001), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_writes_the_final_time_index_entry_and_a_snapshot(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 12)
    first = log.segments[0]
    raw = first.time_index.path.read_bytes()
    last_ts, last_rel = struct.unpack(">qi", raw[-12:])
    assert (last_ts, first.base_offset + last_rel) == tuple(first.max_timestamp_so_far)
    assert (tmp_path / "t-0" / f"{log.segments[1].base_offset:020d}.snapshot").exists()


def test_leader_epochs_are_recorded_and_answered(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 2, epoch=0)
    fill(log, 2, epoch=3)
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n0 0\n3 6\n"
    assert log.leader_epoch == 3
    assert log.end_offset_for_epoch(3) == (3, 12)
    assert log.end_offset_for_epoch(0) == (0, 6)
    assert log.end_offset_for_epoch(2) == (0, 6)
    assert log.end_offset_for_epoch(7) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert [log.epoch_for_offset(o) for o in (0, 5, 6, 11)] == [0, 0, 3, 3]
    log.maybe_assign_epoch_start_offset(5, log.log_end_offset)
    assert log.end_offset_for_epoch(3) == (3, 12) and log.end_offset_for_epoch(5) == (5, 12)


def test_high_watermark_is_kept_within_the_log(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 2)
    assert log.high_watermark == 0
    assert log.update_high_watermark(100) == 6
    assert log.update_high_watermark(-5) == 0


def test_flush_messages_moves_the_recovery_point(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(flush_interval_messages=5))
    fill(log, 1)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 6


def test_flush_ms_and_maintain(tmp_path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", LogConfig(flush_interval_ms=1000), time_ms=clock)
    fill(log, 1)
    log.maintain()
    assert log.recovery_point == 0
    clock.advance(1000)
    log.maintain()
    assert log.recovery_point == 3


def test_maintain_flushes_rolled_segments_only(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 12)
    assert log.maintenance_due
    log.maintain()
    assert log.recovery_point == log.active_segment.base_offset < log.log_end_offset
    assert not log.maintenance_due


def test_maintenance_is_due_only_when_maintain_has_work(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    assert not log.maintenance_due
    fill(log, 1)
    assert not log.maintenance_due  # unflushed, but only the active segment and no policy
    timed = open_log(tmp_path / "t-1", LogConfig(flush_interval_ms=1000))
    fill(timed, 1)
    assert timed.maintenance_due
    timed.flush()
    assert not timed.maintenance_due


def test_retention_bytes_deletes_the_oldest_segments(tmp_path) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    log = open_log(tmp_path / "t-0", config, time_ms=clock)
    fill(log, 40)
    log.update_high_watermark(log.log_end_offset)
    old_files = [s.log_path for s in log.segments]
    deleted = log.delete_old_segments()
    assert deleted > 0 and log.size <= 2500 + SMALL.segment_bytes
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert not any(p.exists() for p in old_files[:deleted])
    with pytest.raises(KafkaError):
        log.read(0, 100, log.log_end_offset)


def test_retention_ms_keeps_data_above_the_high_watermark(tmp_path) -> None:
    clock = Clock(now=10_000_000)
    log = open_log(
        tmp_path / "t-0", LogConfig(segment_bytes=1000, retention_ms=1000), time_ms=clock
    )
    fill(log, 40)  # record timestamps are far in the past
    assert log.delete_old_segments() == 0  # nothing is below the high watermark yet
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() > 0
    assert len(log.segments) == 1 and log.active_segment.size == 0
    assert log.log_start_offset == log.log_end_offset == 120
    fill(log, 1)
    assert [r.offset for r in records(log.read(120, 1000, 123))] == [120, 121, 122]


def test_delete_records_moves_the_log_start(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 40)
    with pytest.raises(KafkaError):
        log.increment_log_start_offset(50)  # above the high watermark
    log.update_high_watermark(120)
    log.increment_log_start_offset(50)
    assert log.log_start_offset == 50
    with pytest.raises(KafkaError):
        log.read(49, 100, 120)
    assert log.delete_old_segments() > 0
    assert log.segments[0].base_offset <= 50


def test_truncate_to_removes_later_batches_and_segments(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 30, epoch=1)
    fill(log, 10, epoch=2)
    log.update_high_watermark(log.log_end_offset)
    assert log.truncate_to(31)  # offset 31 is inside batch 30-32: the whole batch goes
    assert log.log_end_offset == 30 == log.high_watermark
    assert log.active_segment.next_offset() == 30
    assert log.leader_epoch == 1
    assert log.append(batch(3), 3).base_offset == 30
    assert [r.offset for r in stored_records(log)] == list(range(33))


def test_truncate_below_the_first_segment_starts_over(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 40)
    log.update_high_watermark(log.log_end_offset)
    log.increment_log_start_offset(100)
    log.delete_old_segments()
    assert log.segments[0].base_offset > 10
    log.truncate_to(10)
    assert (log.log_start_offset, log.log_end_offset) == (10, 10)
    assert [s.base_offset for s in log.segments] == [10]


def test_delete_removes_the_directory(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 3)
    result = log.read(0, 1000, 9)
    log.mark_deleted()
    log.remove_files()
    assert list(tmp_path.iterdir()) == []
    assert parse_header(result.read_bytes()).base_offset == 0  # descriptors outlive the files
    log.release_descriptors()
