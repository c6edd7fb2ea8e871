"""Compaction removes transaction markers as Kafka's cleaner does (KIP-534 delete horizons).

A marker may go once no data of its transaction is left before it: the first
pass that finds it so rewrites its batch with the delete-horizon attribute bit
and baseTimestamp = now + ``delete.retention.ms``, and a pass at or after that
horizon drops it. Aborted data goes at once, and its ``.txnindex`` entry as
soon as none of it is left. The scenarios are those of Kafka's
``LogCleanerTest`` (testCommitMarkerRemoval, testAbortMarkerRemoval, ...), on
real segment files, with the same outcomes; each pass is one
``LogCleaner.clean`` up to the active segment at a given time, as Kafka's
``Cleaner.doClean(LogToClean, currentTime)``. The bytes of a marker given its
horizon are checked against those Kafka's ``MemoryRecords.filterTo`` writes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch

from kpybroker.log.compaction_schedule import log_to_clean
from kpybroker.log.log_cleaner import LogCleaner
from kpybroker.log.log_config import CleanerConfig, LogConfig
from kpybroker.log.offset_map import ENTRY_OVERHEAD
from kpybroker.log.partition_log import PartitionLog
from kpybroker.log.transaction_index import AbortedTxn
from kpybroker.protocol.records import (
    DELETE_HORIZON_MASK,
    BatchHeader,
    NewRecord,
    build_batch,
    iter_batches,
    iter_records,
    validate_batch,
)
from tests.helpers.coordinator_driver import Driver
from tests.helpers.log_builders import (
    NOW,
    Clock,
    append_committed,
    keyed,
    log_bytes,
    log_manager,
)
from tests.unit.test_coordinator_offsets import committed
from tests.unit.test_txn_offsets import reload

TP = ("t", 0)
RETENTION = 86_400_000  # delete.retention.ms, Kafka's default
CONFIG = LogConfig(
    segment_bytes=1 << 20,  # segments end where a test rolls
    cleanup_policy=("compact",),
    retention_ms=-1,
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=RETENTION,
)


class Log:
    """Partition ``t-0`` in ``root``, a settable clock and a cleaner, with Kafka's test helpers."""

    def __init__(self, root: Path, cleaner: CleanerConfig | None = None) -> None:
        self.root = root
        self.clock = Clock(NOW)
        self.cleaner_config = cleaner or CleanerConfig()
        self.sequences: dict[int, int] = {}
        self.plog = PartitionLog(root / "t-0", CONFIG, time_ms=self.clock)
        self.cleaner = self._new_cleaner()

    def _new_cleaner(self) -> LogCleaner:
        return LogCleaner(
            self.cleaner_config, [self.root], lambda: [(TP, self.plog, self.root)], self.clock
        )

    def txn(self, pid: int, *keys: int, epoch: int = 0) -> None:
        """One transactional batch of ``pid`` with a record per key (value = key)."""
        sequence = self.sequences.get(pid, 0)
        records = [NewRecord(str(k).encode(), str(k).encode(), (), self.clock()) for k in keys]
        batch = build_batch(
            records,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=sequence,
            transactional=True,
            timestamp=self.clock(),
        )
        self.sequences[pid] = sequence + len(keys)
        append_committed(self.plog, bytearray(batch))

    def record(self, key: int, value: int | None) -> None:
        """A plain record; ``value`` None writes a tombstone."""
        encoded = None if value is None else str(value).encode()
        append_committed(self.plog, keyed((str(key).encode(), encoded), timestamp=NOW))

    def marker(self, pid: int, committed: bool, epoch: int = 0) -> None:
        self.plog.append_txn_marker(pid, epoch, 0, committed, 0)
        self.plog.update_high_watermark(self.plog.log_end_offset)

    def clean(self, now: int, first_dirty: int = 0) -> int:
        """One pass at time ``now`` mapping ``[first_dirty, active segment)``; the end offset.

        Kafka's tests pass the previous pass's end offset, and their fake offset map
        keeps its latest offset across passes, so a pass with nothing dirty still
        rewrites the log; with a real map (Kafka's or this one) it would do nothing.
        So passes here map from the log start, which gives the same result: the
        clean part holds each key once.
        """
        self.clock.now = now
        plog = self.plog
        uncleanable = plog.active_segment.base_offset
        ltc = log_to_clean(TP, plog, self.root, first_dirty, uncleanable, False)
        return asyncio.run(self.cleaner.clean(ltc))

    def two_passes(self, now: int) -> int:
        """Kafka's ``runTwoPassClean``: a pass at ``now``, then one past the delete horizon."""
        self.clean(now)
        return self.clean(now + RETENTION + 1)

    def restart(self) -> None:
        """A clean shutdown and a new start of the log and the cleaner."""
        self.cleaner.shutdown()
        end = self.plog.log_end_offset
        self.plog.close()
        self.plog = PartitionLog(
            self.root / "t-0",
            CONFIG,
            time_ms=self.clock,
            recovery_point=end,
            high_watermark=end,
            clean_shutdown=True,
        )
        self.cleaner = self._new_cleaner()

    def headers(self) -> list[BatchHeader]:
        return [h for _, h in iter_batches(log_bytes(self.plog))]

    def batch_bytes(self) -> list[bytes]:
        data = log_bytes(self.plog)
        return [data[pos : pos + h.size] for pos, h in iter_batches(data)]

    def offsets(self) -> list[int]:
        """Kafka's ``offsetsInLog``: the offset of every record, markers included."""
        return [r.offset for b in self.batch_bytes() for r in iter_records(b)]

    def keys(self) -> list[int]:
        """Kafka's ``keysInLog``: the keys of the data records."""
        return [
            int(r.key)
            for b, h in zip(self.batch_bytes(), self.headers(), strict=True)
            if not h.is_control
            for r in iter_records(b)
        ]

    def last_offsets(self) -> list[int]:
        """Kafka's ``lastOffsetsPerBatchInLog``."""
        return [h.last_offset for h in self.headers()]

    def aborted(self) -> list[AbortedTxn]:
        return self.plog.collect_aborted_transactions(0, self.plog.log_end_offset)


