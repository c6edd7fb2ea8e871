"""KIP-848 consumer groups with Kafka's own Java client and tools, and across a restart.

Three of Kafka's VerifiableConsumers (``--group-protocol consumer``) share a
topic in a group whose assignment the broker computes; one leaves cleanly,
one is killed. Every record is read, only the killed member's last,
uncommitted records are read twice, and, sampled all along from the
coordinator, no partition is ever in two members' current assignments.
kafka-consumer-groups.sh describes the group (members, epochs, current and
target assignments) and lists it with its type. A broker killed and
restarted keeps the group: its epoch, members and assignments come back from
``__consumer_offsets`` and the member carries on without rejoining. In a
cluster of three, killing the group's coordinator moves the group with its
``__consumer_offsets`` partition, members and assignments unchanged.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException

from kpybroker.coordinator.partitioning import partition_for
from kpybroker.testing.output import OutputDrain
from tests.helpers.brokers import BrokerFactory
from tests.helpers.clients import ConfluentClient
from tests.helpers.groups_wire import BROKER_OVERRIDES, consumer_group_owners, produce
from tests.helpers.java import java_command
from tests.helpers.process import ToolRunner, wait_until
from tests.helpers.replication_cluster import (
    FAST_FAILOVER,
    ReplicatedCluster,
    cluster,
    wait_for,
    zookeeper,
)

pytestmark = pytest.mark.timeout(240)
__all__ = ["cluster", "zookeeper"]  # fixtures

PARTITIONS = 6
SESSION_MS = 3000
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
OVERRIDES = {
    **BROKER_OVERRIDES,
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.heartbeat.interval.ms": 500,
}


class JavaMember:
    """A VerifiableConsumer process and the JSON events it printed."""

    def __init__(
        self,
        lib: Path,
        bootstrap: str,
        topic: str,
        group: str,
        name: str,
        protocol: str = "consumer",
    ) -> None:
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group]
        args += ["--group-protocol", protocol, "--reset-policy", "earliest", "--verbose"]
        self.name = name
        self.process = subprocess.Popen(
            java_command(lib, VERIFIABLE_CONSUMER, args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert self.process.stdout is not None
        self.drain = OutputDrain(self.process.stdout, name=name)

    def events(self) -> list[dict[str, Any]]:
        lines = self.drain.text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def values(self) -> list[str]:
        return [e["value"] for e in self.events() if e["name"] == "record_data"]

    def stop(self, sig: int) -> None:
        self.process.send_signal(sig)
        self.process.wait(30)


class OwnershipWatch:
    """Samples the coordinator's current assignments until stopped; any partition in two
    members' assignments at once is recorded."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.args = (bootstrap, group, topic)
        self.overlaps: list[dict[int, list[str]]] = []
        self.samples = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stopped.wait(0.1):
            try:
                _, owned = consumer_group_owners(*self.args)
            except (OSError, ValueError):
                continue
            self.samples += 1
            twice = {p: ids for p, ids in owned.items() if len(ids) > 1}
            if twice:
                self.overlaps.append(twice)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(10)


@pytest.fixture
def java_members() -> Iterator[list[JavaMember]]:
    started: list[JavaMember] = []
    yield started
    for member in started:
        if member.process.poll() is None:
            member.process.kill()
        member.process.wait(10)


def wait_stable(bootstrap: str, group: str, topic: str, live: int) -> None:
    def stable() -> bool:
        state, owned = consumer_group_owners(bootstrap, group, topic)
        members = {i for ids in owned.values() for i in ids}
        return (
            state == "Stable"
            and sorted(owned) == list(range(PARTITIONS))
            and (len(members) == live)
        )

    wait_until(stable, 90, interval=0.3, message=f"a Stable consumer group of {live} members")


def phase_values(phase: str) -> dict[int, list[str]]:
    return {p: [f"{phase}-{p}-{i}" for i in range(20)] for p in range(PARTITIONS)}


