"""A share partition's in-flight records: acquisition, acknowledgement, locks, delivery counts."""

from __future__ import annotations

import pytest

from kpybroker.protocol.errors import ErrorCode
from kpybroker.share_coordinator.persister import DeliveryState, StateBatch
from kpybroker.share_partitions.share_partition import (
    NOT_ACQUIRED,
    NOT_OWNER,
    OFFSET_NOT_ACQUIRED,
    PAST_ACQUIRED,
    PAST_ACQUIRED_LAST,
    AckType,
    Acquired,
    LogBatch,
    Refusal,
    SharePartition,
    shared_offset_refusal,
    valid_batches,
)
from kpybroker.share_partitions.share_sessions import (
    SessionError,
    SessionKey,
    SessionPartition,
    ShareSessions,
    next_epoch,
)

ACCEPT, RELEASE, REJECT, GAP, RENEW = (
    AckType.ACCEPT,
    AckType.RELEASE,
    AckType.REJECT,
    AckType.GAP,
    AckType.RENEW,
)


def log_batches(*ranges: tuple[int, int]) -> list[LogBatch]:
    return [LogBatch(first, last, 0, 0) for first, last in ranges]


def partition(start: int = 0, limit: int = 3, max_in_flight: int = 200) -> SharePartition:
    return SharePartition(start, delivery_count_limit=limit, max_in_flight=max_in_flight)


def test_new_records_are_acquired_batch_by_batch_and_the_batches_carried() -> None:
    sp = partition()
    lock, acquired, carried = sp.acquire("a", log_batches((0, 4), (5, 9), (10, 14)), 7)
    # Whole batches: 7 records asked, 10 given (batch boundaries are kept).
    assert acquired == [Acquired(0, 9, 1)]
    assert [b.base_offset for b in carried] == [0, 5]
    assert sp.end_offset == 10
    assert sp.next_fetch_offset() == 10
    assert lock > 0


def test_accepted_records_move_the_start_offset_and_are_never_redelivered() -> None:
    sp = partition()
    sp.acquire("a", log_batches((0, 9)), 100)
    changed, _ = sp.acknowledge("a", 0, 4, [ACCEPT])
    assert changed == [StateBatch(0, 4, DeliveryState.ACKNOWLEDGED, 1)]
    assert sp.start_offset == 5
    assert sp.acquire("b", log_batches((0, 9)), 100)[1] == []


def test_released_records_are_redelivered_with_a_higher_count() -> None:
    sp = partition()
    sp.acquire("a", log_batches((0, 9)), 100)
    sp.acknowledge("a", 0, 9, [ACCEPT] * 3 + [RELEASE] * 2 + [ACCEPT] * 5)
    assert sp.start_offset == 3
    assert sp.next_fetch_offset() == 3
    _, acquired, _ = sp.acquire("b", log_batches((0, 9)), 100)
    assert acquired == [Acquired(3, 4, 2)]


def test_rejected_and_gap_records_are_archived() -> None:
    sp = partition()
    sp.acquire("a", log_batches((0, 3)), 100)
    changed, _ = sp.acknowledge("a", 0, 3, [REJECT, GAP, ACCEPT, REJECT])
    assert sp.start_offset == 4
    assert [c.delivery_state for c in changed] == [DeliveryState.ARCHIVED] * 2 + [
        DeliveryState.ACKNOWLEDGED,
        DeliveryState.ARCHIVED,
    ]


def test_only_the_member_holding_records_may_acknowledge_them() -> None:
    sp = partition()
    sp.acquire("a", log_batches((0, 9)), 100)
    assert sp.check_acquired("b", 0, 9) == Refusal(ErrorCode.INVALID_RECORD_STATE, NOT_OWNER)
    assert sp.check_acquired("a", 5, 12) == Refusal(ErrorCode.INVALID_REQUEST, PAST_ACQUIRED_LAST)
    assert sp.check_acquired("a", 20, 22) == Refusal(ErrorCode.INVALID_REQUEST, PAST_ACQUIRED)
    assert sp.check_acquired("a", 0, 9) is None
    sp.acknowledge("a", 0, 4, [ACCEPT])
    # Below the start offset: done with, ignored.
    assert sp.check_acquired("a", 0, 4) is None
    sp.release_member("a")
    assert sp.check_acquired("a", 5, 9) == Refusal(ErrorCode.INVALID_RECORD_STATE, NOT_ACQUIRED)


