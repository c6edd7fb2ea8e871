"""Share groups driven without sockets: the shard through ``Driver``, the service through a
runtime that runs the shard's events synchronously, and a persister that records its calls.

``ShareDriver`` adds ShareGroupHeartbeat and the share-state events to the
coordinator ``Driver`` (fake clock, timers as deadlines, a list as log).
``DriverRuntime`` is the part of ``CoordinatorRuntime`` that
``ShareGroupService`` uses, over one driver: a test awaits the service as the
handlers would, and the persister calls happen for real (``FakePersister``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.interface import Caller, Effects
from kpybroker.coordinator.share_group_protocol import (
    ShareHeartbeatResult,
    heartbeat_error,
    validate_heartbeat,
)
from kpybroker.coordinator.share_group_service import ShareGroupService
from kpybroker.coordinator.share_group_state import ShareInitialization
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kpybroker.share_coordinator.persister import PartitionState, ShareKey
from tests.helpers.coordinator_driver import SETTINGS, Driver, StaticTopics

#: Kafka's request tests run without assignment batching, each change assigned at once;
#: the tests of batching itself set an interval.
SHARE_SETTINGS = dataclasses.replace(SETTINGS, share_assignment_interval_ms=0)


class ShareDriver(Driver):
    """A coordinator ``Driver`` that speaks ShareGroupHeartbeat too."""

    def __init__(
        self,
        topics: StaticTopics | None = None,
        settings: CoordinatorSettings = SHARE_SETTINGS,
        **kw: Any,
    ) -> None:
        super().__init__(settings=settings, topics=topics, **kw)
        #: The initializations heartbeats asked for, oldest first.
        self.initializations: list[ShareInitialization] = []

    def send_share(self, method: str, *args: Any) -> Any:
        """Feed ``shard.share.<method>(token, *args)``; return its reply."""
        token = next(self.tokens)
        self.apply(getattr(self.shard.share, method)(token, *args))
        return self.replies[token]

    def share_heartbeat(
        self,
        member_id: str,
        epoch: int = 0,
        *,
        group: str = "g",
        topics: list[str] | None = None,
        rack_id: str | None = None,
        client_id: str = "client",
    ) -> Any:
        """A ShareGroupHeartbeat (checked as the service checks it); its answer. A join
        subscribes to ``t`` unless told otherwise."""
        if epoch == 0 and topics is None:
            topics = ["t"]
        request = ShareGroupHeartbeatRequest(
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            rack_id=rack_id,
            subscribed_topic_names=topics,
        )
        try:
            validate_heartbeat(request)
        except KafkaError as exc:
            return heartbeat_error(exc.code, exc.message)
        result: ShareHeartbeatResult = self.send_share(
            "heartbeat", Caller(client_id, "/127.0.0.1", 1), request
        )
        if result.initialize is not None:
            self.initializations.append(result.initialize)
        return result.response

    def initialize_all(self, ok: bool = True) -> None:
        """Report every pending initialization as done (or failed), as the service would."""
        pending, self.initializations = self.initializations, []
        for plan in pending:
            event = "initialized" if ok else "uninitialized"
            assert self.send_share(event, plan.group_id, plan.partitions()) == ErrorCode.NONE

    def share_assignment(self, response: Any) -> dict[str, list[int]] | None:
        return self.assignment_of(response)

    def members(self, group: str = "g") -> dict[str, Any]:
        found = self.shard.share_groups.group(group)
        return {} if found is None else dict(found.members)


class FakePersister:
    """A ``SharePersister`` that keeps start offsets and records every call; ``failing``
    makes the calls on those partitions fail with that error."""

    def __init__(self) -> None:
        self.states: dict[ShareKey, PartitionState] = {}
        self.calls: list[tuple[str, Any]] = []
        self.failing: dict[tuple[bytes, int], ErrorCode] = {}

    def _error(self, key: ShareKey) -> ErrorCode:
        return self.failing.get((key.topic_id, key.partition), ErrorCode.NONE)

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        self.calls.append(("initialize", (key, state_epoch, start_offset)))
        error = self._error(key)
        if not error:
            self.states[key] = PartitionState(state_epoch, start_offset)
        return error

    async def read_summary(
        self, key: ShareKey, leader_epoch: int
    ) -> tuple[ErrorCode, PartitionState | None]:
        self.calls.append(("read_summary", key))
        state = self.states.get(key)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return ErrorCode.NONE, state

    async def delete(self, key: ShareKey) -> ErrorCode:
        self.calls.append(("delete", key))
        error = self._error(key)
        if not error:
            self.states.pop(key, None)
        return error

    async def read(self, key: ShareKey, leader_epoch: int) -> Any:
        raise AssertionError("the group coordinator never reads a partition's whole state")

    async def write(self, key: ShareKey, state: PartitionState) -> ErrorCode:
        raise AssertionError("the group coordinator never writes a partition's state")


class DriverRuntime:
    """What ``ShareGroupService`` asks of ``CoordinatorRuntime``, over one ``Driver``."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.active = True
        self.topics_image = driver.topics
        self.tasks: list[asyncio.Task] = []

    def shard_for(self, key: str) -> Any:
        if not self.active:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return self.driver.shard

    async def call(self, shard: Any, event: Callable[[int], Effects]) -> Any:
        token = next(self.driver.tokens)
        self.driver.apply(event(token))
        return self.driver.replies[token]

    def start_task(self, work: Any) -> None:
        self.tasks.append(asyncio.ensure_future(work))

    async def settle(self) -> None:
        """Wait for the background work (initializations) started so far."""
        while self.tasks:
            tasks, self.tasks = self.tasks, []
            await asyncio.gather(*tasks)


class FakeReplicas:
    """Partition end offsets for the lag: ``high_watermarks[(topic, partition)]``."""

    def __init__(self) -> None:
        self.high_watermarks: dict[tuple[str, int], int] = {}

    def partition_for(self, topic: str, index: int) -> Any:
        if (topic, index) not in self.high_watermarks:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return type("Led", (), {"high_watermark": self.high_watermarks[(topic, index)]})()


def service(driver: ShareDriver, persister: FakePersister | None = None) -> Any:
    """A ``ShareGroupService`` over the driver, with its runtime, replicas and persister."""
    runtime = DriverRuntime(driver)
    replicas = FakeReplicas()
    shares = ShareGroupService(runtime, replicas, persister)  # type: ignore[arg-type]
    return shares, runtime, replicas
