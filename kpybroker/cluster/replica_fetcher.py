"""Followers copy their leaders with the Kafka protocol itself (Kafka's ``ReplicaFetcherThread``).

A ``ReplicaFetcher`` is one task and one connection to one leader broker,
for the partitions this broker follows there. For each partition it first
finds where its log diverges from the leader's, with OffsetForLeaderEpoch
(KIP-101, KIP-279; Kafka's ``AbstractFetcherThread.truncateToEpochEndOffsets``),
and truncates there; then it sends Fetch requests with its broker id as
``replica_id`` from its log end offset, and appends the batches it gets back
byte for byte, offsets and leader epochs included. The fetch offset tells the
leader what this follower holds, which is how the leader tracks its progress.

A partition is truncated again at every new leader epoch (the replica
manager re-adds it). A fetch that finds the offset out of range (the leader's
log is shorter after an unclean election, or its start moved past ours after
retention) is resolved with ListOffsets, as Kafka does. Errors that the next
metadata change will settle (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...)
hold the partition back for ``replica.fetch.backoff.ms``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from kpybroker.cluster.broker_client import BrokerConnection, BrokerConnectionError, Locator
from kpybroker.cluster.partition import Partition
from kpybroker.cluster.replication_settings import ReplicationSettings
from kpybroker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from kpybroker.log.partition_log import PartitionLog
from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    PartitionData,
)
from kpybroker.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kpybroker.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)

log = logging.getLogger(__name__)

#: Versions sent: Fetch 12 names topics and carries replica_id at the top level;
#: OffsetForLeaderEpoch 3+ and ListOffsets 1+ carry replica_id.
FETCH_VERSION = 12
EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 6
LATEST, EARLIEST = -1, -2

#: Network and protocol failures after which the fetcher reconnects.
CONNECTION_ERRORS = (OSError, TimeoutError, BrokerConnectionError, DecodeError)

Key = tuple[str, int]


#: Where a broker is reached: (host, port), or None while it is not registered.
@dataclass(eq=False, slots=True)
class FetchState:
    """One followed partition: its epoch, whether it must truncate first, its back-off."""

    partition: Partition
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0


class ReplicaFetcher:
    """Fetches the partitions that one leader broker leads, over one connection."""

    def __init__(
        self, broker_id: int, leader_id: int, locate: Locator, settings: ReplicationSettings
    ) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.locate = locate
        self.settings = settings
        self.states: dict[Key, FetchState] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: BrokerConnection | None = None

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader={self.leader_id}, partitions={len(self.states)})"

    def add(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        self.states[key] = FetchState(partition, partition.leader_epoch)
        self._changed.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{self.leader_id}")

    def remove(self, key: Key) -> None:
        self.states.pop(key, None)

    def stop(self) -> asyncio.Task[None] | None:
        """Stop fetching; returns the task to await for the stop to finish."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        self._disconnect()
        return task

    # -- the loop --------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = self.settings.fetch_backoff_ms / 1000
        failing = False  # a dead leader is reported once, not at every retry
        while True:
            ready = await self._ready()
            try:
                connection = await self._connect()
                await self._truncate(connection, [s for s in ready if s.truncating])
                await self._fetch(connection, [s for s in ready if not s.truncating])
            except CONNECTION_ERRORS as exc:
                level = logging.DEBUG if failing else logging.WARNING
                log.log(level, "fetching from broker %d failed: %r", self.leader_id, exc)
                failing = True
            except Exception:
                log.exception("replica fetcher for broker %d failed", self.leader_id)
            else:
                if failing:
                    log.info("fetching from broker %d again", self.leader_id)
                failing = False
                continue
            self._disconnect()
            await asyncio.sleep(backoff)

    async def _ready(self) -> list[FetchState]:
        """The partitions not backing off, waiting for one when there are none."""
        while True:
            self._changed.clear()
            now = time.monotonic()
            ready = [s for s in self.states.values() if s.delayed_until <= now]
            if ready:
                return ready
            delays = [s.delayed_until - now for s in self.states.values()]
            try:
                async with asyncio.timeout(min(delays) if delays else None):
                    await self._changed.wait()
            except TimeoutError:
                pass

    async def _connect(self) -> BrokerConnection:
        if self._connection is not None and self._connection.stale:
            self._disconnect()
        if self._connection is None:
            address = self.locate(self.leader_id)
            if address is None:
                raise BrokerConnectionError(f"broker {self.leader_id} is not registered")
            connection = BrokerConnection(
                address,
                client_id=f"broker-{self.broker_id}-fetcher-{self.leader_id}",
                timeout_s=self.settings.socket_timeout_ms / 1000,
            )
            await connection.connect()
            self._connection = connection
        return self._connection

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _current(self, key: Key, state: FetchState) -> bool:
        """Whether ``state`` is still what this fetcher does for ``key`` (an answer to a
        request sent for an older state is dropped)."""
        return self.states.get(key) is state

    def _delay(self, state: FetchState, why: object) -> None:
        partition = state.partition
        log.info(
            "%s-%d: holding fetches from broker %d back: %s",
            partition.topic,
            partition.index,
            self.leader_id,
            why,
        )
        state.delayed_until = time.monotonic() + self.settings.fetch_backoff_ms / 1000

    # -- truncation ------------------------------------------------------------------

    async def _truncate(self, connection: BrokerConnection, states: list[FetchState]) -> None:
        """Truncate each partition to where its log stops matching the leader's."""
        asking = []
        for state in states:
            plog = state.partition.log
            if plog.leader_epoch == UNDEFINED_EPOCH:
                # No epochs to compare (an empty log): only what is committed is certain.
                plog.truncate_to(plog.high_watermark)
                state.truncating = False
            else:
                asking.append(state)
        if not asking:
            return
        request = OffsetForLeaderEpochRequest(
            replica_id=self.broker_id,
            topics=[
                OffsetForLeaderTopic(
                    topic=topic,
                    partitions=[
                        OffsetForLeaderPartition(
                            partition=s.partition.index,
                            current_leader_epoch=s.leader_epoch,
                            leader_epoch=s.partition.log.leader_epoch,
                        )
                        for s in group
                    ],
                )
                for topic, group in _by_topic(asking).items()
            ],
        )
        response = await connection.request(request, EPOCH_VERSION)
        for topic in response.topics:
            for result in topic.partitions:
                key = (topic.topic, result.partition)
                state = self.states.get(key)
                if state is None or state not in asking:
                    continue
                if result.error_code:
                    self._delay(state, ErrorCode(result.error_code).name)
                else:
                    self._truncate_to_epoch_end(state, result.leader_epoch, result.end_offset)

    def _truncate_to_epoch_end(self, state: FetchState, epoch: int, end_offset: int) -> None:
        plog = state.partition.log
        target, done = truncation_point(plog, epoch, end_offset)
        if target < plog.log_end_offset:
            log.info(
                "%s: truncating to %d (leader %d says epoch %d ends at %d)",
                plog.name,
                target,
                self.leader_id,
                epoch,
                end_offset,
            )
        plog.truncate_to(target)
        state.truncating = not done

    # -- fetching --------------------------------------------------------------------

    async def _fetch(self, connection: BrokerConnection, states: list[FetchState]) -> None:
        if not states:
            return
        settings = self.settings
        sent = {
            (s.partition.topic, s.partition.index): (s, s.partition.log.log_end_offset)
            for s in states
        }
        request = FetchRequest(
            replica_id=self.broker_id,
            max_wait_ms=settings.fetch_wait_max_ms,
            min_bytes=settings.fetch_min_bytes,
            max_bytes=settings.fetch_response_max_bytes,
            topics=[
                FetchTopic(
                    topic=topic,
                    partitions=[
                        FetchPartition(
                            partition=s.partition.index,
                            current_leader_epoch=s.leader_epoch,
                            fetch_offset=s.partition.log.log_end_offset,
                            log_start_offset=s.partition.log.log_start_offset,
                            partition_max_bytes=settings.fetch_max_bytes,
                        )
                        for s in group
                    ],
                )
                for topic, group in _by_topic(states).items()
            ],
        )
        timeout = (settings.socket_timeout_ms + settings.fetch_wait_max_ms) / 1000
        response = await connection.request(request, FETCH_VERSION, timeout)
        if response.error_code:
            raise KafkaError(ErrorCode(response.error_code), "fetch refused as a whole")
        for topic in response.responses:
            for data in topic.partitions:
                key = (topic.topic, data.partition_index)
                state, offset = sent.get(key, (None, -1))
                if state is None or not self._current(key, state):
                    continue
                if state.partition.log.log_end_offset != offset:
                    continue  # truncated meanwhile
                await self._process(connection, state, data)

    async def _process(
        self, connection: BrokerConnection, state: FetchState, data: PartitionData
    ) -> None:
        partition = state.partition
        error = ErrorCode(data.error_code)
        if error == ErrorCode.NONE:
            try:
                partition.append_as_follower(
                    data.records, data.high_watermark, data.log_start_offset
                )
            except KafkaError as exc:
                state.truncating = True
                self._delay(state, exc)
            except OSError as exc:
                self._delay(state, f"cannot append: {exc}")
        elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(connection, state)
        else:
            self._delay(state, error.name)

    async def _out_of_range(self, connection: BrokerConnection, state: FetchState) -> None:
        """Kafka's ``handleOutOfRangeError``: behind the leader's log start, start over
        there; past its end (an unclean election shortened it), truncate to it."""
        plog = state.partition.log
        own_end = plog.log_end_offset
        leader_end = await self._leader_offset(connection, state, LATEST)
        if leader_end is None:
            return
        if leader_end < own_end:
            log.warning("%s: truncating to the leader's log end %d", plog.name, leader_end)
            plog.truncate_to(leader_end)
            return
        leader_start = await self._leader_offset(connection, state, EARLIEST)
        if leader_start is not None and leader_start > own_end:
            log.warning("%s: the leader's log starts at %d; starting over", plog.name, leader_start)
            plog.truncate_fully_and_start_at(leader_start)

    async def _leader_offset(
        self, connection: BrokerConnection, state: FetchState, timestamp: int
    ) -> int | None:
        """The leader's log end (LATEST, for a replica) or log start (EARLIEST)."""
        partition = state.partition
        request = ListOffsetsRequest(
            replica_id=self.broker_id,
            topics=[
                ListOffsetsTopic(
                    name=partition.topic,
                    partitions=[
                        ListOffsetsPartition(
                            partition_index=partition.index,
                            current_leader_epoch=state.leader_epoch,
                            timestamp=timestamp,
                        )
                    ],
                )
            ],
        )
        response = await connection.request(request, LIST_OFFSETS_VERSION)
        answer = response.topics[0].partitions[0]
        if answer.error_code or not self._current((partition.topic, partition.index), state):
            self._delay(state, ErrorCode(answer.error_code).name)
            return None
        return answer.offset