def test_malformed_acknowledgement_batches_are_refused_before_any_record() -> None:
    assert valid_batches([(0, 4, [ACCEPT]), (5, 6, [ACCEPT, REJECT])], renew=False)
    assert not valid_batches([(0, 4, [ACCEPT, ACCEPT])], renew=False)  # neither 1 nor 5
    assert not valid_batches([(0, 4, [9])], renew=False)
    assert not valid_batches([(4, 0, [ACCEPT])], renew=False)
    assert not valid_batches([(0, 4, [ACCEPT]), (3, 6, [ACCEPT])], renew=False)  # overlap
    assert not valid_batches([(0, 4, [RENEW])], renew=False)
    assert valid_batches([(0, 4, [RENEW])], renew=True)
    # Kafka refuses only a batch starting before the last offset of the one before.
    assert valid_batches([(0, 4, [ACCEPT]), (4, 6, [ACCEPT])], renew=False)


def test_a_batch_starting_on_the_last_offset_of_the_one_before_finds_it_acknowledged() -> None:
    shared = [(5, 6, [ACCEPT]), (6, 7, [ACCEPT])]
    refused = Refusal(ErrorCode.INVALID_RECORD_STATE, OFFSET_NOT_ACQUIRED)
    assert shared_offset_refusal(shared, start_offset=0) == refused
    assert shared_offset_refusal([(5, 6, [RELEASE, REJECT]), (6, 7, [ACCEPT])], 0) == refused
    # Below the start offset it is ignored; a renewed record is still acquired; a gap is
    # archived whatever its state; batches apart share nothing.
    assert shared_offset_refusal(shared, start_offset=7) is None
    assert shared_offset_refusal([(5, 6, [ACCEPT, RENEW]), (6, 7, [ACCEPT])], 0) is None
    assert shared_offset_refusal([(5, 6, [ACCEPT]), (6, 7, [GAP, ACCEPT])], 0) is None
    assert shared_offset_refusal([(5, 6, [ACCEPT]), (7, 8, [ACCEPT])], 0) is None


def test_an_expired_lock_releases_and_the_delivery_limit_archives() -> None:
    sp = partition(limit=2)
    lock, _, _ = sp.acquire("a", log_batches((0, 4)), 100)
    assert sp.release_lock(lock) == [StateBatch(0, 4, DeliveryState.AVAILABLE, 1)]
    lock, acquired, _ = sp.acquire("b", log_batches((0, 4)), 100)
    assert acquired == [Acquired(0, 4, 2)]
    # Delivered twice (the limit): the next expiry archives them, and the start moves on.
    assert sp.release_lock(lock) == [StateBatch(0, 4, DeliveryState.ARCHIVED, 2)]
    assert sp.start_offset == 5
    assert sp.runs == []


def test_a_lock_that_ran_out_after_acknowledgement_changes_nothing() -> None:
    sp = partition()
    lock, _, _ = sp.acquire("a", log_batches((0, 4)), 100)
    sp.acknowledge("a", 0, 4, [ACCEPT])
    assert sp.release_lock(lock) == []


def test_renewing_gives_the_records_a_new_lock() -> None:
    sp = partition()
    lock, _, _ = sp.acquire("a", log_batches((0, 4)), 100)
    changed, renewed = sp.acknowledge("a", 0, 4, [RENEW])
    assert changed == []
    assert renewed and renewed[0] != lock
    assert sp.release_lock(lock) == []  # the old lock no longer holds them
    assert sp.release_lock(renewed[0]) == [StateBatch(0, 4, DeliveryState.AVAILABLE, 1)]


def test_several_members_share_a_partition_without_overlap() -> None:
    sp = partition()
    _, a, _ = sp.acquire("a", log_batches((0, 4)), 100)
    _, b, _ = sp.acquire("b", log_batches((0, 4), (5, 9)), 100)
    assert a == [Acquired(0, 4, 1)]
    assert b == [Acquired(5, 9, 1)]
    released = sp.release_member("a")
    assert released == [StateBatch(0, 4, DeliveryState.AVAILABLE, 1)]
    _, c, _ = sp.acquire("c", log_batches((0, 4), (5, 9)), 100)
    assert c == [Acquired(0, 4, 2)]


