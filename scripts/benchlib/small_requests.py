"""Workload 12: many clients, each with one small request in flight: the cost per request.

Producers: ``clients`` librdkafka producers in this process (librdkafka has one
connection per producer instance, so one instance per client), each sending one
100 B record per request (``linger.ms=0``) and waiting for its acknowledgement
before sending the next. The broker then always has about ``clients`` requests
to answer, each carrying one record: per-request work, not per-byte work, sets
the pace. Recorded: requests/s, latency percentiles of a request (send to
acknowledgement), and the broker's CPU per request.

Consumers: ``clients`` consumers, each assigned its own partition, long-polling
(librdkafka's ``fetch.wait.max.ms``) while a producer writes one record to every
partition each ``tick_s``. Recorded: delivery latency percentiles (the record's
send time, carried in its value, to its arrival) and the broker's CPU per second
while the consumers wait: what idle long polls cost.

Both run in threads: librdkafka releases the GIL while it waits, and the same
client threads run against both brokers, so their cost is in both figures.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

VALUE_SIZE = 100
#: Each thread's first requests connect and fetch metadata: not counted.
WARM_UP_REQUESTS = 3


@dataclass
class Latencies:
    """Seconds per request or delivery, from every thread; percentiles at the end."""

    values: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def extend(self, more: list[float]) -> None:
        with self.lock:
            self.values.extend(more)

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.values)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def one_at_a_time_producer(bootstrap: str, acks: str) -> Producer:
    """A producer whose every record is a request of its own, sent once the last one was
    answered."""
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 0,
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1,
            "log_level": 0,
        }
    )


def send_one(producer: Producer, topic: str, partition: int, errors: list[KafkaError]) -> float:
    """Send one ``VALUE_SIZE`` record and wait for its answer; the seconds it took."""
    started = time.perf_counter()
    producer.produce(
        topic,
        bytes(VALUE_SIZE),
        partition=partition,
        on_delivery=lambda err, _msg: err is not None and errors.append(err),
    )
    producer.flush(30)
    return time.perf_counter() - started


def produce_until(bootstrap: str, topic: str, stop: threading.Event) -> Latencies:
    """One producer sending to partition 0 of ``topic`` (acks=1), one request at a time,
    until ``stop`` is set; the latencies of its requests after ``WARM_UP_REQUESTS``."""
    producer = one_at_a_time_producer(bootstrap, "1")
    errors: list[KafkaError] = []
    for _ in range(WARM_UP_REQUESTS):
        send_one(producer, topic, 0, errors)
    latencies = Latencies()
    while not stop.is_set():
        latencies.values.append(send_one(producer, topic, 0, errors))
    if errors:
        raise RuntimeError(f"{len(errors)} probe requests failed, e.g. {errors[0]}")
    return latencies


def produce_one_at_a_time(
    bootstrap: str, topic: str, partitions: int, clients: int, acks: str, seconds: float
) -> tuple[int, float, Latencies]:
    """``clients`` producers, each with one request in flight, for ``seconds`` after all
    have warmed up; returns (requests answered, seconds measured, their latencies)."""
    latencies = Latencies()
    warmed = threading.Barrier(clients + 1)
    stop = threading.Event()
    failures: list[str] = []

    def client(index: int) -> None:
        producer = one_at_a_time_producer(bootstrap, acks)
        errors: list[KafkaError] = []
        own: list[float] = []

        def one_request() -> float:
            return send_one(producer, topic, index % partitions, errors)

        try:
            for _ in range(WARM_UP_REQUESTS):
                one_request()
        finally:
            warmed.wait()
        while not stop.is_set():
            own.append(one_request())
        if errors:
            failures.append(f"producer {index}: {len(errors)} failed, e.g. {errors[0]}")
        latencies.extend(own)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    warmed.wait()
    started = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(60)
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError("; ".join(failures[:3]))
    return len(latencies.values), elapsed, latencies


def long_poll_deliveries(
    bootstrap: str, topic: str, clients: int, seconds: float, tick_s: float
) -> Latencies:
    """``clients`` consumers on partitions 0 to clients-1 while one producer writes a record
    to each every ``tick_s``; returns the delivery latencies."""
    latencies = Latencies()
    assigned = threading.Barrier(clients + 1)
    stop = threading.Event()

    def client(partition: int) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "unused",  # librdkafka wants one; assign() joins no group
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )
        consumer.assign([TopicPartition(topic, partition, -1)])  # from the end
        own: list[float] = []
        try:
            consumer.poll(1.0)  # connected and positioned before the clock starts
        finally:
            assigned.wait()
        while not stop.is_set():
            message: Message | None = consumer.poll(0.5)
            if message is not None and message.error() is None:
                own.append(time.time() - float(message.value()))
        consumer.close()
        latencies.extend(own)

    threads = [threading.Thread(target=client, args=(p,), daemon=True) for p in range(clients)]
    for thread in threads:
        thread.start()
    assigned.wait()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 0})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for partition in range(clients):
            producer.produce(topic, b"%.6f" % time.time(), partition=partition)
        producer.poll(0)
        time.sleep(tick_s)
    producer.flush(30)
    time.sleep(1.0)  # the last records' long polls return
    stop.set()
    for thread in threads:
        thread.join(60)
    return latencies
