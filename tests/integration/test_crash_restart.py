"""Acknowledged records survive SIGKILL.

A confluent-kafka producer (acks=all) keeps producing while the broker is
SIGKILLed and restarted several times. Afterwards every acknowledged record is
at the partition and offset its acknowledgement named, offsets are contiguous,
nothing is corrupt; with the idempotent producer nothing is duplicated or
reordered either. A final clean restart must not change the log.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from tests.helpers.brokers import ManagedBroker
from tests.helpers.clients import ConfluentClient, confluent_end_offsets, confluent_produce
from tests.helpers.records import (
    ConsumedRecord,
    DeliveryReport,
    make_records,
    verify_acknowledged_survive,
)

TOPIC = "crash"
PARTITIONS = 3
RECORDS = 30_000
CHUNK = 1_000
KILL_AT_CHUNKS = (6, 14, 22)  # SIGKILL right after producing these chunks


def read_log(broker: ManagedBroker) -> dict[int, list[ConsumedRecord]]:
    """Everything in the topic up to each partition's high watermark."""
    ends = confluent_end_offsets(broker.bootstrap, TOPIC, PARTITIONS)
    consumed = ConfluentClient().consume(broker.bootstrap, TOPIC, ends)
    for p, end in ends.items():
        assert len(consumed[p]) == end, f"partition {p}: read {len(consumed[p])} of {end}"
    return consumed


def wait_for_acks(producer: Producer, report: DeliveryReport, count: int, timeout: float) -> None:
    """Serve delivery reports until ``count`` records are settled (acked or failed)."""
    deadline = time.monotonic() + timeout
    while len(report.acked) + len(report.errors) < count:
        assert time.monotonic() < deadline, (
            f"only {len(report.acked)} acked, {len(report.errors)} failed of {count} "
            f"after {timeout} s"
        )
        producer.poll(0.05)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
def test_acknowledged_records_survive_sigkill(broker: ManagedBroker, idempotent: bool) -> None:
    """Produce 30,000 records through three SIGKILLs; check what the acks promised."""
    ConfluentClient().create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    records = make_records(RECORDS, PARTITIONS)
    producer = Producer(
        ConfluentClient.producer_config(
            broker.bootstrap,
            idempotent=idempotent,
            **{
                "message.timeout.ms": 180_000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "retry.backoff.ms": 50,
            },
        )
    )
    report = DeliveryReport()
    for chunk, start in enumerate(range(0, RECORDS, CHUNK)):
        for record in records[start : start + CHUNK]:
            confluent_produce(producer, TOPIC, record, report)
        if chunk in KILL_AT_CHUNKS:
            producer.poll(0.02)  # let requests get on the wire
            broker.kill()
            broker.start()
        else:
            # Keep about two chunks in flight, so each kill lands mid-stream.
            wait_for_acks(producer, report, start - CHUNK, timeout=180)
    remaining = producer.flush(240)
    assert remaining == 0, f"{remaining} records still unsettled"
    # librdkafka retries through broker restarts until message.timeout.ms:
    # against a broker that comes back, every record is acknowledged.
    report.raise_for_errors(RECORDS)

    consumed = read_log(broker)
    duplicates = verify_acknowledged_survive(PARTITIONS, consumed, report, exactly_once=idempotent)
    print(f"{sum(map(len, consumed.values()))} records stored, {duplicates} duplicates")

    # A clean restart leaves the log exactly as it was.
    broker.restart()
    assert read_log(broker) == consumed


@pytest.mark.timeout(120)
def test_records_acknowledged_just_before_a_crash_are_readable_at_once(
    broker: ManagedBroker,
) -> None:
    """The high watermark is checkpointed every few seconds; after a crash the
    leader must raise it to the log end, or the last acknowledged records stay
    invisible until the next produce."""
    ConfluentClient().create_topic(broker.bootstrap, TOPIC, 1)
    producer = Producer(ConfluentClient.producer_config(broker.bootstrap, idempotent=True))
    report = DeliveryReport()
    for record in make_records(500, 1):
        confluent_produce(producer, TOPIC, record, report)
    wait_for_acks(producer, report, 500, timeout=30)
    assert not report.errors
    broker.kill()  # well within the 5 s high-watermark checkpoint interval
    broker.start()
    assert confluent_end_offsets(broker.bootstrap, TOPIC, 1) == {0: 500}
