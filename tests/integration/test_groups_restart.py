"""Committed offsets and groups across restarts; static members; independent groups."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.clients import ConfluentClient
from tests.helpers.groups_wire import BROKER_OVERRIDES, describe, owners, produce
from tests.helpers.process import wait_until

pytestmark = pytest.mark.timeout(120)


def consumer(broker: ManagedBroker, group: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **extra,
        }
    )


def poll_values(c: Consumer, count: int, timeout: float = 30) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of the next ``count`` records."""
    got: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            got.append((msg.partition(), msg.offset(), msg.value().decode()))
    assert len(got) == count, f"{len(got)} of {count} records within {timeout} s: {got[-3:]}"
    return got


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> ManagedBroker:
    return broker_factory(BROKER_OVERRIDES)


def test_consumer_and_broker_restart_resume_at_the_committed_offset(
    broker: ManagedBroker,
) -> None:
    from kafka import KafkaConsumer

    ConfluentClient().create_topic(broker.bootstrap, "resume", 1)
    produce(broker.bootstrap, "resume", {0: [f"r{i}" for i in range(100)]})
    first = consumer(broker, "resumers")
    first.subscribe(["resume"])
    read = poll_values(first, 40)
    # (confluent-kafka sends a metadata string with its C terminator: none here; the
    # metadata round trip is checked byte for byte in test_groups_wire.py.)
    first.commit(offsets=[TopicPartition("resume", 0, 40, leader_epoch=0)], asynchronous=False)
    first.close()

    broker.restart()

    # Another client library, so that the stored format, not a client cache, is what counts.
    second = KafkaConsumer(
        "resume",
        bootstrap_servers=broker.bootstrap,
        group_id="resumers",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        records = []
        deadline = time.monotonic() + 30
        while len(records) < 60 and time.monotonic() < deadline:
            for batch in second.poll(timeout_ms=200).values():
                records.extend(batch)
        assert [r.offset for r in records] == list(range(40, 100))
        assert [r.value.decode() for r in records[:2]] == ["r40", "r41"]
        tp = next(iter(second.assignment()))
        stored = second.committed(tp, metadata=True)
        assert (stored.offset, stored.leader_epoch) == (40, 0)
    finally:
        second.close()
    assert [v for _, _, v in read] == [f"r{i}" for i in range(40)]


@pytest.fixture
def closing() -> Iterator[list[Consumer]]:
    consumers: list[Consumer] = []
    yield consumers
    for c in consumers:
        c.close()


def test_static_members_rejoin_without_a_rebalance(
    broker: ManagedBroker, closing: list[Consumer]
) -> None:
    topic, group = "static", "statics"
    ConfluentClient().create_topic(broker.bootstrap, topic, 4)
    events: list[tuple[str, str, list[int]]] = []

    def start(instance: str) -> Consumer:
        c = consumer(broker, group, **{"group.instance.id": instance})

        def report(event: str) -> Any:
            return lambda _c, ps: events.append((instance, event, [p.partition for p in ps]))

        c.subscribe([topic], on_assign=report("assigned"), on_revoke=report("revoked"))
        closing.append(c)
        return c

    stayer, leaver = start("stayer"), start("leaver")

    def stable() -> bool:
        for c in (stayer, leaver):
            c.poll(0.1)
        state, owned = owners(broker.bootstrap, group, topic)
        held = sum(len(c.assignment()) for c in (stayer, leaver))
        return state == "Stable" and len(owned) == 4 and held == 4

    wait_until(stable, 30, interval=0, message="a Stable group of two static members")
    before = {m.group_instance_id: m.member_id for m in describe(broker.bootstrap, group).members}
    leaver_partitions = [ps for who, ev, ps in events if who == "leaver" and ev == "assigned"][-1]
    events.clear()

    leaver.close()  # a static member sends no LeaveGroup
    closing.remove(leaver)
    back = start("leaver")
    wait_until(lambda: back.poll(0.1) is not None or back.assignment(), 30, interval=0)
    for _ in range(10):
        stayer.poll(0.1)
    after = describe(broker.bootstrap, group)
    assert after.group_state == "Stable"
    ids = {m.group_instance_id: m.member_id for m in after.members}
    assert ids["stayer"] == before["stayer"] and ids["leaver"] != before["leaver"]
    assert [e for e in events if e[0] == "stayer"] == [], "the other member saw a rebalance"
    assert sorted(p.partition for p in back.assignment()) == sorted(leaver_partitions)


def test_two_groups_each_receive_every_record(broker: ManagedBroker) -> None:
    from kafka import KafkaConsumer

    ConfluentClient().create_topic(broker.bootstrap, "fanout", 3)
    queue_members = [consumer(broker, "queue") for _ in range(2)]
    for c in queue_members:
        c.subscribe(["fanout"])

    def split() -> bool:
        sizes = [len(c.assignment()) for c in queue_members if c.poll(0.05) is None]
        return sorted(sizes) == [1, 2]

    # Both members hold partitions before any record exists: then nothing is left
    # half-rebalanced when they close (a LeaveGroup would queue behind a parked JoinGroup).
    wait_until(split, 30, interval=0, message="the queue group split the partitions")
    values = {p: [f"{p}-{i}" for i in range(50)] for p in range(3)}
    produce(broker.bootstrap, "fanout", values)
    expected = sorted(v for vs in values.values() for v in vs)
    got: list[list[str]] = [[], []]
    deadline = time.monotonic() + 30
    while sum(map(len, got)) < len(expected) and time.monotonic() < deadline:
        for i, c in enumerate(queue_members):
            got[i] += [m.value().decode() for m in c.consume(500, 0.05) if not m.error()]
    for c in queue_members:
        c.close()

    other = KafkaConsumer(
        "fanout",
        bootstrap_servers=broker.bootstrap,
        group_id="audit",
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )
    audited = sorted(r.value.decode() for r in other)
    other.close()
    assert got[0] and got[1], "each queue member took a share"
    assert sorted(got[0] + got[1]) == expected
    assert audited == expected
