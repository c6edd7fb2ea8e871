"""Three real ``Broker`` objects in one event loop, sharing one built-in metadata ensemble.

The whole replication path runs (Fetch with replica_id, OffsetForLeaderEpoch,
acks=all, ISR changes, the controller) over real sockets on loopback, in a
second or two; the process-level fault tests are in
tests/integration/test_replication_faults.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import kpybroker.broker
from kpybroker.broker import Broker
from kpybroker.cluster.broker_client import BrokerConnection, PeerAddress
from kpybroker.config import BrokerConfig
from kpybroker.metadata.builtin import BuiltinEnsemble, BuiltinMetadataStore
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kpybroker.protocol.messages.elect_leaders import ElectLeadersRequest, TopicPartitions
from kpybroker.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ReplicaState,
)
from kpybroker.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
)
from kpybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kpybroker.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kpybroker.protocol.records import NewRecord, build_batch
from tests.helpers.waiting import eventually

TOPIC = "replicated"
SETTINGS = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "20",
    "min.insync.replicas": "2",
    "auto.leader.rebalance.enable": "false",
}


class Cluster:
    def __init__(self, root: Path, ensemble: BuiltinEnsemble) -> None:
        self.root = root
        self.ensemble = ensemble
        self.brokers: dict[int, Broker] = {}

    async def start(self, broker_id: int) -> Broker:
        config = BrokerConfig.load(
            None,
            {**SETTINGS, "broker.id": str(broker_id), "log.dirs": str(self.root / f"b{broker_id}")},
        )
        broker = self.brokers[broker_id] = Broker(config)
        await broker.start()
        return broker

    async def stop(self, broker_id: int) -> None:
        await self.brokers.pop(broker_id).stop()

    def any(self) -> Broker:
        return next(iter(self.brokers.values()))

    def state(self, partition: int = 0) -> Any:
        return self.any().cluster.topics()[TOPIC].partitions[partition]

    def state_of(self, topic: str, partition: int = 0, *, full: bool = False) -> Any:
        """A partition's state as the first broker caches it (``full``: with its replicas)."""
        pm = self.any().cluster.topics()[topic].partitions[partition]
        return pm if full else pm.state

    async def call(self, broker: Broker, request: Any, version: int) -> Any:
        address = broker.services.cluster.live_brokers("PLAINTEXT")
        port = next(a.port for a in address if a.broker_id == broker.broker_id)
        connection = BrokerConnection(PeerAddress("127.0.0.1", port), "test", timeout_s=10)
        await connection.connect()
        try:
            return await connection.request(request, version)
        finally:
            connection.close()


def scenario(test: Callable[[Cluster], Awaitable[None]]) -> Callable[..., None]:
    """Run ``test`` with three started brokers, all sharing one metadata ensemble."""

    def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        async def main() -> None:
            ensemble = BuiltinEnsemble(tmp_path / "metadata")
            await ensemble.start()
            monkeypatch.setattr(
                kpybroker.broker,
                "open_metadata_store",
                lambda config: BuiltinMetadataStore(ensemble=ensemble),
            )
            cluster = Cluster(tmp_path, ensemble)
            try:
                for broker_id in range(3):
                    await cluster.start(broker_id)
                # A broker learns of the others through the metadata store's watches.
                await eventually(
                    lambda: all(
                        len(broker.cluster.live_brokers()) == 3
                        for broker in cluster.brokers.values()
                    )
                )
                await cluster.any().topics.create(TOPIC, num_partitions=2, replication_factor=3)
                # Each broker makes its logs as it learns of the topic, off the event loop.
                await eventually(
                    lambda: all(
                        broker.replicas.get(TOPIC, partition) is not None
                        for broker in cluster.brokers.values()
                        for partition in (0, 1)
                    )
                )
                await test(cluster)
            finally:
                for broker_id in list(cluster.brokers):
                    await cluster.stop(broker_id)
                await ensemble.stop()

        asyncio.run(asyncio.wait_for(main(), 60))

    run.__doc__ = test.__doc__  # not functools.wraps: pytest would ask for test's arguments
    return run


