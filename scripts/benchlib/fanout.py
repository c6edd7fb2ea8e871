"""Workload 13: one topic read by many consumer groups at once: the broker's aggregate
fetch throughput when every record goes out many times.

Each group is one librdkafka consumer in a thread of this process, subscribed to the
topic; all start together and read every record. The time runs from the start until
the last group has read everything (joining the groups is included: it is part of
what a fan-out costs), and the figure is the bytes all groups read over that time.
"""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer

from benchlib.librdkafka import CONSUME_BATCH, FETCH_QUEUE_BACKOFF_MS


def read_in_groups(
    bootstrap: str, topic: str, records: int, groups: int, timeout: float = 600.0
) -> float:
    """Seconds until each of ``groups`` new groups has read all ``records``."""
    ready = threading.Barrier(groups + 1)
    counts = [0] * groups
    deadline = time.monotonic() + timeout

    def group(index: int) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"fanout-{uuid.uuid4().hex[:12]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
                "log_level": 0,
            }
        )
        try:
            ready.wait()
            consumer.subscribe([topic])
            while counts[index] < records and time.monotonic() < deadline:
                batch = consumer.consume(CONSUME_BATCH, 1.0)
                counts[index] += sum(1 for m in batch if m.error() is None)
        finally:
            consumer.close()

    threads = [threading.Thread(target=group, args=(i,), daemon=True) for i in range(groups)]
    for thread in threads:
        thread.start()
    ready.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join(timeout)
    elapsed = time.perf_counter() - started
    short = [c for c in counts if c < records]
    if short:
        raise RuntimeError(f"{len(short)} of {groups} groups read too few records: {short[:3]}")
    return elapsed
