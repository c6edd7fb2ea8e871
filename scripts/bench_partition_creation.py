#!/usr/bin/env python3
"""Other clients' latency while a broker creates many partitions (issue 18, item 5).

    python scripts/bench_partition_creation.py [--partitions 10000] [--topics 1]

Starts one kpybroker in a temporary directory, and a probe (``tests/helpers/
request_probe.py``): one client sending Metadata requests and one producing
(acks=1) to a topic of its own, one request at a time each. Then an admin client
(confluent-kafka) creates ``--topics`` topics of ``--partitions`` partitions in all,
in one CreateTopics request whose timeout (``operation_timeout``) lets the broker
answer once it hosts every new partition (their logs exist). Printed: how long the
answer took, and the Metadata and Produce answers of the probe during that window
(count, p50, p99, max). Then it checks that Metadata lists every partition with a
leader.

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

from tests.helpers.brokers import launcher  # noqa: E402
from tests.helpers.request_probe import RequestProbe  # noqa: E402

PROBE_TOPIC = "probe"
#: Seconds the broker may take to answer (CreateTopics' timeout_ms).
TIMEOUT_S = 1800


def all_led(admin: AdminClient, topics: list[str], partitions: int) -> bool:
    """Whether the topics have ``partitions`` partitions in all, each with a leader."""
    found = admin.list_topics(timeout=60).topics
    led = 0
    for name in topics:
        meta = found.get(name)
        if meta is not None and meta.error is None:
            led += sum(1 for p in meta.partitions.values() if p.error is None and p.leader >= 0)
    return led == partitions


def run(partitions: int, topics: int) -> None:
    with tempfile.TemporaryDirectory() as root, launcher(Path(root)) as brokers:
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
        print(f"{partitions} partitions in {topics} topic(s) on one broker:")
        print(f"  CreateTopics {outcome} after {answered - started:.1f} s")
        for answers in (probe.metadata, probe.produce):
            print(f"  {answers.summary(started, answered)}")
            if answers.failures:
                print(f"    failures: {len(answers.failures)}, e.g. {answers.failures[0]}")
        if outcome == "answered" and not all_led(admin, names, partitions):
            raise SystemExit("some partitions have no leader")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=1)
    args = parser.parse_args()
    run(args.partitions, args.topics)


if __name__ == "__main__":
    main()
