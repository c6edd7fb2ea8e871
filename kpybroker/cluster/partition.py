"""A partition hosted on this broker: its log, its state znode as last seen, and its role.

The state znode (leader, leader epoch, ISR) decides the role; ``apply`` takes
each new version of it and says what changed (``Transition``), so that the
replica manager can start or stop fetching.

As leader, the partition keeps each follower's progress (``isr``) and
advances the high watermark to the smallest log end offset across the ISR;
while this broker is the only in-sync replica that is its own log end, right
after each append. Requests wait on it here: acks=all produces for the high
watermark to pass their last offset, consumer fetches for it to move,
follower fetches for appends. The last stable offset, which bounds
read_committed consumers, moves only with the high watermark, so their fetches
wait on the same signal.

Transaction markers (``append_txn_marker``) are appended as leader like an
acks=all produce: the transaction coordinator's WriteTxnMarkers waits for the
high watermark to pass them.

Fencing by leader epoch: the log records each epoch's start offset when this
broker becomes leader (Kafka's ``makeLeader``), so that OffsetForLeaderEpoch
tells a returning replica where its log diverged.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kpybroker.cluster.follower_progress import FollowerProgress, fresh_progress
from kpybroker.log.partition_log import AppendResult, PartitionLog, ReadResult
from kpybroker.log.produce_validator import CheckedBatch
from kpybroker.log.producer_state import VerificationGuard
from kpybroker.metadata.model import PartitionMetadata
from kpybroker.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kpybroker.log.transaction_index import AbortedTxn

log = logging.getLogger(__name__)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Transition(enum.Enum):
    """What a new partition state means for this broker."""

    NONE = "none"
    """Same leader and epoch: at most the ISR changed."""
    LEADER = "leader"
    """This broker now leads, at a new epoch."""
    FOLLOWER = "follower"
    """Another broker (or none: leader -1) now leads, at a new epoch."""


def _ignore_caught_up(partition: Partition, follower: int) -> None:
    """The default ``on_caught_up``: one function for every partition, not a lambda each."""


def _ignore_disk_error(log: PartitionLog, what: str, exc: OSError) -> None:
    """The default ``on_disk_error``."""


class Partition:
    """One replica of a partition on this broker.

    A broker hosts tens of thousands of these, most of them idle, so the class has
    ``__slots__`` and what only a busy partition needs (the futures waiting on it) is made
    on first use: an empty set is 216 bytes.
    """

    __slots__ = (
        "_acks",
        "_append_waiters",
        "_hwm_waiters",
        "broker_id",
        "clock_ms",
        "followers",
        "index",
        "leader_epoch_start_offset",
        "log",
        "meta",
        "min_insync_replicas",
        "on_caught_up",
        "on_disk_error",
        "pending_isr",
        "topic",
        "topic_id",
    )

    def __init__(
        self,
        log: PartitionLog,
        topic: str,
        index: int,
        topic_id: bytes,
        broker_id: int,
        min_insync_replicas: int = 1,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.log = log
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.broker_id = broker_id
        self.min_insync_replicas = min_insync_replicas
        self.clock_ms = clock_ms
        self.meta = PartitionMetadata(index, ())
        self.leader_epoch_start_offset = -1
        self.followers: dict[int, FollowerProgress] = {}
        #: An ISR being written by this leader; the high watermark counts it in meanwhile.
        self.pending_isr: tuple[int, ...] | None = None
        #: Called with (partition, follower) when a follower caught up and may join the ISR.
        #: The replica manager gives every partition the same callable (no closure each).
        self.on_caught_up: Callable[[Partition, int], None] = _ignore_caught_up
        #: Called with (log, what, error) when the log hit a disk error: its directory goes
        #: offline. Shared by every partition, like ``on_caught_up``.
        self.on_disk_error: Callable[[PartitionLog, str, OSError], None] = _ignore_disk_error
        #: Futures resolved at the next append (follower fetches) and at the next move of the
        #: high watermark (consumer fetches); None until the first waits.
        self._append_waiters: set[asyncio.Future[bool]] | None = None
        self._hwm_waiters: set[asyncio.Future[bool]] | None = None
        #: acks=all produces waiting for the high watermark to pass their offset; None when
        #: none ever did.
        self._acks: list[tuple[int, asyncio.Future[ErrorCode]]] | None = None

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.index}, leader={self.leader}, epoch={self.leader_epoch})"
        )

    # -- state -------------------------------------------------------------------

    @property
    def leader(self) -> int:
        return self.meta.leader

    @property
    def leader_epoch(self) -> int:
        return self.meta.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return self.meta.isr

    @property
    def replicas(self) -> tuple[int, ...]:
        return self.meta.replicas

    @property
    def is_leader(self) -> bool:
        return self.meta.leader == self.broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def follower(self, broker: int) -> FollowerProgress:
        progress = self.followers.get(broker)
        if progress is None:
            progress = self.followers[broker] = FollowerProgress()
        return progress

    def apply(self, meta: PartitionMetadata) -> Transition:
        """Take a new version of the partition's state; say what it means for this broker.

        A change of leader or leader epoch is a transition even when this broker
        stays leader: the epoch may have been bumped because this broker was
        away (its ZooKeeper session expired), and what its followers hold is
        unknown again.
        """
        old = self.meta
        self.meta = meta
        if old.state is not None and (old.leader, old.leader_epoch) == (
            meta.leader,
            meta.leader_epoch,
        ):
            if self.is_leader:
                self.maybe_advance_high_watermark()
            return Transition.NONE
        if self.is_leader:
            self._become_leader()
            return Transition.LEADER
        self._resign(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return Transition.FOLLOWER

    def _become_leader(self) -> None:
        """Kafka's ``makeLeader``: the new epoch starts at the log end; followers are unknown."""
        end = self.log.log_end_offset
        self.log.maybe_assign_epoch_start_offset(self.leader_epoch, end)
        self.leader_epoch_start_offset = end
        followers = [b for b in self.replicas if b != self.broker_id]
        self.followers = fresh_progress(followers, self.isr, self.clock_ms())
        self.pending_isr = None
        log.info(
            "%s-%d: leader at epoch %d from offset %d, ISR %s",
            self.topic,
            self.index,
            self.leader_epoch,
            end,
            list(self.isr),
        )
        self.maybe_advance_high_watermark()

    def _resign(self, error: ErrorCode) -> None:
        """No longer the leader (or no longer hosted): answer whatever waited on leadership."""
        self.followers = {}
        self.pending_isr = None
        self.fail_acks(error)
        self._wake(self._append_waiters)
        self._wake(self._hwm_waiters)

    def fail_acks(self, error: ErrorCode) -> None:
        """Answer every acks=all produce waiting here with ``error``."""
        acks, self._acks = self._acks, None
        for _, future in acks or ():
            if not future.done():
                future.set_result(error)

    def close(self, error: ErrorCode = ErrorCode.NOT_LEADER_OR_FOLLOWER) -> None:
        """The partition is no longer hosted here (its topic was deleted, or its log
        directory failed): what waits on it gets ``error``."""
        self._resign(error)

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing: a client's view of the epoch must match ours (-1 skips the check)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)

    # -- as leader -------------------------------------------------------------------

    def append_as_leader(
        self,
        batch: CheckedBatch | memoryview | bytearray,
        required_acks: int,
        verification: VerificationGuard | None = None,
    ) -> AppendResult:
        """Append a batch (a produced one, checked by ``produce_validator``; or one the
        broker built); NOT_ENOUGH_REPLICAS first when acks=all cannot be met.
        ``verification``: see ``start_txn_verification``."""
        return self._append(
            lambda: self.log.append(batch, self.leader_epoch, verification), required_acks
        )

    def start_txn_verification(
        self, producer_id: int, epoch: int
    ) -> tuple[VerificationGuard, bool]:
        """Before a transactional write: the guard it presents, and whether the transaction
        coordinator must first verify (or add) this partition (KIP-890)."""
        return self.log.producer_state.start_verification(producer_id, epoch)

    def append_txn_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool
    ) -> AppendResult:
        """Append the marker ending ``producer_id``'s transaction (always acks=all, as
        Kafka's WriteTxnMarkers); the errors of ``PartitionLog.append_txn_marker``."""
        return self._append(
            lambda: self.log.append_txn_marker(
                producer_id, producer_epoch, coordinator_epoch, committed, self.leader_epoch
            ),
            -1,
        )

    def _append(self, append: Callable[[], AppendResult], required_acks: int) -> AppendResult:
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {list(self.isr)} is insufficient to satisfy "
                f"the min.isr requirement of {self.min_insync_replicas} for partition "
                f"{self.topic}-{self.index}",
            )
        try:
            result = append()
        except OSError as exc:
            raise self._storage_error(f"appending to {self.topic}-{self.index}", exc) from exc
        if not result.duplicate:
            self._wake(self._append_waiters)
            self.maybe_advance_high_watermark()
        return result

    def _storage_error(self, what: str, exc: OSError) -> KafkaError:
        """Report a disk error (its directory goes offline); the error to answer with."""
        self.on_disk_error(self.log, what, exc)
        return KafkaError(
            ErrorCode.KAFKA_STORAGE_ERROR, f"Disk error when trying to access log file: {exc}"
        )

    def acks_outcome(self, offset: int) -> ErrorCode | None:
        """The acks=all answer for records below ``offset`` if it is known now; None while the
        high watermark is below it. On a partition with no followers it is always known
        (the high watermark follows each append), so produce need not wait at all."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < offset:
            return None
        return self._committed_outcome()

    def _committed_outcome(self) -> ErrorCode:
        """Records below the high watermark are committed, but NOT_ENOUGH_REPLICAS_AFTER_APPEND
        if the ISR shrank below ``min.insync.replicas`` meanwhile (fewer copies than asked)."""
        if len(self.isr) < self.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    async def wait_for_high_watermark(self, offset: int) -> ErrorCode:
        """Wait until the high watermark reaches ``offset`` (acks=all; Kafka's DelayedProduce).

        NOT_LEADER_OR_FOLLOWER when leadership is lost first; then as ``acks_outcome``.
        """
        outcome = self.acks_outcome(offset)
        if outcome is not None:
            return outcome
        future = asyncio.get_running_loop().create_future()
        if self._acks is None:
            self._acks = []
        self._acks.append((offset, future))
        try:
            error = await future
        finally:
            self._acks = [(o, f) for o, f in self._acks or () if f is not future] or None
        return error or self._committed_outcome()

    def update_follower(self, follower: int, fetch_offset: int) -> None:
        """A follower fetched from ``fetch_offset``: it holds everything below it."""
        if follower not in self.replicas:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {follower} is not a replica of {self.topic}-{self.index}",
            )
        end = self.log.log_end_offset
        progress = self.follower(follower)
        progress.on_fetch(fetch_offset, end, self.clock_ms())
        if (
            follower not in self.isr
            and follower not in self.meta.removing  # a reassignment is taking it away
            and fetch_offset >= self.high_watermark
            and fetch_offset >= self.leader_epoch_start_offset
        ):
            self.on_caught_up(self, follower)
        self.maybe_advance_high_watermark()

    def maybe_advance_high_watermark(self) -> None:
        """As leader, move the high watermark up to what every in-sync replica has.

        The ISR counted is the larger of the written one and one being written
        (Kafka's maximal ISR), so that a follower being added holds the high
        watermark back at once. A follower that has not fetched since this
        broker became leader holds it where it is. While this broker is the only
        in-sync replica the high watermark is its log end, also right after a
        restart, when the checkpointed one may lag the log by a few seconds of
        acknowledged records.
        """
        if not self.is_leader:
            return
        target = self.log.log_end_offset
        for broker in set(self.isr) | set(self.pending_isr or ()):
            if broker != self.broker_id:
                target = min(target, self.follower(broker).log_end_offset)
        if target > self.log.high_watermark:
            self.log.update_high_watermark(target)
            self._wake(self._hwm_waiters)
            self._complete_acks()

    def _complete_acks(self) -> None:
        hwm = self.log.high_watermark
        for offset, future in self._acks or ():
            if offset <= hwm and not future.done():
                future.set_result(ErrorCode.NONE)

    def read_records(
        self,
        offset: int,
        max_bytes: int,
        min_one: bool,
        *,
        for_follower: bool = False,
        committed: bool = False,
    ) -> ReadResult:
        """Whole batches from ``offset``: up to the log end for followers, below the last
        stable offset for read_committed consumers, the high watermark for others. A disk
        error takes the log's directory offline: KAFKA_STORAGE_ERROR."""
        plog = self.log
        if for_follower:
            limit = plog.log_end_offset
        else:
            limit = plog.last_stable_offset if committed else plog.high_watermark
        try:
            return plog.read(offset, max_bytes, limit, min_one_message=min_one)
        except OSError as exc:
            raise self._storage_error(f"reading {self.topic}-{self.index}", exc) from exc

    def aborted_transactions(self, fetch_offset: int, result: ReadResult) -> list[AbortedTxn]:
        """For a read_committed fetch: the aborted transactions overlapping ``result``."""
        return self.log.aborted_transactions(fetch_offset, result)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.log.end_offset_for_epoch(epoch)

    # -- as follower -------------------------------------------------------------------

    def append_as_follower(self, records: memoryview, leader_hwm: int, leader_start: int) -> int:
        """Append what the leader sent and follow its high watermark and log start offset;
        a disk error takes the log's directory offline and is raised."""
        plog = self.log
        try:
            appended = plog.append_as_follower(records) if records else 0
        except OSError as exc:
            self.on_disk_error(plog, f"appending to {self.topic}-{self.index} as follower", exc)
            raise
        plog.update_high_watermark(min(leader_hwm, plog.log_end_offset))
        if leader_start > plog.log_start_offset:
            plog.increment_log_start_offset(min(leader_start, plog.high_watermark))
        return appended

    # -- waiting -----------------------------------------------------------------------

    def add_waiter(self, future: asyncio.Future[bool], *, for_follower: bool) -> None:
        """Resolve ``future`` at the next append (followers) or high watermark move (consumers)."""
        if for_follower:
            if self._append_waiters is None:
                self._append_waiters = set()
            self._append_waiters.add(future)
        else:
            if self._hwm_waiters is None:
                self._hwm_waiters = set()
            self._hwm_waiters.add(future)

    def remove_waiter(self, future: asyncio.Future[bool]) -> None:
        for waiters in (self._append_waiters, self._hwm_waiters):
            if waiters:
                waiters.discard(future)

    @staticmethod
    def _wake(waiters: set[asyncio.Future[bool]] | None) -> None:
        if not waiters:
            return
        for future in waiters:
            if not future.done():
                future.set_result(True)
        waiters.clear()