def produce(values: list[bytes], partition: int = 0, acks: int = -1, timeout_ms: int = 5000):
    batch = build_batch([NewRecord(None, v, (), 1_700_000_000_000) for v in values])
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            TopicProduceData(name=TOPIC, partition_data=[PartitionProduceData(partition, batch)])
        ],
    )


async def produce_to(cluster: Cluster, broker: Broker, values: list[bytes], **kwargs: Any) -> Any:
    response = await cluster.call(broker, produce(values, **kwargs), 11)
    return response, response.responses[0].partition_responses[0]


def leader_of(cluster: Cluster, partition: int = 0) -> Broker:
    return cluster.brokers[cluster.state(partition).leader]


def segment_bytes(broker: Broker, partition: int = 0) -> bytes:
    plog = broker.replicas.get(TOPIC, partition).log
    return b"".join(segment.log_path.read_bytes() for segment in plog.segments)


@scenario
async def test_acks_all_writes_reach_every_replica_byte_for_byte(cluster: Cluster) -> None:
    leader = leader_of(cluster)
    for i in range(5):
        _, part = await produce_to(cluster, leader, [b"v%d" % i] * 3)
        assert (part.error_code, part.base_offset) == (0, 3 * i)
        assert leader.replicas.get(TOPIC, 0).high_watermark >= 3 * i + 3
    await eventually(lambda: len({segment_bytes(b) for b in cluster.brokers.values()}) == 1)
    for broker in cluster.brokers.values():
        assert broker.replicas.get(TOPIC, 0).log.epoch_cache.entries == [(0, 0)]


@scenario
async def test_other_brokers_point_at_the_leader(cluster: Cluster) -> None:
    leader = leader_of(cluster)
    other = next(b for b in cluster.brokers.values() if b is not leader)
    response, part = await produce_to(cluster, other, [b"x"])
    assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (
        leader.broker_id,
        0,
    )
    assert [e.node_id for e in response.node_endpoints] == [leader.broker_id]
    topic_id = other.topics.get(TOPIC).topic_id  # Fetch v13+ names topics by id
    fetch = FetchRequest(
        max_wait_ms=0,
        topics=[
            FetchTopic(topic_id=topic_id, partitions=[FetchPartition(0, -1, 0, -1, -1, 1 << 20)])
        ],
    )
    response = await cluster.call(other, fetch, 16)
    data = response.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert data.current_leader.leader_id == leader.broker_id
    assert [e.node_id for e in response.node_endpoints] == [leader.broker_id]


@scenario
async def test_a_follower_behind_on_the_high_watermark_is_answered_at_once(
    cluster: Cluster,
) -> None:
    """Fetch v18 (KIP-1166): a follower's fetch naming a high watermark below the
    leader's returns without waiting, even with nothing new to read."""
    leader = leader_of(cluster)
    await produce_to(cluster, leader, [b"a", b"b", b"c"])
    follower = next(b for b in cluster.brokers if b != leader.broker_id)
    topic_id = leader.topics.get(TOPIC).topic_id

    def fetch(known_high_watermark: int, max_wait_ms: int) -> FetchRequest:
        partition = FetchPartition(
            partition=0,
            fetch_offset=3,
            partition_max_bytes=1 << 20,
            high_watermark=known_high_watermark,
        )
        return FetchRequest(
            replica_state=ReplicaState(replica_id=follower),
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            topics=[FetchTopic(topic_id=topic_id, partitions=[partition])],
        )

    stale = await asyncio.wait_for(cluster.call(leader, fetch(0, 30_000), 18), 10)
    data = stale.responses[0].partitions[0]
    assert (data.error_code, data.high_watermark, bytes(data.records or b"")) == (0, 3, b"")
    current = await cluster.call(leader, fetch(3, 100), 18)  # waits out its 100 ms
    assert current.responses[0].partitions[0].high_watermark == 3


