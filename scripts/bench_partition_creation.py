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
in one CreateTopics request whose timeout (``operation_timeout``) lets the broker
answer once it hosts every new partition (their logs exist). Printed: how long the
answer took, and the Metadata and Produce answers of the probe during that window
(count, p50, p99, max), and when every new partition answered ListOffsets (the
figure compared between the two brokers). Then it checks that Metadata lists every
partition with a leader.

A stalled event loop shows as few answers with a p99 as long as the stall.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kpybroker.protocol.messages.list_offsets import (  # noqa: E402
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from tests.helpers.brokers import launcher  # noqa: E402
from tests.helpers.groups_wire import Wire  # noqa: E402
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


def run(partitions: int, topics: int, target: str) -> float | None:
    """One creation on a fresh ``target`` broker; the seconds CreateTopics took to answer,
    or None when it failed."""
    with tempfile.TemporaryDirectory() as root, launcher(Path(root), target) as brokers:
        broker = brokers()
        # A stalled broker must not make the admin client give up on its request.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 300_000})
        admin.create_topics([NewTopic(PROBE_TOPIC, 1, 1)])[PROBE_TOPIC].result(60)
        names = [f"bench-{i}" for i in range(topics)]
        each, extra = divmod(partitions, topics)
        new = [NewTopic(n, each + (i < extra), 1) for i, n in enumerate(names)]
        with RequestProbe(broker.bootstrap, PROBE_TOPIC) as probe:
            probe.wait_for_answers(20)
            started = time.monotonic()
            futures = admin.create_topics(
                new, operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S
            )
            try:
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
        print(f"  CreateTopics {outcome} after {answered - started:.1f} s")
        print(f"  every partition answering ListOffsets after {served - started:.1f} s")
        for answers in (probe.metadata, probe.produce):
            print(f"  {answers.summary(started, served)}")
            if answers.failures:
                print(f"    failures: {len(answers.failures)}, e.g. {answers.failures[0]}")
        if outcome == "answered" and not all_led(admin, names, partitions):
            raise SystemExit("some partitions have no leader")
        del admin  # closes its connections while the broker is still there
        return served - started if outcome == "answered" else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=1)
    parser.add_argument("--target", choices=("kpybroker", "kafka", "both"), default="kpybroker")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    targets = ("kpybroker", "kafka") if args.target == "both" else (args.target,)
    took: dict[str, list[float | None]] = {target: [] for target in targets}
    for _ in range(args.rounds):
        for target in targets:
            took[target].append(run(args.partitions, args.topics, target))
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
