"""The same failed log directory on kpybroker and on Apache Kafka, whole answers side by side.

Issue 18 promises a failed directory goes offline "as in Kafka". Chosen fields
(the error code of one Produce) can agree while the rest of the answer does
not, so this runs one scenario against a broker with two log dirs (``faulty``,
an ext4 on a loop device, and ``healthy``), fails the loop disk with
``EXT4_IOC_SHUTDOWN`` (EIO on the next write, what Kafka's
``LogDirFailureChannel`` reacts to), and records every field of every answer
(``whole.flatten`` of the differential suite) to the requests a client sends
then. Kafka runs single-node KRaft: its broker reports the offline directory
to its controller, which moves the partitions, so the scenario polls Metadata
until the answer stops changing before it asks anything else.

Run as root (the loop mount), from the repository root::

    PYTHONPATH=. python3 -m tests.helpers.log_dir_diff /tmp/logdirdiff

which writes ``kpybroker.json`` and ``kafka.json`` there (a broker whose file
is there already is not run again) and prints the paths whose values differ.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    alter_replica_log_dirs as arld,
)
from kpybroker.protocol.messages import (
    create_topics,
    describe_log_dirs,
    describe_topic_partitions,
    fetch,
    list_offsets,
    metadata,
    produce,
)
from tests.helpers.brokers import KpyBroker, ManagedBroker
from tests.helpers.disk_faults import loop_filesystem
from tests.helpers.groups_wire import Wire
from tests.helpers.reference_kafka import ReferenceKafka
from tests.helpers.wire import record_batch

# The differential suite's flattening of whole answers, shared rather than copied.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat-tests"))
from suites.differential.whole import Where, flatten, matches

TOPIC = "spread"
LATER = "later"
#: Record timestamps fixed so that both brokers store the same bytes.
T0 = 1_700_000_000_000
#: A disk's sizes differ between any two runs: recorded as their sign, so that the
#: failed directory's -1 (unknown) or 0 still shows.
DISK_SIZES = ("*total_bytes", "*usable_bytes")
#: Arrays both brokers build from hash maps.
UNORDERED = (
    "results",
    "results/topics",
    "results/topics/partitions",
    "topics",
    "responses",
    "topics/partitions",
)
#: DescribeLogDirs versions clients send (Kafka 4 answers 1 to 4).
DESCRIBE_LOG_DIRS_VERSIONS = (1, 2, 3, 4)
STABLE_POLLS = 3


class Scenario:
    """One broker's run: the answers recorded as ``step/path -> value``."""

    def __init__(self, broker: ManagedBroker, wire: Wire, base: Path) -> None:
        self.broker = broker
        self.wire = wire
        self.base = str(base.resolve())
        self.where = Where(broker.host, broker.port)
        self.answers: dict[str, Any] = {}

    def call(self, request: Any, version: int) -> Any:
        return self.wire.call(request, version)

    def record(self, step: str, request: Any, version: int) -> Any:
        """Send ``request``; record its whole answer under ``step``, paths made relative."""
        response = self.call(request, version)
        flat = flatten(response, request, version, self.where, (), UNORDERED)
        for path, value in flat.items():
            if isinstance(value, str):
                value = value.replace(self.base, "<base>")
            elif matches(path, DISK_SIZES) and value > 0:
                value = "> 0"
            self.answers[f"{step}/{path}"] = value
        return response

    def placement(self) -> dict[str, set[tuple[str, int]]]:
        """Each online log dir's partitions, by the dir's last path component."""
        response = self.call(describe_log_dirs.DescribeLogDirsRequest(topics=None), 4)
        return {
            Path(r.log_dir).name: {
                (t.name, p.partition_index) for t in r.topics for p in t.partitions
            }
            for r in response.results
            if r.error_code == ErrorCode.NONE
        }

    def wait(self, what: str, ready: Callable[[], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.broker.kind}: no {what} within {timeout} s")
            time.sleep(0.5)

    def metadata_answer(self) -> Any:
        request = metadata.MetadataRequest(topics=[metadata.MetadataRequestTopic(name=TOPIC)])
        response = self.call(request, 12)
        return flatten(response, request, 12, self.where, (), UNORDERED)

    def wait_stable(self) -> None:
        """Poll Metadata until ``STABLE_POLLS`` answers in a row, 1 s apart, are the same:
        Kafka's controller fences the replicas and elects after the broker reports."""
        seen: list[Any] = []
        for _ in range(60):
            seen = [*seen[-(STABLE_POLLS - 1) :], self.metadata_answer()]
            if len(seen) == STABLE_POLLS and all(s == seen[0] for s in seen):
                return
            time.sleep(1)
        raise AssertionError(f"{self.broker.kind}: Metadata never settled")


def produce_request(partition: int, acks: int, value: bytes) -> produce.ProduceRequest:
    data = produce.PartitionProduceData(
        index=partition, records=bytes(record_batch([value], timestamp_ms=T0))
    )
    return produce.ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[produce.TopicProduceData(name=TOPIC, partition_data=[data])],
    )


