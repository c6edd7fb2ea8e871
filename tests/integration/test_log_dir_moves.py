"""Moving a partition between a broker's two log directories while producers write:
kafka-python's ``alter_replica_log_dirs`` and ``describe_log_dirs``, Kafka's
kafka-reassign-partitions with ``log_dirs``, a SIGKILL in the middle of a move (which
resumes by itself after the restart), and a follower in a three-broker ZooKeeper cluster
whose log moves while it replicates.

The move is throttled (``replica.alter.log.dirs.io.max.bytes.per.second``) so that it
lasts seconds on a log of a few MB: long enough to see it as a future replica, with no
assumption about how fast anything else runs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.errors import NoError

from kpybroker.protocol.records import iter_batches, iter_records
from tests.helpers.brokers import ManagedBroker
from tests.helpers.clients import ConfluentClient
from tests.helpers.log_life import consume_all, create_topic, wait_until
from tests.helpers.replication_cluster import ReplicatedCluster, zookeeper
from tests.helpers.zookeeper import ZooKeeperServer

__all__ = ["zookeeper"]  # a fixture

pytestmark = pytest.mark.timeout(180)

REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
#: Bytes per second a move copies: the few MB written first take seconds to move.
RATE = 600_000
PRELOAD_RECORDS = 3000
VALUE = b"v" * 1000


def two_dir_broker(broker_factory, tmp_path: Path) -> tuple[ManagedBroker, list[Path]]:
    dirs = [(tmp_path / name).resolve() for name in ("first", "second")]
    broker = broker_factory(
        {"log.dirs": ",".join(map(str, dirs)), THROTTLE: RATE, "log.segment.bytes": 1048576}
    )
    return broker, dirs


def preload(bootstrap: str, topic: str) -> None:
    """Write a few MB (several segments) to partition 0 of ``topic``."""
    producer = Producer(ConfluentClient.producer_config(bootstrap, idempotent=True))
    for i in range(PRELOAD_RECORDS):
        producer.produce(topic, key=f"pre-{i}".encode(), value=VALUE, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0


@dataclass
class Writer:
    """An idempotent producer writing numbered records from a thread until stopped;
    ``acked`` maps each acknowledged record's number to its offset."""

    bootstrap: str
    topic: str
    acked: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Writer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer(
            ConfluentClient.producer_config(
                self.bootstrap,
                idempotent=True,
                **{"message.timeout.ms": 120_000, "reconnect.backoff.max.ms": 200},
            )
        )

        def delivered(err, msg) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[int(msg.key())] = msg.offset()

        seq = 0
        while not self._stop.is_set():
            producer.produce(
                self.topic, key=str(seq).encode(), value=b"w", partition=0, on_delivery=delivered
            )
            seq += 1
            producer.poll(0.002)
        assert producer.flush(120) == 0

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(150)
        assert not self._thread.is_alive()
        assert self.errors == []


def replicas(admin: KafkaAdminClient, topic: str) -> Iterator[tuple[str, dict]]:
    """(directory, DescribeLogDirs entry) of every replica of the topic's partition 0."""
    (broker,) = admin.describe_log_dirs()
    for d in broker["log_dirs"]:
        for t in d["topics"]:
            if t["name"] == topic:
                for p in t["partitions"]:
                    yield d["log_dir"], p


def placement(admin: KafkaAdminClient, topic: str) -> set[tuple[str, bool]]:
    """(directory, is future) of every replica of the topic's partition 0 on the broker."""
    return {(log_dir, p["is_future_key"]) for log_dir, p in replicas(admin, topic)}


def future_size(admin: KafkaAdminClient, topic: str) -> int:
    """Bytes the future replica of the topic's partition 0 holds, 0 when there is none."""
    return sum(p["partition_size"] for _, p in replicas(admin, topic) if p["is_future_key"])


