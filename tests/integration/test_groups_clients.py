"""Consumers sharing one topic in one group: three confluent-kafka and three kafka-python
consumers in a classic group, and six confluent-kafka consumers in a consumer group of
KIP-848's protocol (``group.protocol=consumer``, the assignment computed by the broker).

Each member runs in its own process (this module, run as a script), so that
one can leave cleanly (SIGTERM: close, LeaveGroup) and one can die silently
(SIGKILL: its session must time out). A member commits each record's offset
synchronously and reports the record only once the commit succeeded, which
makes "consumed" mean "consumed and committed": every record must then be
reported exactly once, by whichever member owned its partition, across the
rebalances. Members also report their assignments with timestamps, and no
partition may have two owners at the same time.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kpybroker.testing.output import OutputDrain
from tests.helpers.brokers import BrokerFactory
from tests.helpers.clients import ConfluentClient
from tests.helpers.groups_wire import BROKER_OVERRIDES, consumer_group_owners, owners, produce
from tests.helpers.process import REPO_ROOT, wait_until

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 6
SESSION_MS = 3000
RECORDS_PER_PHASE = 30  # per partition


# -- the member program (this module run as a script) -----------------------------------


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def run_confluent(args: argparse.Namespace, stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if args.protocol == "consumer":
        # Session, heartbeat and assignor are the broker's (group.consumer.*).
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = args.session_ms
        config["heartbeat.interval.ms"] = 300
        config["partition.assignment.strategy"] = "range"
    consumer = Consumer(config)

    def report(event: str) -> Any:
        return lambda _c, parts: emit(
            {"ev": event, "ps": [p.partition for p in parts], "t": time.time()}
        )

    consumer.subscribe([args.topic], on_assign=report("assigned"), on_revoke=report("revoked"))
    while not stop.is_set():
        msg = consumer.poll(0.1)
        if msg is None or msg.error():
            continue
        try:
            consumer.commit(
                offsets=[TopicPartition(args.topic, msg.partition(), msg.offset() + 1)],
                asynchronous=False,
            )
        except KafkaException:
            # Not committed: not consumed. Read it again if the partition is still ours.
            with contextlib.suppress(KafkaException):
                consumer.seek(TopicPartition(args.topic, msg.partition(), msg.offset()))
            continue
        emit({"ev": "rec", "p": msg.partition(), "o": msg.offset(), "v": msg.value().decode()})
    consumer.close()


def run_kafka_python(args: argparse.Namespace, stop: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    class Report(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit({"ev": "revoked", "ps": [tp.partition for tp in revoked], "t": time.time()})

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit({"ev": "assigned", "ps": [tp.partition for tp in assigned], "t": time.time()})

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=300,
    )
    consumer.subscribe([args.topic], listener=Report())
    while not stop.is_set():
        for tp, records in consumer.poll(timeout_ms=100, max_records=1).items():
            for record in records:
                try:
                    commit = OffsetAndMetadata(record.offset + 1, "", -1)
                    consumer.commit({TopicPartition(tp.topic, tp.partition): commit})
                except KafkaError:
                    with contextlib.suppress(KafkaError, AssertionError, ValueError):
                        consumer.seek(tp, record.offset)
                    continue
                emit(
                    {"ev": "rec", "p": tp.partition, "o": record.offset, "v": record.value.decode()}
                )
    consumer.close()


def member_main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("client", "bootstrap", "group", "topic", "name"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--session-ms", type=int, default=SESSION_MS)
    parser.add_argument("--protocol", default="classic")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    emit({"ev": "started"})
    (run_confluent if args.client == "confluent" else run_kafka_python)(args, stop)
    emit({"ev": "closed", "t": time.time()})


# -- the test side -----------------------------------------------------------------------


@dataclass
class Member:
    """A member process and what it reported."""

    name: str
    process: subprocess.Popen[bytes]
    drain: OutputDrain
    ended_at: float | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    def read(self) -> list[dict[str, Any]]:
        lines = self.drain.text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def records(self) -> list[dict[str, Any]]:
        return [e for e in self.read() if e["ev"] == "rec"]

    def intervals(self) -> Iterator[tuple[int, float, float]]:
        """(partition, from, to) for each time this member owned a partition."""
        held: dict[int, float] = {}
        for event in self.read():
            if event["ev"] == "assigned":
                held.update(dict.fromkeys(event["ps"], event["t"]))
            elif event["ev"] == "revoked":
                for p in event["ps"]:
                    yield p, held.pop(p), event["t"]
        end = self.ended_at or time.time()
        for p, since in held.items():
            yield p, since, end


def start_member(
    client: str, name: str, bootstrap: str, group: str, topic: str, protocol: str = "classic"
) -> Member:
    argv = [sys.executable, "-m", "tests.integration.test_groups_clients", "--client", client]
    argv += ["--bootstrap", bootstrap, "--group", group, "--topic", topic, "--name", name]
    argv += ["--protocol", protocol]
    process = subprocess.Popen(
        argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    return Member(name, process, OutputDrain(process.stdout, name=name))


def values(phase: str) -> dict[int, list[str]]:
    return {p: [f"{phase}-{p}-{i}" for i in range(RECORDS_PER_PHASE)] for p in range(PARTITIONS)}


def consumed(members: list[Member]) -> Counter[str]:
    return Counter(r["v"] for m in members for r in m.records())


def wait_consumed(members: list[Member], expected: set[str], timeout: float) -> None:
    wait_until(
        lambda: expected <= set(consumed(members)),
        timeout,
        message=f"{len(expected)} records consumed (have {len(set(consumed(members)) & expected)})",
    )


def wait_balanced(
    bootstrap: str,
    group: str,
    topic: str,
    live: int,
    timeout: float = 60,
    protocol: str = "classic",
) -> None:
    """Until the coordinator holds a Stable assignment of every partition, each to one member."""
    described = consumer_group_owners if protocol == "consumer" else owners

    def balanced() -> bool:
        state, owned = described(bootstrap, group, topic)
        return (
            state == "Stable"
            and sorted(owned) == list(range(PARTITIONS))
            and all(len(ids) == 1 for ids in owned.values())
            and len({i for ids in owned.values() for i in ids}) == live
        )

    wait_until(balanced, timeout, interval=0.3, message=f"a Stable group of {live} members")


def assert_no_partition_owned_twice(members: list[Member]) -> None:
    intervals = [(p, start, end, m.name) for m in members for p, start, end in m.intervals()]
    for p in range(PARTITIONS):
        spans = sorted((s, e, n) for q, s, e, n in intervals if q == p)
        for (s1, e1, n1), (s2, _e2, n2) in itertools.pairwise(spans):
            assert e1 <= s2, f"partition {p} owned by {n1} ({s1}-{e1}) and {n2} from {s2}"


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        if member.process.poll() is None:
            member.process.kill()
        member.process.wait(10)


@pytest.mark.parametrize(
    ("protocol", "clients"),
    [("classic", ("confluent", "kafka-python")), ("consumer", ("confluent", "confluent"))],
)
def test_six_members_share_partitions_exactly_once_through_leave_and_death(
    broker_factory: BrokerFactory, members: list[Member], protocol: str, clients: tuple[str, str]
) -> None:
    broker = broker_factory(
        {
            **BROKER_OVERRIDES,
            "group.consumer.session.timeout.ms": SESSION_MS,
            "group.consumer.heartbeat.interval.ms": 300,
        }
    )
    topic, group = "shared", "six"
    bootstrap = broker.bootstrap
    ConfluentClient().create_topic(bootstrap, topic, PARTITIONS)
    for n in range(3):
        for client in clients:
            name = f"{client}-{n}-{len(members)}"
            members.append(start_member(client, name, bootstrap, group, topic, protocol))

    def wait_stable(live: int) -> None:
        wait_balanced(bootstrap, group, topic, live, protocol=protocol)

    wait_stable(6)

    produced = set()
    for phase in ("before", "leaving"):
        batch = values(phase)
        produce(broker.bootstrap, topic, batch)
        produced |= {v for vs in batch.values() for v in vs}
        if phase == "leaving":
            # A member leaves cleanly (LeaveGroup) while records are being consumed.
            leaver = members[0]
            leaver.process.send_signal(signal.SIGTERM)
            leaver.process.wait(30)
            leaver.ended_at = time.time()
        wait_consumed(members, produced, timeout=60)
    wait_stable(5)

    # A member dies silently: its partitions move on only after its session times out.
    victim = members[1]
    victim.process.kill()
    victim.process.wait(10)
    victim.ended_at = time.time()
    batch = values("dead")
    produce(broker.bootstrap, topic, batch)
    produced |= {v for vs in batch.values() for v in vs}
    wait_consumed(members, produced, timeout=60)
    wait_stable(4)

    counts = consumed(members)
    assert set(counts) == produced
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, f"consumed more than once: {duplicates}"
    assert_no_partition_owned_twice(members)
    assert {e["ev"] for e in victim.read()} >= {"assigned", "rec"}, "the victim took part"


if __name__ == "__main__":
    member_main()


def test_cooperative_sticky_moves_only_the_partitions_that_change_owner(
    broker_factory: BrokerFactory,
) -> None:
    """KIP-429 through plain repeated joins: the first member keeps half its partitions."""
    from confluent_kafka import Consumer

    broker = broker_factory(BROKER_OVERRIDES)
    topic, group = "cooperative", "coop"
    ConfluentClient().create_topic(broker.bootstrap, topic, PARTITIONS)
    events: list[tuple[str, str, list[int]]] = []

    def start(name: str) -> Any:
        c = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "cooperative-sticky",
                "heartbeat.interval.ms": 300,
            }
        )

        def report(kind: str) -> Any:
            return lambda _c, ps: events.append((name, kind, sorted(p.partition for p in ps)))

        c.subscribe([topic], on_assign=report("assigned"), on_revoke=report("revoked"))
        return c

    first = start("first")
    second = None
    try:
        wait_until(lambda: first.poll(0.1) is None and len(first.assignment()) == 6, 30, 0)
        second = start("second")

        def split() -> bool:
            for c in (first, second):
                c.poll(0.1)
            return len(first.assignment()) == len(second.assignment()) == 3

        wait_until(split, 30, interval=0, message="an even split")
        revoked = [ps for who, kind, ps in events if who == "first" and kind == "revoked" and ps]
        assert sum(map(len, revoked)) == 3, f"first gave up more than it had to: {events}"
        state, owned = owners(broker.bootstrap, group, topic)
        assert state == "Stable" and all(len(ids) == 1 for ids in owned.values()), owned

        values = {p: [f"c-{p}-{i}" for i in range(10)] for p in range(PARTITIONS)}
        produce(broker.bootstrap, topic, values)
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while len(seen) < 60 and time.monotonic() < deadline:
            for c in (first, second):
                seen += [m.value().decode() for m in c.consume(100, 0.05) if not m.error()]
        assert sorted(seen) == sorted(v for vs in values.values() for v in vs)
    finally:
        first.close()
        if second is not None:
            second.close()


def group_type(bootstrap: str, group: str) -> str | None:
    """The group's type as ListGroups (v5) reports it: classic or consumer."""
    from kpybroker.protocol.messages.list_groups import ListGroupsRequest
    from tests.helpers.groups_wire import Wire

    with Wire(bootstrap) as wire:
        listed = wire.call(ListGroupsRequest(states_filter=[], types_filter=[]), 5).groups
    return next((g.group_type for g in listed if g.group_id == group), None)