def truncation_point(plog: PartitionLog, epoch: int, end_offset: int) -> tuple[int, bool]:
    """Where to truncate when the leader says ``epoch`` ends at ``end_offset``, and whether
    that settles it (Kafka's ``AbstractFetcherThread.getOffsetTruncationState``).

    When this log does not know that epoch, it is cut to the end of its own
    largest epoch below it, and the leader must be asked again about that one.
    """
    own_end = plog.log_end_offset
    if end_offset == UNDEFINED_EPOCH_OFFSET:
        return plog.high_watermark, True
    if epoch == UNDEFINED_EPOCH:
        return min(end_offset, own_end), True
    own_epoch, own_epoch_end = plog.end_offset_for_epoch(epoch)
    if own_epoch == UNDEFINED_EPOCH:
        return min(end_offset, own_end), True
    if own_epoch != epoch:
        return min(own_epoch_end, own_end), False
    return min(own_epoch_end, end_offset, own_end), True


def _by_topic(states: Iterable[FetchState]) -> dict[str, list[FetchState]]:
    grouped: dict[str, list[FetchState]] = {}
    for state in states:
        grouped.setdefault(state.partition.topic, []).append(state)
    return grouped


class FetcherManager:
    """Which fetcher copies which followed partition (Kafka's ``ReplicaFetcherManager``).

    Partitions with the same leader share ``num.replica.fetchers`` fetchers,
    spread by a stable hash; a fetcher left with no partition is closed.
    """

    def __init__(self, broker_id: int, locate: Locator, settings: ReplicationSettings) -> None:
        self.broker_id = broker_id
        self.locate = locate
        self.settings = settings
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[Key, tuple[int, int]] = {}

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from its current leader, truncating first."""
        self.unfollow(partition.topic, partition.index)
        key = (partition.topic, partition.index)
        slot = (partition.leader, hash(key) % self.settings.num_fetchers)
        fetcher = self.fetchers.get(slot)
        if fetcher is None:
            fetcher = self.fetchers[slot] = ReplicaFetcher(
                self.broker_id, partition.leader, self.locate, self.settings
            )
        fetcher.add(partition)
        self._assigned[key] = slot

    def unfollow(self, topic: str, index: int) -> None:
        slot = self._assigned.pop((topic, index), None)
        if slot is None:
            return
        fetcher = self.fetchers[slot]
        fetcher.remove((topic, index))
        if not fetcher.states:
            del self.fetchers[slot]
            fetcher.stop()

    async def close(self) -> None:
        tasks = [fetcher.stop() for fetcher in self.fetchers.values()]
        self.fetchers.clear()
        self._assigned.clear()
        await asyncio.gather(*(t for t in tasks if t is not None), return_exceptions=True)