def fetch_request(partition: int) -> fetch.FetchRequest:
    part = fetch.FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)
    return fetch.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=[fetch.FetchTopic(topic=TOPIC, partitions=[part])],
    )


def list_offsets_request(partition: int, timestamp: int) -> list_offsets.ListOffsetsRequest:
    part = list_offsets.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)
    return list_offsets.ListOffsetsRequest(
        replica_id=-1, topics=[list_offsets.ListOffsetsTopic(name=TOPIC, partitions=[part])]
    )


def create_topic_request(name: str, partitions: int) -> create_topics.CreateTopicsRequest:
    topic = create_topics.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    return create_topics.CreateTopicsRequest(topics=[topic], timeout_ms=30000)


def move_request(path: str, partition: int) -> arld.AlterReplicaLogDirsRequest:
    topic = arld.AlterReplicaLogDirTopic(name=TOPIC, partitions=[partition])
    return arld.AlterReplicaLogDirsRequest(
        dirs=[arld.AlterReplicaLogDir(path=path, topics=[topic])]
    )


def run_scenario(s: Scenario, faulty: Path, healthy: Path, shut_down: Callable[[], None]) -> None:
    """The steps, in order; every answer after the failure recorded whole."""
    s.call(create_topic_request(TOPIC, 2), 7)
    s.wait("placement", lambda: sum(len(p) for p in s.placement().values()) == 2)
    dirs = s.placement()
    [(_, doomed)] = dirs[faulty.name]
    [(_, alive)] = dirs[healthy.name]
    for partition in (doomed, alive):
        s.record(f"before/produce p{partition}", produce_request(partition, -1, b"before"), 9)
    shut_down()
    s.record("failure/first produce", produce_request(doomed, 1, b"meets the failure"), 9)
    # Kafka 4.4 answers that produce UNKNOWN_SERVER_ERROR and keeps the directory
    # online (the EIO came from a read); its next checkpoint write takes it offline.
    s.wait("the failed dir reported offline", lambda: faulty.name not in s.placement())
    s.wait_stable()
    names = {doomed: "failed", alive: "healthy"}
    for partition, name in names.items():
        for acks in (1, -1):
            value = f"acks {acks}".encode()
            s.record(f"{name}/produce acks={acks}", produce_request(partition, acks, value), 9)
        s.record(f"{name}/fetch", fetch_request(partition), 12)
        for label, timestamp in (("latest", -1), ("earliest", -2)):
            s.record(f"{name}/list offsets {label}", list_offsets_request(partition, timestamp), 7)
    s.record("metadata", metadata.MetadataRequest(topics=None), 12)
    for version in DESCRIBE_LOG_DIRS_VERSIONS:
        request = describe_log_dirs.DescribeLogDirsRequest(topics=None)
        s.record(f"describe log dirs v{version}", request, version)
    # As describeReplicaLogDirs and kafka-log-dirs.sh --topic-list ask: named partitions.
    wanted = [describe_log_dirs.DescribableLogDirTopic(topic=TOPIC, partitions=[0, 1])]
    request = describe_log_dirs.DescribeLogDirsRequest(topics=wanted)
    s.record("describe log dirs of the topic", request, 4)
    request = describe_topic_partitions.DescribeTopicPartitionsRequest(
        topics=[describe_topic_partitions.TopicRequest(name=TOPIC)], response_partition_limit=100
    )
    s.record("describe topic partitions", request, 0)
    s.record("create topics after", create_topic_request(LATER, 4), 7)
    s.wait(
        "placement of the new topic",
        lambda: sum(1 for p in s.placement().values() for t, _ in p if t == LATER) == 4,
    )
    s.answers["create topics after/placement"] = {
        name: sorted(i for t, i in parts if t == LATER) for name, parts in s.placement().items()
    }
    s.record("alter replica log dirs: into the failed dir", move_request(str(faulty), alive), 2)
    s.record("alter replica log dirs: out of the failed dir", move_request(str(healthy), doomed), 2)
    request = describe_log_dirs.DescribeLogDirsRequest(topics=None)
    s.record("describe log dirs after the moves", request, 4)


