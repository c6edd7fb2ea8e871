"""A broker under a low limit on open files (``RLIMIT_NOFILE``): far more segment files than
descriptors, and clients that use up the rest.

Each broker starts with a soft limit of 128 and a hard one of 256, set in its process before
Python starts; it raises the soft limit to 256 itself. With
300 partitions of six segments each there are 5,400 segment and index files; every
record produced is consumed back, and again after a SIGKILL and a restart, while the
broker's descriptors (``/proc/<pid>/fd``) stay under the limit. Connections beyond the
limit wait, with one warning in the log, and are served once others close.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.metadata import ApiVersionsRequest

from tests.helpers.brokers import KpyBroker, Overrides
from tests.helpers.clients import ConfluentClient
from tests.helpers.log_life import create_topic, wait_until
from tests.helpers.process import open_fds
from tests.helpers.wire import RawConnection

LIMIT = 256
PARTITIONS = 300
ROUNDS = 6  # one batch per partition per round; segment.bytes makes each its own segment
TOPIC = "many"
OUT_OF_FILES = "Cannot accept connections on listener PLAINTEXT: Too many open files"
ACCEPTING_AGAIN = "Accepting connections on listener PLAINTEXT again"

#: Run kpybroker with RLIMIT_NOFILE's hard limit set to argv[1] and the soft one to half of it.
_RUN_LIMITED = (
    "import resource, runpy, sys\n"
    "limit = int(sys.argv.pop(1))\n"
    "resource.setrlimit(resource.RLIMIT_NOFILE, (limit // 2, limit))\n"
    "runpy.run_module('kpybroker', run_name='__main__', alter_sys=True)\n"
)


class LimitedBroker(KpyBroker):
    """``python -m kpybroker`` with at most ``limit`` open files (its hard limit)."""

    def __init__(self, base_dir: Path, limit: int, overrides: Overrides | None = None) -> None:
        super().__init__(base_dir, overrides)
        self.limit = limit

    def command(self) -> list[str]:
        _, _, *arguments = super().command()  # the interpreter and "-m kpybroker"
        return [sys.executable, "-c", _RUN_LIMITED, str(self.limit), *arguments[1:]]

    def open_descriptors(self) -> int:
        assert self.process is not None
        return open_fds(self.process.pid)


class DescriptorWatch:
    """The most descriptors a broker had open, sampled on a thread while the test runs."""

    def __init__(self, broker: LimitedBroker) -> None:
        self.broker = broker
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            if self.broker.is_running:
                with contextlib.suppress(FileNotFoundError):  # the broker is being killed
                    self.most = max(self.most, self.broker.open_descriptors())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most


@pytest.fixture
def limited_broker(tmp_path: Path) -> Iterator[LimitedBroker]:
    # Checkpoints every second: the descriptors they open briefly must be there too.
    broker = LimitedBroker(
        tmp_path / "broker", LIMIT, {"log.flush.offset.checkpoint.interval.ms": 1000}
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def produce_rounds(bootstrap: str) -> set[tuple[int, bytes]]:
    """One record per partition per round, each round its own batches; returns what was
    acknowledged."""
    acknowledged: set[tuple[int, bytes]] = set()

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acknowledged.add((msg.partition(), msg.value()))  # type: ignore[attr-defined]

    producer = Producer(ConfluentClient.producer_config(bootstrap))
    for round_ in range(ROUNDS):
        for partition in range(PARTITIONS):
            value = f"{round_}-{partition}".encode()
            producer.produce(TOPIC, value, partition=partition, on_delivery=delivered)
        assert producer.flush(60) == 0
    return acknowledged


def consume_everything(bootstrap: str, count: int) -> set[tuple[int, bytes]]:
    """Every record of every partition, read from offset 0 (``count`` of them expected)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: set[tuple[int, bytes]] = set()
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1):
                if message.error() is None:
                    got.add((message.partition(), message.value()))
    finally:
        consumer.close()
    return got


def test_far_more_segment_files_than_descriptors(limited_broker: LimitedBroker) -> None:
    broker = limited_broker
    watch = DescriptorWatch(broker)
    create_topic(broker.bootstrap, TOPIC, {"segment.bytes": 100}, partitions=PARTITIONS)
    acknowledged = produce_rounds(broker.bootstrap)
    assert len(acknowledged) == PARTITIONS * ROUNDS
    assert consume_everything(broker.bootstrap, len(acknowledged)) == acknowledged
    segment_files = list(broker.log_dir.glob(f"{TOPIC}-*/*.log"))
    assert len(segment_files) >= PARTITIONS * ROUNDS > 7 * LIMIT

    broker.kill()
    broker.start()
    assert consume_everything(broker.bootstrap, len(acknowledged)) == acknowledged
    assert watch.stop() < LIMIT
    assert "Too many open files" not in broker.log_text()
    assert f"(RLIMIT_NOFILE): soft {LIMIT} (was {LIMIT // 2}), hard {LIMIT}" in broker.log_text()


def api_versions(connection: RawConnection) -> int:
    return connection.request(ApiVersionsRequest[0]()).error_code


def test_connections_beyond_the_limit_wait_and_the_established_ones_are_served(
    limited_broker: LimitedBroker,
) -> None:
    broker = limited_broker
    established = [RawConnection(broker.bootstrap) for _ in range(10)]
    assert [api_versions(c) for c in established] == [0] * 10
    # The kernel completes these handshakes whether the broker accepts them or not.
    waiting = [socket.create_connection((broker.host, broker.port)) for _ in range(LIMIT)]
    wait_until(lambda: OUT_OF_FILES in broker.log_text(), "the broker ran out of descriptors")
    assert [api_versions(c) for c in established] == [0] * 10
    time.sleep(2.5)  # accepting is retried meanwhile, and fails again: not logged again

    for sock in waiting:
        sock.close()
    with RawConnection(broker.bootstrap, timeout=60) as newcomer:
        assert api_versions(newcomer) == 0
    assert [api_versions(c) for c in established] == [0] * 10
    log = broker.log_text()
    assert log.count(OUT_OF_FILES) == 1
    assert ACCEPTING_AGAIN in log
    for connection in established:
        connection.close()
