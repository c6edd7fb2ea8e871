"""Compaction of a log with transactions: aborted data never shadows committed data and is
dropped, markers and the aborted index survive the pass that drops it, open transactions are
not cleaned (the removal of markers: ``test_log_cleaner_markers``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kpybroker.log.log_cleaner import LogCleaner
from kpybroker.log.log_config import CleanerConfig
from kpybroker.log.partition_log import PartitionLog
from kpybroker.protocol.records import NewRecord, build_batch, iter_batches
from tests.helpers.log_builders import NOW, Clock, append_committed, keyed, log_bytes, stored_pairs
from tests.unit.test_log_cleaner import COMPACTED, TP


def txn_record(pid: int, key: bytes, value: bytes) -> bytearray:
    return bytearray(
        build_batch(
            [NewRecord(key, value, (), NOW)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
            timestamp=NOW,
        )
    )


def compacting(log_dir: Path) -> tuple[PartitionLog, LogCleaner]:
    clock = Clock(NOW)
    plog = PartitionLog(log_dir / "t-0", COMPACTED, time_ms=clock)
    return plog, LogCleaner(CleanerConfig(), [log_dir], lambda: [(TP, plog, log_dir)], clock)


def test_aborted_data_is_dropped_without_shadowing_committed_data(tmp_path) -> None:
    plog, cleaner = compacting(tmp_path)
    try:
        append_committed(plog, keyed((b"k0", b"v00")))  # 0
        append_committed(plog, txn_record(5, b"k0", b"bad"))  # 1, aborted below
        plog.append_txn_marker(5, 0, 0, False, 0)  # 2
        for i in range(3, 16):
            append_committed(plog, keyed((b"k1", f"v{i:02d}".encode())))
        aborted = plog.collect_aborted_transactions(0, 100)
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in aborted] == [(5, 1, 2)]
        assert asyncio.run(cleaner.clean_filthiest())
        pairs = stored_pairs(plog)
        assert (0, b"k0", b"v00") in pairs  # not removed for the aborted k0@1
        assert all(offset != 1 for offset, _, _ in pairs)  # the aborted record is gone
        markers = [h.base_offset for _, h in iter_batches(log_bytes(plog)) if h.is_control]
        assert markers == [2]
        assert plog.collect_aborted_transactions(0, 100) == aborted
    finally:
        cleaner.shutdown()
        plog.release_descriptors()


def test_an_open_transaction_bounds_the_cleaning(tmp_path) -> None:
    plog, cleaner = compacting(tmp_path)
    try:
        append_committed(plog, txn_record(6, b"k0", b"open"))  # 0, never decided
        for i in range(1, 16):
            append_committed(plog, keyed((b"k0", f"v{i:02d}".encode())))
        assert plog.last_stable_offset == 0
        before = log_bytes(plog)
        asyncio.run(cleaner.clean_filthiest())
        assert log_bytes(plog) == before
    finally:
        cleaner.shutdown()
        plog.release_descriptors()