@pytest.fixture
def make(tmp_path: Path) -> Iterator:
    made: list[Log] = []

    def factory(cleaner: CleanerConfig | None = None) -> Log:
        made.append(Log(tmp_path, cleaner))
        return made[-1]

    yield factory
    for setup in made:
        setup.cleaner.shutdown()
        setup.plog.release_descriptors()


LATER = NOW + 1_000_000  # the time of the passes that set horizons


def test_a_commit_marker_goes_only_once_its_data_is_gone_and_its_horizon_passed(make) -> None:
    log = make()
    log.txn(1, 1)  # 0
    log.txn(1, 2, 3)  # 1-2
    log.marker(1, True)  # 3
    log.txn(1, 2)  # 4
    log.marker(1, True)  # 5
    log.plog.roll()

    # Both transactions still have records (key 1 at 0, key 3 at 2, key 2 at 4).
    log.clean(LATER)
    assert log.keys() == [1, 3, 2]
    assert log.offsets() == [0, 2, 3, 4, 5]
    assert all(h.delete_horizon_ms is None for h in log.headers())

    log.txn(1, 1, 3)  # 6-7: supersedes the first transaction's last records
    log.marker(1, True)  # 8
    log.plog.roll()

    # The marker at 3 stays: its transaction was read in this pass before being emptied.
    log.clean(LATER)
    assert log.keys() == [2, 1, 3]
    assert log.offsets() == [3, 4, 5, 6, 7, 8]
    marker = log.headers()[0]
    assert (marker.base_offset, marker.is_control) == (3, True)
    assert marker.delete_horizon_ms is None

    # Now its transaction has nothing left: this pass sets its delete horizon ...
    log.clean(LATER)
    assert log.offsets() == [3, 4, 5, 6, 7, 8]
    assert log.headers()[0].delete_horizon_ms == LATER + RETENTION
    # ... a pass just before the horizon keeps it ...
    log.clean(LATER + RETENTION - 1)
    assert log.offsets() == [3, 4, 5, 6, 7, 8]
    # ... and the first pass at the horizon removes it. The other markers stay.
    log.clean(LATER + RETENTION)
    assert log.keys() == [2, 1, 3]
    assert log.offsets() == [4, 5, 6, 7, 8]
    assert [h.base_offset for h in log.headers() if h.is_control] == [5, 8]


