"""A log directory whose disk fails goes offline; the other directory keeps serving.

Each test gives one broker two log directories: ``faulty``, a small ext4 on a
loop device that the kernel is made to fail (``tests/helpers/disk_faults``:
EIO on write, a failed fsync on a thin device, ENOSPC, a read-only remount),
and ``healthy``, a plain directory. A topic of two partitions puts one in each.
Records are produced to both (acks=all), the disk fails in the middle, and then:
the partition on it answers KAFKA_STORAGE_ERROR (Produce, ListOffsets), its
directory is reported offline by DescribeLogDirs (and the offline replica by
Metadata, the offline directory by the metrics), one ERROR line names the
directory and the cause, and the other partition still takes and serves
records. The broker stops cleanly; once the disk is back (repaired, space
freed) it starts again and every acknowledged record of both partitions is
there, and both take records again.

With a single log directory the failure leaves none online: the broker halts,
as Kafka does ("Shutdown broker because all log dirs ... have failed").
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.describe_log_dirs import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kpybroker.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kpybroker.protocol.messages.metadata import MetadataRequest
from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.disk_faults import LoopFilesystem, loop_filesystem
from tests.helpers.groups_wire import Wire
from tests.helpers.log_life import consume_all, create_topic, wait_until
from tests.helpers.replication_cluster import (
    ReplicatedCluster,
    Workload,
    check_history,
    wait_for,
    zookeeper,
)
from tests.helpers.wire import ConnectionClosed, produce_error, produce_request, record_batch
from tests.helpers.zookeeper import ZooKeeperServer
from tests.integration.test_metrics import metrics_url, scrape, value

TOPIC = "spread"
BATCH = 64 * 1024
#: Batches produced before the fault, to each partition.
BEFORE = 5
#: Batches tried against the failing disk before it must have failed.
ATTEMPTS = 400
#: The cluster test's assignment: broker 0 leads two of the three partitions, so that
#: it leads one of the two its first (failing) log directory gets, whichever they are.
SPREAD = [[0, 1, 2], [0, 2, 1], [1, 2, 0]]

__all__ = ["zookeeper"]  # a fixture


@dataclass
class Acked:
    """The values each partition acknowledged, in order."""

    values: dict[int, list[bytes]] = field(default_factory=lambda: {0: [], 1: []})

    def produce(self, wire: Wire, partition: int) -> int:
        """Produce one batch; keep its value when acknowledged; the error code."""
        value = f"{partition}-{len(self.values[partition])}-".encode().ljust(BATCH, b"x")
        code, base = produce_error(
            wire.request(produce_request(TOPIC, partition, record_batch([value])))
        )
        if code == ErrorCode.NONE:
            assert base == len(self.values[partition]), (partition, base)
            self.values[partition].append(value)
        return code


def describe_log_dirs(wire: Wire) -> DescribeLogDirsResponse:
    return wire.call(DescribeLogDirsRequest(topics=None), 4)


def placement(wire: Wire) -> dict[str, tuple[int, set[int]]]:
    """Each log directory's (error code, partitions of TOPIC in it)."""
    return {
        r.log_dir: (
            r.error_code,
            {p.partition_index for t in r.topics if t.name == TOPIC for p in t.partitions},
        )
        for r in describe_log_dirs(wire).results
    }


def list_offsets_error(wire: Wire, partition: int) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[ListOffsetsTopic(TOPIC, [ListOffsetsPartition(partition, timestamp=-1)])],
    )
    return wire.call(request, 7).topics[0].partitions[0].error_code


def offline_replicas(wire: Wire) -> dict[int, list[int]]:
    """Metadata's offline replicas of each partition of TOPIC."""
    [topic] = wire.call(MetadataRequest(topics=None), 12).topics
    return {p.partition_index: p.offline_replicas for p in topic.partitions}


