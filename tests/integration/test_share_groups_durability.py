"""Share groups (KIP-932) through crashes and failovers: no acknowledged record
redelivered, no record lost.

Kafka's guarantee for a share group: a record whose acknowledgement (ACCEPT) succeeded is
never delivered again; a record acquired but not acknowledged (its holder's ack failed,
or never went out) may be delivered again, with a higher delivery count. The partition's
leader writes every acknowledgement through the share coordinator
(``__share_group_state``) before answering it, so this must hold when brokers die.

Kafka's VerifiableShareConsumers (``--acknowledgement-mode sync``, ``max.poll.records``
10, records produced in batches of 10, so each holds a batch or two at a time) share one
partition while:

- one broker is killed (SIGKILL) a quarter of the way through and restarted on its port
  and data directory; the consumers reconnect on their own;
- three brokers on ZooKeeper, every topic replicated three ways (the internal ones made,
  and in sync, before anything fails): the leader of the data partition, the share
  coordinator of the group's share partition ("group:topicId:partition"), or the group
  coordinator is killed, on a broker chosen to hold only that one of the three roles;
  the consumers go on with the brokers that take over;
- the same with the data partition's leader cut off ZooKeeper instead: alive, it still
  believes it leads. A raw member took the first batch from it before and sits on it; a
  consumer that knows only the survivors gets that batch from the new leader, and the
  raw member's late acknowledgement to the deposed leader is refused: the new leader
  read the state at a newer leader epoch, which fences the old one's writes. Then the
  old leader is let back and follows.

From the consumers' JSON events: every record is delivered at least once; its
acknowledgement succeeds exactly once (a second success would mean it was delivered
again after the first), or, when it was in flight as its broker died, fails at the
client though the broker had written it (the answer was lost with the broker: Kafka
promises nothing either way then; such a record is not delivered again); no record
acknowledged before the failure is delivered after it; records produced after the
failure are consumed too. The share coordinator's state of the partition ends starting
past the last record: every record done with there too. Assertions never depend on
timings.
"""

from __future__ import annotations

import collections
import contextlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from kpybroker.coordinator.partitioning import partition_for
from kpybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kpybroker.share_coordinator.persister import uuid_string
from kpybroker.testing.output import OutputDrain
from tests.helpers.brokers import BrokerFactory, KpyBroker
from tests.helpers.groups_wire import Wire
from tests.helpers.java import java_command
from tests.helpers.process import wait_until
from tests.helpers.replication_cluster import ReplicatedCluster, cluster, wait_for, zookeeper
from tests.helpers.share_clients import (
    SHARE_OVERRIDES,
    VERIFIABLE_SHARE_CONSUMER,
    new_topic,
    produce,
)
from tests.helpers.share_wire import (
    ACCEPT,
    RawMember,
    ShareWire,
    acknowledge_topic,
    describe_offsets,
    fetch_topic,
    messages,
    settle,
    share_fetch,
    wait_group_configs,
)

__all__ = ["cluster", "zookeeper"]  # fixtures
pytestmark = pytest.mark.timeout(180)

OFFSETS_TOPIC, STATE_TOPIC = "__consumer_offsets", "__share_group_state"
INTERNAL_PARTITIONS = 3
#: Records per produced batch (a share fetch acquires whole batches) and per poll.
BATCH = 10
CONSUMER_CONFIG = f"max.poll.records={BATCH}\n"
#: Three brokers: every internal topic replicated three ways (the replication cluster's
#: overrides already make __consumer_offsets so), three partitions each.
CLUSTER_OVERRIDES = {
    **SHARE_OVERRIDES,
    "share.coordinator.state.topic.num.partitions": INTERNAL_PARTITIONS,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.min.isr": 2,
}


@pytest.fixture(scope="module")
def msg(kafka_lib: Path) -> SimpleNamespace:
    return messages(kafka_lib)


