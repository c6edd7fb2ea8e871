#!/usr/bin/env python3
"""Other clients' latency while a broker creates many partitions (issue 18, item 5).

    python scripts/bench_partition_creation.py [--partitions 10000] [--topics 1]
                                               [--target kpybroker|kafka|both] [--rounds 1]

Starts one broker (kpybroker, or Apache Kafka 4.4 in KRaft mode from
``tests/helpers/reference_kafka.py``; ``both`` alternates them, kpybroker first,
``--rounds`` times) in a temporary directory, and a probe (``tests/helpers/
request_probe.py``): one client sending Metadata requests and one producing
(acks=1) to a topic of its own, one request at a time each. Then an admin client
(confluent-kafka) creates ``--topics`` topics of ``--partitions`` partitions in all,
in as few CreateTopics (then CreatePartitions) requests as Kafka 4's bounds on one
request allow (10,000 metadata records, 10,000 partitions added), one after the
other, each with a timeout (``operation_timeout``) that lets the broker answer
once it hosts every new partition (their logs exist). Printed: how long the
answer took, and the Metadata and Produce answers of the probe during that window
(count, p50, p99, max), and when every new partition answered ListOffsets (the
figure compared between the two brokers). Then it checks that Metadata lists every
partition with a leader.

A stalled event loop shows as few answers with a p99 as long as the stall.

With ``--traffic`` one record is then produced to every partition and read back,
and the broker's RSS and open descriptors are printed (under this process's
``RLIMIT_NOFILE``, which the broker inherits).
"""

from __future__ import annotations

import argparse
import functools
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kpybroker.protocol.messages.list_offsets import (  # noqa: E402
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from tests.helpers.brokers import launcher  # noqa: E402
from tests.helpers.groups_wire import Wire  # noqa: E402
from tests.helpers.process import open_fds, rss_bytes  # noqa: E402
from tests.helpers.request_probe import RequestProbe  # noqa: E402

PROBE_TOPIC = "probe"
#: Seconds the broker may take to answer (CreateTopics' timeout_ms).
TIMEOUT_S = 1800
#: The ListOffsets version of Kafka 4's clients.
LIST_OFFSETS_VERSION = 9


def all_led(admin: AdminClient, topics: list[str], partitions: int) -> bool:
    """Whether the topics have ``partitions`` partitions in all, each with a leader."""
    found = admin.list_topics(timeout=60).topics
    led = 0
    for name in topics:
        meta = found.get(name)
        if meta is not None and meta.error is None:
            led += sum(1 for p in meta.partitions.values() if p.error is None and p.leader >= 0)
    return led == partitions


def wait_all_answering(bootstrap: str, topics: list[str], partitions: int) -> None:
    """Until this broker answers ListOffsets without error for every partition of ``topics``
    (asked every 50 ms, with no client's retry back-off in the way).

    Kafka in KRaft mode answers CreateTopics once its controller has committed the
    topic; the broker makes the logs afterwards. kpybroker answers once its logs
    exist. Being served is the same point in both, so it is what the ratio uses.
    """
    each, extra = divmod(partitions, len(topics))
    waiting = {name: set(range(each + (i < extra))) for i, name in enumerate(topics)}
    with Wire(bootstrap, client_id="creation-bench") as wire:
        while waiting:
            request = ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    ListOffsetsTopic(
                        name=name,
                        partitions=[
                            ListOffsetsPartition(partition_index=p, timestamp=-1) for p in ps
                        ],
                    )
                    for name, ps in waiting.items()
                ],
            )
            for topic in wire.call(request, LIST_OFFSETS_VERSION).topics:
                served = {p.partition_index for p in topic.partitions if p.error_code == 0}
                waiting[topic.name] -= served
            waiting = {name: ps for name, ps in waiting.items() if ps}
            if waiting:
                time.sleep(0.05)


def requests(sizes: dict[str, int]) -> list[Callable[[AdminClient], dict]]:
    """The CreateTopics, then CreatePartitions, requests that make these topics within the
    bounds Kafka 4's controller sets on one request: 10,000 metadata records (a topic and
    each of its partitions) and 10,000 partitions added."""
    limit = 10_000
    made: list[Callable[[AdminClient], dict]] = []
    batch: list[NewTopic] = []
    for name, size in sizes.items():
        first = min(size, limit - 1)
        if batch and sum(t.num_partitions + 1 for t in batch) + first + 1 > limit:
            made.append(functools.partial(_create, batch))
            batch = []
        batch.append(NewTopic(name, first, 1))
    if batch:
        made.append(functools.partial(_create, batch))
    current = {name: min(size, limit - 1) for name, size in sizes.items()}
    for name, size in sizes.items():
        while current[name] < size:
            current[name] = min(size, current[name] + limit)
            made.append(functools.partial(_grow, name, current[name]))
    return made