def test_aborted_data_goes_first_then_its_index_entry_then_its_marker(make) -> None:
    log = make()
    log.txn(1, 1)  # 0
    log.txn(1, 2, 3)  # 1-2
    log.marker(1, False)  # 3: aborts 0-2
    log.txn(1, 3)  # 4
    log.marker(1, True)  # 5
    log.plog.roll()
    entry = AbortedTxn(1, 0, 3, 4)
    assert log.aborted() == [entry]

    # The aborted records are removed; the marker and its index entry stay this pass.
    log.clean(LATER)
    assert log.keys() == [3]
    assert log.offsets() == [3, 4, 5]
    assert log.aborted() == [entry]
    assert log.headers()[0].delete_horizon_ms is None

    # Nothing of the transaction is left: the entry goes, the marker gets its horizon.
    log.clean(LATER)
    assert log.offsets() == [3, 4, 5]
    assert log.aborted() == []
    assert log.headers()[0].delete_horizon_ms == LATER + RETENTION
    assert not any(p.stat().st_size for p in log.plog.directory.glob("*.txnindex"))

    # Past the horizon the marker goes too.
    log.clean(LATER + RETENTION)
    assert log.keys() == [3]
    assert log.offsets() == [4, 5]


def test_a_marker_whose_transaction_still_has_records_stays(make) -> None:
    log = make()
    log.txn(1, 1)  # 0: stays, key 1 is never written again
    log.plog.roll()
    log.marker(1, True)  # 1, in another segment
    log.record(2, 2)  # 2
    log.record(2, 3)  # 3
    log.plog.roll()
    # However many passes and however late: the commit marker's transaction holds key 1.
    log.two_passes(LATER)
    log.clean(LATER + 10 * RETENTION)
    assert log.offsets() == [0, 1, 3]
    assert [(h.base_offset, h.is_control) for h in log.headers()] == [
        (0, False),
        (1, True),
        (3, False),
    ]
    assert all(h.delete_horizon_ms is None for h in log.headers())


def test_a_marker_stays_while_its_transactions_emptied_batch_does(make) -> None:
    """Kafka's testAbortMarkerRetentionWithEmptyBatch: the producer's last data batch stays as
    an empty batch (it holds the last sequence), and the abort marker after it stays too."""
    log = make()
    log.txn(1, 2, 3)  # 0-1
    log.marker(1, False)  # 2
    log.plog.roll()
    entry = [AbortedTxn(1, 0, 2, 3)]

    log.clean(LATER)
    assert (log.aborted(), log.keys(), log.offsets(), log.last_offsets()) == (
        entry,
        [],
        [2],
        [1, 2],
    )

    log.two_passes(LATER)
    assert (log.aborted(), log.keys(), log.offsets(), log.last_offsets()) == (
        entry,
        [],
        [2],
        [1, 2],
    )

    log.txn(1, 1)  # 3: the producer's last batch now
    log.plog.roll()
    log.clean(LATER)
    # The marker stays: the empty batch was read in this pass (and is gone now).
    assert (log.aborted(), log.keys(), log.offsets(), log.last_offsets()) == (
        entry,
        [1],
        [2, 3],
        [2, 3],
    )

    log.two_passes(LATER)
    assert (log.aborted(), log.keys(), log.offsets(), log.last_offsets()) == ([], [1], [3], [3])


def test_an_emptied_control_batch_that_holds_the_producer_epoch_stays(make) -> None:
    """Kafka's testCleanEmptyControlBatch: a marker with no transaction is removed down to an
    empty batch, kept because it is the producer's last entry (its epoch)."""
    log = make()
    log.marker(1, True)  # 0
    log.record(2, 2)  # 1
    log.record(3, 3)  # 2
    log.plog.roll()
    log.two_passes(LATER)
    assert (log.keys(), log.offsets(), log.last_offsets()) == ([2, 3], [1, 2], [0, 1, 2])
    empty = log.headers()[0]
    assert (empty.is_control, empty.record_count, empty.base_timestamp) == (True, 0, -1)
    assert empty.delete_horizon_ms is None  # an empty header, as Kafka's writeEmptyHeader
    log.clean(2**62)
    assert (log.keys(), log.offsets(), log.last_offsets()) == ([2, 3], [1, 2], [0, 1, 2])