def test_a_classic_group_upgraded_live_and_back(
    broker_factory: BrokerFactory, members: list[Member]
) -> None:
    """Two classic consumers share a topic; a consumer of KIP-848's protocol joins and the
    group becomes a consumer group without stopping them; it leaves and the group is classic
    again. Every record is consumed once, and no partition has two owners at a time."""
    broker = broker_factory(
        {
            **BROKER_OVERRIDES,
            "group.consumer.session.timeout.ms": SESSION_MS,
            "group.consumer.heartbeat.interval.ms": 300,
        }
    )
    topic, group = "migrating", "migrating-group"
    bootstrap = broker.bootstrap
    ConfluentClient().create_topic(bootstrap, topic, PARTITIONS)
    for n in range(2):
        members.append(start_member("confluent", f"classic-{n}", bootstrap, group, topic))
    wait_balanced(bootstrap, group, topic, live=2)
    produced: set[str] = set()

    def produce_and_consume(phase: str) -> None:
        batch = values(phase)
        produce(bootstrap, topic, batch)
        produced.update(v for vs in batch.values() for v in vs)
        wait_consumed(members, produced, timeout=60)

    produce_and_consume("classic")
    assert group_type(bootstrap, group) == "classic"
    newcomer = start_member("confluent", "kip848", bootstrap, group, topic, "consumer")
    members.append(newcomer)
    wait_until(lambda: group_type(bootstrap, group) == "consumer", 30, message="the upgrade")
    wait_balanced(bootstrap, group, topic, live=3, protocol="consumer")
    produce_and_consume("mixed")
    assert {e["ev"] for e in newcomer.read()} >= {"assigned", "rec"}, "the newcomer took part"
    newcomer.process.send_signal(signal.SIGTERM)
    newcomer.process.wait(30)
    newcomer.ended_at = time.time()
    wait_until(lambda: group_type(bootstrap, group) == "classic", 30, message="the downgrade")
    wait_balanced(bootstrap, group, topic, live=2)
    produce_and_consume("classic-again")

    counts = consumed(members)
    assert set(counts) == produced
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, f"consumed more than once: {duplicates}"
    assert_no_partition_owned_twice(members)