@scenario
async def test_a_dead_follower_leaves_the_isr_and_writes_go_on(cluster: Cluster) -> None:
    leader = leader_of(cluster)
    follower = next(b for b in cluster.brokers if b != leader.broker_id)
    await cluster.stop(follower)
    await eventually(lambda: follower not in cluster.state().isr)
    _, part = await produce_to(cluster, leader, [b"after"])
    assert part.error_code == 0
    meta = await cluster.call(
        leader, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]), 12
    )
    [p0] = [p for p in meta.topics[0].partitions if p.partition_index == 0]
    assert follower in p0.replica_nodes
    assert follower not in p0.isr_nodes
    assert p0.offline_replicas == [follower]
    back = await cluster.start(follower)
    await eventually(lambda: follower in cluster.state().isr)
    assert back.replicas.get(TOPIC, 0).log.log_end_offset == 1


@scenario
async def test_acks_all_times_out_while_a_follower_stalls(cluster: Cluster) -> None:
    leader = leader_of(cluster)
    follower = cluster.brokers[next(b for b in cluster.brokers if b != leader.broker_id)]
    await follower.replicas._fetchers.close()  # alive and registered, but not fetching
    _, part = await produce_to(cluster, leader, [b"stuck"], timeout_ms=100)
    assert part.error_code == ErrorCode.REQUEST_TIMED_OUT
    # Once the ISR shrinks (replica.lag.time.max.ms), acks=all succeeds without it.
    await eventually(lambda: follower.broker_id not in cluster.state().isr)
    _, part = await produce_to(cluster, leader, [b"unstuck"])
    assert (part.error_code, part.base_offset) == (0, 1)


@scenario
async def test_not_enough_replicas(cluster: Cluster) -> None:
    leader = leader_of(cluster)
    for broker_id in [b for b in list(cluster.brokers) if b != leader.broker_id]:
        await cluster.stop(broker_id)
    await eventually(lambda: cluster.state().isr == (leader.broker_id,))
    _, part = await produce_to(cluster, leader, [b"alone"])
    assert part.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    _, part = await produce_to(cluster, leader, [b"alone"], acks=1)
    assert part.error_code == 0


@scenario
async def test_leader_failover_and_the_old_leaders_return(cluster: Cluster) -> None:
    old = leader_of(cluster)
    await produce_to(cluster, old, [b"a", b"b"])
    await cluster.stop(old.broker_id)
    await eventually(lambda: cluster.state().leader not in (old.broker_id, -1))
    new = leader_of(cluster)
    assert cluster.state().leader_epoch == 1
    _, part = await produce_to(cluster, new, [b"c"])
    assert (part.error_code, part.base_offset) == (0, 2)
    back = await cluster.start(old.broker_id)
    await eventually(lambda: old.broker_id in cluster.state().isr)
    assert back.replicas.get(TOPIC, 0).log.epoch_cache.entries == [(0, 0), (1, 2)]
    # ElectLeaders moves leadership back to the preferred replica (the first one).
    preferred = cluster.state().replicas[0]
    controller = cluster.brokers[cluster.any().cluster.controller_id]
    request = ElectLeadersRequest(0, [TopicPartitions(TOPIC, [0])], 5000)
    response = await cluster.call(controller, request, 2)
    [result] = response.replica_election_results[0].partition_result
    expected = ErrorCode.ELECTION_NOT_NEEDED if preferred == new.broker_id else ErrorCode.NONE
    assert result.error_code == expected
    await eventually(lambda: cluster.state().leader == preferred)


@scenario
async def test_a_broker_whose_session_expires_fences_itself(cluster: Cluster) -> None:
    leader = leader_of(cluster)
    store = leader.store
    assert isinstance(store, BuiltinMetadataStore)
    lost = asyncio.Event()
    leader.cluster.add_listener(lambda change: leader.replicas.fenced and lost.set())
    await store.expire_session()
    await asyncio.wait_for(lost.wait(), 5)
    await eventually(lambda: not leader.replicas.fenced)
    assert leader.broker_id in leader.cluster.live_brokers()
    await eventually(lambda: len(cluster.state().isr) == 3)
    _, part = await produce_to(cluster, leader_of(cluster), [b"after expiry"])
    assert part.error_code == 0