def test_the_in_flight_window_is_bounded() -> None:
    sp = partition(max_in_flight=10)
    sp.acquire("a", log_batches((0, 9)), 100)
    assert not sp.can_acquire()
    assert sp.acquire("b", log_batches((10, 19)), 100)[1] == []
    sp.acknowledge("a", 0, 9, [ACCEPT])
    assert sp.can_acquire()


def test_state_rebuilt_from_persisted_batches() -> None:
    batches = [
        StateBatch(10, 12, DeliveryState.ACKNOWLEDGED, 1),
        StateBatch(13, 14, DeliveryState.AVAILABLE, 2),
        StateBatch(17, 18, DeliveryState.ARCHIVED, 3),
    ]
    sp = SharePartition.from_state(10, batches, delivery_count_limit=5, max_in_flight=100)
    # 10-12 are done: the start moves past them; 15-16 were never delivered.
    assert sp.start_offset == 13
    assert sp.end_offset == 19
    _, acquired, _ = sp.acquire("a", log_batches((10, 20)), 100)
    assert acquired == [Acquired(13, 14, 3), Acquired(15, 16, 1), Acquired(19, 20, 1)]


def test_the_log_start_moving_forgets_what_is_below() -> None:
    sp = partition()
    sp.acquire("a", log_batches((0, 9)), 100)
    sp.move_start(5)
    assert sp.start_offset == 5
    sp.acknowledge("a", 5, 9, [ACCEPT])
    assert sp.start_offset == 10


def test_offsets_missing_from_the_log_are_archived() -> None:
    sp = partition()
    _, acquired, _ = sp.acquire("a", log_batches((0, 2), (6, 8)), 100)
    assert acquired == [Acquired(0, 2, 1), Acquired(6, 8, 1)]
    sp.acknowledge("a", 0, 2, [ACCEPT])
    assert sp.start_offset == 6


def test_share_sessions_follow_kafkas_epochs() -> None:
    sessions = ShareSessions(max_sessions=1)
    key = SessionKey("g", "m")
    tp = SessionPartition(b"\1" * 16, 0)
    session, replaced = sessions.open(key, [tp])
    assert (session.epoch, replaced) == (1, None)
    with pytest.raises(SessionError) as refused:
        sessions.advance(key, 5)
    assert refused.value.code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert sessions.advance(key, 1, forgotten=[tp]).partitions == {}
    with pytest.raises(SessionError) as refused:
        sessions.open(SessionKey("g", "other"), [])
    assert refused.value.code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert sessions.close(key) is session
    with pytest.raises(SessionError) as refused:
        sessions.advance(key, 2)
    assert refused.value.code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert next_epoch(2**31 - 1) == 1


def test_record_limit_mode_acquires_part_of_a_batch() -> None:
    sp = partition()
    _, acquired, carried = sp.acquire("a", log_batches((0, 9)), 4, record_limit=True)
    assert acquired == [Acquired(0, 3, 1)]
    assert len(carried) == 1
    _, acquired, _ = sp.acquire("b", log_batches((0, 9)), 4, record_limit=True)
    assert acquired == [Acquired(4, 7, 1)]
    sp.release_member("a")
    _, acquired, _ = sp.acquire("c", log_batches((0, 9)), 3, record_limit=True)
    assert acquired == [Acquired(0, 2, 2)]


def test_control_batches_are_archived_not_delivered() -> None:
    sp = partition()
    batches = [LogBatch(0, 4, 0, 0), LogBatch(5, 5, 0, 0, skipped=True), LogBatch(6, 9, 0, 0)]
    _, acquired, carried = sp.acquire("a", batches, 100)
    assert acquired == [Acquired(0, 4, 1), Acquired(6, 9, 1)]
    assert [b.base_offset for b in carried] == [0, 6]
    sp.acknowledge("a", 0, 4, [ACCEPT])
    assert sp.start_offset == 6