def test_commit_markers_go_when_their_emptied_batches_no_longer_hold_sequences(make) -> None:
    """Kafka's testCommitMarkerRetentionWithEmptyBatch."""
    log = make()
    log.txn(1, 2, 3)  # 0-1
    log.plog.roll()
    log.txn(2, 2, 3)  # 2-3
    log.marker(2, True)  # 4
    log.plog.roll()
    log.record(2, 2)  # 5
    log.record(3, 3)  # 6
    log.marker(1, True)  # 7
    log.plog.roll()

    log.clean(LATER)
    assert (log.keys(), log.offsets()) == ([2, 3], [4, 5, 6, 7])
    assert log.last_offsets() == [1, 3, 4, 5, 6, 7]
    log.clean(LATER)
    assert (log.keys(), log.offsets()) == ([2, 3], [4, 5, 6, 7])
    assert log.last_offsets() == [1, 3, 4, 5, 6, 7]

    log.txn(2, 1)  # 8
    log.marker(2, True)  # 9
    log.plog.roll()
    log.clean(LATER)
    assert (log.keys(), log.offsets()) == ([2, 3, 1], [4, 5, 6, 7, 8, 9])
    assert log.last_offsets() == [1, 4, 5, 6, 7, 8, 9]

    log.two_passes(LATER)
    assert (log.keys(), log.offsets()) == ([2, 3, 1], [5, 6, 7, 8, 9])
    assert log.last_offsets() == [1, 5, 6, 7, 8, 9]


