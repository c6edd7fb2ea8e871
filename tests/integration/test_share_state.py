"""Share partitions' state (KIP-932) kept by the share coordinator across crashes and failovers.

- One broker process: the share-state RPCs sent over a real socket
  (FindCoordinator v6 with a share key, then Initialize/Read/Write/
  ReadSummary) build a state across snapshots and updates; the records
  before its latest snapshot are pruned; the broker is killed with SIGKILL
  and restarted, and reads back exactly that state.
- Three broker processes on a real ZooKeeper, ``__share_group_state``
  replicated three ways: the same, then the broker coordinating the key is
  killed (SIGKILL); once another broker leads the key's partition, it answers
  the same state, and still fences a reader at an older leader epoch.
- Three ``Broker`` objects in one event loop: a broker's persister writes to
  the coordinator on another broker (over the inter-broker connection),
  then that broker stops, leadership moves, and the persister reads the same
  state from the new coordinator, retrying while leadership moves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import kpybroker.broker
from kpybroker.broker import Broker
from kpybroker.config import BrokerConfig
from kpybroker.coordinator.partitioning import partition_for
from kpybroker.metadata.builtin import BuiltinEnsemble, BuiltinMetadataStore
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    initialize_share_group_state,
    read_share_group_state,
    read_share_group_state_summary,
    write_share_group_state,
)
from kpybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kpybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kpybroker.share_coordinator.persister import PartitionState, ShareKey, StateBatch
from tests.helpers.brokers import BrokerFactory
from tests.helpers.groups_wire import Wire
from tests.helpers.log_life import create_topic
from tests.helpers.replication_cluster import ReplicatedCluster, cluster, wait_for, zookeeper
from tests.helpers.waiting import eventually

__all__ = ["cluster", "zookeeper"]  # fixtures
pytestmark = pytest.mark.timeout(240)

STATE_TOPIC = "__share_group_state"
STATE_PARTITIONS = 3
TOPIC = "shared"
GROUP = "share-group"
RETRIABLE = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}
ACKNOWLEDGED, ARCHIVED, AVAILABLE = 2, 4, 0
#: Enough updates per snapshot that the writes below make snapshots and updates after them.
UPDATES_PER_SNAPSHOT = 2
SINGLE = {
    "share.coordinator.state.topic.num.partitions": STATE_PARTITIONS,
    "share.coordinator.snapshot.update.records.per.snapshot": UPDATES_PER_SNAPSHOT,
    "share.coordinator.state.topic.prune.interval.ms": 200,
}
REPLICATED = {
    **SINGLE,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 2,
}
WRITES: list[tuple[int, list[tuple[int, int, int, int]]]] = [
    (0, [(0, 9, AVAILABLE, 1)]),
    (-1, [(0, 4, ACKNOWLEDGED, 1), (10, 19, AVAILABLE, 1)]),
    (-1, [(5, 5, ARCHIVED, 1)]),
    (5, [(6, 9, AVAILABLE, 2)]),
    (-1, [(12, 14, ACKNOWLEDGED, 1)]),
]
#: What the writes add up to: start offset 5, the batches below it dropped.
EXPECTED = (
    5,
    [
        (5, 5, ARCHIVED, 1),
        (6, 9, AVAILABLE, 2),
        (10, 11, AVAILABLE, 1),
        (12, 14, ACKNOWLEDGED, 1),
        (15, 19, AVAILABLE, 1),
    ],
)


def topic_id_of(bootstrap: str, topic: str) -> bytes:
    with Wire(bootstrap) as wire:
        answer = wire.call(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12)
    [found] = answer.topics
    assert found.error_code == 0, found
    return bytes(found.topic_id)


class StateWire:
    """The share-state RPCs for one key, over a raw connection to one broker."""

    def __init__(self, bootstrap: str, key: ShareKey) -> None:
        self.bootstrap = bootstrap
        self.key = key

    def _call(self, request: Any, version: int) -> Any:
        with Wire(self.bootstrap) as wire:
            answer = wire.call(request, version)
        [topic] = answer.results
        [partition] = topic.partitions
        return partition

    def initialize(self, state_epoch: int, start_offset: int) -> Any:
        m = initialize_share_group_state
        return self._call(
            m.InitializeShareGroupStateRequest(
                group_id=self.key.group_id,
                topics=[
                    m.InitializeStateData(
                        topic_id=self.key.topic_id,
                        partitions=[m.PartitionData(self.key.partition, state_epoch, start_offset)],
                    )
                ],
            ),
            0,
        )

    def read(self, leader_epoch: int) -> Any:
        m = read_share_group_state
        return self._call(
            m.ReadShareGroupStateRequest(
                group_id=self.key.group_id,
                topics=[
                    m.ReadStateData(
                        topic_id=self.key.topic_id,
                        partitions=[m.PartitionData(self.key.partition, leader_epoch)],
                    )
                ],
            ),
            0,
        )

    def summary(self, leader_epoch: int) -> Any:
        m = read_share_group_state_summary
        return self._call(
            m.ReadShareGroupStateSummaryRequest(
                group_id=self.key.group_id,
                topics=[
                    m.ReadStateSummaryData(
                        topic_id=self.key.topic_id,
                        partitions=[m.PartitionData(self.key.partition, leader_epoch)],
                    )
                ],
            ),
            1,
        )

    def write(self, leader_epoch: int, start_offset: int, batches: list[tuple]) -> Any:
        m = write_share_group_state
        partition = m.PartitionData(
            partition=self.key.partition,
            state_epoch=1,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=len(batches),
            state_batches=[m.StateBatch(*b) for b in batches],
        )
        return self._call(
            m.WriteShareGroupStateRequest(
                group_id=self.key.group_id,
                topics=[m.WriteStateData(topic_id=self.key.topic_id, partitions=[partition])],
            ),
            1,
        )


def retrying(ask: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Ask until the answer is not a coordinator-moving error (as the persister does)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = ask()
        except (OSError, ConnectionError):
            answer = None
        if answer is not None and answer.error_code not in RETRIABLE:
            return answer
        assert time.monotonic() < deadline, f"still {answer} after {timeout} s"
        time.sleep(0.2)


def find_share_coordinator(bootstrap: str, key: ShareKey) -> int:
    """The broker id FindCoordinator v6 names for ``key`` (the first lookup creates the topic)."""

    def ask() -> Any:
        with Wire(bootstrap) as wire:
            answer = wire.call(
                FindCoordinatorRequest(key_type=2, coordinator_keys=[key.coordinator_key()]), 6
            )
        [coordinator] = answer.coordinators
        return coordinator

    found = retrying(ask)
    assert found.error_code == 0, found
    return found.node_id


def build_state(state: StateWire, leader_epoch: int) -> None:
    assert retrying(lambda: state.initialize(state_epoch=1, start_offset=0)).error_code == 0
    read = retrying(lambda: state.read(leader_epoch))
    assert (read.error_code, read.state_epoch, read.start_offset) == (0, 1, 0)
    for start, batches in WRITES:
        answer = retrying(lambda s=start, b=batches: state.write(leader_epoch, s, b))
        assert answer.error_code == 0


def state_of(answer: Any) -> tuple[int, list[tuple[int, int, int, int]]]:
    assert answer.error_code == 0, answer
    return answer.start_offset, [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in answer.state_batches
    ]


# -- one broker: SIGKILL and restart ------------------------------------------------------------


def test_state_survives_kill_9_and_restart(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(SINGLE)
    create_topic(broker.bootstrap, TOPIC, {}, partitions=2)
    key = ShareKey(GROUP, topic_id_of(broker.bootstrap, TOPIC), 1)
    assert find_share_coordinator(broker.bootstrap, key) == 0
    state = StateWire(broker.bootstrap, key)
    build_state(state, leader_epoch=4)
    assert state_of(state.read(4)) == EXPECTED
    # The records before the key's latest snapshot are pruned away; the state is unchanged.
    index = partition_for(key.coordinator_key(), STATE_PARTITIONS)
    wait_for(lambda: f"pruned {STATE_TOPIC}-{index} below" in broker.log_text(), "pruning")
    assert state_of(state.read(4)) == EXPECTED
    broker.kill()
    broker.start()
    assert state_of(retrying(lambda: state.read(4))) == EXPECTED
    summary = state.summary(4)
    assert (summary.error_code, summary.state_epoch, summary.leader_epoch) == (0, 1, 4)
    assert (summary.start_offset, summary.delivery_complete_count) == (5, 1)
    # The recorded leader epoch survived too: an older leader is still fenced.
    assert state.read(3).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert state.write(3, -1, []).error_code == ErrorCode.FENCED_LEADER_EPOCH


# -- three brokers on ZooKeeper: the coordinator is killed --------------------------------------


@pytest.mark.parametrize("cluster", [REPLICATED], indirect=True)
def test_state_survives_the_coordinator_being_killed(cluster: ReplicatedCluster) -> None:
    cluster.create_topic(TOPIC, 2, 3)
    key = ShareKey(GROUP, topic_id_of(cluster.brokers[0].bootstrap, TOPIC), 0)
    coordinator = find_share_coordinator(cluster.brokers[0].bootstrap, key)
    index = partition_for(key.coordinator_key(), STATE_PARTITIONS)
    wait_for(lambda: cluster.state(STATE_TOPIC, index).leader == coordinator, "the state leader")
    state = StateWire(cluster.brokers[coordinator].bootstrap, key)
    build_state(state, leader_epoch=2)
    assert state_of(state.read(2)) == EXPECTED
    cluster.wait_for_full_isr(STATE_TOPIC, STATE_PARTITIONS)

    cluster.brokers[coordinator].kill()
    wait_for(
        lambda: cluster.state(STATE_TOPIC, index).leader not in (coordinator, -1),
        "another leader of the key's partition",
    )
    survivor = next(b for i, b in cluster.brokers.items() if i != coordinator)
    successor = find_share_coordinator(survivor.bootstrap, key)
    assert successor != coordinator
    moved = StateWire(cluster.brokers[successor].bootstrap, key)
    assert state_of(retrying(lambda: moved.read(2))) == EXPECTED
    assert moved.read(1).error_code == ErrorCode.FENCED_LEADER_EPOCH
    cluster.brokers[coordinator].start()


# -- three brokers in one process: the persister across brokers -----------------------------------

IN_PROCESS = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "20",
    "auto.leader.rebalance.enable": "false",
    "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "share.coordinator.snapshot.update.records.per.snapshot": str(UPDATES_PER_SNAPSHOT),
}


async def start_brokers(root: Path, ensemble: BuiltinEnsemble) -> dict[int, Broker]:
    started: dict[int, Broker] = {}
    for broker_id in range(3):
        settings = {
            **IN_PROCESS,
            "broker.id": str(broker_id),
            "log.dirs": str(root / f"b{broker_id}"),
        }
        started[broker_id] = Broker(BrokerConfig.load(None, settings))
        await started[broker_id].start()
    # A broker learns of the others through the store's watches.
    await eventually(lambda: all(len(b.cluster.live_brokers()) == 3 for b in started.values()))
    return started


def state_leader(broker: Broker, index: int) -> int:
    topic = broker.cluster.topics().get(STATE_TOPIC)
    return -1 if topic is None else topic.partitions[index].leader


async def persister_scenario(brokers: dict[int, Broker]) -> None:
    writer = brokers[0]
    data = await writer.topics.create(TOPIC, num_partitions=4, replication_factor=3)
    # A key whose share coordinator is another broker than the writer.
    persister = writer.share_persister
    assert persister is not None
    await writer.share_coordinator.runtime.ensure_topic()
    await eventually(
        lambda: all(state_leader(writer, i) >= 0 for i in range(STATE_PARTITIONS)), timeout=10
    )
    key = next(
        ShareKey(GROUP, data.topic_id, p)
        for p in range(4)
        if state_leader(
            writer,
            partition_for(ShareKey(GROUP, data.topic_id, p).coordinator_key(), STATE_PARTITIONS),
        )
        != writer.broker_id
    )
    index = partition_for(key.coordinator_key(), STATE_PARTITIONS)
    coordinator = state_leader(writer, index)

    assert await persister.initialize(key, 1, 0) == ErrorCode.NONE
    error, state = await persister.read(key, 2)
    assert (error, state) == (ErrorCode.NONE, PartitionState(1, 0, 2, ()))
    for start, batches in WRITES:
        written = PartitionState(1, start, 2, tuple(StateBatch(*b) for b in batches))
        assert await persister.write(key, written) == ErrorCode.NONE
    expected = PartitionState(1, EXPECTED[0], 2, tuple(StateBatch(*b) for b in EXPECTED[1]))
    assert await persister.read(key, 2) == (ErrorCode.NONE, expected)
    # The other broker's coordinator wrote it: this one holds no shard of that partition.
    assert index not in writer.share_coordinator.runtime.shards
    await eventually(
        lambda: all(
            len(b.cluster.topics()[STATE_TOPIC].partitions[index].isr) == 3
            for b in brokers.values()
        ),
        timeout=10,
    )

    await brokers.pop(coordinator).stop()
    await eventually(lambda: state_leader(writer, index) not in (coordinator, -1))
    # The persister follows the partition's new leader (maybe this broker), retrying meanwhile.
    assert await persister.read(key, 2) == (ErrorCode.NONE, expected)
    error, summary = await persister.read_summary(key, 2)
    assert (error, summary.start_offset, summary.state_epoch) == (ErrorCode.NONE, 5, 1)
    assert await persister.write(key, PartitionState(1, -1, 1, ())) == (
        ErrorCode.FENCED_LEADER_EPOCH
    )
    assert await persister.delete(key) == ErrorCode.NONE
    assert (await persister.read(key, 2))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_persister_reaches_the_coordinator_on_another_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        ensemble = BuiltinEnsemble(tmp_path / "metadata")
        await ensemble.start()
        monkeypatch.setattr(
            kpybroker.broker,
            "open_metadata_store",
            lambda config: BuiltinMetadataStore(ensemble=ensemble),
        )
        brokers: dict[int, Broker] = {}
        try:
            brokers.update(await start_brokers(tmp_path, ensemble))
            await persister_scenario(brokers)
        finally:
            for broker in brokers.values():
                await broker.stop()
            await ensemble.stop()

    asyncio.run(main())