def _create(topics: list[NewTopic], admin: AdminClient) -> dict:
    return admin.create_topics(topics, operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)


def _grow(name: str, count: int, admin: AdminClient) -> dict:
    return admin.create_partitions(
        [NewPartitions(name, count)], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S
    )


def traffic(bootstrap: str, topics: list[str], partitions: int) -> None:
    """One record produced to every partition (acks=all), then every one consumed back;
    SystemExit when a record is not acknowledged or not read."""
    each, extra = divmod(partitions, len(topics))
    targets = [(name, p) for i, name in enumerate(topics) for p in range(each + (i < extra))]
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
        raise SystemExit(f"{len(failed)} records not acknowledged, e.g. {failed[:1]}")
    del producer
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
    if unread:
        raise SystemExit(f"{len(unread)} of {len(targets)} records not read back in 600 s")


def run(partitions: int, topics: int, target: str, with_traffic: bool) -> float | None:
    """One creation on a fresh ``target`` broker; the seconds until every new partition
    was served, or None when CreateTopics failed."""
    with tempfile.TemporaryDirectory() as root, launcher(Path(root), target) as brokers:
        broker = brokers()
        # A stalled broker must not make the admin client give up on its request.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 300_000})
        admin.create_topics([NewTopic(PROBE_TOPIC, 1, 1)])[PROBE_TOPIC].result(60)
        names = [f"bench-{i}" for i in range(topics)]
        each, extra = divmod(partitions, topics)
        sizes = {n: each + (i < extra) for i, n in enumerate(names)}
        with RequestProbe(broker.bootstrap, PROBE_TOPIC) as probe:
            probe.wait_for_answers(20)
            started = time.monotonic()
            asked = requests(sizes)
            try:
                for request in asked:
                    futures = request(admin)
                    for future in futures.values():
                        future.result(TIMEOUT_S)
                outcome = "answered"
            except KafkaException as exc:
                outcome = f"failed ({exc})"
            answered = time.monotonic()
            if outcome == "answered":
                wait_all_answering(broker.bootstrap, names, partitions)
            served = time.monotonic()
        print(f"{partitions} partitions in {topics} topic(s) on one {target} broker:")
        print(
            f"  {len(asked)} CreateTopics/CreatePartitions request(s), one after the other, "
            f"{outcome} after {answered - started:.1f} s"
        )
        print(f"  every partition answering ListOffsets after {served - started:.1f} s")
        for answers in (probe.metadata, probe.produce):
            print(f"  {answers.summary(started, served)}")
            if answers.failures:
                print(f"    failures: {len(answers.failures)}, e.g. {answers.failures[0]}")
        if outcome == "answered" and not all_led(admin, names, partitions):
            raise SystemExit("some partitions have no leader")
        if outcome == "answered" and with_traffic:
            sending = time.monotonic()
            traffic(broker.bootstrap, names, partitions)
            pid = broker.process.pid
            print(
                f"  one record produced to every partition and read back in "
                f"{time.monotonic() - sending:.1f} s; then the broker's RSS "
                f"{rss_bytes(pid) / 2**20:.0f} MiB, {open_fds(pid)} open descriptors "
                f"(limit {resource.getrlimit(resource.RLIMIT_NOFILE)[1]})"
            )
        del admin  # closes its connections while the broker is still there
        return served - started if outcome == "answered" else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=1)
    parser.add_argument("--target", choices=("kpybroker", "kafka", "both"), default="kpybroker")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--traffic",
        action="store_true",
        help="then produce a record to every partition, read them all back, and print the "
        "broker's RSS and open descriptors",
    )
    args = parser.parse_args()
    targets = ("kpybroker", "kafka") if args.target == "both" else (args.target,)
    took: dict[str, list[float | None]] = {target: [] for target in targets}
    for _ in range(args.rounds):
        for target in targets:
            took[target].append(run(args.partitions, args.topics, target, args.traffic))
    if len(targets) == 2:
        print("every partition answering after (s), by round:")
        for target, seconds in took.items():
            shown = ("failed" if t is None else f"{t:.1f}" for t in seconds)
            print(f"  {target:9} " + "  ".join(shown))
        pairs = [(k, a) for k, a in zip(*took.values(), strict=True) if k and a]
        if pairs:
            ratios = sorted(k / a for k, a in pairs)
            print(f"  kpybroker / Kafka, median of {len(ratios)}: {ratios[len(ratios) // 2]:.2f}")


if __name__ == "__main__":
    main()
