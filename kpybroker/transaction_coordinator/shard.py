"""The coordinator of one ``__transaction_state`` partition, as a state machine without I/O.

It holds the transactional ids that hash to its partition, fed events (the
client requests, the outcome of its writes and marker sends, the periodic
abort and expiry passes) and answering with ``Effects`` that the runtime
carries out. The checks and their errors are Kafka's ``TransactionCoordinator``
(``handleInitProducerId``, ``handleAddPartitionsToTransaction``,
``handleEndTransaction``, ``abortTimedOutTransactions``,
``removeExpiredTransactionalIds``); ``transaction_state`` has the transitions.

The shard is built by replaying its partition (``replay``); ``loaded()`` then
resends the markers of every transaction left half-completed, as Kafka does
when it becomes coordinator, so no transaction is left open by a crash or a
failover. ``coordinator_epoch`` is the partition's leader epoch at load: the
markers carry it, and partition leaders refuse markers of an older one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from kpybroker.coordinator.interface import coordinator_error
from kpybroker.protocol.errors import ErrorCode
from kpybroker.transaction_coordinator.effects import Effects, Token, TxnMarkers
from kpybroker.transaction_coordinator.transaction_log_records import TxnRecord
from kpybroker.transaction_coordinator.transaction_settings import TransactionSettings
from kpybroker.transaction_coordinator.transaction_state import (
    EXHAUSTED_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    TopicPartition,
    TransactionMetadata,
    TxnFields,
    TxnState,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndResult:
    """EndTxn's answer: the id and epoch the producer goes on with (EndTxn v5 returns them)."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class ListFilter:
    """ListTransactions' filters; empty means any."""

    states: frozenset[TxnState] = frozenset()
    producer_ids: frozenset[int] = frozenset()
    min_duration_ms: int = -1
    transactional_id_matches: Callable[[str], bool] | None = None