def test_java_consumers_in_a_consumer_group_through_leave_and_death(
    broker_factory: BrokerFactory,
    java_members: list[JavaMember],
    kafka_lib: Path,
    java_tool: ToolRunner,
) -> None:
    broker = broker_factory(OVERRIDES)
    bootstrap, topic, group = broker.bootstrap, "java-848", "java-848-group"
    ConfluentClient().create_topic(bootstrap, topic, PARTITIONS)
    watch = OwnershipWatch(bootstrap, group, topic)
    produced: set[str] = set()

    def consumed() -> Counter[str]:
        return Counter(v for m in java_members for v in m.values())

    def produce_phase(phase: str) -> None:
        batch = phase_values(phase)
        produce(bootstrap, topic, batch)
        produced.update(v for vs in batch.values() for v in vs)
        wait_until(
            lambda: produced <= set(consumed()),
            90,
            message=f"every record of phase {phase} consumed",
        )

    try:
        for n in range(3):
            java_members.append(JavaMember(kafka_lib, bootstrap, topic, group, f"java-{n}"))
        produce_phase("three")
        wait_stable(bootstrap, group, topic, 3)

        described = java_tool(
            CONSUMER_GROUP_COMMAND, "--bootstrap-server", bootstrap,
            "--describe", "--group", group, "--members", "--verbose",
        ).check()  # fmt: skip
        rows = [line.split() for line in described.stdout.splitlines() if line.startswith(group)]
        assert len(rows) == 3, described.describe()
        # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT ...
        assert sum(int(row[4]) for row in rows) == PARTITIONS, described.describe()
        assert all(int(row[5]) > 0 for row in rows), described.describe()
        state = java_tool(
            CONSUMER_GROUP_COMMAND, "--bootstrap-server", bootstrap,
            "--describe", "--group", group, "--state",
        ).check()  # fmt: skip
        assert "uniform" in state.stdout and "Stable" in state.stdout, state.describe()
        listed = java_tool(
            CONSUMER_GROUP_COMMAND, "--bootstrap-server", bootstrap, "--list", "--type"
        ).check()
        assert [group, "Consumer"] in [line.split() for line in listed.stdout.splitlines()], (
            listed.describe()
        )

        java_members[0].stop(signal.SIGTERM)  # leaves the group
        produce_phase("two")
        wait_stable(bootstrap, group, topic, 2)

        victim = java_members[1]
        victim.stop(signal.SIGKILL)  # its session must time out
        produce_phase("one")
        wait_stable(bootstrap, group, topic, 1)
    finally:
        watch.stop()

    counts = consumed()
    assert set(counts) == produced
    duplicates = {v for v, n in counts.items() if n > 1}
    assert duplicates <= set(victim.values()), sorted(duplicates - set(victim.values()))[:10]
    assert watch.samples > 10 and not watch.overlaps, watch.overlaps[:5]


def test_java_classic_consumers_upgraded_live_and_back(
    broker_factory: BrokerFactory, java_members: list[JavaMember], kafka_lib: Path
) -> None:
    """Two of Kafka's classic consumers, then one of the consumer protocol joins (the group
    is upgraded, the classic ones go on inside it), then it leaves (the group is classic
    again): every record is read."""
    from tests.integration.test_groups_clients import group_type

    broker = broker_factory(OVERRIDES)
    bootstrap, topic, group = broker.bootstrap, "java-migrating", "java-migrating-group"
    ConfluentClient().create_topic(bootstrap, topic, PARTITIONS)
    produced: set[str] = set()

    def produce_phase(phase: str) -> None:
        batch = phase_values(phase)
        produce(bootstrap, topic, batch)
        produced.update(v for vs in batch.values() for v in vs)
        wait_until(
            lambda: produced <= {v for m in java_members for v in m.values()},
            90,
            message=f"every record of phase {phase} consumed",
        )

    for n in range(2):
        java_members.append(
            JavaMember(kafka_lib, bootstrap, topic, group, f"classic-{n}", protocol="classic")
        )
    produce_phase("classic")
    assert group_type(bootstrap, group) == "classic"
    newcomer = JavaMember(kafka_lib, bootstrap, topic, group, "kip848")
    java_members.append(newcomer)
    wait_until(lambda: group_type(bootstrap, group) == "consumer", 60, message="the upgrade")
    wait_stable(bootstrap, group, topic, 3)
    produce_phase("mixed")
    newcomer.stop(signal.SIGTERM)
    wait_until(lambda: group_type(bootstrap, group) == "classic", 60, message="the downgrade")
    produce_phase("classic-again")


