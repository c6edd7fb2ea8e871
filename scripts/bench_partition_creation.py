#!/usr/bin/env python3
"""Other clients' latency while brokers create many partitions (issues 17 and 18).

    python scripts/bench_partition_creation.py [--partitions 10000] [--topics 1]
                                               [--target kpybroker|kafka|both] [--rounds 1]
                                               [--brokers 1|3]
                                               [--via create-topics|create-partitions]
                                               [--traffic]

Starts fresh brokers in a temporary directory: with ``--brokers 1`` one kpybroker, or one
Apache Kafka 4.4 in KRaft mode (``tests/helpers/reference_kafka.py``); with ``--brokers 3``
three kpybrokers on ZooKeeper or three combined KRaft nodes of Kafka
(``scripts/benchlib/clusters.py``, workload 15's clusters), and the topics get a
replication factor of 3. ``both`` alternates them, kpybroker first, ``--rounds`` times.

A probe (``tests/helpers/request_probe.py``) sends to the first broker only: one client
sending Metadata requests and one producing (acks=1) to a topic of its own, led by that
broker, one request at a time each. Then an admin client (confluent-kafka) makes
``--topics`` topics of ``--partitions`` partitions in all, in as few requests as Kafka 4's
bounds on one request allow (10,000 metadata records per CreateTopics, 10,000 partitions
added per CreatePartitions), one after the other, each with a timeout
(``operation_timeout``) that lets the broker answer once it hosts every new partition.
``--via create-topics`` (the default) creates each topic with up to 9,999 partitions and
grows the larger ones; ``--via create-partitions`` creates every topic with one partition
beforehand (not timed) and times growing them all to their size.

Printed: how long the answers took, when every new partition was served (the figure
compared between the two brokers: each partition's leader answers ListOffsets for it, and
the first broker's Metadata lists all of its replicas in its ISR), and the probe's Metadata
and Produce answers during that window (count, p50, p99, max). Then it checks that the
admin client's metadata lists every partition with a leader.

A stalled event loop shows as few answers with a p99 as long as the stall.

With ``--traffic`` one record is then produced to every partition (acks=all) and read
back, and the brokers' RSS and open descriptors are printed (under this process's
``RLIMIT_NOFILE``, which the brokers inherit).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from benchlib.clusters import NODE_IDS, KafkaCluster, KpyCluster  # noqa: E402
from benchlib.partition_creation import (  # noqa: E402
    REQUEST_LIMIT,
    Request,
    admin_client,
    create_requests,
    grow_requests,
    send,
    wait_all_served,
)

from tests.helpers.brokers import launcher  # noqa: E402
from tests.helpers.java import fetch_kafka_lib  # noqa: E402
from tests.helpers.process import open_fds, rss_bytes  # noqa: E402
from tests.helpers.request_probe import RequestProbe  # noqa: E402

PROBE_TOPIC = "probe"


@dataclass(frozen=True)
class Deployment:
    """The running brokers: where the clients connect, which one the probe asks, and the
    replication factor of the topics created on them."""

    bootstrap: str
    probed: str
    pids: list[int]
    replication: int

    def probe_topic(self) -> NewTopic:
        """The probe's topic, of one partition led by the probed broker."""
        if self.replication == 1:
            return NewTopic(PROBE_TOPIC, 1, 1)
        return NewTopic(PROBE_TOPIC, 1, replica_assignment=[list(NODE_IDS)])


@contextlib.contextmanager
def deployed(target: str, brokers: int, root: Path) -> Iterator[Deployment]:
    """Fresh ``target`` brokers in ``root`` (one, or a cluster of three), killed on exit:
    their data is thrown away, and how long a clean shutdown takes is not measured here."""
    if brokers == 1:
        with launcher(root, target) as launch:
            broker = launch()
            assert broker.process is not None
            try:
                yield Deployment(broker.bootstrap, broker.bootstrap, [broker.process.pid], 1)
            finally:
                broker.kill()
        return
    cluster = KpyCluster(root) if target == "kpybroker" else KafkaCluster(root, fetch_kafka_lib())
    try:
        cluster.start()
        nodes = list(cluster.nodes.values())
        yield Deployment(cluster.bootstrap, nodes[0].bootstrap, [n.pid for n in nodes], 3)
    finally:
        cluster.kill()