class TransactionShard:
    def __init__(
        self,
        partition: int,
        coordinator_epoch: int,
        settings: TransactionSettings,
        clock: Callable[[], int],
    ) -> None:
        self.partition = partition
        self.coordinator_epoch = coordinator_epoch
        self.settings = settings
        self.clock = clock
        self.transactions: dict[str, TransactionMetadata] = {}
        #: Ids whose markers are being sent: the periodic pass resends the others' markers.
        self.completing: set[str] = set()

    def __repr__(self) -> str:
        return f"TransactionShard({self.partition}, ids={len(self.transactions)})"

    # -- loading ------------------------------------------------------------------------

    def replay(self, record: TxnRecord) -> None:
        """Apply one record of the partition, in log order (the last one of an id wins)."""
        if record.fields is None:
            self.transactions.pop(record.transactional_id, None)
        else:
            self.transactions[record.transactional_id] = TransactionMetadata(
                record.transactional_id, record.fields
            )

    def loaded(self) -> Effects:
        """Finish what the previous coordinator left half-done: markers of Prepare* states."""
        out = Effects()
        for txn in self.transactions.values():
            if txn.state.preparing:
                self._send_markers(out, txn)
        return out

    # -- InitProducerId -------------------------------------------------------------------

    def needs_producer_id(self, transactional_id: str) -> bool:
        """Whether InitProducerId for this id will need a fresh producer id (new or exhausted)."""
        txn = self.transactions.get(transactional_id)
        return txn is None or (txn.state.settled and txn.epoch_exhausted)

    def init_producer_id(
        self,
        token: Token,
        transactional_id: str,
        timeout_ms: int,
        expected: ProducerIdAndEpoch | None,
        fresh_producer_id: int | None,
    ) -> Effects:
        """``fresh_producer_id`` was claimed beforehand if ``needs_producer_id`` said so."""
        out = Effects()
        now = self.clock()
        txn = self.transactions.get(transactional_id)
        if txn is None:
            if fresh_producer_id is None:
                out.reply(token, InitResult(ErrorCode.CONCURRENT_TRANSACTIONS))
                return out
            txn = self.transactions[transactional_id] = TransactionMetadata(
                transactional_id,
                TxnFields(
                    producer_id=fresh_producer_id,
                    producer_epoch=NO_PRODUCER_EPOCH,
                    timeout_ms=timeout_ms,
                    state=TxnState.EMPTY,
                    last_update_timestamp_ms=now,
                ),
            )
        if txn.pending is not None:
            out.reply(token, InitResult(ErrorCode.CONCURRENT_TRANSACTIONS))
            return out
        if expected is not None and not _expected_producer_is_valid(txn, expected):
            out.reply(token, InitResult(ErrorCode.PRODUCER_FENCED))
            return out
        state = txn.state
        if state.preparing:
            out.reply(token, InitResult(ErrorCode.CONCURRENT_TRANSACTIONS))
        elif state == TxnState.ONGOING:
            # Abort the open transaction with a bumped epoch (fencing its producer); the
            # client retries and then gets a second bump.
            self._end(
                out,
                txn,
                txn.prepare_fence(),
                False,
                token,
                txn.current.client_transaction_version,
                from_init=True,
            )
        elif state.settled:
            self._init_settled(out, token, txn, timeout_ms, expected, fresh_producer_id, now)
        else:
            raise IllegalTransition(f"{transactional_id} is {state.kafka_name}")
        return out

    def _init_settled(
        self,
        out: Effects,
        token: Token,
        txn: TransactionMetadata,
        timeout_ms: int,
        expected: ProducerIdAndEpoch | None,
        fresh_producer_id: int | None,
        now: int,
    ) -> None:
        if txn.epoch_exhausted and (
            expected is None or expected.producer_epoch == txn.producer_epoch
        ):
            if fresh_producer_id is None:
                out.reply(token, InitResult(ErrorCode.CONCURRENT_TRANSACTIONS))
                return
            fields = txn.prepare_new_producer_id(
                fresh_producer_id, timeout_ms, now, keep_last_epoch=expected is not None
            )
        else:
            bumped = txn.prepare_epoch_bump(
                timeout_ms, None if expected is None else expected.producer_epoch, now
            )
            if bumped is None:
                out.reply(token, InitResult(ErrorCode.PRODUCER_FENCED))
                return
            fields = bumped

        def done(effects: Effects, error: ErrorCode) -> None:
            if error:
                effects.reply(token, InitResult(error))
                return
            log.info(
                "initialized transactional id %s with producer id %d and epoch %d on partition %d",
                txn.transactional_id,
                fields.producer_id,
                fields.producer_epoch,
                self.partition,
            )
            effects.reply(
                token, InitResult(ErrorCode.NONE, fields.producer_id, fields.producer_epoch)
            )

        self._write(out, txn, fields, done)

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------

    def add_partitions(
        self,
        token: Token,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Collection[TopicPartition],
        transaction_version: int = 1,
    ) -> Effects:
        """A client's AddPartitionsToTxn (version 1), or a leader adding a partition of a
        version-2 transaction on its first write there."""
        out = Effects()
        txn, error = self._producer_check(transactional_id, producer)
        if txn is None:
            out.reply(token, error)
            return out
        if _busy(txn):
            out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
            return out
        wanted = frozenset(partitions)
        if txn.state == TxnState.ONGOING and wanted <= txn.current.partitions:
            out.reply(token, ErrorCode.NONE)
            return out
        fields = txn.prepare_add_partitions(wanted, self.clock(), transaction_version)
        self._write(out, txn, fields, lambda effects, err: effects.reply(token, err))
        return out

    def busy(self, transactional_id: str) -> bool:
        """Whether adding partitions to the id's transaction would answer
        CONCURRENT_TRANSACTIONS now: a write of its state is pending, or its previous
        transaction is still completing (markers being written)."""
        txn = self.transactions.get(transactional_id)
        return txn is not None and _busy(txn)

    def verify_partitions(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Collection[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890's check for a partition leader: is each partition in the open transaction?"""
        txn, error = self._producer_check(transactional_id, producer)
        if txn is None:
            return dict.fromkeys(partitions, error)
        if txn.state.preparing:
            return dict.fromkeys(partitions, ErrorCode.CONCURRENT_TRANSACTIONS)
        added = txn.current.partitions
        return {
            tp: ErrorCode.NONE if tp in added else ErrorCode.TRANSACTION_ABORTABLE
            for tp in partitions
        }

    def _producer_check(
        self, transactional_id: str, producer: ProducerIdAndEpoch
    ) -> tuple[TransactionMetadata | None, ErrorCode]:
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer.producer_id:
            return None, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer.producer_epoch:
            return None, ErrorCode.PRODUCER_FENCED
        return txn, ErrorCode.NONE

    # -- EndTxn ----------------------------------------------------------------------------

    def needs_next_producer_id(self, transactional_id: str, transaction_version: int) -> bool:
        """Whether an EndTxn of version 2 will exhaust the epoch and need a fresh id."""
        txn = self.transactions.get(transactional_id)
        return transaction_version >= 2 and txn is not None and txn.epoch_exhausted

    def end_txn(
        self,
        token: Token,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        commit: bool,
        transaction_version: int = 1,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> Effects:
        """Kafka's ``endTransaction``; the reply is an ``EndResult`` with the producer id and
        epoch the client goes on with (bumped under transaction version 2)."""
        out = Effects()
        txn = self.transactions.get(transactional_id)
        if txn is None:
            out.reply(token, EndResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
            return out
        current = txn.current
        state = current.state
        retry_on_bump = False
        if current.bumps_on_end:
            # An EndTxn of version 2 retried after its bump carries the epoch before it; one
            # retried after an exhausted epoch moved the id carries the previous id.
            retry_on_bump = (
                producer.producer_id == current.producer_id
                and producer.producer_epoch == current.producer_epoch - 1
                and current.last_producer_epoch == producer.producer_epoch
            )
            retry_on_overflow = (
                producer.producer_id == current.previous_producer_id
                and producer.producer_epoch == EXHAUSTED_EPOCH
                and current.producer_epoch == 0
                and state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
            )
            if producer.producer_id != current.producer_id and not retry_on_overflow:
                out.reply(token, EndResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
                return out
            if state.preparing:
                valid_epoch = retry_on_bump
            elif state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
                retry_on_bump = retry_on_bump or retry_on_overflow
                valid_epoch = retry_on_bump or producer.producer_epoch == current.producer_epoch
            else:
                valid_epoch = producer.producer_epoch == current.producer_epoch
        else:
            if producer.producer_id != current.producer_id:
                out.reply(token, EndResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING))
                return out
            valid_epoch = producer.producer_epoch == current.producer_epoch
        if not valid_epoch:
            out.reply(token, EndResult(ErrorCode.PRODUCER_FENCED))
            return out
        if txn.pending is not None:
            out.reply(token, EndResult(ErrorCode.CONCURRENT_TRANSACTIONS))
            return out
        completed = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        completing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if state == TxnState.ONGOING:
            self._end(out, txn, None, commit, token, transaction_version, next_producer_id)
        elif state == completed and (retry_on_bump or not current.bumps_on_end):
            # A retry of an EndTxn that completed.
            out.reply(token, EndResult(ErrorCode.NONE, current.producer_id, current.producer_epoch))
        elif state == completing:
            out.reply(token, EndResult(ErrorCode.CONCURRENT_TRANSACTIONS))
        elif not commit and transaction_version >= 2 and state.settled and not retry_on_bump:
            # Version 2 lets a client abort before any partition was added: the epoch is
            # bumped with nothing to mark.
            self._end(out, txn, None, False, token, transaction_version, next_producer_id)
        elif state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
            raise IllegalTransition(f"{transactional_id} is {state.kafka_name}")
        else:
            log.debug("%s is %s: cannot end it with commit=%s", transactional_id, state, commit)
            out.reply(token, EndResult(ErrorCode.INVALID_TXN_STATE))
        return out

    def _end(
        self,
        out: Effects,
        txn: TransactionMetadata,
        fence: TxnFields | None,
        commit: bool,
        token: Token | None,
        transaction_version: int,
        next_producer_id: int = NO_PRODUCER_ID,
        *,
        from_init: bool = False,
    ) -> None:
        """Write Prepare*, answer, then send the markers; ``fence`` is a pending epoch fence.
        An abort by the coordinator (a fence) gets the transaction's own version."""
        fields = txn.prepare_end(commit, self.clock(), transaction_version, next_producer_id)

        def done(effects: Effects, error: ErrorCode) -> None:
            if error:
                if fence is not None and error == ErrorCode.COORDINATOR_NOT_AVAILABLE:
                    txn.failed_epoch_fence = True
                effects.reply(token, InitResult(error) if from_init else EndResult(error))
                return
            if from_init:
                effects.reply(token, InitResult(ErrorCode.CONCURRENT_TRANSACTIONS))
            elif fields.next_producer_id != NO_PRODUCER_ID:
                effects.reply(token, EndResult(ErrorCode.NONE, fields.next_producer_id, 0))
            else:
                effects.reply(
                    token, EndResult(ErrorCode.NONE, fields.producer_id, fields.producer_epoch)
                )
            self._send_markers(effects, txn)

        self._write(out, txn, fields, done)

    def _send_markers(self, out: Effects, txn: TransactionMetadata) -> None:
        current = txn.current
        markers = TxnMarkers(
            transactional_id=txn.transactional_id,
            producer_id=current.producer_id,
            producer_epoch=current.producer_epoch,
            committed=current.state == TxnState.PREPARE_COMMIT,
            coordinator_epoch=self.coordinator_epoch,
            partitions=current.partitions,
            transaction_version=current.client_transaction_version,
        )

        def written(effects: Effects, all_written: bool) -> None:
            if (
                not all_written
                or self.transactions.get(txn.transactional_id) is not txn
                or txn.pending is not None
                or not txn.state.preparing
            ):
                self.completing.discard(txn.transactional_id)
                return
            self._write(effects, txn, txn.prepare_complete(self.clock()), completed)

        def completed(effects: Effects, error: ErrorCode) -> None:
            self.completing.discard(txn.transactional_id)
            if error:
                log.warning(
                    "writing the completion of transaction %s failed (%s): its markers are "
                    "sent again on the next pass",
                    txn.transactional_id,
                    error.name,
                )

        self.completing.add(txn.transactional_id)
        out.send_markers(markers, written)

    # -- the periodic passes -------------------------------------------------------------------

    def abort_timed_out(self) -> Effects:
        """Abort every transaction open longer than its timeout, fencing its producer; and
        send again the markers of a completion whose write failed."""
        out = Effects()
        now = self.clock()
        for txn in list(self.transactions.values()):
            current = txn.current
            if (
                current.state.preparing
                and txn.pending is None
                and txn.transactional_id not in self.completing
            ):
                self._send_markers(out, txn)
                continue
            if (
                current.state == TxnState.ONGOING
                and txn.pending is None
                and current.start_timestamp_ms + current.timeout_ms < now
            ):
                log.info(
                    "aborting transaction %s (producer id %d, epoch %d): open longer than "
                    "its timeout of %d ms",
                    txn.transactional_id,
                    current.producer_id,
                    current.producer_epoch,
                    current.timeout_ms,
                )
                self._end(
                    out,
                    txn,
                    txn.prepare_fence(),
                    False,
                    None,
                    current.client_transaction_version,
                )
        return out

    def expire_transactional_ids(self) -> Effects:
        """Forget ids idle for ``transactional.id.expiration.ms``, writing their tombstones."""
        out = Effects()
        cutoff = self.clock() - self.settings.transactional_id_expiration_ms
        for txn in list(self.transactions.values()):
            if (
                txn.state.settled
                and txn.pending is None
                and txn.current.last_update_timestamp_ms <= cutoff
            ):
                self._expire(out, txn)
        return out

    def _expire(self, out: Effects, txn: TransactionMetadata) -> None:
        fields = txn.prepare_dead()

        def done(effects: Effects, error: ErrorCode) -> None:
            if error:
                txn.abandon(fields)
            elif self.transactions.get(txn.transactional_id) is txn:
                del self.transactions[txn.transactional_id]
                log.info("expired transactional id %s", txn.transactional_id)

        out.append([TxnRecord(txn.transactional_id, None)], done)

    # -- reads -------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        txn = self.transactions.get(transactional_id)
        return None if txn is None or txn.state == TxnState.DEAD else txn

    def list_transactions(self, wanted: ListFilter) -> Iterable[TransactionMetadata]:
        now = self.clock()
        for txn in self.transactions.values():
            current = txn.current
            if wanted.states and current.state not in wanted.states:
                continue
            if wanted.producer_ids and current.producer_id not in wanted.producer_ids:
                continue
            # Kafka's duration filter: time since the start, in any state (an id that never
            # started one, start -1, passes any filter).
            if (
                wanted.min_duration_ms >= 0
                and now - current.start_timestamp_ms <= wanted.min_duration_ms
            ):
                continue
            matches = wanted.transactional_id_matches
            if matches is not None and not matches(txn.transactional_id):
                continue
            yield txn

    # -- writing ---------------------------------------------------------------------------------

    def _write(
        self,
        out: Effects,
        txn: TransactionMetadata,
        fields: TxnFields,
        then: Callable[[Effects, ErrorCode], None],
    ) -> None:
        """Append ``fields``; apply them once acknowledged, then run ``then`` with the error."""

        def done(effects: Effects, append_error: ErrorCode) -> None:
            error = coordinator_error(append_error) if append_error else ErrorCode.NONE
            if error or self.transactions.get(txn.transactional_id) is not txn:
                txn.abandon(fields)
                then(effects, error or ErrorCode.NOT_COORDINATOR)
                return
            txn.complete(fields)
            then(effects, ErrorCode.NONE)

        out.append([TxnRecord(txn.transactional_id, fields)], done)


def _busy(txn: TransactionMetadata) -> bool:
    return txn.pending is not None or txn.state.preparing


def _expected_producer_is_valid(txn: TransactionMetadata, expected: ProducerIdAndEpoch) -> bool:
    """Kafka's ``isValidProducerId``: a producer recovering with its last known id and epoch."""
    current = txn.current
    return (
        current.producer_epoch == NO_PRODUCER_EPOCH
        or expected.producer_id == current.producer_id
        or (
            expected.producer_id == current.previous_producer_id
            and expected.producer_epoch >= EXHAUSTED_EPOCH
        )
    )
