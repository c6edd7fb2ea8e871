"""The controller on a metadata store shared by several "brokers" (sessions).

Each broker here is a ``ClusterMetadata`` on its own session with a running
``Controller``; killing a broker closes its session, which deletes its
registration (and its ``/controller`` node) as a crash does after the session
timeout. Runs on both store backends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from kpybroker.cluster.controller import Controller, NotControllerError
from kpybroker.cluster.offline_replicas import OfflineReplicas, TopicPartition
from kpybroker.cluster.replication_settings import ReplicationSettings
from kpybroker.metadata.cluster_metadata import ClusterMetadata
from kpybroker.metadata.model import (
    NO_LEADER,
    ChangeKind,
    Endpoint,
    MetadataChange,
    PartitionState,
)
from kpybroker.protocol.errors import ErrorCode
from tests.helpers.metadata_backends import Backend, scenario
from tests.helpers.waiting import eventually

PLAINTEXT = (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
SETTINGS = ReplicationSettings(fetch_backoff_ms=10, leader_imbalance_per_broker_percentage=0)


@dataclass
class Node:
    cluster: ClusterMetadata
    controller: Controller
    task: asyncio.Task[None]

    async def kill(self) -> None:
        self.task.cancel()
        await self.cluster.close()
        await self.cluster.store.close()


def offline_replicas(
    offline: Mapping[int, Collection[TopicPartition]], asked: list[int] | None = None
) -> OfflineReplicas:
    """What each broker would answer the controller's DescribeLogDirs with; the brokers
    asked are appended to ``asked``."""

    async def ask(broker: int, assigned: Iterable[TopicPartition]) -> frozenset[TopicPartition]:
        if asked is not None:
            asked.append(broker)
        return frozenset(assigned) & frozenset(offline.get(broker, ()))

    return ask


async def start_node(
    backend: Backend,
    broker_id: int,
    unclean: bool = False,
    offline: Mapping[int, Collection[TopicPartition]] | None = None,
    asked: list[int] | None = None,
) -> Node:
    cluster = ClusterMetadata(await backend.connect())
    await cluster.start()
    await cluster.register_broker(broker_id, PLAINTEXT)
    controller = Controller(
        broker_id, cluster, SETTINGS, lambda topic: unclean, offline_replicas(offline or {}, asked)
    )
    cluster.add_listener(controller.on_change)
    await controller.start()
    return Node(cluster, controller, asyncio.create_task(controller.run()))


async def start_nodes(backend: Backend, count: int, unclean: bool = False) -> list[Node]:
    return [await start_node(backend, i, unclean) for i in range(count)]


def state(node: Node, topic: str, partition: int) -> PartitionState | None:
    return node.cluster.topics()[topic].partitions[partition].state


@scenario
async def test_one_controller_at_a_time(backend: Backend) -> None:
    nodes = await start_nodes(backend, 3)
    assert [n.controller.active for n in nodes] == [True, False, False]
    assert nodes[0].controller.epoch == 1
    await nodes[0].kill()
    await eventually(lambda: nodes[1].controller.active or nodes[2].controller.active)
    successor = next(n for n in nodes[1:] if n.controller.active)
    assert successor.controller.epoch == 2
    await eventually(lambda: nodes[1].cluster.controller_id == successor.controller.broker_id)


@scenario
async def test_leaders_follow_broker_deaths_and_returns(backend: Backend) -> None:
    nodes = await start_nodes(backend, 3)
    await nodes[0].cluster.create_topic("t", {0: [0, 1, 2], 1: [1, 2, 0]})
    await eventually(lambda: state(nodes[2], "t", 1) is not None)
    await nodes[1].kill()
    await eventually(lambda: state(nodes[2], "t", 1).leader == 2)
    assert state(nodes[2], "t", 1) == PartitionState(2, 1, (2, 0), 1)
    assert state(nodes[2], "t", 0) == PartitionState(0, 0, (0, 2), 1)  # no new epoch
    # The controller itself dies: another takes over and moves its leaderships.
    await nodes[0].kill()
    await eventually(lambda: state(nodes[2], "t", 0).leader == 2)
    assert state(nodes[2], "t", 0) == PartitionState(2, 1, (2,), 2)
    await nodes[2].kill()
    # Nobody left to notice: the state still names the last leader, which leads again.
    survivor = await start_node(backend, 2)
    assert survivor.controller.epoch == 3
    assert state(survivor, "t", 0) == PartitionState(2, 1, (2,), 2)


@scenario
async def test_a_log_dir_event_moves_leadership_off_the_offline_replicas(backend: Backend) -> None:
    offline = {1: [("t", 0), ("t", 1)]}
    nodes = [await start_node(backend, i, offline=offline) for i in range(3)]
    await nodes[0].cluster.create_topic("t", {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]})
    await eventually(lambda: state(nodes[1], "t", 2) is not None)
    await nodes[1].cluster.propagate_log_dir_event(1)  # broker 1's directory failed
    await eventually(lambda: state(nodes[2], "t", 1).leader == 2)
    assert state(nodes[2], "t", 1) == PartitionState(2, 1, (2, 0), 1)
    assert state(nodes[2], "t", 0) == PartitionState(0, 0, (0, 2), 1)  # only the ISR shrank
    assert state(nodes[2], "t", 2) == PartitionState(2, 0, (2, 0, 1), 1)  # still online
    assert await nodes[0].cluster.store.get_children("/log_dir_event_notification") == []
    # A pass after another change keeps the offline replicas out (no re-election of 1).
    await nodes[2].kill()
    await eventually(lambda: state(nodes[0], "t", 1).leader == 0)
    assert state(nodes[0], "t", 1) == PartitionState(0, 2, (0,), 1)
    for node in nodes[:2]:
        await node.kill()


@scenario
async def test_a_new_controller_asks_the_brokers_for_their_offline_replicas(
    backend: Backend,
) -> None:
    """Broker 1's replica of t-0 went offline (log dir event), then the controller died: its
    successor asks every live broker, and no unclean election picks broker 1's offline
    replica when broker 2, the last in-sync one, dies too (before the answer, it waits)."""
    offline = {1: [("t", 0)]}
    nodes = [await start_node(backend, i, unclean=True, offline=offline) for i in range(3)]
    await nodes[0].cluster.create_topic("t", {0: [1, 2, 0]})
    await eventually(lambda: state(nodes[1], "t", 0) is not None)
    await nodes[1].cluster.propagate_log_dir_event(1)
    await eventually(lambda: state(nodes[1], "t", 0).leader == 2)
    await nodes[0].kill()
    await eventually(lambda: state(nodes[1], "t", 0).isr == (2,))
    await eventually(lambda: any(n.controller.offline == {1: {("t", 0)}} for n in nodes[1:]))
    await nodes[2].kill()  # whichever was controller: broker 1 is the last one
    await eventually(lambda: nodes[1].controller.offline == {1: {("t", 0)}})
    await eventually(lambda: state(nodes[1], "t", 0).leader != 2)
    assert state(nodes[1], "t", 0).leader == NO_LEADER
    assert state(nodes[1], "t", 0).isr == (2,)  # broker 2 leads again when it returns
    await nodes[1].kill()


@scenario
async def test_a_broker_that_registers_is_asked_for_its_offline_replicas(
    backend: Backend,
) -> None:
    """Broker 1 starts with t-0's log dir unusable: the controller asks it once, at its
    registration, and its offline replica is then never elected, not even uncleanly. In
    the steady state nobody is asked."""
    asked: list[int] = []
    offline = {1: [("t", 0)]}
    nodes = [
        await start_node(backend, i, unclean=True, offline=offline, asked=asked) for i in (0, 2)
    ]
    await nodes[0].cluster.create_topic("t", {0: [1, 2]})
    await eventually(lambda: state(nodes[0], "t", 0) is not None)
    assert state(nodes[0], "t", 0).leader == 2
    nodes.append(await start_node(backend, 1, unclean=True, offline=offline, asked=asked))
    await eventually(lambda: nodes[0].controller.offline == {1: {("t", 0)}})
    await nodes[0].cluster.create_topic("u", {0: [0, 1, 2]})
    await eventually(lambda: state(nodes[0], "u", 0) is not None)
    assert sorted(asked) == [0, 1, 2]  # each registration once
    await nodes[1].kill()  # broker 2
    await eventually(lambda: state(nodes[0], "t", 0).leader != 2)
    assert state(nodes[0], "t", 0).leader == NO_LEADER
    for node in (nodes[0], nodes[2]):
        await node.kill()


@scenario
async def test_a_partition_without_live_replicas_gets_its_state_later(backend: Backend) -> None:
    [node] = await start_nodes(backend, 1)
    await node.cluster.create_topic("late", {0: [5]})
    assert state(node, "late", 0) is None
    other = await start_node(backend, 5)
    await eventually(lambda: state(node, "late", 0) is not None)
    assert state(node, "late", 0) == PartitionState(5, 0, (5,), 1)
    await other.kill()


@scenario
async def test_a_pass_looks_only_at_what_changed_since_the_last(backend: Backend) -> None:
    [node] = await start_nodes(backend, 1)
    await node.cluster.create_topic("a", {0: [0], 1: [0], 2: [0]})
    await node.cluster.create_topic("b", {0: [0], 1: [0]})
    await eventually(lambda: state(node, "a", 2) is not None and state(node, "b", 1) is not None)
    node.task.cancel()
    controller = node.controller
    await controller._try_step()  # everything seen: nothing is pending
    controller.on_change(MetadataChange(ChangeKind.PARTITION, "a", 1))
    controller.on_change(MetadataChange(ChangeKind.TOPIC_CONFIG, "b"))
    controller.on_change(MetadataChange(ChangeKind.PARTITION, "b", 1))
    looked_at = sorted((t, pm.partition) for t, pm in controller._in_scope(controller._pending))
    assert looked_at == [("a", 1), ("b", 0), ("b", 1)]
    controller.on_change(MetadataChange(ChangeKind.BROKER, "0"))
    assert controller._pending is None  # a broker change concerns every partition


@scenario
async def test_unclean_election(backend: Backend) -> None:
    nodes = await start_nodes(backend, 2, unclean=True)
    await nodes[0].cluster.create_topic("t", {0: [1, 0]})
    current = nodes[0].cluster.topics()["t"].partitions[0]
    await nodes[0].cluster.set_partition_state(
        "t", 0, PartitionState(1, 0, (1,), 1), current.state_version
    )
    await nodes[1].kill()
    await eventually(lambda: state(nodes[0], "t", 0).leader == 0)
    assert state(nodes[0], "t", 0) == PartitionState(0, 1, (0,), 1)


@scenario
async def test_preferred_leader_election(backend: Backend) -> None:
    nodes = await start_nodes(backend, 2)
    controller = nodes[0].controller
    await nodes[0].cluster.create_topic("t", {0: [1, 0], 1: [0, 1]})
    outcome = await controller.elect_leaders([("t", 0), ("t", 1), ("t", 9)], unclean=False)
    assert outcome[("t", 0)].code == ErrorCode.ELECTION_NOT_NEEDED
    assert outcome[("t", 9)].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    current = nodes[0].cluster.topics()["t"].partitions[0]
    moved = PartitionState(0, 3, (0, 1), 1)
    await nodes[0].cluster.set_partition_state("t", 0, moved, current.state_version)
    outcome = await controller.elect_leaders([("t", 0)], unclean=False)
    assert outcome == {("t", 0): None}
    assert state(nodes[0], "t", 0) == PartitionState(1, 4, (0, 1), 1)
    try:
        await nodes[1].controller.elect_leaders([("t", 0)], unclean=False)
    except NotControllerError:
        pass
    else:
        raise AssertionError("only the controller elects")


@scenario
async def test_auto_rebalance_moves_leadership_back(backend: Backend) -> None:
    nodes = await start_nodes(backend, 2)
    await nodes[0].cluster.create_topic("t", {0: [1, 0]})
    current = nodes[0].cluster.topics()["t"].partitions[0]
    await nodes[0].cluster.set_partition_state(
        "t", 0, PartitionState(0, 1, (0, 1), 1), current.state_version
    )
    await nodes[0].controller._apply(nodes[0].controller._imbalanced())
    assert state(nodes[0], "t", 0) == PartitionState(1, 2, (0, 1), 1)


@scenario
async def test_a_deposed_controller_resigns_at_its_first_write(backend: Backend) -> None:
    nodes = await start_nodes(backend, 3)
    await nodes[0].cluster.create_topic("t", {0: [1, 2, 0]})
    old = nodes[0].controller
    nodes[0].task.cancel()  # a controller that stopped noticing changes
    await nodes[0].cluster.store.delete("/controller")
    await eventually(lambda: nodes[1].controller.active or nodes[2].controller.active)
    await nodes[2].kill()
    # Written at epoch 2; node 0 writes next, so wait until its own cache has it too.
    await eventually(lambda: state(nodes[1], "t", 0).isr == (1, 0))
    await eventually(lambda: state(nodes[0], "t", 0).isr == (1, 0))
    current = nodes[0].cluster.topics()["t"].partitions[0]
    moved = PartitionState(0, 1, (1, 0), 2)
    await nodes[0].cluster.set_partition_state("t", 0, moved, current.state_version)
    assert old.active and old.epoch == 1
    outcome = await old.elect_leaders([("t", 0)], unclean=False)
    assert outcome[("t", 0)].code == ErrorCode.NOT_CONTROLLER
    assert not old.active
