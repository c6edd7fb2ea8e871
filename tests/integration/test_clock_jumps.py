"""A live broker whose wall clock jumps back two hours and forward again while its
segments roll and retention runs (issue 18): nothing deleted early, every index sound.

The broker runs under libfaketime (Debian's ``libfaketime``, installed by
``scripts/install-test-deps``), which offsets its wall clock (``CLOCK_REALTIME``: record
timestamps, retention, segment age) by what a file says, re-read every second; its
monotonic clock (timeouts, the event loop) keeps running untouched, as on a machine
whose NTP daemon steps the clock. The clients run on the real clock.

What Kafka does, and so what is checked: with the broker two hours behind, a producer's
``CreateTime`` records are two hours in the broker's future, beyond
``message.timestamp.after.max.ms`` (1 h), and are refused with INVALID_TIMESTAMP;
``LogAppendTime`` records are stamped with the broker's clock, back jump included.
Retention deletes a segment only once its largest timestamp is ``retention.ms`` behind
the broker's clock, so no jump back deletes anything, and a jump forward deletes only
what is then truly old. After a kill -9 the broker recovers every segment, and Kafka's
own DumpLogSegments finds every index sane.
"""

from __future__ import annotations

import glob
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from tests.helpers.brokers import KpyBroker
from tests.helpers.clients import ConfluentClient
from tests.helpers.dump_log import dump_log_segments, problem_lines, segment_files
from tests.helpers.log_life import consume_all, create_topic, wait_until, watermarks

LIBFAKETIME = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
HOUR_MS = 3_600_000
TOPICS = {
    "append-time": {"message.timestamp.type": "LogAppendTime"},
    "create-time": {"message.timestamp.type": "CreateTime"},
}
SMALL_SEGMENTS = {"segment.bytes": 1024, "retention.ms": HOUR_MS}
#: Retention checks every 200 ms; faketime re-reads its file every second.
SETTLE_S = 2.5

pytestmark = pytest.mark.skipif(not LIBFAKETIME, reason="libfaketime is not installed")


class FakeTimeBroker(KpyBroker):
    """A kpybroker whose wall clock is offset by the libfaketime spec in ``clock_file``."""

    def __init__(self, base_dir: Path, clock_file: Path) -> None:
        super().__init__(base_dir, {"log.retention.check.interval.ms": 200})
        self.clock_file = clock_file
        self.set_offset("+0")

    def set_offset(self, spec: str) -> None:
        """``+0``, ``-2h``, ``+30m``: the broker's clock relative to the real one."""
        self.clock_file.write_text(spec + "\n")

    def env(self) -> dict[str, str]:
        env = super().env()
        env.update(
            LD_PRELOAD=LIBFAKETIME[0],
            FAKETIME_TIMESTAMP_FILE=str(self.clock_file),
            FAKETIME_CACHE_DURATION="1",
            FAKETIME_DONT_FAKE_MONOTONIC="1",
        )
        return env


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[FakeTimeBroker]:
    broker = FakeTimeBroker(tmp_path / "broker", tmp_path / "faketime")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def produce(bootstrap: str, topic: str, count: int, first: int) -> list[KafkaError]:
    """``count`` records (values ``first``...), in small batches; the delivery errors."""
    producer = Producer(
        ConfluentClient.producer_config(bootstrap, **{"batch.size": 512, "retries": 0})
    )
    errors: list[KafkaError] = []
    for i in range(first, first + count):
        producer.produce(
            topic,
            value=b"value-%04d" % i,
            partition=0,
            on_delivery=lambda err, _msg: err and errors.append(err),
        )
    assert producer.flush(60) == 0
    return errors


def jump(broker: FakeTimeBroker, spec: str) -> None:
    broker.set_offset(spec)
    time.sleep(SETTLE_S)  # faketime has read it, and retention has run a few times since


def timestamps(bootstrap: str, topic: str) -> list[int]:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        stamps: list[int] = []
        while consumer.position(tp) < end:
            for batch in consumer.poll(timeout_ms=1000).values():
                stamps += [r.timestamp for r in batch]
        return stamps
    finally:
        consumer.close()


def test_clock_jumps_delete_nothing_early_and_leave_every_index_sound(
    broker: FakeTimeBroker, kafka_lib: Path
) -> None:
    bootstrap = broker.bootstrap
    for topic, config in TOPICS.items():
        create_topic(bootstrap, topic, {**SMALL_SEGMENTS, **config})
        assert produce(bootstrap, topic, 60, 0) == []

    before_jump = time.time() * 1000
    jump(broker, "-2h")
    assert produce(bootstrap, "append-time", 60, 60) == []
    refused = produce(bootstrap, "create-time", 5, 60)
    assert {e.code() for e in refused} == {KafkaError.INVALID_TIMESTAMP}, refused
    for topic in TOPICS:
        assert watermarks(bootstrap, topic)[0] == 0, f"{topic}: retention ran on a clock gone back"
    stamps = timestamps(bootstrap, "append-time")
    assert max(stamps[60:]) < before_jump - HOUR_MS  # stamped with the broker's clock, 2 h back

    jump(broker, "+30m")
    for topic in TOPICS:
        assert produce(bootstrap, topic, 60, 120) == []
        assert watermarks(bootstrap, topic)[0] == 0, f"{topic}: deleted records not an hour old"

    broker.kill()
    broker.start()  # recovers every segment of a killed broker, indexes included
    assert [v for _, (_, v) in consume_all(bootstrap, "create-time")] == [
        b"value-%04d" % i for i in [*range(60), *range(120, 180)]
    ]
    assert len(consume_all(bootstrap, "append-time")) == 180

    # Forward past the hour: the first segments are old now by any clock; the append-time
    # records stamped two hours back go first, the newest stay.
    jump(broker, "+90m")
    for topic in TOPICS:
        wait_until(lambda topic=topic: watermarks(bootstrap, topic)[0] > 0, f"{topic} retention")
    assert produce(bootstrap, "create-time", 10, 180) == []
    broker.stop()

    files = segment_files(broker.log_dir)
    result = dump_log_segments(kafka_lib, files, "--deep-iteration", "--verify-index-only")
    assert result.returncode == 0 and problem_lines(result) == [], result.describe()
    indexes = [p for p in files if p.suffix in (".index", ".timeindex")]
    result = dump_log_segments(kafka_lib, indexes, "--index-sanity-check")
    assert result.returncode == 0 and problem_lines(result) == [], result.describe()
