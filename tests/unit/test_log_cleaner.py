"""Log compaction: what the cleaner keeps, when it runs, and how it shares the log.

Records are mostly single-record batches with 2-byte keys and 3-byte values,
so every batch has the size ``ONE``, a segment holds exactly ``PER_SEGMENT``
of them, and the survivors of a round can be listed offset by offset.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from kpybroker.log.log_cleaner import LogCleaner
from kpybroker.log.log_config import CleanerConfig, LogConfig, LogManagerConfig
from kpybroker.log.log_manager import LogManager
from kpybroker.log.partition_log import PartitionLog
from kpybroker.log.produce_validator import RecordValidationError
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.records import (
    Record,
    build_retained_batch,
    iter_batches,
    parse_header,
    validate_batch,
)
from tests.helpers.log_builders import (
    NOW,
    ONE,
    PER_SEGMENT,
    Clock,
    append_committed,
    keyed,
    log_bytes,
    log_manager,
    records,
    stored_pairs,
)

TP = ("t", 0)
COMPACTED = LogConfig(
    segment_bytes=PER_SEGMENT * ONE,
    cleanup_policy=("compact",),
    retention_ms=-1,
    min_cleanable_dirty_ratio=0.01,
)


def compacted(**changes: object) -> LogConfig:
    return dataclasses.replace(COMPACTED, **changes)


class Compacting:
    """A compacted partition ``t-0`` in ``log_dir``, a settable clock, and a cleaner for it."""

    def __init__(self, log_dir: Path, config: LogConfig, cleaner: CleanerConfig) -> None:
        self.log_dir = log_dir
        self.clock = Clock(NOW)
        self.log = PartitionLog(log_dir / "t-0", config, time_ms=self.clock)
        self.cleaner = LogCleaner(cleaner, [log_dir], lambda: [(TP, self.log, log_dir)], self.clock)

    def write(self, *pairs: tuple[bytes | None, bytes | None], timestamp: int = NOW) -> None:
        """One single-record batch per pair, each committed."""
        for key, value in pairs:
            append_committed(self.log, keyed((key, value), timestamp=timestamp))

    def clean(self) -> bool:
        return asyncio.run(self.cleaner.clean_filthiest())

    def offsets(self) -> list[int]:
        return [offset for offset, _, _ in stored_pairs(self.log)]


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Compacting]]:
    made: list[Compacting] = []

    def factory(config: LogConfig = COMPACTED, cleaner: CleanerConfig | None = None) -> Compacting:
        made.append(Compacting(tmp_path, config, cleaner or CleanerConfig()))
        return made[-1]

    yield factory
    for setup in made:
        setup.cleaner.shutdown()
        setup.log.release_descriptors()


def versions(count: int, keys: int = 3, first: int = 0) -> list[tuple[bytes, bytes]]:
    """Record i (from ``first``) is key ``k{i % keys}`` with value ``v{i:02}``."""
    return [(f"k{i % keys}".encode(), f"v{i:02d}".encode()) for i in range(first, first + count)]


def test_the_newest_record_of_each_key_stays_at_its_offset(make) -> None:
    s = make()
    s.write(*versions(20))  # segments [0-3] [4-7] [8-11] [12-15], active [16-19]
    assert s.clean()
    # Below the active segment only k1@13, k2@14 and k0@15 are the newest of their key.
    assert s.offsets() == [13, 14, 15, 16, 17, 18, 19]
    assert stored_pairs(s.log)[:3] == [
        (13, b"k1", b"v13"),
        (14, b"k2", b"v14"),
        (15, b"k0", b"v15"),
    ]
    data = log_bytes(s.log)
    for pos, _ in iter_batches(data):
        validate_batch(data, pos, from_client=False)
    assert (s.log_dir / "cleaner-offset-checkpoint").read_bytes() == b"0\n1\nt 0 16\n"
    # Offsets never move: reading at a hole returns the next record that is there.
    assert records(s.log.read(0, 10, 20))[0].offset == 13
    assert not s.clean()  # nothing dirty is left below the active segment


def test_a_later_round_cleans_the_new_dirty_part_and_merges_shrunk_segments(make) -> None:
    s = make()
    s.write(*versions(20))
    s.clean()
    s.write(*versions(8, keys=2))  # offsets 20-27: segments [16-19] [20-23], active [24-27]
    segments_before = len(s.log.segments)
    assert s.clean()
    # k2@17 is still the newest k2; k0@22 and k1@23 replace every earlier k0 and k1.
    assert s.offsets() == [17, 22, 23, 24, 25, 26, 27]
    assert len(s.log.segments) < segments_before  # the emptied segments became one
    assert (s.log_dir / "cleaner-offset-checkpoint").read_bytes() == b"0\n1\nt 0 24\n"


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_rewritten_batches_keep_codec_offsets_timestamps_and_valid_crcs(make, codec) -> None:
    s = make(compacted(segment_bytes=100_000))
    for i, first_key in enumerate((0, 1, 2)):  # keys k0-k4, then k1-k4, then k2-k4
        pairs = [(f"k{j}".encode(), f"batch{i}".encode() * 10) for j in range(first_key, 5)]
        append_committed(s.log, keyed(*pairs, timestamp=NOW - 10 + i, compression=codec))
    s.log.roll()
    s.write((b"zz", b"zzz"))
    assert s.clean()
    data = log_bytes(s.log)
    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.last_offset, h.record_count) for h in headers] == [
        (0, 4, 1),  # k0 of the first batch: the batch keeps its offset range
        (5, 8, 1),  # k1 of the second
        (9, 11, 3),  # the third is copied whole
        (12, 12, 1),
    ]
    assert [h.compression for h in headers[:3]] == [codec] * 3
    kept = records(s.log.read(0, 100_000, 12))
    assert [(r.offset, r.key, r.timestamp) for r in kept] == [
        (0, b"k0", NOW - 10),
        (5, b"k1", NOW - 9),
        (9, b"k2", NOW - 8),
        (10, b"k3", NOW - 8),
        (11, b"k4", NOW - 8),
    ]
    for pos, header in list(iter_batches(data))[:2]:
        # An independent decoder (kafka-python) reads the rewritten batch the same way.
        theirs = DefaultRecordBatch(bytes(data[pos : pos + header.size]))
        assert theirs.validate_crc()
        assert [(r.offset, r.key) for r in theirs] == [
            (header.base_offset, f"k{pos and 1}".encode())
        ]


def test_tombstones_stay_until_delete_retention_ms_has_passed(make) -> None:
    s = make(compacted(delete_retention_ms=1000))
    s.write((b"ka", b"v01"), (b"kb", b"v01"), (b"ka", None), (b"kb", b"v02"))  # [0-3]
    s.write(*[(b"kc", f"v{i:02d}".encode()) for i in range(5)])  # [4-7], active [8]
    assert s.clean()
    assert s.offsets() == [2, 3, 7, 8]
    horizon_batch = next(iter_batches(log_bytes(s.log)))[1]
    assert horizon_batch.delete_horizon_ms == NOW + 1000  # set by the round that first kept it
    assert records(s.log.read(2, 100, 9))[0].timestamp == NOW  # the record keeps its time

    s.clock.advance(500)  # within the horizon: a new round keeps the tombstone
    s.write(*[(b"kc", f"w{i:02d}".encode()) for i in range(4)])
    assert s.clean()
    assert s.offsets() == [2, 3, 11, 12]

    s.clock.advance(600)  # past it: the next round drops it
    s.write(*[(b"kc", f"x{i:02d}".encode()) for i in range(4)])
    assert s.clean()
    assert s.offsets() == [3, 15, 16]


def test_min_cleanable_dirty_ratio_decides_when_a_round_is_due(make) -> None:
    s = make(compacted(min_cleanable_dirty_ratio=0.6))
    s.write(*versions(16))  # dirty [0-11] against nothing clean: ratio 1.0
    assert s.clean()
    assert s.offsets() == [9, 10, 11, 12, 13, 14, 15]
    s.write(*versions(4, keys=1))  # dirty [12-15] (4 batches) against 3 clean ones: 4/7
    assert not s.clean()
    s.log.config = compacted(min_cleanable_dirty_ratio=0.5)
    assert s.clean()


def test_max_compaction_lag_forces_a_round_below_the_ratio(make) -> None:
    s = make(compacted(min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=60_000))
    s.write(*versions(8), timestamp=NOW - 10_000)
    assert not s.clean()  # a ratio can never be above 1.0, and no record is overdue yet
    s.clock.advance(60_000)
    assert s.clean()
    assert s.offsets() == [1, 2, 3, 4, 5, 6, 7]


def test_min_compaction_lag_keeps_young_segments_dirty(make) -> None:
    s = make(compacted(min_compaction_lag_ms=5_000))
    s.write(*versions(4), timestamp=NOW - 10_000)  # [0-3], old enough
    s.write(*versions(4, first=4), timestamp=NOW - 1_000)  # [4-7], too young
    s.write((b"k0", b"v99"))  # active [8]
    assert s.clean()
    assert s.offsets() == [1, 2, 3, 4, 5, 6, 7, 8]  # only k0@0 went: k0@3 replaced it
    assert (s.log_dir / "cleaner-offset-checkpoint").read_bytes() == b"0\n1\nt 0 4\n"


def test_an_active_producers_last_batch_stays_as_an_empty_batch(make, tmp_path) -> None:
    s = make()
    for sequence in (0, 1):
        pair = (b"kx", b"v01")
        append_committed(s.log, keyed(pair, timestamp=NOW, producer_id=7, base_sequence=sequence))
    s.write((b"kx", b"v02"), *[(b"ky", f"v{i:02d}".encode()) for i in range(6)])  # active [8]
    assert s.clean()
    headers = [h for _, h in iter_batches(log_bytes(s.log))]
    assert [(h.base_offset, h.record_count, h.producer_id) for h in headers] == [
        (1, 0, 7),  # emptied, kept: it holds producer 7's last sequence
        (2, 1, -1),
        (7, 1, -1),
        (8, 1, -1),
    ]
    # After a crash that also lost the producer snapshots, the state is replayed from
    # the log, and the empty batch still tells where producer 7's sequence stands.
    s.log.release_descriptors()
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    s.log = PartitionLog(tmp_path / "t-0", COMPACTED, time_ms=s.clock)
    retry = s.log.append(keyed((b"kx", b"v01"), producer_id=7, base_sequence=1), 0)
    assert retry.duplicate and retry.base_offset == 1
    with pytest.raises(KafkaError) as info:
        s.log.append(keyed((b"kx", b"v01"), producer_id=7, base_sequence=5), 0)
    assert info.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert s.log.append(keyed((b"kx", b"v03"), producer_id=7, base_sequence=2), 0).base_offset == 9


def test_keyless_records_are_refused_by_a_compacted_log(make) -> None:
    s = make()
    with pytest.raises(RecordValidationError) as info:
        s.log.append(keyed((b"k0", b"v00"), (None, b"v01"), (None, b"v02")), 0)
    error = info.value
    message = "Compacted topic cannot accept message without key in topic partition t-0"
    assert error.code == ErrorCode.INVALID_RECORD
    assert error.record_errors == [(1, message), (2, message)]
    assert error.message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=2, message='{message}')]"
    )
    assert s.log.log_end_offset == 0


def test_keyless_records_written_before_the_policy_changed_are_dropped(make) -> None:
    s = make(compacted(cleanup_policy=("delete",)))
    s.write((None, b"v00"), (b"k0", b"v01"), (None, b"v02"), (b"k0", b"v03"), (b"k1", b"v04"))
    s.log.config = COMPACTED
    assert s.clean()
    assert s.offsets() == [3, 4]


def test_a_checkpoint_below_the_log_start_is_reset(make) -> None:
    s = make(compacted(cleanup_policy=("compact", "delete")))
    s.write(*versions(12))
    assert s.clean()  # checkpoint 8
    s.log.delete_records(10)
    s.write(*versions(4, first=12))
    assert s.clean()
    assert (s.log_dir / "cleaner-offset-checkpoint").read_bytes() == b"0\n1\nt 0 12\n"


def test_cleaning_runs_beside_appends_and_reads_without_stalling_them(make) -> None:
    s = make(compacted(segment_bytes=200 * ONE))
    s.write(*versions(3000, keys=50))

    async def produce_and_fetch_while_cleaning() -> tuple[list[int], float]:
        task = asyncio.create_task(s.cleaner.clean_filthiest())
        appended, longest_gap = [], 0.0
        while not task.done():
            started = time.monotonic()
            await asyncio.sleep(0)
            longest_gap = max(longest_gap, time.monotonic() - started)
            key = f"n{len(appended) % 7}".encode()
            append_committed(s.log, keyed((key, b"new")))
            appended.append(s.log.log_end_offset - 1)
            assert records(s.log.read(appended[0], 100, s.log.log_end_offset))
        assert await task
        return appended, longest_gap

    appended, longest_gap = asyncio.run(produce_and_fetch_while_cleaning())
    assert len(appended) > 10  # the round really overlapped the appends
    assert longest_gap < 0.5
    kept = stored_pairs(s.log)
    assert [o for o, _, _ in kept if o >= 3000] == appended
    assert {k: v for _, k, v in kept if k.startswith(b"k")} == dict(versions(3000, keys=50))


def busy_manager(tmp_path: Path) -> tuple[LogManager, PartitionLog]:
    """A log manager whose partition t-0 has enough to clean to keep a round busy a while."""
    settings = LogManagerConfig(cleaner=CleanerConfig(backoff_ms=10))
    logs = log_manager(tmp_path, lambda _t: COMPACTED, settings=settings)
    plog = logs.get_or_create("t", 0, None, compacted(segment_bytes=200 * ONE))
    for pairs in versions(2000, keys=40):
        append_committed(plog, keyed(pairs))
    return logs, plog


def interrupt_a_round(logs: LogManager, interrupt: Callable[[], object]) -> bool:
    """Start a round, ``interrupt`` it once the worker thread has its job, finish it."""
    cleaner = logs.cleaner
    assert cleaner is not None

    async def run() -> bool:
        task = asyncio.create_task(cleaner.clean_filthiest())
        while not cleaner.is_cleaning(TP):
            await asyncio.sleep(0)
        interrupt()  # waits for the worker thread to let go of the segments
        return await task

    return asyncio.run(run())


def test_deleting_a_partition_aborts_its_round(tmp_path) -> None:
    logs, _ = busy_manager(tmp_path)
    assert interrupt_a_round(logs, lambda: logs.delete_partition("t", 0))
    assert not any(p.name.startswith("t-0") for p in tmp_path.iterdir())
    logs.close()
    assert (tmp_path / "cleaner-offset-checkpoint").read_bytes() == b"0\n0\n"


def test_truncating_a_log_aborts_its_round(tmp_path) -> None:
    logs, plog = busy_manager(tmp_path)
    assert interrupt_a_round(logs, lambda: plog.truncate_to(1000))
    assert [o for o, _, _ in stored_pairs(plog)] == list(range(1000))  # nothing swapped in
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    logs.close()


def test_consumer_offsets_are_compacted_and_compacted_retention_is_the_cleaners(tmp_path) -> None:
    configs = {
        "__consumer_offsets": COMPACTED,
        "both": compacted(cleanup_policy=("compact", "delete"), retention_bytes=3 * ONE),
    }
    settings = LogManagerConfig(retention_check_interval_ms=1)
    logs = log_manager(tmp_path, configs.get, settings=settings)
    offsets = logs.get_or_create("__consumer_offsets", 7, None, COMPACTED)
    both = logs.get_or_create("both", 0, None, configs["both"])
    for pairs in versions(12, keys=2):
        append_committed(offsets, keyed(pairs))
        append_committed(both, keyed(pairs))
    logs.periodic(NOW + 10)  # the retention task leaves compacted logs alone
    assert len(both.segments) == 3
    assert asyncio.run(logs.cleaner.clean_filthiest())
    assert asyncio.run(logs.cleaner.clean_filthiest())
    assert not asyncio.run(logs.cleaner.clean_filthiest())
    assert [o for o, _, _ in stored_pairs(offsets)] == [6, 7, 8, 9, 10, 11]
    logs.cleaner.delete_old_segments()  # what the cleaner's loop does after each round
    assert both.log_start_offset == 8 and both.segments[0].base_offset == 8
    logs.close()
    assert (tmp_path / "cleaner-offset-checkpoint").read_bytes() == (
        b"0\n2\n__consumer_offsets 7 8\nboth 0 8\n"
    )


def test_without_a_cleaner_compacted_logs_keep_every_segment(tmp_path) -> None:
    settings = LogManagerConfig(retention_check_interval_ms=1, cleaner=CleanerConfig(enable=False))
    config = compacted(cleanup_policy=("compact", "delete"), retention_bytes=ONE)
    logs = log_manager(
        tmp_path,
        lambda _t: config,
        settings=settings,
    )
    plog = logs.get_or_create("t", 0, None, config)
    for pairs in versions(12):
        append_committed(plog, keyed(pairs))
    logs.periodic(NOW + 10)
    assert logs.cleaner is None and plog.log_start_offset == 0 and len(plog.segments) == 3
    logs.close()


def test_a_record_outside_its_batchs_offset_range_is_kept_as_the_latest_of_its_key(make) -> None:
    """A malformed batch (offsets 0-1, but its second record claims offset 3) written before
    the policy changed: the cleaner judges it record by record, as Kafka does, and does not
    drop it for holding no latest offset in its own range."""
    s = make(compacted(cleanup_policy=("delete",)))
    header = parse_header(keyed((b"k0", b"v00"), (b"k1", b"v01")))
    odd = build_retained_batch(
        header, [Record(0, NOW, b"k0", b"v00", ()), Record(3, NOW, b"k1", b"v01", ())]
    )
    append_committed(s.log, bytearray(odd))
    s.write((b"k0", b"v02"), (b"k2", b"v03"), *versions(4, keys=1, first=4))
    s.log.config = COMPACTED
    assert s.clean()
    assert (3, b"k1", b"v01") in stored_pairs(s.log)


def test_the_cleaners_view_holds_only_compacted_logs(tmp_path) -> None:
    """Its passes each log.cleaner.backoff.ms list the logs they concern, not every log: a
    log that does not compact leaves the uncleanable set and the cleaner's checkpoint."""
    configs = {"kept": COMPACTED, "deleted": LogConfig()}
    logs = log_manager(tmp_path, configs.get)
    kept = logs.get_or_create("kept", 0, None, COMPACTED)
    logs.get_or_create("deleted", 0, None, LogConfig())
    manager = logs.cleaner.manager
    manager.uncleanable = {("kept", 0), ("deleted", 0)}
    manager.forget_uncleanable()
    assert manager.uncleanable == {("kept", 0)}
    manager.update_checkpoint(tmp_path, ("deleted", 0), 5)
    manager.update_checkpoint(tmp_path, ("kept", 0), kept.log_end_offset)
    assert manager.checkpointed(tmp_path, ("deleted", 0)) is None
    assert manager.checkpointed(tmp_path, ("kept", 0)) == kept.log_end_offset
    logs.close()