class ShareConsumer:
    """A VerifiableShareConsumer: its JSON events from stdout, its log (stderr) in a file."""

    def __init__(self, lib: Path, bootstrap: str, topic: str, group: str, work: Path, name: str):
        self.name = name
        config = work / "share-consumer.properties"
        config.write_text(CONSUMER_CONFIG)
        self.log_path = work / f"{name}.log"
        args = [
            "--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group,
            "--acknowledgement-mode", "sync", "--offset-reset-strategy", "earliest",
            "--command-config", str(config), "--verbose",
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                java_command(lib, VERIFIABLE_SHARE_CONSUMER, args, log_level="INFO"),
                stdout=subprocess.PIPE,
                stderr=log,
            )
        assert self.process.stdout is not None
        self.drain = OutputDrain(self.process.stdout, name=name)

    def lines(self) -> list[str]:
        return self.drain.text().splitlines()

    def mark(self) -> int:
        """Where its output stands now: the events before it happened before now."""
        return len(self.lines())

    def events(self, start: int = 0, end: int | None = None) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines()[start:end] if line.startswith("{")]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(30)
        self.drain.join()

    def describe(self) -> str:
        log = self.log_path.read_text(errors="replace")
        return (
            f"--- {self.name} (exit {self.process.poll()}) stdout ---\n"
            f"{self.drain.text()[-3000:]}\n--- {self.name} log ---\n{log[-5000:]}"
        )


@pytest.fixture
def stack() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as exit_stack:
        yield exit_stack


@pytest.fixture
def consumers(kafka_lib: Path, tmp_path: Path) -> Iterator[Any]:
    """Start share consumers: ``consumers(bootstrap, topic, group, n)``; killed at the end."""
    started: list[ShareConsumer] = []

    def start(bootstrap: str, topic: str, group: str, n: int) -> list[ShareConsumer]:
        new = [
            ShareConsumer(kafka_lib, bootstrap, topic, group, tmp_path, f"share-consumer-{i}")
            for i in range(len(started), len(started) + n)
        ]
        started.extend(new)
        return new

    yield start
    for c in started:
        if c.process.poll() is None:
            c.process.kill()
        c.process.wait(10)
        c.drain.join()
        c.log_path.with_suffix(".out").write_text(c.drain.text())


def offsets(events: list[dict[str, Any]], name: str, success: bool | None = None) -> list[int]:
    """The offsets of the ``record_data`` events (``name``), or of the
    ``offsets_acknowledged`` events that succeeded (or failed) as ``success`` says."""
    if name == "record_data":
        return [e["offset"] for e in events if e["name"] == name]
    return [
        offset
        for e in events
        if e["name"] == name and e["success"] == success
        for p in e["partitions"]
        for offset in p["offsets"]
    ]


def acknowledged(consumers: list[ShareConsumer]) -> set[int]:
    return {o for c in consumers for o in offsets(c.events(), "offsets_acknowledged", True)}


@dataclass
class Outcome:
    """What the consumers did, split at the kill (``marks``: each one's output then)."""

    delivered: collections.Counter[int]
    acked: collections.Counter[int]
    failed_acks: collections.Counter[int]
    acked_before_kill: set[int]
    delivered_after_kill: collections.Counter[int]
    failed_after_kill: set[int]
    values: set[str]


def outcome(consumers: list[ShareConsumer], marks: list[int]) -> Outcome:
    delivered: collections.Counter[int] = collections.Counter()
    acked: collections.Counter[int] = collections.Counter()
    failed: collections.Counter[int] = collections.Counter()
    acked_before: set[int] = set()
    after: collections.Counter[int] = collections.Counter()
    failed_after: set[int] = set()
    values: set[str] = set()
    for c, mark in zip(consumers, marks, strict=True):
        events = c.events()
        delivered.update(offsets(events, "record_data"))
        acked.update(offsets(events, "offsets_acknowledged", True))
        failed.update(offsets(events, "offsets_acknowledged", False))
        values.update(e["value"] for e in events if e["name"] == "record_data")
        acked_before.update(offsets(c.events(0, mark), "offsets_acknowledged", True))
        after.update(offsets(c.events(mark), "record_data"))
        failed_after.update(offsets(c.events(mark), "offsets_acknowledged", False))
    return Outcome(delivered, acked, failed, acked_before, after, failed_after, values)


