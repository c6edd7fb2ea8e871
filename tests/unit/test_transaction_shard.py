"""The transaction coordinator's state machine, driven without I/O.

Each test feeds a ``TransactionShard`` the events a runtime would (requests,
the outcome of its appends and marker sends) and checks the answers and the
records it writes, against Kafka's ``TransactionCoordinator``: epoch bumps and
fencing, the two-phase end with markers, CONCURRENT_TRANSACTIONS while a
change is being written, retries of a completed EndTxn, timeouts that abort
with a bumped epoch, expiry of idle ids, and rebuilding from the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kpybroker.protocol.errors import ErrorCode
from kpybroker.transaction_coordinator.effects import Effects
from kpybroker.transaction_coordinator.shard import (
    EndResult,
    InitResult,
    ListFilter,
    ProducerIdAndEpoch,
    TransactionShard,
)
from kpybroker.transaction_coordinator.transaction_log_records import (
    TxnRecord,
    decode_record,
    encode_record,
)
from kpybroker.transaction_coordinator.transaction_settings import TransactionSettings
from kpybroker.transaction_coordinator.transaction_state import EXHAUSTED_EPOCH, TxnFields, TxnState

TXN = "app-1"
COORDINATOR_EPOCH = 3


@dataclass
class Driver:
    """Runs a shard as the runtime would: appends succeed (or fail) when told; markers too."""

    now: int = 1_000_000
    settings: TransactionSettings = field(default_factory=TransactionSettings)
    written: list[TxnRecord] = field(default_factory=list)
    markers: list = field(default_factory=list)
    replies: dict[int, object] = field(default_factory=dict)
    append_error: ErrorCode = ErrorCode.NONE
    hold_markers: bool = False
    held: list = field(default_factory=list)
    tokens: int = 0

    def __post_init__(self) -> None:
        self.shard = TransactionShard(0, COORDINATOR_EPOCH, self.settings, lambda: self.now)

    def run(self, effects: Effects) -> None:
        pending = [effects]
        while pending:
            out = pending.pop(0)
            for append in out.appends:
                self.written.extend(append.records)
                follow = Effects()
                append.on_done(follow, self.append_error)
                pending.append(follow)
            for send in out.markers:
                self.markers.append(send.markers)
                if self.hold_markers:
                    self.held.append(send)
                    continue
                follow = Effects()
                send.on_done(follow, True)
                pending.append(follow)
            for token, result in out.replies:
                assert token not in self.replies, "a token is answered once"
                self.replies[token] = result

    def release_markers(self) -> None:
        held, self.held = self.held, []
        for send in held:
            follow = Effects()
            send.on_done(follow, True)
            self.run(follow)

    def call(self, event) -> object:  # type: ignore[no-untyped-def]
        self.tokens += 1
        token = self.tokens
        self.run(event(token))
        return self.replies.get(token)

    def init(self, tid: str = TXN, expected: ProducerIdAndEpoch | None = None) -> InitResult:
        fresh = 5000 + self.tokens if self.shard.needs_producer_id(tid) else None
        return self.call(  # type: ignore[return-value]
            lambda t: self.shard.init_producer_id(t, tid, 60_000, expected, fresh)
        )

    def add(
        self, producer: ProducerIdAndEpoch, *partitions: tuple[str, int], version: int = 1
    ) -> ErrorCode:
        return self.call(  # type: ignore[return-value]
            lambda t: self.shard.add_partitions(t, TXN, producer, partitions, version)
        )

    def end(self, producer: ProducerIdAndEpoch, commit: bool) -> ErrorCode:
        return self.end_txn(producer, commit, version=1).error

    def end_txn(self, producer: ProducerIdAndEpoch, commit: bool, version: int) -> EndResult:
        """EndTxn of a client of transaction ``version`` (2: EndTxn v5)."""
        next_id = 9000 if self.shard.needs_next_producer_id(TXN, version) else -1
        return self.call(  # type: ignore[return-value]
            lambda t: self.shard.end_txn(t, TXN, producer, commit, version, next_id)
        )

    def state(self) -> TxnState:
        return self.shard.transactions[TXN].state


def initialized(driver: Driver) -> ProducerIdAndEpoch:
    result = driver.init()
    assert result.error == ErrorCode.NONE
    return ProducerIdAndEpoch(result.producer_id, result.producer_epoch)


def test_init_gives_a_new_id_epoch_0_then_bumps_the_epoch() -> None:
    driver = Driver()
    first = driver.init()
    assert first.error == ErrorCode.NONE and first.producer_epoch == 0
    second = driver.init()
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert driver.written[-1].fields is not None
    assert driver.written[-1].fields.state == TxnState.EMPTY


def test_a_full_commit_writes_prepare_markers_then_complete() -> None:
    driver = Driver()
    producer = initialized(driver)
    assert driver.add(producer, ("t", 0), ("t", 1)) == ErrorCode.NONE
    assert driver.state() == TxnState.ONGOING
    assert driver.add(producer, ("t", 1)) == ErrorCode.NONE  # already in: nothing written
    writes = len(driver.written)
    assert driver.end(producer, commit=True) == ErrorCode.NONE
    states = [r.fields.state for r in driver.written[writes:] if r.fields]
    assert states == [TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    (markers,) = driver.markers
    assert markers.committed and markers.partitions == {("t", 0), ("t", 1)}
    assert markers.coordinator_epoch == COORDINATOR_EPOCH
    assert driver.shard.transactions[TXN].current.partitions == frozenset()


def test_end_txn_answers_like_kafka_in_every_state() -> None:
    driver = Driver(hold_markers=True)
    producer = initialized(driver)
    assert driver.end(producer, commit=True) == ErrorCode.INVALID_TXN_STATE  # Empty
    driver.add(producer, ("t", 0))
    assert driver.end(producer, commit=False) == ErrorCode.NONE
    assert driver.state() == TxnState.PREPARE_ABORT
    assert driver.end(producer, commit=False) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert driver.end(producer, commit=True) == ErrorCode.INVALID_TXN_STATE
    assert driver.add(producer, ("t", 1)) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert driver.init().error == ErrorCode.CONCURRENT_TRANSACTIONS
    driver.release_markers()
    assert driver.state() == TxnState.COMPLETE_ABORT
    assert driver.end(producer, commit=False) == ErrorCode.NONE  # a retry
    assert driver.end(producer, commit=True) == ErrorCode.INVALID_TXN_STATE


def test_wrong_producer_id_or_epoch() -> None:
    driver = Driver()
    producer = initialized(driver)
    other_id = ProducerIdAndEpoch(producer.producer_id + 1, producer.producer_epoch)
    old_epoch = ProducerIdAndEpoch(producer.producer_id, producer.producer_epoch - 1)
    assert driver.add(other_id, ("t", 0)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert driver.add(old_epoch, ("t", 0)) == ErrorCode.PRODUCER_FENCED
    assert driver.end(old_epoch, commit=True) == ErrorCode.PRODUCER_FENCED
    unknown = driver.call(lambda t: driver.shard.end_txn(t, "nobody", producer, commit=True))
    assert unknown == EndResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)


def test_init_during_an_open_transaction_aborts_it_with_a_bumped_epoch() -> None:
    driver = Driver()
    producer = initialized(driver)
    driver.add(producer, ("t", 0))
    assert driver.init().error == ErrorCode.CONCURRENT_TRANSACTIONS
    (markers,) = driver.markers
    assert not markers.committed and markers.producer_epoch == producer.producer_epoch + 1
    assert driver.state() == TxnState.COMPLETE_ABORT
    retried = driver.init()
    assert retried.error == ErrorCode.NONE
    assert retried.producer_epoch == producer.producer_epoch + 2
    assert driver.end(producer, commit=True) == ErrorCode.PRODUCER_FENCED


def test_expected_epoch_checks_of_kip_360() -> None:
    driver = Driver()
    producer = initialized(driver)
    bumped = driver.init(expected=producer)
    assert bumped.error == ErrorCode.NONE and bumped.producer_epoch == producer.producer_epoch + 1
    # The producer never got that answer and retries with the same expectation: same epoch.
    retry = driver.init(expected=producer)
    assert retry.producer_epoch == bumped.producer_epoch
    stranger = ProducerIdAndEpoch(producer.producer_id + 7, 0)
    assert driver.init(expected=stranger).error == ErrorCode.PRODUCER_FENCED


def test_an_exhausted_epoch_gets_a_new_producer_id() -> None:
    driver = Driver()
    producer = initialized(driver)
    txn = driver.shard.transactions[TXN]
    txn.current = replace(txn.current, producer_epoch=32_766)
    fresh = driver.init()
    assert fresh.producer_id != producer.producer_id and fresh.producer_epoch == 0


def test_a_failed_write_leaves_the_state_unchanged() -> None:
    driver = Driver()
    producer = initialized(driver)
    driver.append_error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert driver.add(producer, ("t", 0)) == ErrorCode.NOT_COORDINATOR
    assert driver.state() == TxnState.EMPTY
    assert driver.shard.transactions[TXN].pending is None


def test_timed_out_transactions_are_aborted_and_fenced() -> None:
    driver = Driver()
    producer = initialized(driver)
    driver.add(producer, ("t", 0))
    driver.now += 59_000
    driver.run(driver.shard.abort_timed_out())
    assert driver.state() == TxnState.ONGOING
    driver.now += 2_000
    driver.run(driver.shard.abort_timed_out())
    assert driver.state() == TxnState.COMPLETE_ABORT
    assert driver.markers[-1].producer_epoch == producer.producer_epoch + 1
    assert driver.end(producer, commit=True) == ErrorCode.PRODUCER_FENCED


def test_idle_ids_expire_with_a_tombstone() -> None:
    driver = Driver()
    initialized(driver)
    driver.now += driver.settings.transactional_id_expiration_ms
    driver.run(driver.shard.expire_transactional_ids())
    assert TXN not in driver.shard.transactions
    assert driver.written[-1] == TxnRecord(TXN, None)


def test_a_reloaded_shard_finishes_what_was_prepared() -> None:
    driver = Driver(hold_markers=True)
    producer = initialized(driver)
    driver.add(producer, ("t", 0), ("u", 2))
    driver.end(producer, commit=True)
    log = [decode_record(*encode_record(r)[:2]) for r in driver.written]
    reloaded = Driver()
    for record in log:
        assert record is not None
        reloaded.shard.replay(record)
    assert reloaded.state() == TxnState.PREPARE_COMMIT
    reloaded.run(reloaded.shard.loaded())
    assert reloaded.markers[0].partitions == {("t", 0), ("u", 2)}
    assert reloaded.state() == TxnState.COMPLETE_COMMIT


def test_describe_and_list() -> None:
    driver = Driver()
    producer = initialized(driver)
    driver.add(producer, ("t", 0))
    assert driver.shard.describe(TXN) is not None
    assert driver.shard.describe("nobody") is None
    ongoing = ListFilter(states=frozenset({TxnState.ONGOING}))
    assert [t.transactional_id for t in driver.shard.list_transactions(ongoing)] == [TXN]
    assert list(driver.shard.list_transactions(ListFilter(producer_ids=frozenset({1})))) == []
    driver.now += 5_000
    long_running = ListFilter(min_duration_ms=4_000)
    assert len(list(driver.shard.list_transactions(long_running))) == 1
    assert list(driver.shard.list_transactions(ListFilter(min_duration_ms=5_000))) == []
    driver.end(producer, commit=True)  # a finished transaction counts from its start too
    assert len(list(driver.shard.list_transactions(long_running))) == 1
    other = driver.init("never-started")
    assert other.error == ErrorCode.NONE
    ages_ago = ListFilter(min_duration_ms=100_000)
    ids = {t.transactional_id for t in driver.shard.list_transactions(ages_ago)}
    assert ids == {"never-started"}  # start time -1 passes any duration


def test_records_round_trip_in_kafkas_format() -> None:
    driver = Driver()
    producer = initialized(driver)
    driver.add(producer, ("topic-a", 3), ("topic-a", 1), ("b", 0))
    record = driver.written[-1]
    key, value = encode_record(record)[:2]
    assert key[:2] == b"\x00\x00" and value[:2] == b"\x00\x00"  # key and value version 0
    # Value version 0 has no previous producer id nor last epoch (Kafka's does not either).
    assert decode_record(key, value) == TxnRecord(record.transactional_id, on_the_wire(record))
    empty = driver.written[0]
    assert decode_record(*encode_record(empty)[:2]) == TxnRecord(TXN, on_the_wire(empty))


def on_the_wire(record: TxnRecord) -> TxnFields:
    assert record.fields is not None
    return replace(
        record.fields, previous_producer_id=-1, last_producer_epoch=-1, client_transaction_version=0
    )


# -- transaction version 2 (KIP-890 part 2) ------------------------------------------------------


def test_version_2_bumps_the_epoch_at_every_end_and_marks_with_the_new_one() -> None:
    driver = Driver()
    producer = initialized(driver)
    assert driver.add(producer, ("t", 0), version=2) == ErrorCode.NONE
    assert driver.shard.transactions[TXN].current.client_transaction_version == 2
    result = driver.end_txn(producer, commit=True, version=2)
    bumped = ProducerIdAndEpoch(producer.producer_id, producer.producer_epoch + 1)
    assert result == EndResult(ErrorCode.NONE, bumped.producer_id, bumped.producer_epoch)
    marker = driver.markers[-1]
    assert marker.producer_epoch == bumped.producer_epoch and marker.transaction_version == 2
    assert driver.state() == TxnState.COMPLETE_COMMIT
    # The retry of that EndTxn (with the old epoch) gets the same answer; the old epoch
    # is fenced for anything else.
    assert driver.end_txn(producer, commit=True, version=2) == result
    assert driver.end_txn(producer, commit=False, version=2).error == ErrorCode.INVALID_TXN_STATE
    assert driver.add(producer, ("t", 0), version=2) == ErrorCode.PRODUCER_FENCED
    # The next transaction goes on with the bumped epoch.
    assert driver.add(bumped, ("t", 1), version=2) == ErrorCode.NONE
    assert driver.end_txn(bumped, commit=False, version=2).producer_epoch == 2
    record = driver.written[-1]
    key, value = encode_record(record)[:2]
    assert value[:2] == b"\x00\x01"  # value version 1 under transaction version 2
    decoded = decode_record(key, value)
    assert decoded is not None and decoded.fields is not None
    assert decoded.fields.client_transaction_version == 2


def test_version_2_abort_with_nothing_added_bumps_the_epoch_without_markers() -> None:
    driver = Driver()
    producer = initialized(driver)
    assert driver.end_txn(producer, commit=True, version=2).error == ErrorCode.INVALID_TXN_STATE
    result = driver.end_txn(producer, commit=False, version=2)
    assert result.error == ErrorCode.NONE and result.producer_epoch == producer.producer_epoch + 1
    assert driver.markers[-1].partitions == frozenset()
    assert driver.state() == TxnState.COMPLETE_ABORT
    # Version 1 refuses the same abort, as Kafka.
    other = Driver()
    first = initialized(other)
    assert other.end(first, commit=False) == ErrorCode.INVALID_TXN_STATE


def test_version_2_end_while_the_markers_are_sent_is_concurrent() -> None:
    driver = Driver(hold_markers=True)
    producer = initialized(driver)
    driver.add(producer, ("t", 0), version=2)
    assert driver.end_txn(producer, commit=True, version=2).error == ErrorCode.NONE
    assert driver.state() == TxnState.PREPARE_COMMIT
    bumped = ProducerIdAndEpoch(producer.producer_id, producer.producer_epoch + 1)
    # The client's next transaction starts at once: its implicit add waits for the markers.
    assert driver.add(bumped, ("t", 0), version=2) == ErrorCode.CONCURRENT_TRANSACTIONS
    # A retry of the EndTxn itself (old epoch) is concurrent too; the new epoch is early.
    assert driver.end_txn(producer, commit=True, version=2).error == (
        ErrorCode.CONCURRENT_TRANSACTIONS
    )
    assert driver.end_txn(bumped, commit=True, version=2).error == ErrorCode.PRODUCER_FENCED


def test_version_2_exhausted_epoch_moves_to_the_next_producer_id() -> None:
    driver = Driver()
    producer = initialized(driver)
    txn = driver.shard.transactions[TXN]
    txn.current = replace(txn.current, producer_epoch=EXHAUSTED_EPOCH)
    exhausted = ProducerIdAndEpoch(producer.producer_id, EXHAUSTED_EPOCH)
    driver.add(exhausted, ("t", 0), version=2)
    result = driver.end_txn(exhausted, commit=True, version=2)
    assert result == EndResult(ErrorCode.NONE, 9000, 0)
    assert driver.markers[-1].producer_id == producer.producer_id
    assert driver.markers[-1].producer_epoch == EXHAUSTED_EPOCH + 1
    current = driver.shard.transactions[TXN].current
    assert (current.producer_id, current.producer_epoch) == (9000, 0)
    assert current.previous_producer_id == producer.producer_id
    # A retry with the exhausted id and epoch is answered with the new ones.
    assert driver.end_txn(exhausted, commit=True, version=2) == EndResult(ErrorCode.NONE, 9000, 0)
