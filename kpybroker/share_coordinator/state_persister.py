"""How the rest of the broker reaches share state: Kafka's ``DefaultStatePersister``.

Each call is about one share partition (group, topic ID, partition). Its
share coordinator is the leader of the key's ``__share_group_state``
partition, found in the cluster metadata (the topic is created on first
need). When that is this broker, the local ``ShareCoordinator`` is called
directly; otherwise the request goes to that broker over the inter-broker
listener (one key per request; ``state_requests``), as Kafka's
``PersisterStateManager`` sends it.

A coordinator that cannot answer yet (COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS: the topic is being created,
leadership is moving, the partition is loading) or a broker that cannot be
reached is asked again, after a backoff doubling from 100 ms to 1 s, until
``request.timeout.ms`` has passed; then the last error is returned (an
unreachable broker as COORDINATOR_NOT_AVAILABLE).

Kafka's coordinator refuses to read or write a key that was never
initialized with INVALID_REQUEST ("... on uninitialized share partition not
allowed."); the persister returns that as UNKNOWN_TOPIC_OR_PARTITION, which
``SharePersister`` promises for a key without state. Reads hand out the
reader's leader epoch and no delivery complete count (the read answer has
neither), whichever broker answered.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable

from kpybroker.cluster.broker_client import BrokerConnectionError, BrokerConnections, Locator
from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.errors import ErrorCode
from kpybroker.share_coordinator import state_requests
from kpybroker.share_coordinator.persister import PartitionState, ShareKey
from kpybroker.share_coordinator.service import ShareCoordinator
from kpybroker.share_coordinator.shard import READ_UNINITIALIZED, WRITE_UNINITIALIZED
from kpybroker.share_coordinator.share_coordinator_settings import ShareCoordinatorSettings
from kpybroker.share_coordinator.share_state import StateAnswer
from kpybroker.share_coordinator.state_requests import StateRequest

log = logging.getLogger(__name__)

CONNECTION_ERRORS = (OSError, TimeoutError, BrokerConnectionError, DecodeError)
RETRIABLE = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
UNINITIALIZED = frozenset({READ_UNINITIALIZED, WRITE_UNINITIALIZED})
#: Connections kept per peer broker: each carries one request at a time, and a write waits
#: for its replication, so share partitions writing at once should not queue behind one.
CONNECTIONS_PER_PEER = 4

Local = Callable[[], Awaitable[StateAnswer]]
Remote = Callable[[object], StateAnswer]


class DefaultStatePersister:
    """Implements ``persister.SharePersister``."""

    def __init__(
        self,
        broker_id: int,
        coordinator: ShareCoordinator,
        locate: Locator,
        settings: ShareCoordinatorSettings,
    ) -> None:
        self.broker_id = broker_id
        self.coordinator = coordinator
        self.settings = settings
        timeout_s = settings.persister_timeout_ms / 1000
        self._peers = [
            BrokerConnections(locate, f"broker-{broker_id}-share-persister", timeout_s)
            for _ in range(CONNECTIONS_PER_PEER)
        ]
        self._next_peers = itertools.cycle(self._peers)

    def close(self) -> None:
        for peers in self._peers:
            peers.close()

    # -- SharePersister -----------------------------------------------------------------------

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        answer = await self._ask(
            key,
            lambda: self.coordinator.initialize(key, state_epoch, start_offset),
            state_requests.initialize_request(key, state_epoch, start_offset),
            lambda response: state_requests.answer_of(key, response),
        )
        return answer.error

    async def read(
        self, key: ShareKey, leader_epoch: int
    ) -> tuple[ErrorCode, PartitionState | None]:
        answer = await self._ask(
            key,
            lambda: self.coordinator.read(key, leader_epoch),
            state_requests.read_request(key, leader_epoch),
            lambda response: state_requests.read_answer(key, leader_epoch, response),
        )
        state = answer.state
        if state is not None:
            state = state._replace(leader_epoch=leader_epoch, delivery_complete_count=-1)
        return answer.error, state

    async def write(self, key: ShareKey, state: PartitionState) -> ErrorCode:
        answer = await self._ask(
            key,
            lambda: self.coordinator.write(key, state),
            state_requests.write_request(key, state),
            lambda response: state_requests.answer_of(key, response),
        )
        return answer.error

    async def read_summary(
        self, key: ShareKey, leader_epoch: int
    ) -> tuple[ErrorCode, PartitionState | None]:
        answer = await self._ask(
            key,
            lambda: self.coordinator.read_summary(key, leader_epoch),
            state_requests.summary_request(key, leader_epoch),
            lambda response: state_requests.summary_answer(key, response),
        )
        return answer.error, answer.state

    async def delete(self, key: ShareKey) -> ErrorCode:
        answer = await self._ask(
            key,
            lambda: self.coordinator.delete(key),
            state_requests.delete_request(key),
            lambda response: state_requests.answer_of(key, response),
        )
        return answer.error

    # -- reaching the coordinator -------------------------------------------------------------

    async def _ask(
        self, key: ShareKey, local: Local, request: StateRequest, remote: Remote
    ) -> StateAnswer:
        """Ask the key's coordinator until it answers or the time is up."""
        settings = self.settings
        deadline = time.monotonic() + settings.persister_timeout_ms / 1000
        backoff_s = settings.persister_backoff_ms / 1000
        while True:
            answer = await self._attempt(key, local, request, remote)
            if answer.error not in RETRIABLE or time.monotonic() + backoff_s > deadline:
                break
            await asyncio.sleep(backoff_s)
            backoff_s = min(2 * backoff_s, settings.persister_backoff_max_ms / 1000)
        if answer.error == ErrorCode.INVALID_REQUEST and answer.message in UNINITIALIZED:
            return StateAnswer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, answer.message)
        if answer.error:
            log.debug(
                "share state of %s: %s (%s)",
                key.coordinator_key(),
                answer.error.name,
                answer.message,
            )
        return answer

    async def _attempt(
        self, key: ShareKey, local: Local, request: StateRequest, remote: Remote
    ) -> StateAnswer:
        coordinator_key = key.coordinator_key()
        broker = self.coordinator.leader_of(coordinator_key)
        if broker is None:  # no topic yet (created now), or no live leader
            error, broker = await self.coordinator.find_coordinator(coordinator_key)
            if error:
                return StateAnswer(error)
        if broker == self.broker_id:
            return await local()
        try:
            response = await next(self._next_peers).request(
                broker, request.request, request.version
            )
        except CONNECTION_ERRORS as exc:
            log.info("share coordinator %d of %s unreachable: %s", broker, coordinator_key, exc)
            return StateAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc))
        return remote(response)
