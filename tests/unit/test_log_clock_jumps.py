"""The system clock jumping backward and forward, and client timestamps far from now, while
segments roll and retention runs (issue 18): no segment deleted early, no index corrupted.

Kafka's rules, which the log follows: a segment is deleted by time once its *largest*
record timestamp is more than ``retention.ms`` behind the wall clock, so a clock that
jumps back deletes nothing it would not have deleted anyway, and a segment holding a
timestamp from the future waits for it. ``segment.ms`` counts from the segment's first
batch, so a clock going back delays a roll and never makes one fail. With
``LogAppendTime`` the broker stamps the clock's time, backward jumps included, while the
time index only ever grows (an entry is added only above the last), so a reload after
any of this finds every index consistent.
"""

from __future__ import annotations

import dataclasses

from kpybroker.log.log_config import LOG_APPEND_TIME, LogConfig
from tests.helpers.log_builders import (
    NOW,
    ONE,
    PER_SEGMENT,
    Clock,
    append_committed,
    keyed,
    offsets_on_disk,
    open_log,
    stored_records,
)

HOUR = 3_600_000
LOG = LogConfig(segment_bytes=PER_SEGMENT * ONE, retention_ms=HOUR)


def write(log, count: int, timestamp: int) -> None:
    for _ in range(count):
        append_committed(log, keyed((b"k0", b"v00"), timestamp=timestamp))


def reopened(log, clock: Clock):
    """The log as the broker finds it after a crash: every segment recovered from disk."""
    log.close()
    return open_log(log.directory, log.config, time_ms=clock)


def test_a_clock_jumping_back_deletes_nothing_and_forward_deletes_what_is_old(tmp_path) -> None:
    clock = Clock(NOW)
    log = open_log(tmp_path / "t-0", LOG, time_ms=clock)
    write(log, 8, NOW - 30 * 60_000)  # [0-3] [4-7]: half an hour old
    write(log, 5, NOW)  # [8-11], active [12]
    clock.now = NOW - 24 * HOUR  # a day back: every record is "in the future"
    assert log.delete_old_segments() == 0
    write(log, 4, clock.now)  # the producer's clock went back too
    assert log.delete_old_segments() == 0
    assert offsets_on_disk(log) == list(range(17))
    clock.now = NOW + 45 * 60_000  # forward again, past the first segments' hour
    assert log.delete_old_segments() == 2
    assert offsets_on_disk(log)[0] == 8
    log = reopened(log, clock)
    assert offsets_on_disk(log) == list(range(8, 17))


def test_a_segment_holding_a_future_timestamp_waits_for_it(tmp_path) -> None:
    clock = Clock(NOW)
    log = open_log(tmp_path / "t-0", LOG, time_ms=clock)
    write(log, 3, NOW - 10 * HOUR)  # old records...
    write(log, 1, NOW + 50 * 60_000)  # ...and one stamped 50 minutes ahead: [0-3]
    write(log, 4, NOW - 10 * HOUR)  # [4-7]: old only
    write(log, 1, NOW + 55 * 60_000)  # active [8] (message.timestamp.after.max.ms: 1 h)
    clock.now = NOW + 100 * 60_000
    # [0-3]'s largest timestamp is only 50 minutes old; deletion stops at the first
    # segment that must stay, so [4-7] waits behind it, as in Kafka.
    assert log.delete_old_segments() == 0
    clock.now = NOW + 50 * 60_000 + HOUR + 1
    assert log.delete_old_segments() == 2
    assert offsets_on_disk(log) == [8]


def test_log_append_time_follows_the_clock_back_and_the_time_index_stays_ordered(
    tmp_path,
) -> None:
    clock = Clock(NOW)
    config = dataclasses.replace(
        LOG, message_timestamp_type=LOG_APPEND_TIME, index_interval_bytes=1, retention_ms=-1
    )
    log = open_log(tmp_path / "t-0", config, time_ms=clock)
    stamps = []
    for step in (0, 1000, 2000, -HOUR, -HOUR + 1000, 5 * HOUR, 5 * HOUR + 1000, 10, 20, 30):
        clock.now = NOW + step
        stamps.append(clock.now)
        write(log, 1, 0)  # whatever the client says: the broker stamps its own time
    assert [r.timestamp for r in stored_records(log)] == stamps
    # The first record at or after a time is found however the clock moved.
    assert log.offset_for_timestamp(NOW + 5 * HOUR).offset == 5
    log = reopened(log, clock)  # a reload checks every index (CorruptIndexError otherwise)
    assert [r.timestamp for r in stored_records(log)] == stamps
    assert log.offset_for_timestamp(NOW + 5 * HOUR).offset == 5
    assert log.max_timestamp_and_offset().offset == 6


def test_segment_ms_rolls_by_elapsed_time_and_a_clock_going_back_only_delays_it(
    tmp_path,
) -> None:
    clock = Clock(NOW)
    config = dataclasses.replace(LOG, segment_bytes=1 << 20, segment_ms=60_000, retention_ms=-1)
    log = open_log(tmp_path / "t-0", config, time_ms=clock)
    write(log, 1, NOW)
    clock.now = NOW - HOUR  # back: the segment is "younger than zero", no roll
    write(log, 1, clock.now)
    assert len(log.segments) == 1
    clock.now = NOW + 61_000  # past segment.ms since its first batch
    write(log, 1, clock.now)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log = reopened(log, clock)
    assert offsets_on_disk(log) == [0, 1, 2]
