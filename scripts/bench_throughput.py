#!/usr/bin/env python3
"""Produce and consume throughput with confluent-kafka (librdkafka) against a broker.

    python scripts/bench_throughput.py                         # starts its own kpybroker
    python scripts/bench_throughput.py --bootstrap host:port   # uses a running broker
    python scripts/bench_throughput.py --compression lz4       # the producer compresses

Prints records/s and MB/s for a produce run (acks=all) and a consume run
that reads the same records back, and, for a broker it starts, the broker's CPU
time during each. This is a benchmark, not a test: it asserts only that every
record came back.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from benchlib.procstat import cpu_seconds
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

READY = re.compile(r"ready, listening on PLAINTEXT://([^,\s]+)")


class LocalBroker(NamedTuple):
    bootstrap: str
    pid: int


@contextlib.contextmanager
def local_broker() -> Iterator[LocalBroker]:
    """Start kpybroker on a free port with a throw-away data directory."""
    with tempfile.TemporaryDirectory(prefix="kpybroker-bench-") as data:
        log_path = Path(data) / "broker.log"
        with open(log_path, "w") as log_file:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kpybroker",
                    "--override",
                    "listeners=PLAINTEXT://127.0.0.1:0",
                    "--override",
                    f"log.dirs={data}/logs",
                ],
                stderr=log_file,
            )
        try:
            yield LocalBroker(wait_ready(proc, log_path), proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def wait_ready(proc: subprocess.Popen, log_path: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if m := READY.search(log_path.read_text()):
            return m.group(1)
        time.sleep(0.05)
    raise RuntimeError(f"broker did not become ready:\n{log_path.read_text()}")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def broker_with_topic(
    stack: contextlib.ExitStack, bootstrap: str | None, prefix: str, partitions: int
) -> tuple[str, int | None, str]:
    """``bootstrap``, or a kpybroker started for the run (whose pid is then known), and a new
    topic of ``partitions`` partitions on it named ``<prefix>-<random>``."""
    pid = None
    if bootstrap is None:
        bootstrap, pid = stack.enter_context(local_broker())
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    return bootstrap, pid, topic


def produce(bootstrap: str, topic: str, count: int, size: int, linger_ms: int, codec: str) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": linger_ms,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "compression.type": codec,
        }
    )
    # Compressed, values are half random and half zeros (about 2:1, as text-like payloads):
    # librdkafka sends a batch that compression does not shrink uncompressed.
    value = os.urandom(size) if codec == "none" else os.urandom(size - size // 2) + bytes(size // 2)
    failures = []

    def delivered(err, _msg) -> None:
        if err is not None:
            failures.append(err)

    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} records failed, first: {failures[0]}")
    return elapsed


def consume(bootstrap: str, topic: str, partitions: int, count: int) -> float:
    """Read every partition from the start by assignment, so no group coordinator is involved."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen = 0
    started = None
    deadline = time.monotonic() + 120
    while seen < count and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                if started is None:
                    started = time.perf_counter()
                seen += 1
    elapsed = time.perf_counter() - (started or time.perf_counter())
    consumer.close()
    if seen != count:
        raise RuntimeError(f"consumed {seen} of {count} records")
    return elapsed


def report(label: str, count: int, size: int, seconds: float, cpu: float | None) -> None:
    rate = count / seconds
    broker = "" if cpu is None else f"  broker CPU {cpu:.2f} s ({cpu / count * 1e6:.2f} us/record)"
    print(
        f"{label:<8} {count:>10,} records  {rate:>12,.0f} records/s  "
        f"{rate * size / 1e6:>8.1f} MB/s  ({seconds:.2f} s){broker}"
    )


def measured(pid: int | None, run: Callable[[], float]) -> tuple[float, float | None]:
    """``run``'s seconds, and the CPU seconds broker ``pid`` (if known) spent meanwhile."""
    before = None if pid is None else cpu_seconds(pid)
    seconds = run()
    return seconds, None if pid is None else cpu_seconds(pid) - before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a running broker (default: start kpybroker)")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument(
        "--compression",
        default="none",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        help="the producer's compression.type",
    )
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        bootstrap, pid, topic = broker_with_topic(stack, args.bootstrap, "bench", args.partitions)
        print(
            f"broker {bootstrap}, topic {topic}, {args.partitions} partitions, "
            f"{args.size}-byte values, compression {args.compression}"
        )
        report(
            "produce",
            args.records,
            args.size,
            *measured(
                pid,
                lambda: produce(
                    bootstrap, topic, args.records, args.size, args.linger_ms, args.compression
                ),
            ),
        )
        report(
            "consume",
            args.records,
            args.size,
            *measured(pid, lambda: consume(bootstrap, topic, args.partitions, args.records)),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
