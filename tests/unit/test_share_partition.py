"""A share partition's in-flight records: acquisition, acknowledgement, locks, delivery counts."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpybroker.protocol.errors import ErrorCode
from kpybroker.share_coordinator.persister import DeliveryState, StateBatch
from kpybroker.share_partitions.share_partition import (
    BATCH_NOT_ACQUIRED,
    NOT_OWNER,
    OFFSET_NOT_ACQUIRED,
    OFFSET_NOT_OWNER,
    PAST_ACQUIRED,
    PAST_ACQUIRED_LAST,
    AckType,
    Acquired,
    LogBatch,
    Refusal,
    SharePartition,
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
    # Part of the batch was acknowledged apart: Kafka tracks it record by record.
    refused = Refusal(ErrorCode.INVALID_RECORD_STATE, OFFSET_NOT_ACQUIRED)
    assert sp.check_acquired("a", 5, 9) == refused


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
    sp = partition()
    sp.acquire("a", log_batches((0, 9)), 100)
    shared = [(5, 6, [ACCEPT]), (6, 7, [ACCEPT])]
    refused = Refusal(ErrorCode.INVALID_RECORD_STATE, OFFSET_NOT_ACQUIRED)
    assert sp.shared_offset_refusal(shared) == refused
    assert sp.shared_offset_refusal([(5, 6, [RELEASE, REJECT]), (6, 7, [ACCEPT])]) == refused
    # A renewed record is still acquired; a gap is archived whatever its state; batches
    # apart share nothing.
    assert sp.shared_offset_refusal([(5, 6, [ACCEPT, RENEW]), (6, 7, [ACCEPT])]) is None
    assert sp.shared_offset_refusal([(5, 6, [ACCEPT]), (6, 7, [GAP, ACCEPT])]) is None
    assert sp.shared_offset_refusal([(5, 6, [ACCEPT]), (7, 8, [ACCEPT])]) is None
    # Below the start offset it is ignored.
    sp.acknowledge("a", 0, 6, [ACCEPT])
    assert sp.shared_offset_refusal(shared) is None


def test_a_shared_offset_of_a_batch_acknowledged_whole_finds_the_batch_not_acquired() -> None:
    sp = partition()
    sp.acquire("a", log_batches((0, 4)), 100)
    sp.acquire("a", log_batches((5, 9)), 100)
    # 0..4 is one in-flight batch, acknowledged whole by the first: a gap changes nothing.
    refused = Refusal(ErrorCode.INVALID_RECORD_STATE, BATCH_NOT_ACQUIRED)
    assert sp.shared_offset_refusal([(0, 4, [ACCEPT]), (4, 6, [ACCEPT])]) == refused
    assert sp.shared_offset_refusal([(0, 4, [ACCEPT]), (4, 6, [GAP])]) == refused


def test_refusals_are_worded_after_how_kafka_tracks_the_in_flight_batch() -> None:
    """Kafka tracks an in-flight batch whole until part of it is touched, then record by
    record; its refusals say "batch" or "offset" accordingly."""
    batch_not_acquired = Refusal(ErrorCode.INVALID_RECORD_STATE, BATCH_NOT_ACQUIRED)
    offset_not_acquired = Refusal(ErrorCode.INVALID_RECORD_STATE, OFFSET_NOT_ACQUIRED)
    # Released whole, then asked again: the batch is not acquired.
    sp = partition()
    sp.acquire("a", log_batches((0, 9)), 100)
    sp.acknowledge("a", 0, 9, [RELEASE])
    assert sp.check_acquired("a", 0, 9) == batch_not_acquired
    assert sp.check_acquired("a", 3, 4) == batch_not_acquired
    # Acquired again whole by another member: the batch's owner is named.
    sp.acquire("b", log_batches((0, 9)), 100)
    assert sp.check_acquired("a", 2, 3) == Refusal(ErrorCode.INVALID_RECORD_STATE, NOT_OWNER)
    # One type per record makes it tracked record by record, even when they are all one.
    sp.acknowledge("b", 0, 9, [RELEASE] * 10)
    assert sp.check_acquired("a", 0, 9) == offset_not_acquired
    sp.acquire("b", log_batches((0, 9)), 100)
    refused = Refusal(ErrorCode.INVALID_RECORD_STATE, OFFSET_NOT_OWNER)
    assert sp.check_acquired("a", 0, 9) == refused
    # A subset acquired (the record limit cuts the batch) is tracked record by record.
    sp = partition()
    sp.acquire("a", log_batches((0, 9)), 100)
    sp.acknowledge("a", 0, 9, [RELEASE])
    sp.acquire("b", log_batches((0, 9)), 4, record_limit=True)
    assert sp.check_acquired("b", 3, 6) == offset_not_acquired


def test_new_records_are_cached_in_batches_of_the_fetchs_batch_size() -> None:
    sp = partition()
    sp.acquire("a", log_batches((0, 2), (3, 5), (6, 8), (9, 11)), 100, batch_size=4)
    # Cut at a log batch's base once a piece holds 4 records: 0..5, 6..11.
    assert [(b.first, b.last) for b in sp.inflight.batches] == [(0, 5), (6, 11)]
    sp.acknowledge("a", 0, 5, [ACCEPT])
    sp.acknowledge("a", 6, 11, [RELEASE])
    refused = Refusal(ErrorCode.INVALID_RECORD_STATE, BATCH_NOT_ACQUIRED)
    assert sp.check_acquired("a", 6, 11) == refused
    assert [(b.first, b.last) for b in sp.inflight.batches] == [(6, 11)]
    # A negative batch size cuts at every log batch, never into an empty batch.
    sp = partition()
    sp.acquire("a", log_batches((0, 2), (3, 5)), 100, batch_size=-1)
    assert [(b.first, b.last) for b in sp.inflight.batches] == [(0, 2), (3, 5)]
    # The record-limit mode caches what it takes as one batch, whatever the batch size.
    sp = partition()
    sp.acquire("a", log_batches((0, 2), (3, 5), (6, 8)), 9, record_limit=True, batch_size=2)
    assert [(b.first, b.last) for b in sp.inflight.batches] == [(0, 8)]


def test_batches_rebuilt_from_persisted_state_are_tracked_whole() -> None:
    batches = [StateBatch(0, 4, DeliveryState.AVAILABLE, 1), StateBatch(5, 9, 4, 1)]
    sp = SharePartition.from_state(0, batches, delivery_count_limit=5, max_in_flight=200)
    assert [(b.first, b.last, b.per_offset) for b in sp.inflight.batches] == [
        (0, 4, False),
        (5, 9, False),
    ]
    refused = Refusal(ErrorCode.INVALID_RECORD_STATE, BATCH_NOT_ACQUIRED)
    assert sp.check_acquired("a", 5, 9) == refused


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
    # The rest of the batch is in flight, available, as Kafka caches it: acknowledging it
    # is refused record by record, and a range past it as past the acquired records.
    assert (sp.end_offset, sp.next_fetch_offset()) == (10, 4)
    refused = Refusal(ErrorCode.INVALID_RECORD_STATE, OFFSET_NOT_ACQUIRED)
    assert sp.check_acquired("a", 5, 6) == refused
    assert sp.check_acquired("a", 9, 12) == Refusal(ErrorCode.INVALID_REQUEST, PAST_ACQUIRED_LAST)
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


MEMBERS = st.sampled_from(["a", "b"])
OPERATIONS = st.one_of(
    st.tuples(st.just("acquire"), MEMBERS, st.integers(1, 4), st.integers(1, 12), st.booleans(),
              st.integers(-2, 8)),
    st.tuples(st.just("acknowledge"), MEMBERS, st.integers(0, 40), st.integers(0, 6),
              st.lists(st.sampled_from([ACCEPT, RELEASE, REJECT, GAP]), min_size=1, max_size=7)),
    st.tuples(st.just("release"), MEMBERS),
    st.tuples(st.just("expire"), st.integers(1, 20)),
    st.tuples(st.just("move start"), st.integers(0, 50)),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(OPERATIONS, max_size=30))
def test_in_flight_batches_always_cover_the_window_and_refusals_never_fail(ops: list) -> None:
    """Whatever happens to a partition, its in-flight batches stay in order and cover its
    in-flight records, and checking an acknowledgement only ever answers."""
    sp = partition(limit=3, max_in_flight=30)
    log_end = 0
    for op in ops:
        if op[0] == "acquire":
            _, member, count, size, record_limit, batch_size = op
            offset = sp.next_fetch_offset()
            batches = log_batches(*((offset + i * size, offset + i * size + size - 1)
                                    for i in range(count)))  # fmt: skip
            log_end = max(log_end, batches[-1].last_offset + 1)
            sp.acquire(member, batches, 5, record_limit=record_limit, batch_size=batch_size)
        elif op[0] == "acknowledge":
            _, member, first, extra, types = op
            last = first + extra
            types = types[:1] if len(types) != extra + 1 else types
            if sp.check_acquired(member, first, last) is None:
                sp.acknowledge(member, first, last, types)
        elif op[0] == "release":
            sp.release_member(op[1])
        elif op[0] == "expire":
            sp.release_lock(op[1])
        else:
            sp.move_start(min(op[1], log_end))
        spans = [(b.first, b.last) for b in sp.inflight.batches]
        assert all(first <= last for first, last in spans)  # no empty batch
        assert all(a[1] + 1 == b[0] for a, b in pairwise(spans))
        if sp.runs:
            assert spans[0][0] <= sp.start_offset and spans[-1][1] == sp.end_offset - 1
        else:
            assert spans == []