def two_dir_broker(
    broker_factory: BrokerFactory, faulty: Path, tmp_path: Path, topic_config: dict[str, object]
) -> tuple[ManagedBroker, int]:
    """A broker with log dirs ``faulty`` and a healthy one, and TOPIC with a partition in
    each; returns the broker and the partition in ``faulty``."""
    broker = broker_factory(
        {
            "log.dirs": f"{faulty},{tmp_path / 'healthy'}",
            "metadata.log.dir": tmp_path / "metadata",
            "metrics.listeners": "http://127.0.0.1:0",
        }
    )
    create_topic(broker.bootstrap, TOPIC, topic_config, partitions=2)
    with Wire(broker.bootstrap) as wire:
        wait_until(lambda: sum(len(p) for _, p in placement(wire).values()) == 2, "logs made")
        dirs = placement(wire)
    [in_faulty] = dirs[str(faulty.resolve())][1]
    [in_healthy] = dirs[str((tmp_path / "healthy").resolve())][1]
    assert {in_faulty, in_healthy} == {0, 1}
    return broker, in_faulty


def survive(
    broker_factory: BrokerFactory,
    tmp_path: Path,
    fs: LoopFilesystem,
    fail: Callable[[], None],
    bring_back: Callable[[], None],
    cause: str,
    topic_config: dict[str, object] | None = None,
) -> None:
    """The scenario of the module docstring, with ``fail`` breaking the disk (records
    are produced until a Produce meets it), the ERROR line ending with ``cause`` (a
    regular expression), and ``bring_back`` repairing the disk."""
    broker, doomed = two_dir_broker(broker_factory, fs.mountpoint, tmp_path, topic_config or {})
    healthy = 1 - doomed
    acked = Acked()
    with Wire(broker.bootstrap) as wire:
        for _ in range(BEFORE):
            assert acked.produce(wire, doomed) == ErrorCode.NONE
            assert acked.produce(wire, healthy) == ErrorCode.NONE
        fail()
        code = ErrorCode.NONE
        for _ in range(ATTEMPTS):
            if (code := acked.produce(wire, doomed)) != ErrorCode.NONE:
                break
        assert code == ErrorCode.KAFKA_STORAGE_ERROR, code
        assert acked.produce(wire, doomed) == ErrorCode.KAFKA_STORAGE_ERROR  # offline now
        assert list_offsets_error(wire, doomed) == ErrorCode.KAFKA_STORAGE_ERROR
        assert acked.produce(wire, healthy) == ErrorCode.NONE
        assert list_offsets_error(wire, healthy) == ErrorCode.NONE
        assert offline_replicas(wire) == {doomed: [0], healthy: []}
        dirs = placement(wire)
        assert dirs[str(fs.mountpoint.resolve())] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
        assert dirs[str((tmp_path / "healthy").resolve())] == (ErrorCode.NONE, {healthy})
    samples = scrape(metrics_url(broker))
    assert value(samples, "kafka_log_logmanager_offlinelogdirectorycount") == 1
    broker.check_alive()
    text = broker.log_text()
    errors = re.findall(rf"Error while .* in dir {re.escape(str(fs.mountpoint))}: (.*)", text)
    assert len(errors) == 1, errors
    assert re.fullmatch(f"{cause}; the directory goes offline", errors[0]), errors
    assert "Traceback" not in text
    assert consume_all(broker.bootstrap, TOPIC, healthy)[-1][1][1] == acked.values[healthy][-1]

    assert broker.stop() == 0
    bring_back()
    broker.start()
    with Wire(broker.bootstrap) as wire:
        for partition in (doomed, healthy):
            stored = [value for _, (_, value) in consume_all(broker.bootstrap, TOPIC, partition)]
            assert stored[: len(acked.values[partition])] == acked.values[partition], partition
            # Beyond them at most the batch whose fsync failed: written, never acknowledged.
            assert len(stored) - len(acked.values[partition]) <= 1
            acked.values[partition] = stored
            assert acked.produce(wire, partition) == ErrorCode.NONE
        assert {code for code, _ in placement(wire).values()} == {ErrorCode.NONE}
    assert broker.stop() == 0