# -- reassignments ------------------------------------------------------------------------


def controller_of(cluster: Cluster) -> Broker:
    return next(b for b in cluster.brokers.values() if b.controller.active)


def reassign(topic: str, partition: int, replicas: list[int] | None, **kwargs: Any):
    return AlterPartitionReassignmentsRequest(
        topics=[
            ReassignableTopic(name=topic, partitions=[ReassignablePartition(partition, replicas)])
        ],
        **kwargs,
    )


def reassignment_errors(response: Any) -> list[tuple[int, str | None]]:
    return [(p.error_code, p.error_message) for t in response.responses for p in t.partitions]


def ongoing(response: Any) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    return {
        (t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        for p in t.partitions
    }


@scenario
async def test_a_reassignment_moves_a_partition_with_its_data(cluster: Cluster) -> None:
    first = cluster.any()
    await first.topics.create(
        "moving", num_partitions=-1, replication_factor=-1, assignments={0: [0]}
    )
    await eventually(lambda: first.replicas.get("moving", 0) is not None)
    request = ProduceRequest(
        acks=1,  # one replica, under min.insync.replicas=2
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name="moving",
                partition_data=[
                    PartitionProduceData(0, build_batch([NewRecord(None, b"v", (), 1)] * 5))
                ],
            )
        ],
    )
    produced = await cluster.call(cluster.brokers[0], request, 11)
    assert produced.responses[0].partition_responses[0].error_code == 0
    controller = controller_of(cluster)
    response = await cluster.call(controller, reassign("moving", 0, [2, 1]), 1)
    assert (response.error_code, reassignment_errors(response)) == (0, [(0, None)])

    def moved() -> bool:
        pm = cluster.any().cluster.topics()["moving"].partitions[0]
        return pm.replicas == (2, 1) and not pm.reassigning and set(pm.isr) == {1, 2}

    await eventually(moved)
    await eventually(lambda: cluster.brokers[0].replicas.get("moving", 0) is None)
    assert cluster.brokers[0].logs.get("moving", 0) is None  # the old replica is deleted
    pm = cluster.any().cluster.topics()["moving"].partitions[0]
    assert pm.leader in (1, 2) and pm.leader_epoch == 1  # leadership left broker 0
    new_logs = [cluster.brokers[b].replicas.get("moving", 0).log for b in (1, 2)]
    assert [plog.log_end_offset for plog in new_logs] == [5, 5]
    listed = await cluster.call(cluster.any(), ListPartitionReassignmentsRequest(), 0)
    assert ongoing(listed) == {}


@scenario
async def test_moving_one_partition_away_keeps_the_others_reachable_by_topic_id(
    cluster: Cluster,
) -> None:
    first = cluster.any()
    await first.topics.create(
        "split", num_partitions=-1, replication_factor=-1, assignments={0: [0], 1: [0]}
    )
    await eventually(lambda: cluster.brokers[0].replicas.get("split", 1) is not None)
    response = await cluster.call(controller_of(cluster), reassign("split", 1, [1]), 0)
    assert reassignment_errors(response) == [(0, None)]
    await eventually(lambda: cluster.brokers[0].replicas.get("split", 1) is None)
    topic_id = first.topics.get("split").topic_id
    fetch = FetchRequest(
        max_wait_ms=0,
        topics=[
            FetchTopic(
                topic_id=topic_id,
                partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)],
            )
        ],
    )
    answer = await cluster.call(cluster.brokers[0], fetch, 13)
    assert answer.responses[0].partitions[0].error_code == ErrorCode.NONE


