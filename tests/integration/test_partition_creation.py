"""Creating thousands of partitions while the broker serves others; complete or absent.

While an admin client creates a topic of ``PARTITIONS`` partitions (or grows one to
that many), a probe (``tests/helpers/request_probe.py``) keeps sending Metadata and
Produce requests on another topic: they must be answered *during* the creation
(their count in that window is asserted; their p99 is printed, never asserted).
Afterwards Metadata lists exactly the partitions asked for, each with a leader, and
partition 0, the last one and a sample between accept a produce.

A kill -9 in the middle of a creation, then a restart: the topic is there with every
partition producible, or not there at all (the built-in store writes a topic's
assignment as one node; the logs are made after it, and again after a restart).

A three-broker cluster on ZooKeeper: a replication factor 3 topic gets a leader and a
full ISR for every partition while the probe is answered; and the controller killed -9
while the brokers create the logs of such a topic leaves it complete on every broker or
absent from all, once the controller is back.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.groups_wire import Wire
from tests.helpers.replication_cluster import ReplicatedCluster, cluster, wait_for, zookeeper
from tests.helpers.request_probe import RequestProbe

__all__ = ["cluster", "zookeeper"]  # fixtures

#: Large enough that creating them took the old broker seconds of a stalled event loop
#: (about 6 s for 2,000 on a 2-core machine); small enough for a quick test. Creation
#: is bound by its fsyncs: scripts/bench_partition_creation.py measures 10,000 and more.
PARTITIONS = 2_000
#: Growing a topic and crashing mid-way check the same paths with fewer partitions.
SMALLER = 1_000
CLUSTER_PARTITIONS = 300
PROBE_TOPIC = "probe"
#: CreateTopics' timeout: the broker answers once it hosts every new partition.
CREATION_TIMEOUT_S = 600


def admin_of(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create(bootstrap: str, topic: NewTopic) -> None:
    admin = admin_of(bootstrap)  # kept alive until the answer
    futures = admin.create_topics(
        [topic], operation_timeout=CREATION_TIMEOUT_S, request_timeout=CREATION_TIMEOUT_S
    )
    futures[topic.topic].result(CREATION_TIMEOUT_S)


def grow(bootstrap: str, topic: str, count: int) -> None:
    admin = admin_of(bootstrap)
    futures = admin.create_partitions(
        [NewPartitions(topic, count)],
        operation_timeout=CREATION_TIMEOUT_S,
        request_timeout=CREATION_TIMEOUT_S,
    )
    futures[topic].result(CREATION_TIMEOUT_S)


def metadata(bootstrap: str, topic: str) -> object:
    request = MetadataRequest(topics=[MetadataRequestTopic(name=topic)])
    with Wire(bootstrap) as wire:
        [answer] = wire.call(request, 12).topics
    return answer


def assert_complete(bootstrap: str, topic: str, partitions: int) -> None:
    """Metadata lists exactly ``partitions`` partitions, each with a leader."""
    answer = metadata(bootstrap, topic)
    assert answer.error_code == ErrorCode.NONE
    assert sorted(p.partition_index for p in answer.partitions) == list(range(partitions))
    leaderless = [p.partition_index for p in answer.partitions if p.leader_id < 0]
    assert not leaderless, f"partitions without a leader: {leaderless[:10]}"


def assert_producible(bootstrap: str, topic: str, partitions: int) -> None:
    """Partition 0, the last one and a sample between each acknowledge a record."""
    sample = {0, partitions - 1, *random.Random(partitions).sample(range(partitions), 20)}
    failures: dict[int, object] = {}
    acked: set[int] = set()

    def delivered(error: object, message: object) -> None:
        partition = message.partition()  # type: ignore[attr-defined]
        if error is None:
            acked.add(partition)
        else:
            failures[partition] = error

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition in sorted(sample):
        producer.produce(topic, b"x", partition=partition, on_delivery=delivered)
    assert producer.flush(120) == 0
    assert not failures
    assert acked == sample


@contextmanager
def probed(bootstrap: str) -> Iterator[RequestProbe]:
    """A probe on its own topic, warmed up."""
    create(bootstrap, NewTopic(PROBE_TOPIC, 1, 1))
    with RequestProbe(bootstrap, PROBE_TOPIC) as probe:
        probe.wait_for_answers(10)
        yield probe


def served_during(probe: RequestProbe, work: Callable[[], None]) -> None:
    """Run ``work``; the probe's requests must have been answered while it ran."""
    started = time.monotonic()
    work()
    ended = time.monotonic()
    for answers in (probe.metadata, probe.produce):
        print(answers.summary(started, ended))
        assert not answers.failures
        assert answers.during(started, ended), f"no {answers.kind} answered during the creation"