def test_eio_on_write(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    with loop_filesystem(tmp_path, "faulty") as fs:
        survive(broker_factory, tmp_path, fs, fs.shut_down, fs.repair, r"\[Errno 5\] .*")


def test_fsync_failure_on_a_thin_device(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    with loop_filesystem(tmp_path, "faulty", thin_mb=12) as fs:

        def bring_back() -> None:
            fs.grow_backing(128)
            fs.repair()

        # No fault to inject: the records fill the backing store until an fsync fails
        # (EIO or ENOSPC; its error names no file, unlike a failed open or write).
        fsync_error = r"\[Errno (5|28)\] [^:']+"
        flush_each = {"flush.messages": 1}
        survive(broker_factory, tmp_path, fs, lambda: None, bring_back, fsync_error, flush_each)


def test_enospc(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    with loop_filesystem(tmp_path, "faulty", 32) as fs:
        survive(broker_factory, tmp_path, fs, fs.fill, fs.free, r"\[Errno 28\] .*")


def test_read_only_remount(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    with loop_filesystem(tmp_path, "faulty", options="errors=remount-ro") as fs:
        survive(broker_factory, tmp_path, fs, fs.remount_read_only, fs.repair, r"\[Errno 30\] .*")


def test_the_broker_halts_when_its_only_log_dir_fails(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    with loop_filesystem(tmp_path, "only") as fs:
        broker = broker_factory(
            {"log.dirs": fs.mountpoint, "metadata.log.dir": tmp_path / "metadata"}
        )
        create_topic(broker.bootstrap, TOPIC, {})
        acked = Acked()
        with Wire(broker.bootstrap) as wire:
            assert acked.produce(wire, 0) == ErrorCode.NONE
            fs.shut_down()
            with contextlib.suppress(ConnectionClosed):  # it may halt before answering
                assert acked.produce(wire, 0) == ErrorCode.KAFKA_STORAGE_ERROR
        assert broker.process is not None
        assert broker.process.wait(30) == 1
        assert "Shutdown broker because all log dirs in" in broker.log_text()
        fs.repair()
        broker.start()
        stored = [value for _, (_, value) in consume_all(broker.bootstrap, TOPIC)]
        assert stored == acked.values[0]
        assert broker.stop() == 0


@pytest.mark.timeout(180)
def test_in_a_cluster_leadership_moves_off_the_failed_dir(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    """Three brokers, RF 3, ``min.insync.replicas=2``; broker 0's first log dir is on a
    disk that fails (EIO) under idempotent acks=all producers and group consumers. The
    controller learns of it through the log dir event: broker 0 leaves the ISR of its
    replicas in that dir and the leadership it held there moves; the producers keep
    being acknowledged; broker 0's replicas in its other dir stay in sync. The history
    check then finds nothing acknowledged lost; repaired and restarted, broker 0 catches
    up and every replica is in sync again."""
    with loop_filesystem(tmp_path, "faulty") as fs:
        cluster = ReplicatedCluster(tmp_path / "cluster", zookeeper)
        victim = cluster.brokers[0]
        victim.overrides["log.dirs"] = f"{fs.mountpoint},{victim.log_dir}"
        cluster.start()
        try:
            admin = cluster.admin()  # alive until the answer: its destruction cancels it
            admin.create_topics([NewTopic(TOPIC, 3, replica_assignment=SPREAD)])[TOPIC].result(30)
            leaders = [replicas[0] for replicas in SPREAD]
            wait_for(
                lambda: [cluster.state(TOPIC, p).leader for p in range(3)] == leaders, "leaders"
            )
            with Wire(victim.bootstrap) as wire:
                dirs = placement(wire)
            on_disk = dirs[str(fs.mountpoint.resolve())][1]
            led = {p for p in on_disk if leaders[p] == 0}
            assert led and len(on_disk) < 3, dirs  # a leader there; a replica elsewhere
            work = Workload(cluster.bootstrap, TOPIC, 3).start()
            work.wait_progress(acked=200, polled=100)
            fs.shut_down()
            moved = wait_for(
                lambda: (
                    all(0 not in cluster.state(TOPIC, p).isr for p in on_disk)
                    and all(cluster.state(TOPIC, p).leader not in (0, -1) for p in led)
                ),
                "leadership and the ISR to leave the failed replicas",
            )
            work.wait_progress(acked=work.acked + 200, polled=work.polled + 100)
            for p in set(range(3)) - on_disk:
                assert 0 in cluster.state(TOPIC, p).isr, p
            victim.check_alive()
            history = work.stop(cluster)
            print(f"leadership moved {moved:.1f} s after the disk failed")
            check_history(history, tmp_path)

            assert victim.stop() == 0
            fs.repair()
            victim.start()
            cluster.wait_for_full_isr(TOPIC, 3, timeout=60)
        finally:
            problems = cluster.close()
        assert not problems, "\n\n".join(problems)