def check_every_acked_record(broker: ManagedBroker, topic: str, writer: Writer) -> None:
    """Every acknowledged record is there, once, at the offset acknowledged, in order."""
    records = consume_all(broker.bootstrap, topic)
    written = [(offset, int(key)) for offset, (key, _) in records if not key.startswith(b"pre-")]
    assert [n for _, n in written] == sorted({n for _, n in written})  # in order, no duplicate
    at = dict((n, offset) for offset, n in written)
    missing = [n for n, offset in writer.acked.items() if at.get(n) != offset]
    assert missing == [], f"{len(missing)} acknowledged records lost or moved"
    assert sum(1 for _, (key, _) in records if key.startswith(b"pre-")) == PRELOAD_RECORDS


def only_partition_dir(dirs: list[Path], topic: str) -> Path:
    """The one directory holding the partition; no future or deleted copy is left."""
    holding = [d for d in dirs if (d / f"{topic}-0").is_dir()]
    leftovers = [p.name for d in dirs for p in d.iterdir() if p.name.startswith(f"{topic}-0.")]
    assert len(holding) == 1 and leftovers == [], (holding, leftovers)
    return holding[0]


def test_a_partition_moves_while_a_producer_writes(broker_factory, tmp_path) -> None:
    broker, dirs = two_dir_broker(broker_factory, tmp_path)
    create_topic(broker.bootstrap, "moving", {})
    preload(broker.bootstrap, "moving")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    ((source, _),) = placement(admin, "moving")
    target = next(str(d) for d in dirs if str(d) != source)
    writer = Writer(broker.bootstrap, "moving").start()
    replica = TopicPartitionReplica("moving", 0, 0)

    assert admin.alter_replica_log_dirs({replica: target}) == {replica: NoError}
    wait_until(
        lambda: placement(admin, "moving") == {(source, False), (target, True)},
        "DescribeLogDirs shows the future replica in the target directory",
    )
    wait_until(
        lambda: placement(admin, "moving") == {(target, False)},
        "the move completes",
        timeout=90,
    )
    writer.stop()
    admin.close()
    assert writer.acked
    check_every_acked_record(broker, "moving", writer)
    assert only_partition_dir(dirs, "moving") == Path(target)
    broker.wait_for_output("moving-0: log moved to")


def test_a_move_a_kill_interrupted_resumes_and_loses_no_acknowledged_record(
    broker_factory, tmp_path
) -> None:
    broker, dirs = two_dir_broker(broker_factory, tmp_path)
    create_topic(broker.bootstrap, "killed", {})
    preload(broker.bootstrap, "killed")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    ((source, _),) = placement(admin, "killed")
    target = next(str(d) for d in dirs if str(d) != source)
    writer = Writer(broker.bootstrap, "killed").start()
    wait_until(lambda: writer.acked, "writes acknowledged before the kill")
    replica = TopicPartitionReplica("killed", 0, 0)
    assert admin.alter_replica_log_dirs({replica: target}) == {replica: NoError}
    wait_until(lambda: future_size(admin, "killed") > 0, "the move has copied a first chunk")
    admin.close()
    broker.kill()
    acked_before_restart = len(writer.acked)
    broker.start()
    # Nobody asks again: the move goes on from where the kill stopped it, and completes.
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    wait_until(
        lambda: placement(admin, "killed") == {(target, False)}, "the resumed move", timeout=90
    )
    resumed = broker.wait_for_output(r"killed-0: resuming the move to \S+ from offset (\d+)")
    assert int(resumed[1]) > 0, "resumed, not copied again"
    wait_until(lambda: len(writer.acked) > acked_before_restart, "writes after the restart")
    writer.stop()
    admin.close()
    check_every_acked_record(broker, "killed", writer)
    assert only_partition_dir(dirs, "killed") == Path(target)


