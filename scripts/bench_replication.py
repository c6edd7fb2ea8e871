#!/usr/bin/env python3
"""Replication costs and recovery times on a local three-broker cluster (issue 8).

    python scripts/bench_replication.py [--records N] [--size BYTES] [--catch-up-mb MB]

Starts ZooKeeper and three brokers with ``scripts/cluster`` in a temporary
directory, then measures, with confluent-kafka (librdkafka):

- acks=all produce throughput and delivery latency (p50, p99) with replication
  factor 3, as a ratio to replication factor 1: flat out, and at a light
  fixed rate, where latency is not queueing;
- failover time: kill -9 the leader of a partition under a steady producer;
  the time until ZooKeeper names a new leader, and the longest pause between
  two acknowledgements the producer saw;
- catch-up rate: a follower killed while the others take ``--catch-up-mb``,
  restarted, timed until it is back in every ISR.

A benchmark, not a test: it prints figures and checks only that everything
was acknowledged. Failover time is dominated by zookeeper.session.timeout.ms
(a dead broker is noticed when its session expires); it is printed alongside.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

ROOT = Path(__file__).resolve().parent.parent
SESSION_TIMEOUT_MS = 3000
BROKER_OPTS = (
    f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS} replica.lag.time.max.ms=5000 "
    "replica.fetch.backoff.ms=100 auto.leader.rebalance.enable=false"
)
PARTITIONS = 3


@dataclass
class Cluster:
    """A cluster started by scripts/cluster in ``directory``."""

    directory: Path
    bootstrap: str
    zk: KazooClient

    def run(self, *args: str) -> str:
        env = {
            **os.environ,
            "CLUSTER_DIR": str(self.directory),
            "BASE_PORT": "0",
            "ZK_PORT": "0",
            "BROKER_OPTS": BROKER_OPTS,
        }
        out = subprocess.run(
            [str(ROOT / "scripts" / "cluster"), *args],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=180,
        )
        return out.stdout.strip()

    def pid(self, broker: int) -> int:
        return int((self.directory / f"broker-{broker}.pid").read_text())

    def state(self, topic: str, partition: int) -> dict:
        data, _ = self.zk.get(f"/kpybroker/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(data)

    def create_topic(self, name: str, replication_factor: int) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        min_isr = str(min(2, replication_factor))
        topic = NewTopic(
            name, PARTITIONS, replication_factor, config={"min.insync.replicas": min_isr}
        )
        admin.create_topics([topic])[name].result(30)
        wait(lambda: all(self.state(name, p)["leader"] >= 0 for p in range(PARTITIONS)), 30)


def wait(condition: Callable[[], bool], timeout: float) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise TimeoutError("condition not met")
        time.sleep(0.02)
    return time.monotonic() - started


@contextlib.contextmanager
def local_cluster() -> Iterator[Cluster]:
    with tempfile.TemporaryDirectory(prefix="kpybroker-bench-replication-") as directory:
        cluster = Cluster(Path(directory), "", KazooClient())
        try:
            cluster.bootstrap = cluster.run("start", "3")
            zk = (Path(directory) / "zookeeper" / "connect").read_text().strip()
            cluster.zk = KazooClient(hosts=zk)
            cluster.zk.start(10)
            yield cluster
        finally:
            cluster.zk.stop()
            cluster.run("stop")


def produce(
    bootstrap: str, topic: str, records: int, size: int, rate: float | None = None
) -> tuple[float, list[float], list[float]]:
    """Send ``records`` records (flat out, or at ``rate`` per second); return the elapsed
    seconds, each delivery latency, and each delivery's time. One record goes first, so
    that connecting and fetching metadata are not measured."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True}
    )
    latencies: list[float] = []
    delivered: list[float] = []
    payload = os.urandom(size)
    producer.produce(topic, payload)
    producer.flush(30)

    def on_delivery(err: object, sent: float) -> None:
        if err is not None:
            raise RuntimeError(f"delivery failed: {err}")
        now = time.monotonic()
        latencies.append(now - sent)
        delivered.append(now)

    started = time.monotonic()
    for i in range(records):
        if rate is not None:
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                producer.poll(delay)
        while True:
            try:
                sent = time.monotonic()
                producer.produce(
                    topic, payload, on_delivery=lambda err, _, sent=sent: on_delivery(err, sent)
                )
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(120) == 0, "records left unacknowledged"
    return time.monotonic() - started, latencies, delivered


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def bench_cost(cluster: Cluster, records: int, size: int) -> None:
    print(f"acks=all, {records} records of {size} bytes, {PARTITIONS} partitions")
    results = {}
    for rf in (1, 3):
        topic = f"cost-rf{rf}"
        cluster.create_topic(topic, rf)
        _, light, _ = produce(cluster.bootstrap, topic, 3000, size, rate=1000)
        elapsed, latencies, _ = produce(cluster.bootstrap, topic, records, size)
        results[rf] = (records / elapsed, percentile(latencies, 99), percentile(light, 99))
        print(
            f"  RF {rf}: {records / elapsed:9.0f} records/s ({records * size / elapsed / 1e6:.1f}"
            f" MB/s), p50 {percentile(latencies, 50) * 1000:.1f} ms, p99 "
            f"{percentile(latencies, 99) * 1000:.1f} ms; "
            f"at 1000/s p99 {results[rf][2] * 1000:.1f} ms"
        )
    (t1, p1, l1), (t3, p3, l3) = results[1], results[3]
    print(f"  RF3/RF1: throughput {t3 / t1:.2f}x, p99 {p3 / p1:.2f}x, p99 at 1000/s {l3 / l1:.2f}x")


