"""The ``.txnindex`` file: Kafka's 34-byte entries, lazy creation, search, truncation."""

import struct

import pytest

from kpybroker.log.index import CorruptIndexError
from kpybroker.log.transaction_index import ENTRY_SIZE, AbortedTxn, TransactionIndex


def index_at(tmp_path, base: int = 0) -> TransactionIndex:
    return TransactionIndex(tmp_path / f"{base:020d}.txnindex", base)


def test_entries_are_kafkas_34_byte_format(tmp_path) -> None:
    index = index_at(tmp_path)
    index.append(AbortedTxn(7, 10, 15, 12))
    data = index.path.read_bytes()
    assert ENTRY_SIZE == 34
    assert data == struct.pack(">hqqqq", 0, 7, 10, 15, 12)


def test_the_file_is_created_with_the_first_entry(tmp_path) -> None:
    index = index_at(tmp_path)
    assert index.entries == []
    assert not index.path.exists()
    index.truncate_to(0)
    index.flush()
    assert not index.path.exists()


def test_entries_survive_reopening(tmp_path) -> None:
    index = index_at(tmp_path)
    txns = [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)]
    for txn in txns:
        index.append(txn)
    index.flush()
    assert index_at(tmp_path).entries == txns


def test_last_offsets_must_increase(tmp_path) -> None:
    index = index_at(tmp_path)
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 1, 5, 6))


def test_collect_finds_overlapping_aborts_and_stops_at_the_upper_bound(tmp_path) -> None:
    index = index_at(tmp_path)
    first, second, third = (
        AbortedTxn(1, 0, 5, 3),
        AbortedTxn(2, 3, 9, 10),
        AbortedTxn(3, 12, 20, 21),
    )
    for txn in (first, second, third):
        index.append(txn)
    # Ends before the fetch offset: not needed.
    assert index.collect(6, 8).aborted == [second]
    # The second entry's LSO (10) reaches the upper bound: later segments need no search.
    assert index.collect(0, 10) == ([first, second], True)
    assert index.collect(0, 100) == ([first, second, third], False)


def test_truncate_drops_entries_whose_marker_is_at_or_after_the_offset(tmp_path) -> None:
    index = index_at(tmp_path)
    for txn in (AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)):
        index.append(txn)
    index.truncate_to(9)
    assert index.entries == [AbortedTxn(1, 0, 5, 6)]
    assert index.path.stat().st_size == ENTRY_SIZE
    assert index_at(tmp_path).entries == [AbortedTxn(1, 0, 5, 6)]
    index.append(AbortedTxn(3, 7, 8, 9))  # appending continues after the cut
    assert len(index_at(tmp_path).entries) == 2


def test_reset_rename_and_delete(tmp_path) -> None:
    index = index_at(tmp_path)
    index.append(AbortedTxn(1, 0, 5, 6))
    target = tmp_path / "renamed.txnindex"
    index.rename(target)
    assert target.exists() and index.path == target
    index.reset()
    assert index.entries == [] and target.stat().st_size == 0
    index.delete()
    assert not target.exists()


def test_a_torn_last_entry_is_ignored_and_a_newer_version_refused(tmp_path) -> None:
    index = index_at(tmp_path)
    index.path.write_bytes(struct.pack(">hqqqq", 0, 1, 0, 5, 6) + b"\x00" * 10)
    assert index.entries == [AbortedTxn(1, 0, 5, 6)]
    other = index_at(tmp_path, 100)
    other.path.write_bytes(struct.pack(">hqqqq", 1, 1, 100, 105, 106))
    with pytest.raises(CorruptIndexError):
        _ = other.entries