def check_outcome(result: Outcome, n: int, topic: str, context: str) -> None:
    """Nothing lost, nothing acknowledged twice, nothing acknowledged before the failure
    delivered after it."""
    everything = set(range(n))
    assert set(result.delivered) == everything, (
        f"never delivered: {sorted(everything - set(result.delivered))[:20]}\n{context}"
    )
    assert result.values == {f"{topic}-{i}" for i in range(n)}
    # An acknowledgement in flight when its broker died fails at the client, though the
    # broker may have written it first (its answer was lost): such a record is done (the
    # share coordinator's state said so) without a successful acknowledgement. Any other
    # record's acknowledgement succeeded.
    in_doubt = everything - set(result.acked)
    assert in_doubt <= result.failed_after_kill, (
        f"never acknowledged: {sorted(in_doubt - result.failed_after_kill)[:20]}\n{context}"
    )
    twice = {o: k for o, k in result.acked.items() if k > 1}
    assert twice == {}, f"acknowledged successfully more than once: {twice}\n{context}"
    again = result.acked_before_kill & set(result.delivered_after_kill)
    assert again == set(), (
        f"acknowledged before the failure, delivered after it: {sorted(again)[:20]}\n{context}"
    )
    # Kafka's at-least-once: what was delivered again had been in flight, unacknowledged.
    redelivered = {o for o, k in result.delivered.items() if k > 1}
    print(
        f"{n} records: {len(result.acked_before_kill)} acknowledged before the failure, "
        f"{len(redelivered)} delivered again, {result.failed_acks.total()} failed "
        f"acknowledgements, {len(in_doubt)} of them written all the same"
    )


def wait_acknowledged(consumers: list[ShareConsumer], count: int, extra: Any) -> None:
    """Until ``count`` records' acknowledgements succeeded."""
    wait_until(
        lambda: len(acknowledged(consumers)) >= count,
        90,
        interval=0.05,
        message=f"{count} records acknowledged\n"
        + "\n".join(c.describe() for c in consumers)
        + f"\n{extra()}",
    )


def wait_finished(
    consumers: list[ShareConsumer],
    bootstrap: str,
    msg: SimpleNamespace,
    group: str,
    topic: str,
    n: int,
    extra: Any,
) -> None:
    """Until every record's acknowledgement came back (succeeded, or failed when a broker
    died), and the share coordinator's state of the partition (DescribeShareGroupOffsets at
    the group coordinator ``bootstrap``) starts at ``n``: every record before it done with.
    (The lag is 0 then, or -1 where the group coordinator does not lead the partition:
    kpybroker does not ask the leader for its end offset.)"""
    everything = set(range(n))
    seen: list[Any] = []

    def answered() -> set[int]:
        return {
            o
            for c in consumers
            for success in (True, False)
            for o in offsets(c.events(), "offsets_acknowledged", success)
        }

    def done() -> bool:
        if not everything <= answered():
            return False
        seen[:] = [describe_offsets(bootstrap, msg, group)]
        return seen[0].get((topic, 0), (-1, -1)) in ((n, 0), (n, -1))

    try:
        wait_until(done, 90, interval=0.1, message="every record acknowledged")
    except AssertionError as exc:
        missing = sorted(everything - answered())[:20]
        raise AssertionError(
            f"{exc}: not acknowledged {missing}; (start offset, lag) described: {seen}\n"
            + "\n".join(c.describe() for c in consumers)
            + f"\n{extra()}"
        ) from None


def produce_range(bootstrap: str, topic: str, first: int, last: int) -> None:
    produce(bootstrap, topic, [f"{topic}-{i}".encode() for i in range(first, last)], BATCH)


# -- one broker, killed and restarted ---------------------------------------------------------


def test_share_consumers_through_a_broker_kill_9_and_restart(
    broker_factory: BrokerFactory, consumers: Any, msg: SimpleNamespace
) -> None:
    """Three consumers; the broker is killed a quarter of the way through, restarted,
    and more records are produced."""
    broker = broker_factory(SHARE_OVERRIDES)
    topic, group = "share-kill9", "share-kill9-group"
    before, total = 600, 900
    new_topic(broker.bootstrap, topic)
    produce_range(broker.bootstrap, topic, 0, before)
    members = consumers(broker.bootstrap, topic, group, 3)
    wait_acknowledged(members, before // 4, broker.log_text)

    marks = [c.mark() for c in members]
    broker.kill()
    broker.start()
    # Records produced after the restart are shared as well.
    produce_range(broker.bootstrap, topic, before, total)
    wait_finished(members, broker.bootstrap, msg, group, topic, total, broker.log_text)
    assert describe_offsets(broker.bootstrap, msg, group) == {(topic, 0): (total, 0)}
    assert all(c.process.poll() is None for c in members), [c.describe() for c in members]
    for c in members:
        c.stop()
    context = "\n".join(c.describe() for c in members)
    check_outcome(outcome(members, marks), total, topic, context)


# -- three brokers: a leader or coordinator killed --------------------------------------------


def find_coordinator(bootstrap: str, key_type: int, key: str) -> int:
    """The broker FindCoordinator (v6) names for ``key``, asking until one is named (the
    first lookup creates the coordinator's topic)."""
    found: list[int] = []

    def ask() -> bool:
        try:
            with Wire(bootstrap) as wire:
                answer = wire.call(
                    FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), 6
                )
        except OSError:
            return False
        [coordinator] = answer.coordinators
        found[:] = [coordinator.node_id]
        return coordinator.error_code == 0

    wait_until(ask, 60, message=f"a coordinator for {key!r}")
    return found[0]


