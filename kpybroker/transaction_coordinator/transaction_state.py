"""One transactional id's state and its legal transitions (Kafka's ``TransactionMetadata``).

A transaction moves through Kafka's states::

    Empty --AddPartitions--> Ongoing --EndTxn--> PrepareCommit/PrepareAbort
          --markers written--> CompleteCommit/CompleteAbort --AddPartitions--> Ongoing ...

and InitProducerId bumps the epoch from any settled state (Empty, Complete*),
or fences an Ongoing transaction (PrepareEpochFence, then abort). Dead is an
expired id.

Under transaction version 2 (KIP-890; the client says so with EndTxn v5 or a
produce that adds its partition implicitly) every EndTxn bumps the epoch:
the markers carry the new epoch, so a late write of the old one is refused,
and when the epoch is exhausted the completion moves the id to the fresh
producer id recorded as ``next_producer_id``.

Every change is prepared first, as an immutable ``TxnFields``, written to
``__transaction_state``, and only applied once that write is acknowledged, so
the state a client was told about is always the one on disk. While a change
is being written the id has a ``pending`` state and other requests get
CONCURRENT_TRANSACTIONS, as in Kafka.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kpybroker.log.producer_state import NO_PRODUCER_EPOCH
from kpybroker.protocol.records import NO_PRODUCER_ID

#: An epoch this high cannot be bumped again: the producer gets a new id (Kafka's
#: ``isEpochExhausted``: Short.MaxValue - 1).
EXHAUSTED_EPOCH = 32_766
MAX_EPOCH = 32_767

TopicPartition = tuple[str, int]


class TxnState(enum.IntEnum):
    """The states and their byte in ``__transaction_state`` (Kafka's ``TransactionState.id``)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("PrepareCommit")."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)

    @property
    def settled(self) -> bool:
        """No transaction is open or completing: a new one may start, the epoch may move."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

#: Kafka's ``TransactionState.validPreviousStates``.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset(
        {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    # Transaction version 2 may abort with no transaction open (Kafka 4.0's additions).
    TxnState.PREPARE_ABORT: frozenset(
        {
            TxnState.ONGOING,
            TxnState.PREPARE_EPOCH_FENCE,
            TxnState.EMPTY,
            TxnState.COMPLETE_COMMIT,
            TxnState.COMPLETE_ABORT,
        }
    ),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


@dataclass(frozen=True, slots=True)
class TxnFields:
    """What ``__transaction_state`` records of an id (Kafka's ``TxnTransitMetadata``)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    #: Producer id the completion moves to when an EndTxn bump exhausted the epoch.
    next_producer_id: int = NO_PRODUCER_ID
    #: The transaction version of the client that started the transaction (0, 1 or 2).
    client_transaction_version: int = 0

    @property
    def bumps_on_end(self) -> bool:
        """Transaction version 2: ending the transaction bumps the epoch."""
        return self.client_transaction_version >= 2


class IllegalTransition(RuntimeError):
    """A transition Kafka's coordinator treats as a bug (it throws IllegalStateException)."""


@dataclass(slots=True)
class TransactionMetadata:
    """A transactional id's current (written) fields and the change being written, if any."""

    transactional_id: str
    current: TxnFields
    pending: TxnFields | None = None
    #: Kafka's ``hasFailedEpochFence``: a fence whose write failed is retried at the same epoch.
    failed_epoch_fence: bool = field(default=False)

    @property
    def state(self) -> TxnState:
        return self.current.state

    @property
    def producer_id(self) -> int:
        return self.current.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.current.producer_epoch

    @property
    def epoch_exhausted(self) -> bool:
        return self.current.producer_epoch >= EXHAUSTED_EPOCH

    # -- preparing changes ------------------------------------------------------------

    def _prepare(self, fields: TxnFields) -> TxnFields:
        if self.pending is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: {fields.state.kafka_name} while "
                f"{self.pending.state.kafka_name} is pending"
            )
        if self.state not in VALID_PREVIOUS[fields.state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.kafka_name} -> {fields.state.kafka_name}"
            )
        self.pending = fields
        return fields

    def prepare_epoch_bump(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnFields | None:
        """InitProducerId on a settled id: the next epoch (``prepareIncrementProducerEpoch``).

        A retry whose expected epoch is the last one keeps the current epoch;
        any other mismatch is None, which the caller answers PRODUCER_FENCED.
        """
        current = self.current
        bumped, last = current.producer_epoch + 1, NO_PRODUCER_EPOCH
        if expected_epoch is not None:
            if current.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
                last = current.producer_epoch
            elif expected_epoch == current.last_producer_epoch:
                bumped, last = current.producer_epoch, current.last_producer_epoch
            else:
                return None
        return self._prepare_init(current.producer_id, bumped, last, timeout_ms, now_ms)

    def prepare_new_producer_id(
        self, producer_id: int, timeout_ms: int, now_ms: int, *, keep_last_epoch: bool
    ) -> TxnFields:
        """InitProducerId when the epoch is exhausted: a fresh id at epoch 0."""
        last = self.current.producer_epoch if keep_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare_init(producer_id, 0, last, timeout_ms, now_ms)

    def _prepare_init(
        self, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int, now_ms: int
    ) -> TxnFields:
        """The Empty state InitProducerId leaves: no partitions, no transaction started."""
        current = self.current
        return self._prepare(
            replace(
                current,
                producer_id=producer_id,
                producer_epoch=epoch,
                last_producer_epoch=last_epoch,
                timeout_ms=timeout_ms,
                state=TxnState.EMPTY,
                partitions=frozenset(),
                start_timestamp_ms=-1,
                last_update_timestamp_ms=now_ms,
                previous_producer_id=current.producer_id,
            )
        )

    def prepare_fence(self) -> TxnFields:
        """Fence an open transaction's producer: the epoch it will be aborted with.

        Kafka never writes this state; the abort that follows carries the bumped epoch.
        """
        current = self.current
        epoch = current.producer_epoch if self.failed_epoch_fence else current.producer_epoch + 1
        return self._prepare(
            replace(
                current,
                producer_epoch=epoch,
                last_producer_epoch=NO_PRODUCER_EPOCH,
                state=TxnState.PREPARE_EPOCH_FENCE,
            )
        )

    def prepare_add_partitions(
        self, partitions: frozenset[TopicPartition], now_ms: int, transaction_version: int
    ) -> TxnFields:
        """A transaction started here takes the client's transaction version."""
        current = self.current
        starting = current.state.settled
        return self._prepare(
            replace(
                current,
                state=TxnState.ONGOING,
                partitions=current.partitions | partitions,
                start_timestamp_ms=now_ms if starting else current.start_timestamp_ms,
                last_update_timestamp_ms=now_ms,
                client_transaction_version=transaction_version
                if starting
                else current.client_transaction_version,
            )
        )

    def prepare_end(
        self,
        commit: bool,
        now_ms: int,
        transaction_version: int,
        next_producer_id: int = NO_PRODUCER_ID,
    ) -> TxnFields:
        """Ongoing (or, under version 2, settled) to PrepareCommit or PrepareAbort, from a
        client's EndTxn or an abort. Version 2 (the EndTxn's, or for an abort the
        transaction's) bumps the epoch, as Kafka's ``prepareAbortOrCommit``;
        ``next_producer_id`` is the fresh id claimed when that exhausts it."""
        if self.pending is not None and self.pending.state == TxnState.PREPARE_EPOCH_FENCE:
            # The fence's epoch becomes the id's epoch; the abort is written with it.
            fenced = self.pending
            self.pending = None
            self.current = replace(
                self.current,
                producer_epoch=fenced.producer_epoch,
                last_producer_epoch=NO_PRODUCER_EPOCH,
            )
        current = self.current
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        ended = replace(
            current,
            state=state,
            last_update_timestamp_ms=now_ms,
            client_transaction_version=transaction_version,
        )
        if transaction_version >= 2 and current.producer_epoch < MAX_EPOCH:
            ended = replace(
                ended,
                producer_epoch=current.producer_epoch + 1,
                last_producer_epoch=current.producer_epoch,
                next_producer_id=next_producer_id,
            )
        return self._prepare(ended)

    def prepare_complete(self, now_ms: int) -> TxnFields:
        """Prepare* to Complete* once every marker is written."""
        current = self.current
        committed = current.state == TxnState.PREPARE_COMMIT
        completed = replace(
            current,
            state=TxnState.COMPLETE_COMMIT if committed else TxnState.COMPLETE_ABORT,
            partitions=frozenset(),
            last_update_timestamp_ms=now_ms,
        )
        if current.next_producer_id != NO_PRODUCER_ID:
            # The bump exhausted the epoch: the client was given the next id at epoch 0.
            completed = replace(
                completed,
                producer_id=current.next_producer_id,
                producer_epoch=0,
                previous_producer_id=current.producer_id,
                next_producer_id=NO_PRODUCER_ID,
            )
        return self._prepare(completed)

    def prepare_dead(self) -> TxnFields:
        """An expired id: its tombstone is written, then it is forgotten."""
        return self._prepare(replace(self.current, state=TxnState.DEAD, partitions=frozenset()))

    # -- the outcome of the write -----------------------------------------------------------

    def complete(self, fields: TxnFields) -> None:
        """The write of ``fields`` is acknowledged: they become the id's state."""
        if self.pending is not fields:
            raise IllegalTransition(f"{self.transactional_id}: completing a change not pending")
        self.pending = None
        self.failed_epoch_fence = False
        self.current = fields

    def abandon(self, fields: TxnFields) -> None:
        """The write of ``fields`` failed: the id stays as it was."""
        if self.pending is fields:
            self.pending = None