def test_kafka_reassign_partitions_moves_a_replica_between_log_dirs(
    broker_factory, tmp_path, java_tool
) -> None:
    broker, dirs = two_dir_broker(broker_factory, tmp_path)
    create_topic(broker.bootstrap, "reassigned", {})
    preload(broker.bootstrap, "reassigned")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    ((source, _),) = placement(admin, "reassigned")
    target = next(str(d) for d in dirs if str(d) != source)
    plan = tmp_path / "reassignment.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "reassigned", "partition": 0, "replicas": [0], "log_dirs": [target]}
                ],
            }
        )
    )
    common = ("--bootstrap-server", broker.bootstrap, "--reassignment-json-file", str(plan))
    started = java_tool(REASSIGN_COMMAND, *common, "--execute").check()
    assert (
        f"Successfully started moving log directory to {target} for replica reassigned-0 "
        "with broker 0" in started.stdout
    ), started.describe()

    def verified() -> bool:
        result = java_tool(REASSIGN_COMMAND, *common, "--verify").check()
        return "Reassignment of replica reassigned-0-0 completed successfully." in result.stdout

    wait_until(verified, "kafka-reassign-partitions --verify reports it done", timeout=90)
    assert placement(admin, "reassigned") == {(target, False)}
    admin.close()
    assert only_partition_dir(dirs, "reassigned") == Path(target)


@pytest.fixture
def two_dir_cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[ReplicatedCluster]:
    """Three brokers on ZooKeeper, each with two log directories."""
    cluster = ReplicatedCluster(tmp_path, zookeeper)
    for broker in cluster.brokers.values():
        dirs = [broker.base_dir / "first", broker.base_dir / "second"]
        broker.overrides["log.dirs"] = ",".join(str(d.resolve()) for d in dirs)
        broker.overrides[THROTTLE] = str(RATE)
    cluster.start()
    try:
        yield cluster
    finally:
        problems = cluster.close()
    assert not problems, "\n\n".join(problems)


def records_in(partition_dir: Path) -> list[tuple[int, bytes]]:
    """``(offset, key)`` of every record in a copy of a partition, from its files."""
    found = []
    for path in sorted(partition_dir.glob("*.log")):
        data = path.read_bytes()
        for pos, header in iter_batches(data):
            found += [(r.offset, r.key or b"") for r in iter_records(data[pos : pos + header.size])]
    return found


def test_a_follower_keeps_replicating_while_its_log_moves(
    two_dir_cluster: ReplicatedCluster,
) -> None:
    cluster = two_dir_cluster
    cluster.create_topic("followed", 1, 3)
    leader_id = cluster.state("followed", 0).leader
    follower_id = next(i for i in cluster.brokers if i != leader_id)
    follower = cluster.brokers[follower_id]
    preload(cluster.bootstrap, "followed")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)

    def follower_placement() -> set[tuple[str, bool]]:
        (described,) = admin.describe_log_dirs(brokers=[follower_id])
        return {
            (d["log_dir"], p["is_future_key"])
            for d in described["log_dirs"]
            for t in d["topics"]
            if t["name"] == "followed"
            for p in t["partitions"]
        }

    ((source, _),) = follower_placement()
    target = next(
        str(d.resolve())
        for d in (follower.base_dir / "first", follower.base_dir / "second")
        if str(d.resolve()) != source
    )
    writer = Writer(cluster.bootstrap, "followed").start()
    replica = TopicPartitionReplica("followed", 0, follower_id)
    assert admin.alter_replica_log_dirs({replica: target}) == {replica: NoError}
    wait_until(lambda: (target, True) in follower_placement(), "the move is under way")
    wait_until(lambda: follower_placement() == {(target, False)}, "the move", timeout=90)
    writer.stop()
    admin.close()
    cluster.wait_for_full_isr("followed", 1)
    leader_records = [
        (offset, key) for offset, (key, _) in consume_all(cluster.bootstrap, "followed")
    ]
    moved = Path(target) / "followed-0"
    wait_until(lambda: records_in(moved) == leader_records, "the moved replica has every record")
    assert not (Path(source) / "followed-0").exists()
