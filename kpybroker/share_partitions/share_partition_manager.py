"""The share partitions this broker leads: loading them, acquiring, acknowledging, locks.

Kafka's ``SharePartitionManager``. A share partition (a group's view of a
partition) is loaded on the first ShareFetch that names it here: its state
is read through the persister (``share_coordinator.persister``); a partition
without a start offset yet starts where ``share.auto.offset.reset`` says
(latest by default: the high watermark), and that start is written back at
once, so the records produced after it are never skipped by a later leader.
A partition loaded at an older leader epoch is dropped and read again.

A fetch reads whole batches from the partition's next available offset
(never decoding records: only batch headers are parsed), acquires what it
can for the member and arms one timer for that acquisition's lock. When the
lock runs out, the records still held are released. Acknowledgements,
releases and lock expiries are written through the persister before they
are answered; writes of one partition are serialized so the share
coordinator sees them in order. A fetch that acquires nothing waits up to
its ``max_wait_ms`` for a partition's high watermark to move or for records
to be released.

Only this module touches the event loop and the persister; the state
machine is ``share_partition``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from kpybroker.config.group_table import BY_DURATION, java_duration_ms
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.records import BatchHeader, iter_batches
from kpybroker.share_coordinator.persister import (
    PartitionState,
    ShareKey,
    SharePersister,
    StateBatch,
)
from kpybroker.share_partitions.share_partition import (
    NOT_OWNER,
    Acquired,
    LogBatch,
    Refusal,
    SharePartition,
    valid_batches,
)
from kpybroker.share_partitions.share_sessions import ShareSession, ShareSessions
from kpybroker.share_partitions.share_settings import READ_COMMITTED, ShareSettings

if TYPE_CHECKING:
    from kpybroker.cluster.partition import Partition
    from kpybroker.log.transaction_index import AbortedTxn

log = logging.getLogger(__name__)

#: Reads of one partition in one fetch while all it meets is skipped.
MAX_READS = 8
#: Errors that mean another broker now keeps the partition's state for a newer leader.
FENCED = (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH)


class Leaders(Protocol):
    """The partitions this broker leads (``ReplicaManager``)."""

    def partition_for(
        self, topic: str, index: int, current_leader_epoch: int = -1, *, require_leader: bool = True
    ) -> Partition: ...


class Fetched(NamedTuple):
    """One partition's answer to a share fetch."""

    error: ErrorCode
    records: bytes = b""
    acquired: tuple[Acquired, ...] = ()


class Ack(NamedTuple):
    """One acknowledgement batch of a request."""

    first_offset: int
    last_offset: int
    types: Sequence[int]


@dataclass(eq=False)
class Held:
    """A loaded share partition and what goes with it."""

    key: ShareKey
    topic: str
    leader_epoch: int
    state_epoch: int
    state: SharePartition
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    timers: dict[int, asyncio.TimerHandle] = field(default_factory=dict)

    def cancel_timers(self) -> None:
        for handle in self.timers.values():
            handle.cancel()
        self.timers.clear()


def skipped(header: BatchHeader, aborted: Mapping[int, list[AbortedTxn]]) -> bool:
    """Whether a batch is kept from consumers: a control batch, or part of an aborted
    transaction (for read_committed groups, which are given ``aborted``)."""
    if header.is_control:
        return True
    if not header.is_transactional:
        return False
    return any(
        txn.first_offset <= header.base_offset <= txn.last_offset
        for txn in aborted.get(header.producer_id, ())
    )