def test_passes_over_part_of_the_log_keep_the_index_of_aborted_data_still_there(make) -> None:
    """Kafka's testMultiPassSegmentCleaningWithAbortedTransactions: an offset map of three keys
    maps a little of the log each pass; every pass still rewrites the whole log."""
    budget = 3 * (1 + ENTRY_OVERHEAD)  # three one-byte keys fill it
    log = make(CleanerConfig(dedupe_buffer_size=budget, dedupe_buffer_load_factor=1.0))
    log.txn(1, 1, 2)  # 0-1
    log.txn(2, 2, 3)  # 2-3
    log.txn(1, 3, 4)  # 4-5
    log.marker(1, True)  # 6
    log.marker(2, True)  # 7
    log.txn(1, 2, 3)  # 8-9
    log.marker(1, False)  # 10
    log.txn(2, 4, 5)  # 11-12
    log.txn(1, 5, 6)  # 13-14
    log.marker(1, True)  # 15
    log.marker(2, False)  # 16
    log.txn(2, 6, 7)  # 17-18
    log.marker(2, True)  # 19
    log.plog.roll()
    assert log.aborted() == [AbortedTxn(1, 8, 10, 11), AbortedTxn(2, 11, 16, 17)]

    def batches() -> list[int]:
        return [h.base_offset for h in log.headers()]

    dirty = log.clean(LATER)
    assert dirty == 4
    assert batches() == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert log.offsets() == [0, 2, 3, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert log.aborted() == [AbortedTxn(1, 8, 10, 11), AbortedTxn(2, 11, 16, 17)]

    dirty = log.clean(LATER, dirty)
    assert dirty == 14
    assert batches() == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert log.offsets() == [0, 2, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert log.aborted() == []

    dirty = log.clean(LATER + RETENTION, dirty)
    assert dirty == 20
    assert batches() == [0, 2, 4, 6, 7, 13, 15, 17, 19]
    assert log.offsets() == [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]
    assert log.aborted() == []


# Kafka 4.4's own bytes for this commit marker (producer 7, epoch 0, offset 0, leader epoch 0,
# coordinator epoch 0, written at NOW - 5000): ``MemoryRecords.withEndTransactionMarker``, and
# what ``MemoryRecords.filterTo`` writes for it when the cleaner's filter reports a marker of an
# empty transaction at LATER with delete.retention.ms 86400000.
KAFKA_MARKER = (
    "0000000000000000000000420000000002"
    "2206436f0030000000000000018bcfe554780000018bcfe5547800000000000000070000ffffffff"
    "000000012000000008000000010c00000000000000"
)
KAFKA_MARKER_WITH_HORIZON = (
    "0000000000000000000000450000000002"
    "ce8e377a0070000000000000018bd51b06400000018bcfe5547800000000000000070000ffffffff"
    "0000000126008fc7ad530008000000010c00000000000000"
)


def test_the_delete_horizon_is_written_as_kafka_writes_it(make) -> None:
    log = make()
    log.clock.now = NOW - 5_000
    log.marker(7, True)  # 0: a marker with no transaction, written at NOW - 5000
    log.record(1, 1)  # 1
    log.record(1, 2)  # 2
    log.plog.roll()
    before = log.headers()[0]
    assert log.batch_bytes()[0].hex() == KAFKA_MARKER
    log.clean(LATER)

    after = log.headers()[0]
    assert after.attributes == before.attributes | DELETE_HORIZON_MASK == 0x70
    assert after.base_timestamp == after.delete_horizon_ms == LATER + RETENTION
    assert after.max_timestamp == before.max_timestamp == NOW - 5_000
    unchanged = ("base_offset", "last_offset_delta", "partition_leader_epoch", "producer_id")
    unchanged += ("producer_epoch", "base_sequence", "record_count")
    assert [getattr(after, f) for f in unchanged] == [getattr(before, f) for f in unchanged]
    data = log.batch_bytes()[0]
    validate_batch(data, 0, from_client=False)  # a valid CRC over the new header
    # The record keeps its timestamp: its delta is now relative to the horizon.
    (record,) = iter_records(data)
    assert record.timestamp == NOW - 5_000
    theirs = DefaultRecordBatch(data)  # an independent decoder reads the same
    assert theirs.validate_crc() and theirs.is_control_batch and theirs.is_transactional
    assert [r.timestamp for r in theirs] == [NOW - 5_000]
    assert data.hex() == KAFKA_MARKER_WITH_HORIZON

    # A second pass before the horizon copies the batch as it is.
    log.clean(LATER + 1)
    assert log.batch_bytes()[0] == data


def test_the_delete_horizon_survives_a_restart_between_passes(make, tmp_path: Path) -> None:
    log = make()
    log.txn(1, 1)  # 0
    log.marker(1, False)  # 1
    log.txn(2, 2)  # 2
    log.marker(2, True)  # 3
    log.txn(1, 3)  # 4: producer 1's last data batch (so the aborted one need not stay)
    log.marker(1, True)  # 5
    log.txn(2, 2)  # 6: supersedes offset 2, and is producer 2's last data batch
    log.marker(2, True)  # 7
    log.plog.roll()
    log.clean(LATER)  # the aborted data and the superseded record go
    assert log.offsets() == [1, 3, 4, 5, 6, 7]
    log.clean(LATER)  # both markers before them get their horizon
    assert [h.delete_horizon_ms for h in log.headers()] == [LATER + RETENTION] * 2 + [None] * 4
    before = log_bytes(log.plog)

    log.restart()
    assert log_bytes(log.plog) == before
    log.clean(LATER + RETENTION - 1)
    assert log_bytes(log.plog) == before

    # A crash: everything is recovered from the files, and the horizons are still there.
    log.cleaner.shutdown()
    log.plog.release_descriptors()
    log.plog = PartitionLog(tmp_path / "t-0", CONFIG, time_ms=log.clock)
    log.plog.update_high_watermark(log.plog.log_end_offset)
    log.cleaner = log._new_cleaner()
    assert log_bytes(log.plog) == before
    log.clean(LATER + RETENTION)
    assert log.offsets() == [4, 5, 6, 7]
    assert log.aborted() == []


def test_the_scheduled_cleaner_removes_markers_through_its_checkpoint(make) -> None:
    """The same through ``clean_filthiest`` (dirty ratio, cleaner-offset-checkpoint) and a
    restart: a marker needs later rounds, which run when new data makes the log dirty."""
    log = make()
    log.txn(1, 1)  # 0
    log.marker(1, True)  # 1
    log.txn(1, 2)  # 2: producer 1's last data batch
    log.marker(1, True)  # 3
    log.plog.roll()
    log.record(1, 2)  # 4: supersedes the first transaction's record
    log.plog.roll()
    log.clock.now = LATER
    assert asyncio.run(log.cleaner.clean_filthiest())
    assert log.offsets() == [1, 2, 3, 4]  # the marker stays: its data was read in this round
    log.record(3, 3)  # 5
    log.plog.roll()
    assert asyncio.run(log.cleaner.clean_filthiest())
    assert log.headers()[0].delete_horizon_ms == LATER + RETENTION

    log.restart()
    log.clock.now = LATER + RETENTION
    log.record(3, 4)  # 6
    log.plog.roll()
    assert asyncio.run(log.cleaner.clean_filthiest())
    assert log.offsets() == [2, 3, 4, 6]
    assert [h.is_control for h in log.headers()] == [False, True, False, False]
    assert (log.root / "cleaner-offset-checkpoint").read_bytes() == b"0\n1\nt 0 7\n"


def test_a_commit_marker_left_by_a_retry_with_no_new_data_goes(make) -> None:
    """Kafka's testEmptyBatchRemovalWithSequenceReuse, with a second commit of one pid."""
    log = make()
    log.txn(1, 1)  # 0
    log.marker(1, True)  # 1
    log.txn(1, 2)  # 2
    log.marker(1, True)  # 3
    log.record(1, 1)  # 4
    log.record(2, 1)  # 5
    log.plog.roll()
    log.clean(LATER)
    assert log.offsets() == [1, 3, 4, 5]
    assert log.last_offsets() == [1, 2, 3, 4, 5]
    log.two_passes(LATER)
    assert log.offsets() == [3, 4, 5]
    assert log.last_offsets() == [2, 3, 4, 5]


def test_consumer_offsets_committed_in_transactions_are_cleaned_the_same_way(tmp_path) -> None:
    """``__consumer_offsets`` goes through the log manager's cleaner like any compacted topic:
    TxnOffsetCommit batches and their markers follow the same rules, and a coordinator loading
    the cleaned partition finds the same committed offsets and nothing pending."""
    start = int(time.time() * 1000)  # the coordinator's batches carry the wall clock's time
    clock = Clock(start)
    logs = log_manager(tmp_path, lambda _topic: CONFIG, time_ms=clock)
    plog = logs.get_or_create("__consumer_offsets", 0, None, CONFIG)
    d = Driver(plog=plog)
    d.txn_commit({("t", 0): 5}, producer_id=1000)  # 0
    d.end_transaction(1000, committed=True)  # 1
    d.txn_commit({("t", 1): 7}, producer_id=2000)  # 2
    d.end_transaction(2000, committed=False)  # 3
    d.commit({("t", 0): 9})  # 4: supersedes offset 0
    d.txn_commit({("t", 2): 3}, producer_id=1000)  # 5
    d.end_transaction(1000, committed=True)  # 6
    d.txn_commit({("t", 3): 1}, producer_id=2000)  # 7
    d.end_transaction(2000, committed=True)  # 8
    expected = committed(d)
    assert {k: v[0] for k, v in expected.items()} == {("t", 0): 9, ("t", 2): 3, ("t", 3): 1}
    assert plog.collect_aborted_transactions(0, 100) == [AbortedTxn(2000, 2, 3, 4)]
    cleaner = logs.cleaner
    assert cleaner is not None

    def round_with_new_data(group_offset: int) -> None:
        d.commit({("u", group_offset): group_offset})  # something dirty, for the round to run
        plog.update_high_watermark(plog.log_end_offset)
        plog.roll()
        assert asyncio.run(cleaner.clean_filthiest())

    def markers() -> list[tuple[int, int | None]]:
        data = log_bytes(plog)
        return [(h.base_offset, h.delete_horizon_ms) for _, h in iter_batches(data) if h.is_control]

    round_with_new_data(0)  # the superseded and the aborted offsets go; every marker stays
    assert markers() == [(1, None), (3, None), (6, None), (8, None)]
    assert plog.collect_aborted_transactions(0, 100) == [AbortedTxn(2000, 2, 3, 4)]
    round_with_new_data(1)  # the two markers with nothing left get their horizon
    assert markers() == [(1, start + RETENTION), (3, start + RETENTION), (6, None), (8, None)]
    assert plog.collect_aborted_transactions(0, 100) == []
    clock.now = start + RETENTION
    round_with_new_data(2)  # and go
    assert markers() == [(6, None), (8, None)]

    again = Driver()
    again.shard = reload(plog)
    assert committed(again) == committed(d)
    assert {k: v[0] for k, v in committed(again).items()} == {
        ("t", 0): 9,
        ("t", 2): 3,
        ("t", 3): 1,
        ("u", 0): 0,
        ("u", 1): 1,
        ("u", 2): 2,
    }
    assert not again.shard.offsets.pending.by_producer
    logs.close()