def bench_failover(cluster: Cluster, size: int) -> None:
    topic = "failover"
    cluster.create_topic(topic, 3)
    victim = cluster.state(topic, 0)["leader"]
    killed_at: list[float] = []

    def kill_soon() -> None:
        time.sleep(2)
        killed_at.append(time.monotonic())
        os.kill(cluster.pid(victim), signal.SIGKILL)

    killer = threading.Thread(target=kill_soon)
    killer.start()
    watcher_result: list[float] = []

    def watch() -> None:
        wait(lambda: bool(killed_at), 30)
        watcher_result.append(
            wait(lambda: cluster.state(topic, 0)["leader"] not in (victim, -1), 60)
        )

    watcher = threading.Thread(target=watch)
    watcher.start()
    _, _, delivered = produce(cluster.bootstrap, topic, 8000, size, rate=500)
    killer.join()
    watcher.join()
    gaps = [b - a for a, b in itertools.pairwise(delivered)]
    print(
        f"failover (zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}): new leader "
        f"{watcher_result[0]:.2f} s after kill -9; longest pause between acks {max(gaps):.2f} s"
    )
    cluster.run("start", "3")  # bring the victim back


def bench_catch_up(cluster: Cluster, megabytes: int, size: int) -> None:
    topic = "catch-up"
    cluster.create_topic(topic, 3)
    follower = next(
        b for b in cluster.state(topic, 0)["isr"] if b != cluster.state(topic, 0)["leader"]
    )
    os.kill(cluster.pid(follower), signal.SIGKILL)
    wait(lambda: all(follower not in cluster.state(topic, p)["isr"] for p in range(PARTITIONS)), 60)
    records = megabytes * 1_000_000 // size
    produce(cluster.bootstrap, topic, records, size)
    started = time.monotonic()
    cluster.run("start", "3")
    wait(lambda: all(follower in cluster.state(topic, p)["isr"] for p in range(PARTITIONS)), 600)
    took = time.monotonic() - started
    print(
        f"catch-up: {megabytes} MB behind, back in every ISR {took:.1f} s after restart "
        f"({megabytes / took:.1f} MB/s, broker start included)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--catch-up-mb", type=int, default=100)
    args = parser.parse_args()
    with local_cluster() as cluster:
        bench_cost(cluster, args.records, args.size)
        bench_failover(cluster, args.size)
        bench_catch_up(cluster, args.catch_up_mb, 1000)


if __name__ == "__main__":
    main()