def test_a_consumer_group_survives_a_broker_restart(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({**OVERRIDES, "group.consumer.session.timeout.ms": 30_000})
    topic, group = "restart-848", "restart-848-group"
    ConfluentClient().create_topic(broker.bootstrap, topic, 2)
    assignments: list[list[int]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(
        [topic],
        on_assign=lambda _c, ps: assignments.append(sorted(p.partition for p in ps)),
    )

    def read(expected: set[str]) -> None:
        seen: set[str] = set()
        deadline = time.monotonic() + 60
        while not expected <= seen and time.monotonic() < deadline:
            seen.update(m.value().decode() for m in consumer.consume(100, 0.2) if not m.error())
        assert expected <= seen, sorted(expected - seen)[:5]

    try:
        produce(broker.bootstrap, topic, {0: ["a0"], 1: ["a1"]})
        read({"a0", "a1"})
        wait_until(lambda: consumer_group_owners(broker.bootstrap, group, topic)[0] == "Stable", 30)
        before = described(broker.bootstrap, group)
        broker.kill()  # kill -9: the group comes back from the log alone
        broker.start()
        wait_until(lambda: described(broker.bootstrap, group)[0] != "", 30)  # loaded
        after = described(broker.bootstrap, group)
        assert after == before
        produce(broker.bootstrap, topic, {0: ["b0"], 1: ["b1"]})
        read({"b0", "b1"})
        # The member kept its partitions and epoch: no new assignment reached it.
        assert assignments == [[0, 1]]
        assert described(broker.bootstrap, group) == before
    finally:
        consumer.close()


def described(bootstrap: str, group: str) -> tuple[Any, ...]:
    """What a restart must keep: state, epochs, and each member's epoch and assignments."""
    from kpybroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
    from tests.helpers.groups_wire import Wire

    with Wire(bootstrap) as wire:
        [group_] = wire.call(ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups
    return (
        group_.group_state,
        group_.group_epoch,
        group_.assignment_epoch,
        sorted(
            (m.member_id, m.member_epoch, repr(m.assignment), repr(m.target_assignment))
            for m in group_.members
        ),
    )


CLUSTER_OVERRIDES = {
    "group.consumer.session.timeout.ms": 20_000,
    "group.consumer.heartbeat.interval.ms": 500,
}


@pytest.mark.parametrize("cluster", [CLUSTER_OVERRIDES], indirect=True)
def test_a_consumer_group_moves_with_its_coordinator(cluster: ReplicatedCluster) -> None:
    """Three brokers, RF 3: the group's coordinator is killed; the broker that takes over
    its ``__consumer_offsets`` partition has the group from the replicated records, and the
    members go on consuming with the member IDs and partitions they had."""
    topic, group = "failover-848", "failover-848-group"
    cluster.create_topic(topic, PARTITIONS, 3)
    # __consumer_offsets, made while all three brokers are up (offsets.topic.replication.factor).
    admin = cluster.admin()
    wait_for(lambda: described_by_admin(admin, group), "the group's coordinator", 60)
    offsets_partitions = FAST_FAILOVER["offsets.topic.num.partitions"]
    cluster.wait_for_full_isr("__consumer_offsets", offsets_partitions, timeout=60)
    consumers = [
        Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
            }
        )
        for _ in range(2)
    ]
    for consumer in consumers:
        consumer.subscribe([topic])
    seen: Counter[str] = Counter()

    def poll_until(done: Callable[[], bool], what: str) -> None:
        """Poll the consumers (their rebalance callbacks run in poll) until ``done()``."""
        deadline = time.monotonic() + 90
        while not done() and time.monotonic() < deadline:
            for consumer in consumers:
                seen.update(m.value().decode() for m in consumer.consume(50, 0.1) if not m.error())
        assert done(), f"{what}\n{cluster.log_tail()}"

    def read(expected: set[str]) -> None:
        poll_until(lambda: expected <= set(seen), f"{len(expected - set(seen))} records unread")

    def stable_at(bootstrap: str) -> bool:
        try:
            return consumer_group_owners(bootstrap, group, topic)[0] == "Stable"
        except (OSError, ValueError):
            return False

    coordinator_partition = partition_for(group, offsets_partitions)

    def coordinator() -> int:
        return cluster.state("__consumer_offsets", coordinator_partition).leader

    try:
        first = phase_values("before")
        produce(cluster.bootstrap, topic, first)
        read({v for vs in first.values() for v in vs})
        killed = coordinator()
        bootstrap = cluster.brokers[killed].bootstrap
        poll_until(lambda: stable_at(bootstrap), "a Stable group")
        before = described(bootstrap, group)
        cluster.brokers[killed].kill()
        wait_for(lambda: coordinator() not in (-1, killed), "a new group coordinator", 60)
        after_bootstrap = cluster.brokers[coordinator()].bootstrap
        poll_until(lambda: stable_at(after_bootstrap), "a Stable group at the new coordinator")
        # Same members, same epochs and assignments: nobody had to rejoin.
        assert described(after_bootstrap, group) == before
        second = phase_values("after")
        produce(cluster.bootstrap, topic, second)
        read({v for vs in second.values() for v in vs})
    finally:
        for consumer in consumers:
            consumer.close()


def described_by_admin(admin: Any, group: str) -> bool:
    """Whether the admin client could describe ``group`` (its coordinator may still be
    loading just after ``__consumer_offsets`` was made: the client is told to retry)."""
    try:
        admin.describe_consumer_groups([group])[group].result(30)
    except KafkaException:
        return False
    return True
