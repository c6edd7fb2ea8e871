"""Support for the replication tests: a ZooKeeper, three brokers, a workload and its history.

``ReplicatedCluster`` starts brokers that reach ZooKeeper through their own
``TcpProxy`` each (so a test can cut one broker off ZooKeeper while it keeps
serving clients), with short timeouts so that failures are noticed within
seconds. It reads partition states and the controller straight from
ZooKeeper with kazoo, the truth the brokers follow.

``Workload`` runs idempotent acks=all producers and group consumers
(confluent-kafka) in threads, recording every acknowledgement, failure,
assignment and read as a history for ``scripts/history_check.py``; at the end
``read_back`` appends the final content of every partition.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kpybroker.protocol.messages.metadata import MetadataRequest
from kpybroker.protocol.records import BatchHeader, Record, iter_batches, iter_records
from tests.helpers.brokers import KpyBroker
from tests.helpers.groups_wire import Wire
from tests.helpers.history import history_check
from tests.helpers.tcp_proxy import TcpProxy
from tests.helpers.zookeeper import ZooKeeperServer

#: Timeouts short enough for a failure to be noticed in a few seconds.
FAST_FAILOVER = {
    "zookeeper.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 2000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 100,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
}


def wait_for(condition: Callable[[], object], what: str, timeout: float = 30.0) -> float:
    """Poll ``condition`` until true; return the seconds it took (AssertionError on timeout)."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class State:
    """A partition's state znode."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


class ReplicatedCluster:
    def __init__(
        self,
        root: Path,
        zookeeper: ZooKeeperServer,
        size: int = 3,
        overrides: dict[str, object] | None = None,
    ) -> None:
        self.root = root
        self.chroot = f"/{root.name}-{uuid.uuid4().hex[:6]}"
        self.proxies = {i: TcpProxy(zookeeper.host, zookeeper.port) for i in range(size)}
        self.brokers = {
            i: KpyBroker(
                root / f"broker-{i}",
                {
                    **FAST_FAILOVER,
                    "broker.id": i,
                    "zookeeper.connect": self.proxies[i].address + self.chroot,
                    **(overrides or {}),
                },
            )
            for i in range(size)
        }
        self.zk = KazooClient(hosts=zookeeper.connect + self.chroot)

    def start(self) -> ReplicatedCluster:
        for broker in self.brokers.values():
            broker.start()
        self.zk.start(10)
        # A registration reaches the other brokers through a watch, a moment after the
        # broker starts: until then a topic with replication factor 3 would be refused.
        wait_for(self._all_see_each_other, "every broker to see every registration")
        return self

    def _all_see_each_other(self) -> bool:
        for broker in self.brokers.values():
            with Wire(broker.bootstrap) as wire:
                if len(wire.call(MetadataRequest(topics=[]), 12).brokers) < len(self.brokers):
                    return False
        return True

    def close(self) -> list[str]:
        """Stop everything; complaints about brokers that did not stop cleanly."""
        problems = []
        for broker in self.brokers.values():
            if broker.is_running:
                try:
                    code = broker.stop()
                except AssertionError as exc:
                    problems.append(str(exc))
                    continue
                if code != 0:
                    problems.append(f"broker exited with {code}:\n{broker.log_text()[-8000:]}")
        self.zk.stop()
        self.zk.close()
        for proxy in self.proxies.values():
            proxy.close()
        for i, broker in self.brokers.items():
            (self.root / f"broker-{i}.log").write_text(broker.log_text())
        return problems

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.is_running)

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(
        self, name: str, partitions: int, replication_factor: int = 3, **configs: str
    ) -> None:
        topic = NewTopic(name, partitions, replication_factor, config=configs)
        admin = self.admin()  # kept alive until the answer: its destruction cancels the request
        admin.create_topics([topic])[name].result(30)
        wait_for(
            lambda: all(self.state(name, p).leader >= 0 for p in range(partitions)),
            f"leaders for {name}",
        )

    def state(self, topic: str, partition: int) -> State:
        try:
            data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        except NoNodeError:
            return State(-1, -1, ())
        info = json.loads(data)
        return State(info["leader"], info["leader_epoch"], tuple(info["isr"]))

    def controller(self) -> int:
        try:
            return json.loads(self.zk.get("/controller")[0])["brokerid"]
        except NoNodeError:
            return -1

    def controller_epoch(self) -> int:
        return int(self.zk.get("/controller_epoch")[0])

    def wait_for_full_isr(self, topic: str, partitions: int, timeout: float = 30.0) -> float:
        size = len(self.brokers)
        return wait_for(
            lambda: all(len(self.state(topic, p).isr) == size for p in range(partitions)),
            f"every replica of {topic} in sync",
            timeout,
        )

    def log_tail(self) -> str:
        return "\n".join(
            f"===== broker {i} =====\n{b.log_text()[-6000:]}" for i, b in self.brokers.items()
        )


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest, tmp_path: Path, zookeeper: ZooKeeperServer
) -> Iterator[ReplicatedCluster]:
    """Three brokers with fast failover settings; parametrize indirectly for other settings."""
    overrides = getattr(request, "param", {})
    cluster = ReplicatedCluster(tmp_path, zookeeper, overrides=overrides).start()
    try:
        yield cluster
    finally:
        failed = getattr(request.node, "report_call", None)
        if failed is not None and failed.failed:
            print(cluster.log_tail())
        problems = cluster.close()
    assert not problems, "\n\n".join(problems)


class Workload:
    """Idempotent acks=all producers and group consumers over one topic, with a history."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        producers: int = 2,
        consumers: int = 2,
        pause_s: float = 0.003,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.pause_s = pause_s
        self.group = f"group-{uuid.uuid4().hex[:6]}"
        self.history: list[dict[str, Any]] = []
        self.acked = 0
        self.polled = 0
        self.fatal: list[str] = []
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._producers = [
            threading.Thread(target=self._produce, args=(f"p{i}",), daemon=True)
            for i in range(producers)
        ]
        #: Running consumers by name, each with the event that makes it leave the group.
        self._consumers: dict[str, tuple[threading.Thread, threading.Event]] = {}
        self._consumer_names = (f"c{i}" for i in itertools.count())
        self._initial_consumers = consumers

    def start(self) -> Workload:
        for thread in self._producers:
            thread.start()
        for _ in range(self._initial_consumers):
            self.add_consumer()
        return self

    def add_consumer(self) -> str:
        """Start one more group consumer (the group rebalances); returns its name."""
        name = next(self._consumer_names)
        leave = threading.Event()
        thread = threading.Thread(target=self._consume, args=(name, leave), daemon=True)
        self._consumers[name] = (thread, leave)
        thread.start()
        return name

    def remove_consumer(self) -> str | None:
        """Make the oldest consumer leave the group (it closes, so the group rebalances)."""
        if not self._consumers:
            return None
        name = next(iter(self._consumers))
        thread, leave = self._consumers.pop(name)
        leave.set()
        thread.join(60)
        return name

    def wait_progress(self, acked: int = 0, polled: int = 0, timeout: float = 60.0) -> float:
        """Wait until at least ``acked`` acknowledgements and ``polled`` reads were recorded."""
        return wait_for(
            lambda: self.fatal or (self.acked >= acked and self.polled >= polled),
            f"{acked} acks and {polled} reads (now {self.acked} and {self.polled})",
            timeout,
        )

    def stop(
        self, server: ReplicatedCluster | KpyBroker, drain_timeout: float = 60.0
    ) -> list[dict]:
        """Stop producing, let the consumers read everything acknowledged, stop; then
        return the whole history, the final content of every partition included, each
        record with the producer id and epoch of its batch in the leader's files.

        Acknowledged records the consumers have not read after ``drain_timeout`` are
        left to the history check (``unconsumed``), which says which they are and,
        with the final log, whether they were lost or skipped."""
        self._stop_producing.set()
        for thread in self._producers:
            thread.join(150)
        # An acknowledgement without an offset (librdkafka's implicit ack: -1001) is
        # followed by its value; the others by their position.
        acks = [e for e in self.history if e["op"] == "ack"]
        acked = {(e["partition"], e["offset"]) for e in acks if e["offset"] >= 0}
        acked |= {e["value"] for e in acks if e["offset"] < 0}
        polled: set[tuple[int, int] | str] = set()

        def drained() -> bool:
            for e in self.history:
                if e["op"] == "poll":
                    polled.update(((e["partition"], e["offset"]), e["value"]))
            return acked <= polled

        try:
            wait_for(drained, "consumers to read every acknowledged record", drain_timeout)
        except AssertionError as exc:
            unread = sorted(map(str, acked - polled))
            print(f"{exc}: {len(unread)} unread, e.g. {unread[:10]}")
        finally:
            self._stop_consuming.set()
            for thread, _ in self._consumers.values():
                thread.join(60)
        assert not self.fatal, self.fatal
        final = read_back(server.bootstrap, self.topic, self.partitions)
        writers: dict[tuple[int, int], tuple[int, int]] = {}
        for partition in range(self.partitions):
            directory = leader_partition_dir(server, self.topic, partition)
            for header, record in stored_batches(directory):
                writers[(partition, record.offset)] = (header.producer_id, header.producer_epoch)
        for event in final:
            writer = writers.get((event["partition"], event["offset"]))
            if event["op"] == "final" and writer is not None:
                event["producer_id"], event["producer_epoch"] = writer
        return self.history + final

    def _record(self, event: dict[str, Any]) -> None:
        self.history.append(event)  # list.append is atomic: one order for all threads

    def _produce(self, name: str) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "request.timeout.ms": 5000,
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                "error_cb": lambda err: err.fatal() and self.fatal.append(f"{name}: {err}"),
            }
        )
        for seq in itertools.count():
            if self._stop_producing.is_set() or self.fatal:
                break
            value = f"{name}:{seq}"
            while True:
                try:
                    producer.produce(
                        self.topic,
                        value=value.encode(),
                        partition=seq % self.partitions,
                        on_delivery=lambda err, msg, value=value: self._delivered(value, err, msg),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            time.sleep(self.pause_s)
        assert producer.flush(120) == 0, f"{name}: records left unsettled"

    def _delivered(self, value: str, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            self._record(
                {"op": "ack", "value": value, "partition": msg.partition(), "offset": msg.offset()}
            )
            self.acked += 1
        else:
            self._record({"op": "fail", "value": value, "error": str(err)})

    def _consume(self, name: str, leave: threading.Event) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )

        def assigned(_: Any, partitions: list[TP]) -> None:
            self._record(
                {"op": "assign", "consumer": name, "partitions": [p.partition for p in partitions]}
            )

        consumer.subscribe([self.topic], on_assign=assigned)
        try:
            while not (self._stop_consuming.is_set() or leave.is_set()):
                msg = consumer.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                self._record(
                    {
                        "op": "poll",
                        "consumer": name,
                        "partition": msg.partition(),
                        "offset": msg.offset(),
                        "value": msg.value().decode(),
                    }
                )
                self.polled += 1
        finally:
            consumer.close()


def stored_records(broker: KpyBroker, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """``(offset, value)`` of every record in a broker's copy of a partition, from its files."""
    directory = broker.log_dir / f"{topic}-{partition}"
    return [(record.offset, record.value or b"") for _, record in stored_batches(directory)]


def stored_batches(directory: Path) -> Iterator[tuple[BatchHeader, Record]]:
    """Every record in a partition directory's segments, with its batch's header; a
    segment that retention deletes meanwhile is skipped."""
    for path in sorted(directory.glob("*.log")):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        for pos, header in iter_batches(data):
            for record in iter_records(data[pos : pos + header.size]):
                yield header, record


def leader_partition_dir(server: ReplicatedCluster | KpyBroker, topic: str, partition: int) -> Path:
    """The directory of a partition on its leader (a lone broker leads everything)."""
    if isinstance(server, ReplicatedCluster):
        server = server.brokers[server.state(topic, partition).leader]
    return server.log_dir / f"{topic}-{partition}"


def read_back(bootstrap: str, topic: str, partitions: int) -> list[dict[str, Any]]:
    """Every record of every partition, from the log start to the high watermark, and each
    partition's log start offset (below it, retention deleted what was acknowledged)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-back-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",  # retention may move the log start under it
        }
    )
    events: list[dict[str, Any]] = []
    try:
        watermarks = {
            p: consumer.get_watermark_offsets(TP(topic, p), timeout=10) for p in range(partitions)
        }
        ends = {p: high for p, (_, high) in watermarks.items()}
        consumer.assign([TP(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        seen = {p: low - 1 for p, (low, _) in watermarks.items()}
        deadline = time.monotonic() + 60
        while any(seen[p] < ends[p] - 1 for p in seen):
            assert time.monotonic() < deadline, f"read back stopped at {seen} of {ends}"
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error() is None:
                    events.append(
                        {
                            "op": "final",
                            "partition": msg.partition(),
                            "offset": msg.offset(),
                            "value": msg.value().decode(),
                        }
                    )
                    seen[msg.partition()] = msg.offset()
        # Taken after the read: retention may have moved the log start during it.
        events += [
            {"op": "log_start", "partition": p, "offset": low}
            for p in range(partitions)
            for low, _ in [consumer.get_watermark_offsets(TP(topic, p), timeout=10)]
        ]
    finally:
        consumer.close()
    events.sort(key=lambda e: (e["partition"], e["offset"], e["op"] == "final"))
    return events


def check_history(history: list[dict], tmp_path: Path) -> Any:
    """Run the history checker, keep the history next to the test's files, fail on violations."""
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(event) + "\n" for event in history))
    report = history_check.check(history, require_consumed=True)
    print(report.summary())
    assert report.ok, f"{report.summary()}\n(history in {path})"
    return report