class SharePartitionManager:
    def __init__(
        self,
        leaders: Leaders,
        persister: SharePersister,
        settings_of: Callable[[str], ShareSettings],
        max_sessions: int,
    ) -> None:
        self.leaders = leaders
        self.persister = persister
        self.settings_of = settings_of
        self.sessions = ShareSessions(max_sessions)
        self.held: dict[ShareKey, Held] = {}
        self._loading: dict[ShareKey, asyncio.Future[Held]] = {}
        self._wakers: set[asyncio.Future[bool]] = set()
        self._tasks: set[asyncio.Task] = set()

    def close(self) -> None:
        for held in self.held.values():
            held.cancel_timers()
        self.held.clear()
        for task in self._tasks:
            task.cancel()

    def lock_duration_ms(self, group_id: str) -> int:
        """How long acquired records stay locked (ShareFetch's AcquisitionLockTimeoutMs)."""
        return self.settings_of(group_id).record_lock_duration_ms

    # -- fetching ---------------------------------------------------------------------------

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        wanted: Sequence[tuple[ShareKey, str]],
        *,
        max_records: int,
        max_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
        record_limit: bool = False,
        batch_size: int | None = None,
    ) -> dict[ShareKey, Fetched]:
        """Acquire records of ``wanted`` (keys with their topic names) for the member,
        waiting up to ``max_wait_ms`` while there are fewer than ``min_bytes``.
        ``batch_size``: ShareFetch's, which cuts new records into in-flight batches."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, max_wait_ms) / 1000
        while True:
            answers, partitions = await self._fetch_once(
                member_id, wanted, max_records, max_bytes, record_limit, batch_size
            )
            got = sum(len(a.records) for a in answers.values())
            failed = any(a.error for a in answers.values())
            timeout = deadline - loop.time()
            if got >= max(1, min_bytes) or failed or timeout <= 0 or not partitions:
                return answers
            if not await self._wait(partitions, timeout):
                return answers

    async def _fetch_once(
        self,
        member_id: str,
        wanted: Sequence[tuple[ShareKey, str]],
        max_records: int,
        max_bytes: int,
        record_limit: bool,
        batch_size: int | None,
    ) -> tuple[dict[ShareKey, Fetched], list[Partition]]:
        answers: dict[ShareKey, Fetched] = {}
        partitions: list[Partition] = []
        records_left, bytes_left = max_records, max_bytes
        for key, topic in wanted:
            try:
                partition = self.leaders.partition_for(topic, key.partition)
                held = await self._held(key, topic, partition)
            except KafkaError as exc:
                answers[key] = Fetched(exc.code)
                continue
            partitions.append(partition)
            if records_left <= 0 or bytes_left <= 0:
                answers[key] = Fetched(ErrorCode.NONE)
                continue
            fetched = self._acquire(
                held, partition, member_id, records_left, bytes_left, record_limit, batch_size
            )
            answers[key] = fetched
            records_left -= sum(a.last_offset - a.first_offset + 1 for a in fetched.acquired)
            bytes_left -= len(fetched.records)
        return answers, partitions

    def _acquire(
        self,
        held: Held,
        partition: Partition,
        member_id: str,
        max_records: int,
        max_bytes: int,
        record_limit: bool,
        batch_size: int | None,
    ) -> Fetched:
        state = held.state
        log_start = partition.log.log_start_offset
        if log_start > state.start_offset:
            state.move_start(log_start)
        settings = self.settings_of(held.key.group_id)
        committed = settings.isolation_level == READ_COMMITTED
        # Batches no consumer gets (markers, aborted) are archived as they are met; reading
        # goes on past them rather than answering empty while records follow.
        for _ in range(MAX_READS):
            if not state.can_acquire():
                break
            offset = state.next_fetch_offset()
            read = partition.read_records(offset, max_bytes, True, committed=committed)
            if not len(read):
                break
            buf = read.read_bytes()
            aborted: dict[int, list[AbortedTxn]] = {}
            if committed:
                for txn in partition.aborted_transactions(offset, read):
                    aborted.setdefault(txn.producer_id, []).append(txn)
            batches = [
                LogBatch(h.base_offset, h.last_offset, pos, h.size, skipped(h, aborted))
                for pos, h in iter_batches(buf)
            ]
            lock, acquired, carried = state.acquire(
                member_id, batches, max_records, record_limit=record_limit, batch_size=batch_size
            )
            if acquired:
                self._arm(held, lock, settings.record_lock_duration_ms)
                view = memoryview(buf)
                records = b"".join(view[b.position : b.position + b.size] for b in carried)
                return Fetched(ErrorCode.NONE, records, tuple(acquired))
            if state.next_fetch_offset() == offset:
                break
        return Fetched(ErrorCode.NONE)

    async def _wait(self, partitions: list[Partition], timeout: float) -> bool:
        """Until a partition's high watermark moves, records are released, or ``timeout``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        for p in partitions:
            p.add_waiter(fut, for_follower=False)
        self._wakers.add(fut)
        handle = loop.call_later(timeout, lambda: fut.done() or fut.set_result(False))
        try:
            return await fut
        finally:
            handle.cancel()
            self._wakers.discard(fut)
            for p in partitions:
                p.remove_waiter(fut)

    def _wake(self) -> None:
        for fut in self._wakers:
            if not fut.done():
                fut.set_result(True)

    # -- acknowledging ------------------------------------------------------------------------

    async def acknowledge(
        self, member_id: str, key: ShareKey, topic: str, acks: Sequence[Ack], renew: bool
    ) -> Refusal | None:
        """Apply a partition's acknowledgement batches (all or none) and persist them: None,
        or why they were refused. ``renew``: the request may carry renewals (v2's
        ``is_renew_ack``)."""
        if not valid_batches(acks, renew):
            return Refusal(ErrorCode.INVALID_REQUEST)
        try:
            partition = self.leaders.partition_for(topic, key.partition)
        except KafkaError as exc:
            return Refusal(exc.code)
        held = self.held.get(key)
        if held is None or held.leader_epoch != partition.leader_epoch:
            # Nothing was acquired from this leader (loaded again since, or never).
            return Refusal(ErrorCode.INVALID_RECORD_STATE, NOT_OWNER)
        state = held.state
        for ack in acks:
            refusal = state.check_acquired(member_id, ack.first_offset, ack.last_offset)
            if refusal is not None:
                return refusal
        refusal = state.shared_offset_refusal(acks)
        if refusal is not None:
            return refusal
        changed: list[StateBatch] = []
        settings = self.settings_of(key.group_id)
        for ack in acks:
            batches, renewed = state.acknowledge(
                member_id, ack.first_offset, ack.last_offset, ack.types
            )
            changed.extend(batches)
            for lock in renewed:
                self._arm(held, lock, settings.record_lock_duration_ms)
        if not changed:
            return None
        self._wake()
        error = await self._persist(held, changed)
        return Refusal(error) if error else None

    def session_ended(self, session: ShareSession) -> None:
        """A member's share session closed, was replaced, or lost its connection: release
        what the member holds (persisted in the background). Once no member of the group
        has a session here, its share partitions are forgotten, as Kafka's
        ``ShareGroupListener.onGroupEmpty`` does: an empty group's start offsets may be
        reset (AlterShareGroupOffsets), so they are read again when members come back."""
        group_id, member_id = session.key
        keys = [ShareKey(group_id, tp.topic_id, tp.partition) for tp in session.partitions]
        for key in keys:
            held = self.held.get(key)
            if held is None:
                continue
            changed = held.state.release_member(member_id)
            if changed:
                self._background(self._persist(held, changed))
        self._wake()
        if not self.sessions.of_group(group_id):
            for key in [k for k in self.held if k.group_id == group_id]:
                self.held.pop(key).cancel_timers()

    def connection_closed(self, connection_id: str) -> None:
        """End the share sessions whose member's latest request came on this connection."""
        for session in self.sessions.drop_connection(connection_id):
            self.session_ended(session)

    # -- locks ---------------------------------------------------------------------------------

    def _arm(self, held: Held, lock: int, duration_ms: int) -> None:
        loop = asyncio.get_running_loop()
        held.timers[lock] = loop.call_later(duration_ms / 1000, self._expire, held, lock)

    def _expire(self, held: Held, lock: int) -> None:
        held.timers.pop(lock, None)
        if self.held.get(held.key) is not held:
            return
        changed = held.state.release_lock(lock)
        if changed:
            self._background(self._persist(held, changed))
            self._wake()

    # -- loading and persisting ----------------------------------------------------------------

    async def _held(self, key: ShareKey, topic: str, partition: Partition) -> Held:
        held = self.held.get(key)
        if held is not None and held.leader_epoch == partition.leader_epoch:
            return held
        if held is not None:  # led again, at a newer epoch: its state may have moved on
            held.cancel_timers()
            del self.held[key]
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.ensure_future(self._load(key, topic, partition))
            self._loading[key] = loading
            loading.add_done_callback(lambda _: self._loading.pop(key, None))
        return await asyncio.shield(loading)

    async def _load(self, key: ShareKey, topic: str, partition: Partition) -> Held:
        epoch = partition.leader_epoch
        error, persisted = await self.persister.read(key, epoch)
        if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or (not error and persisted is None):
            # The group coordinator initializes a partition's state before it assigns it:
            # none means no share group reads it here (Kafka fails the same way).
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR)
        if error in FENCED:
            # A newer leader has read the state: this broker no longer leads the partition,
            # whatever its metadata says yet; the client should look for the leader.
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if error or persisted is None:
            log.warning("cannot read the share state of %s: %s", key.coordinator_key(), error.name)
            raise KafkaError(error)
        settings = self.settings_of(key.group_id)
        state_epoch, start = persisted.state_epoch, persisted.start_offset
        if start < 0:  # initialized by the group coordinator, to be decided here
            start = self._reset_offset(partition, settings.auto_offset_reset)
            error = await self.persister.write(
                key, PartitionState(state_epoch, start, epoch, (), 0)
            )
            if error:
                raise KafkaError(error)
        state = SharePartition.from_state(
            max(start, partition.log.log_start_offset),
            persisted.batches,
            delivery_count_limit=settings.delivery_count_limit,
            max_in_flight=settings.max_record_locks,
        )
        held = Held(key, topic, epoch, state_epoch, state)
        self.held[key] = held
        log.info(
            "loaded share partition %s at start offset %d, %d in flight",
            key.coordinator_key(),
            state.start_offset,
            state.end_offset - state.start_offset,
        )
        return held

    @staticmethod
    def _reset_offset(partition: Partition, strategy: str) -> int:
        """Where a new share partition starts (``share.auto.offset.reset``)."""
        plog = partition.log
        if strategy == "earliest":
            return plog.log_start_offset
        if strategy.startswith(BY_DURATION):
            duration_ms = java_duration_ms(strategy[len(BY_DURATION) :]) or 0
            found = plog.offset_for_timestamp(int(time.time() * 1000 - duration_ms))
            if found is not None and found.offset < plog.high_watermark:
                return found.offset
        return plog.high_watermark

    async def _persist(self, held: Held, changed: list[StateBatch]) -> ErrorCode:
        async with held.write_lock:
            state = PartitionState(
                held.state_epoch,
                held.state.start_offset,
                held.leader_epoch,
                tuple(changed),
                held.state.delivery_complete_count(),
            )
            error = await self.persister.write(held.key, state)
        if error in FENCED:
            # Logged whether or not the partition is still held here: a member's session
            # may have ended (and the partition been forgotten) while the write was out.
            log.info("share partition %s fenced (%s)", held.key.coordinator_key(), error.name)
            if self.held.get(held.key) is held:
                held.cancel_timers()
                del self.held[held.key]
        elif error:
            log.warning(
                "writing the share state of %s failed: %s", held.key.coordinator_key(), error.name
            )
        return error

    def _background(self, work) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
