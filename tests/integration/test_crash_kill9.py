"""SIGKILL at random moments while idempotent producers write: nothing acknowledged is lost.

Two confluent-kafka producers (acks=all, idempotent) write to six partitions
from their own threads while the broker is SIGKILLed and restarted at least
20 times, at moments drawn from a seeded generator (``KPYBROKER_CRASH_SEED``
replays a run). Afterwards every partition must hold contiguous offsets from
0; every record at most once; each producer's records in the order it sent
them; and every acknowledged record at the partition and offset its
acknowledgement named.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Producer

from tests.helpers.brokers import ManagedBroker
from tests.helpers.clients import ConfluentClient
from tests.helpers.log_life import consume_all, create_topic, watermarks
from tests.helpers.records import Problems

TOPIC = "kill9"
PARTITIONS = 6
PRODUCERS = 2
KILLS = 20
RECORDS_PER_BURST = 50  # then a short pause: keeps the log (and the check) a few MB


@dataclass
class ProducerRun:
    """One producer thread: what it sent and what came back."""

    name: str
    sent: int = 0
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq -> (partition, offset)
    errors: dict[int, str] = field(default_factory=dict)

    def delivered(self, seq: int, err: object, msg: object) -> None:
        if err is not None:
            self.errors[seq] = str(err)
        else:
            self.acked[seq] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    def run(self, bootstrap: str, stop: threading.Event) -> None:
        producer = Producer(
            ConfluentClient.producer_config(
                bootstrap,
                idempotent=True,
                **{
                    "message.timeout.ms": 300_000,
                    "reconnect.backoff.ms": 20,
                    "reconnect.backoff.max.ms": 200,
                    "retry.backoff.ms": 20,
                    "queue.buffering.max.messages": 5000,
                },
            )
        )
        while not stop.is_set():
            for _ in range(RECORDS_PER_BURST):
                seq = self.sent
                value = f"{self.name}:{seq}".encode()
                while True:
                    try:
                        producer.produce(
                            TOPIC,
                            key=self.name.encode(),
                            value=value,
                            partition=seq % PARTITIONS,
                            on_delivery=lambda err, msg, seq=seq: self.delivered(seq, err, msg),
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                self.sent += 1
            producer.poll(0.01)
        remaining = producer.flush(240)
        assert remaining == 0, f"{self.name}: {remaining} records unsettled"


def check_log(runs: list[ProducerRun], stored: dict[int, list[tuple[int, bytes]]]) -> Problems:
    problems = Problems()
    seen: dict[bytes, tuple[int, int]] = {}
    for partition, records in stored.items():
        offsets = [offset for offset, _ in records]
        if offsets != list(range(len(offsets))):
            problems.add(f"partition {partition}: offsets not contiguous from 0")
        last_seq: dict[str, int] = {}
        for offset, value in records:
            if value in seen:
                problems.add(f"{value!r} stored twice: {seen[value]} and {(partition, offset)}")
            seen[value] = (partition, offset)
            name, seq = value.decode().split(":")
            if int(seq) <= last_seq.get(name, -1):
                problems.add(f"partition {partition} offset {offset}: {value!r} out of order")
            last_seq[name] = int(seq)
    for run in runs:
        for seq, where in run.acked.items():
            value = f"{run.name}:{seq}".encode()
            if seen.get(value) != where:
                problems.add(f"{value!r} acknowledged at {where}, stored at {seen.get(value)}")
    return problems


def test_acknowledged_records_survive_twenty_sigkills(broker: ManagedBroker) -> None:
    seed = int(os.environ.get("KPYBROKER_CRASH_SEED", "20250601"))
    rng = random.Random(seed)
    create_topic(broker.bootstrap, TOPIC, {"segment.bytes": 256 * 1024}, partitions=PARTITIONS)
    runs = [ProducerRun(f"p{i}") for i in range(PRODUCERS)]
    stop = threading.Event()
    threads = [
        threading.Thread(target=run.run, args=(broker.bootstrap, stop), name=run.name)
        for run in runs
    ]
    for thread in threads:
        thread.start()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.05, 0.7))
            broker.kill()
            time.sleep(rng.uniform(0.0, 0.2))  # down for a moment: requests fail and retry
            broker.start()
        time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(300)
    assert broker.log_text().count("(unclean log dirs = ") >= KILLS

    stored = {}
    for partition in range(PARTITIONS):
        records = consume_all(broker.bootstrap, TOPIC, partition)
        assert watermarks(broker.bootstrap, TOPIC, partition)[1] == len(records)
        stored[partition] = [(offset, value) for offset, (_, value) in records]
    problems = check_log(runs, stored)
    sent = sum(run.sent for run in runs)
    acked = sum(len(run.acked) for run in runs)
    errors = [e for run in runs for e in run.errors.values()]
    print(f"seed {seed}: {sent} sent, {acked} acknowledged, {len(errors)} failed: {errors[:3]}")
    problems.raise_if_any(f"after {KILLS} SIGKILLs (seed {seed})")
    assert acked == sent, f"{sent - acked} records not acknowledged: {errors[:5]}"
