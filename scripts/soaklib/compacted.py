"""Keyed writes to a compacted topic, and the check that compaction kept the right records.

The compacted topic has few keys and many writes, so the cleaner has work all
the time. After the run, the last acknowledged write of every key must still be
in the log, at the offset its acknowledgement named (a later write whose send
failed may stand in front of it: Kafka may have stored it anyway), and no key
may be missing. The cleaner must also have removed something: fewer records in
the log than were acknowledged.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as TP


@dataclass
class KeyedWriter:
    """One idempotent acks=all producer writing ``keys`` keys round-robin."""

    bootstrap: str
    topic: str
    partitions: int
    keys: int
    pause_s: float = 0.002
    #: key -> (partition, offset, value) of its last acknowledged write so far.
    last_acked: dict[str, tuple[int, int, str]] = field(default_factory=dict)
    failed_values: set[str] = field(default_factory=set)
    acked: int = 0
    fatal: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> KeyedWriter:
        self._thread = threading.Thread(target=self._run, name="keyed-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(180)

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "error_cb": lambda err: err.fatal() and self.fatal.append(str(err)),
            }
        )
        for seq in itertools.count():
            if self._stop.is_set() or self.fatal:
                break
            index = seq % self.keys
            key, value = f"k{index}", f"kw:{seq}"
            while True:
                try:
                    producer.produce(
                        self.topic,
                        key=key.encode(),
                        value=value.encode(),
                        partition=index % self.partitions,
                        on_delivery=lambda err, msg, key=key, value=value: self._delivered(
                            key, value, err, msg
                        ),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            time.sleep(self.pause_s)
        if producer.flush(120) != 0:
            self.fatal.append("keyed writes left unsettled")

    def _delivered(self, key: str, value: str, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.failed_values.add(value)
            return
        self.acked += 1
        position = (msg.partition(), msg.offset(), value)
        previous = self.last_acked.get(key)
        if previous is None or position[1] > previous[1]:
            self.last_acked[key] = position


def read_latest(bootstrap: str, topic: str, partitions: int) -> tuple[dict[str, tuple], int]:
    """``({key: (partition, offset, value)} of each key's latest record, records read)``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compacted-read-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    latest: dict[str, tuple] = {}
    count = 0
    try:
        ends = {
            p: consumer.get_watermark_offsets(TP(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        consumer.assign([TP(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 120
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"reading the compacted topic back stopped short of {ends}")
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error() is not None:
                    continue
                count += 1
                latest[msg.key().decode()] = (msg.partition(), msg.offset(), msg.value().decode())
                if msg.offset() >= ends[msg.partition()] - 1:
                    done.add(msg.partition())
    finally:
        consumer.close()
    return latest, count


def check_compacted(writer: KeyedWriter, latest: dict[str, tuple], stored: int) -> list[str]:
    """What is wrong with the compacted topic after the run (empty: nothing)."""
    problems = []
    for key, (partition, offset, value) in sorted(writer.last_acked.items()):
        found = latest.get(key)
        if found is None:
            problems.append(f"{key}: acknowledged {value} at {partition}/{offset}, key gone")
        elif found[1] < offset:
            problems.append(f"{key}: acknowledged {value} at {partition}/{offset}, log has {found}")
        elif found[1] > offset and found[2] not in writer.failed_values:
            problems.append(f"{key}: last acknowledged at {offset}, log has unacknowledged {found}")
        elif found[1] == offset and found[2] != value:
            problems.append(f"{key}: acknowledged {value} at {offset}, log has {found[2]} there")
    if writer.acked and stored >= writer.acked:
        problems.append(f"the cleaner removed nothing: {stored} records for {writer.acked} writes")
    return problems