#: The brokers compared, by name: kpybroker, and Kafka with its defaults and without
#: eligible leader replicas (KIP-966, on in a cluster formatted with 4.4's defaults),
#: which kpybroker has not.
TARGETS: dict[str, dict[str, Any]] = {
    "kpybroker": {},
    "kafka": {},
    "kafka-no-elr": {"eligible.leader.replicas.version": 0},
}


#: The differences explained in docs/log-dir-failure.md ("Against Apache Kafka"), as
#: fnmatch patterns over the paths, for each Kafka target.
KNOWN: dict[str, tuple[str, ...]] = {
    # Kafka 4.4's first append after the EIO reads the segment (its roll check) and
    # wraps the IOException in a KafkaException: UNKNOWN_SERVER_ERROR, dir still online.
    "kafka-no-elr": ("failure/first produce/*",),
}
KNOWN["kafka"] = (
    *KNOWN["kafka-no-elr"],
    # KIP-966: the offline leader leaves the ISR for the ELR; the cluster-wide
    # min.insync.replicas becomes a dynamic default broker config.
    "metadata/topics/partitions/isr_nodes",
    "describe topic partitions/topics/partitions/*",
    "create topics after/topics/configs/config_source",
)


def unexplained(kafka: str, ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """The differences from ``kafka``'s answers that :data:`KNOWN` does not name."""
    return [
        f"{path}: kpybroker {a!r}, {kafka} {b!r}"
        for path, a, b in differences(ours, theirs)
        if not matches(path, KNOWN[kafka])
    ]


def observe(kind: str, base: Path, lib: Path | None = None) -> dict[str, Any]:
    """Run the scenario on a fresh broker of :data:`TARGETS` under ``base`` (``lib``:
    Kafka's jars, fetched when not given)."""
    base.mkdir(parents=True)
    healthy = base / "healthy"
    healthy.mkdir()
    with ExitStack() as stack:
        fs = stack.enter_context(loop_filesystem(base, "disk"))
        # A directory below the mount point, as in production: Kafka refuses to load a
        # log dir holding anything else, such as the file system's lost+found.
        faulty = fs.mountpoint / "faulty"
        faulty.mkdir()
        log_dirs = f"{faulty},{healthy}"
        broker: ManagedBroker
        overrides = {"log.dirs": log_dirs, **TARGETS[kind]}
        if kind.startswith("kafka"):
            # Node 0, as kpybroker's default broker.id: the ids appear in every answer.
            broker = ReferenceKafka(base / "broker", overrides, lib=lib, node_id=0)
        else:
            broker = KpyBroker(
                base / "broker", {**overrides, "metadata.log.dir": base / "metadata"}
            )
        stack.callback(lambda: (base / "broker.log").write_text(broker.log_text()))
        broker.start()
        stack.callback(broker.stop)
        wire = stack.enter_context(Wire(broker.bootstrap))
        scenario = Scenario(broker, wire, base)
        run_scenario(scenario, faulty, healthy, fs.shut_down)
        return scenario.answers


def differences(left: dict[str, Any], right: dict[str, Any]) -> Iterator[tuple[str, Any, Any]]:
    """(path, left value, right value) of each path whose values differ; absent is "-"."""
    for path in sorted(left.keys() | right.keys()):
        a, b = left.get(path, "-"), right.get(path, "-")
        if a != b:
            yield path, a, b


def main(out: Path) -> None:
    """Run each broker whose answers are not in ``out`` yet; print the differences."""
    answers = {}
    for kind in TARGETS:
        saved = out / f"{kind}.json"
        if not saved.exists():
            saved.write_text(json.dumps(observe(kind, out / kind), indent=1, default=str))
        answers[kind] = json.loads(saved.read_text())
    for kafka in ("kafka", "kafka-no-elr"):
        print(f"== kpybroker against {kafka}")
        for path, ours, theirs in differences(answers["kpybroker"], answers[kafka]):
            known = " (known)" if matches(path, KNOWN[kafka]) else ""
            print(f"{path}{known}\n    kpybroker: {ours!r}\n    {kafka}: {theirs!r}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