def topic_id(bootstrap: str, topic: str) -> str:
    """The topic's id as Kafka prints it (as coordinator keys hold it)."""
    with ShareWire(bootstrap) as wire:
        return uuid_string(wire.topic_id(topic).bytes)


class ZombieHolder:
    """A share-group member over raw requests that acquires records from one broker,
    holds them, and acknowledges them later (the group's lock lasts a minute)."""

    def __init__(
        self, msg: SimpleNamespace, group: str, topic: str, coordinator: str, leader: KpyBroker
    ) -> None:
        self.msg, self.group = msg, group
        with ShareWire(coordinator) as wire:
            wire.alter_group_configs(
                group, share_auto_offset_reset="earliest", share_record_lock_duration_ms="60000"
            )
            self.topic_id = wire.topic_id(topic)
            self.member = RawMember(group, [topic])
            settle(wire, msg, [self.member])
        wait_group_configs(leader.bootstrap, group, share_auto_offset_reset="earliest")
        self.wire = ShareWire(leader.bootstrap)
        self.acquired: list[tuple[int, int, int]] = []

    def acquire(self) -> list[tuple[int, int, int]]:
        request = share_fetch(
            self.msg, self.group, self.member.member_id, 0,
            [fetch_topic(self.msg, self.topic_id)], max_wait_ms=5000, max_records=BATCH,
        )  # fmt: skip
        answer = self.wire.call(request, 1)
        [p] = answer.responses[0].partitions
        assert (answer.error_code, p.error_code) == (0, 0), answer
        self.acquired = [
            (a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records
        ]
        return self.acquired

    def acknowledge(self) -> int:
        """Accept what it acquired: the partition's error code."""
        request = self.msg.ShareAcknowledgeRequest(
            group_id=self.group,
            member_id=self.member.member_id,
            share_session_epoch=1,
            topics=[
                acknowledge_topic(
                    self.msg,
                    self.topic_id,
                    0,
                    [(f, last, [ACCEPT]) for f, last, _ in self.acquired],
                )
            ],
        )
        answer = self.wire.call(request, 1)
        assert answer.error_code == 0, answer
        [p] = answer.responses[0].partitions
        return p.error_code

    def close(self) -> None:
        self.wire.close()


#: Which broker fails (holding that role only), and how: killed, or cut off ZooKeeper
#: (alive: a deposed leader that still takes requests until it learns it lost its session).
FAILURES = (
    ("data-leader", "killed"),
    ("share-coordinator", "killed"),
    ("group-coordinator", "killed"),
    ("data-leader", "cut-off"),
)


@pytest.mark.parametrize("cluster", [CLUSTER_OVERRIDES], indirect=True)
@pytest.mark.parametrize(("role", "fate"), FAILURES)
def test_share_consumers_through_a_failover(
    role: str,
    fate: str,
    cluster: ReplicatedCluster,
    consumers: Any,
    msg: SimpleNamespace,
    stack: contextlib.ExitStack,
) -> None:
    """Two consumers (three when cut off); the broker with ``role`` (and no other of the
    three roles) is killed or cut off a quarter of the way through, and more records are
    produced."""
    topic = f"share-failover-{role}-{fate}"
    before, total = 400, 600
    first = cluster.brokers[0].bootstrap
    # The internal topics, made while all three brokers are up, each replica in sync.
    find_coordinator(first, 0, "share-failover-probe")
    find_coordinator(first, 2, f"share-failover-probe:{uuid_string(uuid.uuid4().bytes)}:0")
    for internal in (OFFSETS_TOPIC, STATE_TOPIC):
        cluster.wait_for_full_isr(internal, INTERNAL_PARTITIONS, timeout=60)
    offsets_leaders = [cluster.state(OFFSETS_TOPIC, p).leader for p in range(INTERNAL_PARTITIONS)]
    state_leaders = [cluster.state(STATE_TOPIC, p).leader for p in range(INTERNAL_PARTITIONS)]

    # The victim: not the controller (whose failover would only slow the test down).
    victim = next(i for i in sorted(cluster.brokers) if i != cluster.controller())
    others = [i for i in sorted(cluster.brokers) if i != victim]
    data_leader = victim if role == "data-leader" else others[0]
    replicas = [data_leader, *(i for i in sorted(cluster.brokers) if i != data_leader)]
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas])])[topic].result(30)
    wait_for(lambda: cluster.state(topic, 0).leader == data_leader, f"{topic}'s leader")
    cluster.wait_for_full_isr(topic, 1)
    tid = topic_id(first, topic)

    def roles(group: str) -> dict[str, int]:
        share_key = f"{group}:{tid}:0"
        return {
            "data-leader": data_leader,
            "share-coordinator": state_leaders[partition_for(share_key, INTERNAL_PARTITIONS)],
            "group-coordinator": offsets_leaders[partition_for(group, INTERNAL_PARTITIONS)],
        }

    # A group whose coordinators are where the test wants them: only ``role`` on the victim.
    group = next(
        (
            g
            for g in (f"{topic}-{i}" for i in range(1000))
            if all((broker == victim) == (r == role) for r, broker in roles(g).items())
        ),
        None,
    )
    assert group is not None, (offsets_leaders, state_leaders, victim)
    assert find_coordinator(first, 0, group) == roles(group)["group-coordinator"]
    assert find_coordinator(first, 2, f"{group}:{tid}:0") == roles(group)["share-coordinator"]

    produce_range(cluster.bootstrap, topic, 0, before)
    holder = None
    if fate == "cut-off":
        # A member that takes the first batch from the leader and sits on it.
        group_coordinator = cluster.brokers[roles(group)["group-coordinator"]].bootstrap
        holder = ZombieHolder(msg, group, topic, group_coordinator, cluster.brokers[victim])
        stack.callback(holder.close)
        assert holder.acquire() == [(0, BATCH - 1, 1)]
    members = consumers(cluster.bootstrap, topic, group, 2)
    wait_acknowledged(members, before // 4, cluster.log_tail)

    marks = [c.mark() for c in members]
    if fate == "killed":
        cluster.brokers[victim].kill()
    else:
        cluster.proxies[victim].cut()
    moved_of = {
        "data-leader": (topic, 0),
        "share-coordinator": (STATE_TOPIC, partition_for(f"{group}:{tid}:0", INTERNAL_PARTITIONS)),
        "group-coordinator": (OFFSETS_TOPIC, partition_for(group, INTERNAL_PARTITIONS)),
    }
    moved = moved_of[role]
    wait_for(lambda: cluster.state(*moved).leader not in (victim, -1), f"a new leader of {moved}")
    survivors = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != victim)
    if fate == "cut-off":
        # The first consumers may stay with the deposed leader, which still believes it
        # leads (it hears nothing from ZooKeeper). A consumer that knows the survivors
        # only reads from the new leader, whose reading of the state fences the old
        # leader's acknowledgements (FENCED_LEADER_EPOCH) from then on.
        members += consumers(survivors, topic, group, 1)
        marks.append(0)
    produce_range(survivors, topic, before, total)
    coordinator = cluster.brokers[cluster.state(*moved_of["group-coordinator"]).leader]
    wait_finished(members, coordinator.bootstrap, msg, group, topic, total, cluster.log_tail)
    if holder is not None:
        # The deposed leader still takes the holder's acknowledgement, but cannot make it
        # stick: the new leader has read the state since, at a newer leader epoch.
        error = holder.acknowledge()
        assert error != 0, "the deposed leader acknowledged records the new one handed out"
        # The broker's output reaches the test through a reader thread: wait for the line.
        deposed = cluster.brokers[victim]
        wait_for(lambda: "(FENCED_LEADER_EPOCH)" in deposed.log_text(), "the fence in its log")
        print(f"the deposed leader refused the late acknowledgement: error {error}")
    if fate == "cut-off":  # back, it follows the new leader
        cluster.proxies[victim].restore()
        cluster.wait_for_full_isr(topic, 1)
        fencing = "ZooKeeper session lost: fencing leadership"
        wait_for(lambda: fencing in cluster.brokers[victim].log_text(), "the fencing in its log")
    assert all(c.process.poll() is None for c in members), [c.describe() for c in members]
    for c in members:
        c.stop()
    context = "\n".join(c.describe() for c in members)
    check_outcome(outcome(members, marks), total, topic, context)
