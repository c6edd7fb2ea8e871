"""The coordinator runtime with a fake broker: loading, replicated appends, leadership moves."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest

from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.interface import Caller
from kpybroker.coordinator.offsets_topic_records import decode_batch
from kpybroker.coordinator.runtime import CoordinatorRuntime
from kpybroker.metadata.topic_names import OFFSETS_TOPIC
from kpybroker.protocol.errors import ErrorCode, KafkaError
from tests.helpers.coordinator_driver import commit_request, join_request

SETTINGS = CoordinatorSettings(offsets_topic_partitions=1, initial_rebalance_delay_ms=3000)


class Appended(NamedTuple):
    last_offset: int


class FakePartition:
    """A led ``__consumer_offsets`` partition whose followers acknowledge on demand."""

    def __init__(self) -> None:
        self.is_leader = True
        self.leader_epoch = 0
        self.batches: list[bytes] = []
        self.high_watermark = 0
        self.acks: list[tuple[int, asyncio.Future]] = []
        self.log = self  # the loader reads an empty log: start == end

    log_start_offset = log_end_offset = 0

    def append_as_leader(self, batch: bytearray, required_acks: int) -> Appended:
        self.batches.append(bytes(batch))
        return Appended(len(self.batches) - 1)

    async def wait_for_high_watermark(self, offset: int) -> ErrorCode:
        future = asyncio.get_running_loop().create_future()
        self.acks.append((offset, future))
        return await future

    def replicate(self) -> None:
        self.high_watermark = len(self.batches)
        for offset, future in self.acks:
            if offset <= self.high_watermark:
                future.set_result(ErrorCode.NONE)


class FakeCluster:
    """The replicas, the cluster metadata and the topics of a broker, in one fake."""

    def __init__(self) -> None:
        self.partition = FakePartition()
        self.replicas = self
        self.partitions = {(OFFSETS_TOPIC, 0): self.partition}
        self.cluster = self
        self.topics = SimpleNamespace(get=lambda _name: None)  # sized by the settings
        self.listeners: list[Any] = []

    def get(self, topic: str, index: int) -> FakePartition | None:
        return self.partitions.get((topic, index))

    def leader_partition(self, topic: str, index: int) -> FakePartition:
        return self.partition

    def add_listener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: Any) -> None:
        self.listeners.remove(listener)

    # The replica manager's hosting listeners: every partition here is hosted already.
    def add_hosting_listener(self, listener: Any) -> None:
        pass

    def remove_hosting_listener(self, listener: Any) -> None:
        pass


CALLER = Caller("client", "/127.0.0.1", 9)


def test_a_commit_waits_for_replication_when_the_partition_has_followers() -> None:
    async def scenario() -> None:
        broker = FakeCluster()
        runtime = CoordinatorRuntime(SETTINGS, broker, broker, broker.topics)  # type: ignore[arg-type]
        await runtime.start()
        shard = runtime.shard_for("g")
        request = commit_request({("t", 0): 5})
        commit = asyncio.ensure_future(
            runtime.call(shard, lambda token: shard.commit(token, CALLER, request))
        )
        await asyncio.sleep(0.01)
        assert not commit.done(), "answered before the followers had the record"
        assert [r.value.offset for r in decode_batch(broker.partition.batches[0])] == [5]
        broker.partition.replicate()
        response = await asyncio.wait_for(commit, 1)
        assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
        await runtime.stop()

    asyncio.run(scenario())


def test_losing_leadership_answers_parked_joins_and_stops_routing() -> None:
    async def scenario() -> None:
        broker = FakeCluster()
        broker.partition.high_watermark = 10**9  # one broker: every append is committed
        runtime = CoordinatorRuntime(SETTINGS, broker, broker, broker.topics)  # type: ignore[arg-type]
        await runtime.start()
        shard = runtime.shard_for("g")
        join = asyncio.ensure_future(
            runtime.call(shard, lambda token: shard.join(token, CALLER, join_request()))
        )
        await asyncio.sleep(0.01)
        assert join.done() and join.result().error_code == ErrorCode.MEMBER_ID_REQUIRED
        member_id = join.result().member_id
        parked = asyncio.ensure_future(
            runtime.call(shard, lambda token: shard.join(token, CALLER, join_request(member_id)))
        )
        await asyncio.sleep(0.01)
        assert not parked.done()  # the initial rebalance delay (3 s) runs
        broker.partition.is_leader = False
        runtime.reconcile()
        assert (await asyncio.wait_for(parked, 1)).error_code == ErrorCode.NOT_COORDINATOR
        with pytest.raises(KafkaError) as routed:
            runtime.shard_for("g")
        assert routed.value.code == ErrorCode.NOT_COORDINATOR
        await runtime.stop()

    asyncio.run(scenario())