@scenario
async def test_a_reassignment_waits_for_its_replicas_and_can_be_cancelled(
    cluster: Cluster,
) -> None:
    first = cluster.any()
    await first.topics.create(
        "parked", num_partitions=-1, replication_factor=-1, assignments={0: [0, 1]}
    )
    await eventually(lambda: cluster.state_of("parked").leader == 0)
    # Broker 2 takes the new replica but never fetches: the move cannot complete.
    cluster.brokers[2].replicas._fetchers.follow = lambda partition: None
    controller = controller_of(cluster)
    response = await cluster.call(controller, reassign("parked", 0, [0, 2]), 0)
    assert reassignment_errors(response) == [(0, None)]
    await eventually(lambda: cluster.state_of("parked", full=True).reassigning)
    listed = await cluster.call(cluster.any(), ListPartitionReassignmentsRequest(), 0)
    assert ongoing(listed) == {("parked", 0): ([0, 2, 1], [2], [1])}

    response = await cluster.call(controller, reassign("parked", 0, None), 0)
    assert reassignment_errors(response) == [(0, None)]
    await eventually(lambda: not cluster.state_of("parked", full=True).reassigning)
    assert cluster.state_of("parked", full=True).replicas == (0, 1)
    await eventually(lambda: cluster.brokers[2].logs.get("parked", 0) is None)
    again = await cluster.call(controller, reassign("parked", 0, None), 0)
    assert [code for code, _ in reassignment_errors(again)] == [
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    ]


@scenario
async def test_a_log_made_after_its_reassignment_was_cancelled_is_deleted(
    cluster: Cluster,
) -> None:
    """The new replica's log is already being made in a worker thread when the
    reassignment is cancelled: once made, it is deleted, not kept and unhosted."""
    first = cluster.any()
    await first.topics.create(
        "cancelled", num_partitions=-1, replication_factor=-1, assignments={0: [0, 1]}
    )
    await eventually(lambda: cluster.state_of("cancelled").leader == 0)
    target = cluster.brokers[2]
    target.replicas._fetchers.follow = lambda partition: None
    creator = target.replicas._creator
    making, release = threading.Event(), threading.Event()
    open_log = creator._open

    def held_open(place: Path, spec: Any) -> Any:
        making.set()
        release.wait(30)
        return open_log(place, spec)

    creator._open = held_open  # type: ignore[method-assign]
    controller = controller_of(cluster)
    try:
        response = await cluster.call(controller, reassign("cancelled", 0, [0, 2]), 0)
        assert reassignment_errors(response) == [(0, None)]
        await eventually(making.is_set)
        response = await cluster.call(controller, reassign("cancelled", 0, None), 0)
        assert reassignment_errors(response) == [(0, None)]
        await eventually(lambda: 2 not in target.cluster.partition("cancelled", 0)[1].replicas)
    finally:
        release.set()
    await eventually(lambda: not creator.pending(("cancelled", 0)))
    await eventually(lambda: target.logs.get("cancelled", 0) is None)
    assert not any((place / "cancelled-0").exists() for place in target.config.log_dirs())


@scenario
async def test_reassignment_errors(cluster: Cluster) -> None:
    controller = controller_of(cluster)
    other = next(b for b in cluster.brokers.values() if b is not controller)
    refused = await cluster.call(other, reassign(TOPIC, 0, [0, 1, 2]), 0)
    assert refused.error_code == ErrorCode.NOT_CONTROLLER

    async def errors(request: Any) -> list[tuple[int, str | None]]:
        return reassignment_errors(await cluster.call(controller, request, 1))

    assert await errors(reassign(TOPIC, 0, [0, 7])) == [
        (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        )
    ]
    assert [c for c, _ in await errors(reassign(TOPIC, 0, [1, 1]))] == [
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    ]
    assert [c for c, _ in await errors(reassign(TOPIC, 0, []))] == [
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    ]
    assert [c for c, _ in await errors(reassign(TOPIC, 9, [0]))] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    ]
    no_rf_change = reassign(TOPIC, 0, [0, 1], allow_replication_factor_change=False)
    assert [c for c, _ in await errors(no_rf_change)] == [ErrorCode.INVALID_REPLICATION_FACTOR]
    same = await errors(reassign(TOPIC, 0, list(cluster.state().replicas)))
    assert same == [(0, None)]  # already there: nothing to move