def plan(sizes: dict[str, int], replication: int, via: str) -> tuple[list[Request], list[Request]]:
    """The requests made before the clock starts, and the timed ones."""
    if via == "create-partitions":
        first = dict.fromkeys(sizes, 1)
        return create_requests(first, replication), grow_requests(first, sizes)
    first = {name: min(size, REQUEST_LIMIT - 1) for name, size in sizes.items()}
    return [], create_requests(first, replication) + grow_requests(first, sizes)


def all_led(admin: AdminClient, sizes: dict[str, int]) -> bool:
    """Whether the admin client's metadata has every partition of ``sizes``, each with a
    leader."""
    found = admin.list_topics(timeout=60).topics
    led = 0
    for name in sizes:
        meta = found.get(name)
        if meta is not None and meta.error is None:
            led += sum(1 for p in meta.partitions.values() if p.error is None and p.leader >= 0)
    return led == sum(sizes.values())


#: Partitions one client writes or reads in the traffic step. One confluent-kafka
#: producer for 100,000 partitions had 40% of its records unacknowledged after 300 s
#: while the machine was nearly idle (load average under 2): its work per request grows
#: with its partitions. So the step uses one producer and one consumer per 10,000.
CLIENT_PARTITIONS = 10_000


def traffic(bootstrap: str, sizes: dict[str, int]) -> str | None:
    """One record produced to every partition (acks=all), then every one consumed back,
    by a client per ``CLIENT_PARTITIONS`` partitions in threads; what went wrong, or None
    when every record was acknowledged and read."""
    targets = [(name, p) for name, size in sizes.items() for p in range(size)]
    slices = [targets[i : i + CLIENT_PARTITIONS] for i in range(0, len(targets), CLIENT_PARTITIONS)]
    with ThreadPoolExecutor(len(slices)) as pool:
        problems = [
            p for p in pool.map(functools.partial(produce_one_each, bootstrap), slices) if p
        ]
        if problems:
            return problems[0]
        unread = sum(pool.map(functools.partial(unread_after_reading, bootstrap), slices))
    if unread:
        return f"{unread} of {len(targets)} records not read back in 600 s"
    return None


def produce_one_each(bootstrap: str, targets: list[tuple[str, int]]) -> str | None:
    """A record to each partition (acks=all); what failed, or None."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 50,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    failed: list[object] = []
    for name, p in targets:
        producer.produce(
            name,
            f"{name}-{p}".encode(),
            partition=p,
            on_delivery=lambda e, _m: e and failed.append(e),
        )
        producer.poll(0)
    if producer.flush(600) or failed:
        return f"{len(failed)} records not acknowledged, e.g. {failed[:1]}"
    return None


def unread_after_reading(bootstrap: str, targets: list[tuple[str, int]]) -> int:
    """Read the partitions from the start; how many of their records did not come in 600 s."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "creation-bench", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(name, p, 0) for name, p in targets])
    unread = {f"{name}-{p}".encode() for name, p in targets}
    deadline = time.monotonic() + 600
    while unread and time.monotonic() < deadline:
        for message in consumer.consume(10_000, timeout=1):
            if message.error() is None:
                unread.discard(message.value())
    consumer.close()
    return len(unread)


def describe(partitions: int, topics: int, target: str, brokers: int, via: str) -> str:
    where = f"one {target} broker" if brokers == 1 else f"three {target} brokers (RF 3)"
    how = (
        "grown by CreatePartitions from one partition each"
        if via == "create-partitions"
        else "created"
    )
    return f"{partitions} partitions in {topics} topic(s), {how}, on {where}:"


