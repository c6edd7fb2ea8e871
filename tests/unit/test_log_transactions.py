"""Transactions in a partition log: open transactions, markers, the LSO, the aborted index,
and their rebuilding after truncation, replication and an unclean restart."""

import pytest

from kpybroker.log.control_batches import EndTxnMarker, read_marker
from kpybroker.log.log_config import LogConfig
from kpybroker.log.partition_log import wall_clock_ms
from kpybroker.log.transaction_index import AbortedTxn
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.records import NewRecord, build_batch, iter_batches, iter_records
from tests.helpers.log_builders import SMALL, batch, log_bytes, open_log

NOW = wall_clock_ms()
BIG = LogConfig(retention_ms=-1)


def txn_batch(pid: int, seq: int, count: int = 2, transactional: bool = True) -> bytearray:
    records = [NewRecord(None, b"v", (), NOW)] * count
    return bytearray(
        build_batch(
            records,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            transactional=transactional,
            timestamp=NOW,
        )
    )


def committed(log) -> None:
    log.update_high_watermark(log.log_end_offset)


def error_of(call) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.code


def test_a_transactional_batch_opens_a_transaction_that_holds_the_lso(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", BIG)
    log.append(batch(2), 0)
    log.append(txn_batch(1, 0), 0)
    log.append(batch(1), 0)
    committed(log)
    assert log.high_watermark == 5
    assert log.last_stable_offset == 2
    assert log.producer_state.producers[1].current_txn_first_offset == 2
    marker = log.append_txn_marker(1, 0, 3, True, 0)
    assert marker.base_offset == marker.last_offset == 5
    # Completed, but the marker is not below the high watermark yet.
    assert log.last_stable_offset == 2
    committed(log)
    assert log.last_stable_offset == log.high_watermark == 6
    entry = log.producer_state.producers[1]
    assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (-1, 3)
    assert log.collect_aborted_transactions(0, 100) == []  # a commit is not indexed


def test_the_marker_batch_is_kafkas_control_batch(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", BIG)
    log.append(txn_batch(9, 0), 4)
    log.append_txn_marker(9, 0, 7, False, 4)
    [_, (pos, header)] = list(iter_batches(log_bytes(log)))
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 0, -1)
    assert (header.base_offset, header.partition_leader_epoch, header.record_count) == (2, 4, 1)
    assert abs(header.max_timestamp - wall_clock_ms()) < 60_000
    data = log_bytes(log)[pos:]
    assert read_marker(data) == EndTxnMarker(False, 7)
    [record] = list(iter_records(data))
    assert record.key == b"\x00\x00\x00\x00"  # version 0, ABORT
    assert record.value == b"\x00\x00\x00\x00\x00\x07"  # version 0, coordinator epoch 7


def test_an_abort_is_indexed_with_the_lso_after_it(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", BIG)
    log.append(txn_batch(1, 0), 0)  # 0-1
    log.append(txn_batch(2, 0), 0)  # 2-3
    log.append_txn_marker(1, 0, 0, False, 0)  # 4
    committed(log)
    # Producer 2's transaction is still open: the LSO after the abort is its first offset.
    assert log.active_segment.txn_index.entries == [AbortedTxn(1, 0, 4, 2)]
    assert log.last_stable_offset == 2
    log.append_txn_marker(2, 0, 0, False, 0)  # 5
    committed(log)
    assert log.active_segment.txn_index.entries[-1] == AbortedTxn(2, 2, 5, 6)
    assert log.last_stable_offset == 6
    assert log.segments[0].txn_index.path.name == "00000000000000000000.txnindex"


def test_append_checks_as_kafkas_producer_append_info(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", BIG)
    log.append(txn_batch(1, 0), 0)
    # Non-transactional data while a transaction is open.
    assert error_of(lambda: log.append(txn_batch(1, 2, transactional=False), 0)) == (
        ErrorCode.INVALID_TXN_STATE
    )
    log.append_txn_marker(1, 0, 5, True, 0)
    assert error_of(lambda: log.append_txn_marker(1, 0, 4, False, 0)) == (
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    )
    bumped = bytearray(
        build_batch([NewRecord(None, b"v", (), NOW)], producer_id=1, producer_epoch=1,
                    base_sequence=0, transactional=True, timestamp=NOW)
    )  # fmt: skip
    log.append(bumped, 0)
    assert error_of(lambda: log.append_txn_marker(1, 0, 5, False, 0)) == (
        ErrorCode.INVALID_PRODUCER_EPOCH
    )
    assert log.producer_state.producers[1].current_txn_first_offset == 3


def test_a_marker_without_a_transaction_changes_neither_lso_nor_index(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", BIG)
    log.append(batch(1), 0)
    log.append_txn_marker(5, 0, 1, False, 0)
    committed(log)
    assert log.last_stable_offset == 2
    assert log.collect_aborted_transactions(0, 10) == []
    assert log.producer_state.producers[5].coordinator_epoch == 1


def test_coordinator_batches_without_sequences_get_only_the_epoch_check(tmp_path) -> None:
    """The group coordinator's transactional offset commits carry no sequence (Kafka's
    AppendOrigin.COORDINATOR skips the sequence check)."""
    log = open_log(tmp_path / "t-0", BIG)
    for _ in range(2):
        log.append(txn_batch(3, -1), 0)
    assert log.producer_state.producers[3].current_txn_first_offset == 0
    log.append_txn_marker(3, 0, 0, True, 0)
    assert log.producer_state.producers[3].current_txn_first_offset == -1


def test_read_committed_reads_to_the_lso_and_gets_the_overlapping_aborts(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    log.append(txn_batch(1, 0), 0)  # 0-1, aborted
    log.append(batch(1), 0)  # 2
    log.append_txn_marker(1, 0, 0, False, 0)  # 3
    log.append(txn_batch(2, 0), 0)  # 4-5, open
    log.append(batch(1), 0)  # 6
    committed(log)
    assert log.last_stable_offset == 4
    result = log.read(0, 1 << 20, log.last_stable_offset)
    assert [h.last_offset for _, h in iter_batches(result.read_bytes())][-1] < 4
    assert log.aborted_transactions(0, result) == [AbortedTxn(1, 0, 3, 4)]
    assert log.aborted_transactions(4, log.read(4, 1 << 20, 4)) == []  # empty read


def test_aborted_transactions_are_found_across_segments(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    log.append(txn_batch(1, 0, count=5), 0)
    seq = 5
    while len(log.segments) < 3:
        log.append(txn_batch(1, seq, count=5), 0)
        seq += 5
    log.append_txn_marker(1, 0, 0, False, 0)
    committed(log)
    marker_offset = log.log_end_offset - 1
    assert log.segments[0].txn_index.entries == []
    assert log.active_segment.txn_index.entries == [
        AbortedTxn(1, 0, marker_offset, marker_offset + 1)
    ]
    # A fetch in the first segment learns of the abort whose marker is two segments on.
    assert log.collect_aborted_transactions(0, 3) == [
        AbortedTxn(1, 0, marker_offset, marker_offset + 1)
    ]
    first = log.read(0, 1, log.last_stable_offset)
    assert log.aborted_transactions(0, first) == [
        AbortedTxn(1, 0, marker_offset, marker_offset + 1)
    ]


def test_truncation_reopens_a_transaction_and_cuts_the_index(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", BIG)
    log.append(txn_batch(1, 0), 0)
    log.append_txn_marker(1, 0, 0, False, 0)  # 2
    assert log.active_segment.txn_index.entries
    log.truncate_to(2)
    assert log.active_segment.txn_index.entries == []
    assert log.active_segment.txn_index.path.stat().st_size == 0
    assert log.producer_state.txns.ongoing == {0: 1}
    committed(log)
    assert log.last_stable_offset == 0


def test_a_follower_tracks_and_indexes_transactions_as_the_leader(tmp_path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0", SMALL)
    follower = open_log(tmp_path / "follower" / "t-0", SMALL)
    leader.append(txn_batch(1, 0), 0)
    leader.append(txn_batch(2, 0), 0)
    leader.append_txn_marker(1, 0, 0, False, 0)
    leader.append(txn_batch(1, 2), 0)  # a new transaction of producer 1
    leader.append_txn_marker(2, 0, 0, True, 0)
    follower.append_as_follower(log_bytes(leader))
    follower.update_high_watermark(follower.log_end_offset)
    committed(leader)
    assert follower.collect_aborted_transactions(0, 100) == [AbortedTxn(1, 0, 4, 2)]
    assert follower.producer_state.txns.ongoing == leader.producer_state.txns.ongoing == {5: 1}
    assert follower.last_stable_offset == leader.last_stable_offset == 5


def test_retention_deletes_the_txnindex_with_its_segment(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", SMALL)
    log.append(txn_batch(1, 0), 0)
    log.append_txn_marker(1, 0, 0, False, 0)
    path = log.active_segment.txn_index.path
    log.roll()
    committed(log)
    log.increment_log_start_offset(log.log_end_offset)
    log.delete_old_segments()
    assert not path.exists()


def write_transactions(directory) -> tuple:
    """An aborted, a committed and an open transaction over several segments."""
    log = open_log(directory, SMALL)
    log.append(txn_batch(1, 0, count=4), 0)
    log.append(txn_batch(2, 0, count=4), 0)
    log.append_txn_marker(1, 0, 0, False, 0)
    log.roll()
    log.append(txn_batch(3, 0, count=4), 0)
    log.append_txn_marker(2, 0, 0, True, 0)
    log.append(txn_batch(1, 4, count=4), 0)
    log.append_txn_marker(1, 0, 0, False, 0)
    committed(log)
    return (
        log.last_stable_offset,
        dict(log.producer_state.txns.ongoing),
        log.collect_aborted_transactions(0, 1000),
        log.high_watermark,
    )


def test_an_unclean_restart_rebuilds_open_transactions_lso_and_aborted_index(tmp_path) -> None:
    directory = tmp_path / "t-0"
    lso, ongoing, aborted, hwm = write_transactions(directory)
    assert ongoing == {9: 3} and lso == 9 and len(aborted) == 2
    # Kill-style: no close(); the index files are lost too, as after a crash before fsync.
    for path in directory.glob("*.txnindex"):
        path.unlink()
    reopened = open_log(directory, SMALL, high_watermark=hwm)
    assert reopened.collect_aborted_transactions(0, 1000) == aborted
    assert reopened.producer_state.txns.ongoing == ongoing
    assert reopened.last_stable_offset == lso
    # Recovery from a later recovery point still finds the transaction opened before it.
    reopened.close()
    again = open_log(directory, SMALL, high_watermark=hwm, recovery_point=reopened.log_end_offset)
    assert again.last_stable_offset == lso
    assert again.collect_aborted_transactions(0, 1000) == aborted


def test_a_clean_restart_loads_open_transactions_from_the_snapshot(tmp_path) -> None:
    directory = tmp_path / "t-0"
    lso, ongoing, aborted, hwm = write_transactions(directory)
    log = open_log(directory, SMALL, high_watermark=hwm)
    end = log.log_end_offset
    log.close()
    reopened = open_log(
        directory, SMALL, high_watermark=hwm, recovery_point=end, clean_shutdown=True
    )
    assert reopened.producer_state.txns.ongoing == ongoing
    assert reopened.last_stable_offset == lso
    assert reopened.collect_aborted_transactions(0, 1000) == aborted


# -- KIP-890 verification guards --------------------------------------------------------------


def test_a_verified_first_write_presents_its_guard(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", BIG)
    state = log.producer_state
    guard, ask = state.start_verification(1, 0)
    assert ask  # no transaction of producer 1 open here: the coordinator is asked
    again, _ = state.start_verification(1, 0)
    assert again is guard  # pipelined requests of one producer share it
    log.append(txn_batch(1, 0), 0, guard)
    # The write opened the transaction and retired the guard; the next write of that
    # transaction needs no question, and the pipelined request with the old guard passes.
    later, ask = state.start_verification(1, 0)
    assert not ask and later is not guard
    log.append(txn_batch(1, 2), 0, guard)
    assert state.producers[1].current_txn_first_offset == 0


def test_a_marker_between_verification_and_write_refuses_the_write(tmp_path) -> None:
    """The transaction ended (its abort marker arrived) while the write waited: writing it
    would open a transaction no coordinator knows, which nobody would ever end."""
    log = open_log(tmp_path / "t-0", BIG)
    log.append(txn_batch(1, 0), 0)
    guard, ask = log.producer_state.start_verification(1, 0)
    assert not ask  # already open here
    log.append_txn_marker(1, 0, 0, False, 0)
    assert error_of(lambda: log.append(txn_batch(1, 2), 0, guard)) == ErrorCode.INVALID_TXN_STATE
    # A write that was never verified, with verification on, is refused the same way.
    other, _ = log.producer_state.start_verification(2, 0)
    log.producer_state.verifications.clear()
    assert error_of(lambda: log.append(txn_batch(2, 0), 0, other)) == ErrorCode.INVALID_TXN_STATE
    # Without verification (the setting off) the write opens its transaction.
    log.append(txn_batch(2, 0), 0)
    assert log.producer_state.producers[2].current_txn_first_offset >= 0