def test_other_clients_are_served_while_a_topic_of_thousands_is_created(
    broker: ManagedBroker,
) -> None:
    with probed(broker.bootstrap) as probe:
        served_during(probe, lambda: create(broker.bootstrap, NewTopic("big", PARTITIONS, 1)))
    assert_complete(broker.bootstrap, "big", PARTITIONS)
    assert_producible(broker.bootstrap, "big", PARTITIONS)


def test_other_clients_are_served_while_a_topic_grows_by_thousands(
    broker: ManagedBroker,
) -> None:
    create(broker.bootstrap, NewTopic("growing", 1, 1))
    with probed(broker.bootstrap) as probe:
        served_during(probe, lambda: grow(broker.bootstrap, "growing", SMALLER))
    assert_complete(broker.bootstrap, "growing", SMALLER)
    assert_producible(broker.bootstrap, "growing", SMALLER)


def partition_dirs(broker: ManagedBroker, topic: str) -> int:
    return sum(1 for d in broker.log_dir.glob(f"{topic}-*") if d.is_dir())


@pytest.mark.parametrize("change", ["create", "grow"])
def test_a_crash_during_creation_leaves_the_topic_complete_or_absent(
    broker_factory: BrokerFactory, change: str
) -> None:
    broker = broker_factory()
    if change == "grow":
        create(broker.bootstrap, NewTopic("crash", 1, 1))

        def work() -> None:
            grow(broker.bootstrap, "crash", SMALLER)
    else:

        def work() -> None:
            create(broker.bootstrap, NewTopic("crash", SMALLER, 1))

    # The admin call fails when the broker dies under it: that is the point.
    creator = threading.Thread(target=lambda: _ignore_errors(work), daemon=True)
    creator.start()
    wait_for(lambda: partition_dirs(broker, "crash") >= SMALLER // 4, "logs being created")
    broker.kill()
    creator.join(60)
    assert partition_dirs(broker, "crash") < SMALLER, "the creation ended before the kill"
    broker.start()
    answer = metadata(broker.bootstrap, "crash")
    if answer.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        wait_for(lambda: partition_dirs(broker, "crash") == 0, "stray logs to be deleted")
        return
    assert_complete(broker.bootstrap, "crash", SMALLER)
    wait_for(lambda: partition_dirs(broker, "crash") == SMALLER, "every log to be created", 300)
    assert_producible(broker.bootstrap, "crash", SMALLER)


def _ignore_errors(work: Callable[[], None]) -> None:
    try:
        work()
    except Exception as exc:
        print(f"the interrupted creation failed as expected: {exc!r}")


def test_a_cluster_creates_a_replicated_topic_while_serving(cluster: ReplicatedCluster) -> None:
    bootstrap = cluster.brokers[0].bootstrap
    with probed(bootstrap) as probe:
        served_during(
            probe, lambda: create(bootstrap, NewTopic("replicated", CLUSTER_PARTITIONS, 3))
        )
    cluster.wait_for_full_isr("replicated", CLUSTER_PARTITIONS, timeout=300)
    for broker in cluster.brokers.values():
        assert_complete(broker.bootstrap, "replicated", CLUSTER_PARTITIONS)
    assert_producible(cluster.bootstrap, "replicated", CLUSTER_PARTITIONS)


def test_a_controller_killed_during_a_replicated_creation_leaves_the_topic_whole(
    cluster: ReplicatedCluster,
) -> None:
    c = cluster.controller()
    victim = cluster.brokers[c]
    bootstrap = next(b.bootstrap for i, b in cluster.brokers.items() if i != c)
    creator = threading.Thread(
        target=lambda: _ignore_errors(lambda: create(bootstrap, NewTopic("crash", SMALLER, 3))),
        daemon=True,
    )
    creator.start()
    wait_for(lambda: partition_dirs(victim, "crash") >= SMALLER // 4, "logs being created")
    victim.kill()
    assert partition_dirs(victim, "crash") < SMALLER, "the creation ended before the kill"
    wait_for(lambda: cluster.controller() not in (-1, c), "a new controller")
    victim.start()
    creator.join(CREATION_TIMEOUT_S)
    if metadata(bootstrap, "crash").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        for broker in cluster.brokers.values():
            wait_for(lambda b=broker: partition_dirs(b, "crash") == 0, "stray logs to go")
        return
    cluster.wait_for_full_isr("crash", SMALLER, timeout=300)
    for broker in cluster.brokers.values():
        assert_complete(broker.bootstrap, "crash", SMALLER)
        assert partition_dirs(broker, "crash") == SMALLER
    assert_producible(cluster.bootstrap, "crash", SMALLER)