def run(
    partitions: int, topics: int, target: str, brokers: int, via: str, with_traffic: bool
) -> float | None:
    """One creation on fresh ``target`` brokers; the seconds until every new partition
    was served, or None when a request failed."""
    names = [f"bench-{i}" for i in range(topics)]
    each, extra = divmod(partitions, topics)
    sizes = {n: each + (i < extra) for i, n in enumerate(names)}
    with tempfile.TemporaryDirectory() as root, deployed(target, brokers, Path(root)) as where:
        # A stalled broker must not make the admin client give up on its request.
        admin = admin_client(where.bootstrap)
        admin.create_topics([where.probe_topic()])[PROBE_TOPIC].result(60)
        beforehand, timed = plan(sizes, where.replication, via)
        send(admin, beforehand)
        if beforehand:
            wait_all_served(where.probed, dict.fromkeys(names, 1), where.replication)
        with RequestProbe(where.probed, PROBE_TOPIC) as probe:
            probe.wait_for_answers(20)
            started = time.monotonic()
            try:
                send(admin, timed)
                outcome = "answered"
            except KafkaException as exc:
                outcome = f"failed ({exc})"
            answered = time.monotonic()
            if outcome == "answered":
                wait_all_served(where.probed, sizes, where.replication)
            served = time.monotonic()
        print(describe(partitions, topics, target, brokers, via))
        print(
            f"  {len(timed)} CreateTopics/CreatePartitions request(s), one after the other, "
            f"{outcome} after {answered - started:.1f} s"
        )
        print(f"  every partition served after {served - started:.1f} s")
        for answers in (probe.metadata, probe.produce):
            print(f"  {answers.summary(started, served)}")
            if answers.failures:
                print(f"    failures: {len(answers.failures)}, e.g. {answers.failures[0]}")
        if outcome == "answered" and not all_led(admin, sizes):
            raise SystemExit("some partitions have no leader")
        if outcome == "answered" and with_traffic:
            sending = time.monotonic()
            problem = traffic(where.bootstrap, sizes)
            done = f"failed ({problem})" if problem else "read back"
            rss = "+".join(f"{rss_bytes(pid) / 2**20:.0f}" for pid in where.pids)
            fds = "+".join(str(open_fds(pid)) for pid in where.pids)
            print(
                f"  one record produced to every partition and {done} after "
                f"{time.monotonic() - sending:.1f} s; then the RSS {rss} MiB, {fds} open "
                f"descriptors (limit {resource.getrlimit(resource.RLIMIT_NOFILE)[1]} each)"
            )
        del admin  # closes its connections while the brokers are still there
        return served - started if outcome == "answered" else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=1)
    parser.add_argument("--target", choices=("kpybroker", "kafka", "both"), default="kpybroker")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--brokers",
        type=int,
        choices=(1, 3),
        default=1,
        help="one broker, or a cluster of three with topics of replication factor 3",
    )
    parser.add_argument(
        "--via",
        choices=("create-topics", "create-partitions"),
        default="create-topics",
        help="create the topics at their size, or with one partition each (not timed) "
        "and then grow them",
    )
    parser.add_argument(
        "--traffic",
        action="store_true",
        help="then produce a record to every partition, read them all back, and print the "
        "brokers' RSS and open descriptors",
    )
    args = parser.parse_args()
    targets = ("kpybroker", "kafka") if args.target == "both" else (args.target,)
    took: dict[str, list[float | None]] = {target: [] for target in targets}
    for _ in range(args.rounds):
        for target in targets:
            took[target].append(
                run(args.partitions, args.topics, target, args.brokers, args.via, args.traffic)
            )
    if len(targets) == 2:
        print("every partition served after (s), by round:")
        for target, seconds in took.items():
            shown = ("failed" if t is None else f"{t:.1f}" for t in seconds)
            print(f"  {target:9} " + "  ".join(shown))
        pairs = [(k, a) for k, a in zip(*took.values(), strict=True) if k and a]
        if pairs:
            ratios = sorted(k / a for k, a in pairs)
            print(f"  kpybroker / Kafka, median of {len(ratios)}: {ratios[len(ratios) // 2]:.2f}")


if __name__ == "__main__":
    main()
