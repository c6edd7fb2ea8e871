"""Migrating from Apache Kafka: partition directories written by Kafka 4.4, adopted by kpybroker.

The procedure of docs/migrating-from-kafka.md, step by step: Kafka takes records
(several partitions, codecs, headers, explicit timestamps, an idempotent
producer, several segments per partition) and a group's committed offsets, and
stops; a fresh kpybroker creates the same topic (and its ``__consumer_offsets``
with Kafka's partition count) and stops; Kafka's partition directories replace
kpybroker's, but for kpybroker's ``partition.metadata`` (the topic ID must be
the cluster's: a log recorded with another one is set aside as a stray, by
Kafka and by kpybroker). Restarted, kpybroker serves every record at its offset
with its key, value, headers and timestamp, the log end offsets Kafka had, the
idempotent producer's state (retry detection, next sequence), the group's
committed offsets, and hands new producers IDs above the adopted ones.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kpybroker.log.names import PARTITION_METADATA
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.records import BatchHeader, NewRecord, build_batch, iter_batches
from tests.helpers.brokers import KpyBroker, ManagedBroker
from tests.helpers.clients import ConfluentClient
from tests.helpers.dump_log import dump_log_segments, problem_lines, segment_files
from tests.helpers.reference_kafka import SINGLE_NODE_DEFAULTS, ReferenceKafka
from tests.helpers.wire import RawConnection, produce_error, produce_request

pytestmark = pytest.mark.timeout(300)

TOPIC = "migrated"
PARTITIONS = 3
#: segment.ms below the gap between rounds' timestamps: each round starts a segment.
TOPIC_CONFIG = {"segment.ms": "500", "retention.ms": "-1"}
ROUNDS = 4
PER_ROUND = 25
#: (partition, codec, idempotent) of each partition's producer.
PRODUCERS = ((0, "none", False), (1, "zstd", False), (2, "lz4", True))
FIRST_TIMESTAMP = int(time.time() * 1000) - 3_600_000
GROUP = "migrated-group"
GROUP_OFFSETS = {0: 10, 1: 20, 2: 30}
#: __consumer_offsets' partition count of the reference Kafka: a group's partition is
#: hash(group) % count, so kpybroker's offsets topic must have as many.
OFFSETS_PARTITIONS = int(SINGLE_NODE_DEFAULTS["offsets.topic.num.partitions"])


class Sent(NamedTuple):
    partition: int
    offset: int
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp: int


def produce_rounds(bootstrap: str) -> list[Sent]:
    """Each partition's records, in rounds whose timestamps lie a second apart."""
    sent: list[Sent] = []
    for partition, codec, idempotent in PRODUCERS:
        config = ConfluentClient.producer_config(bootstrap, codec, idempotent)
        producer = Producer(config)
        for round_ in range(ROUNDS):
            for i in range(PER_ROUND):
                n = round_ * PER_ROUND + i
                key, value = b"k%d-%d" % (partition, n), b"v%d-%d" % (partition, n) * 5
                headers = [("n", b"%d" % n), ("p", b"%d" % partition)]
                timestamp = FIRST_TIMESTAMP + round_ * 1000 + i

                def delivered(err, msg, args=(key, value, headers, timestamp)) -> None:
                    assert err is None, err
                    sent.append(Sent(msg.partition(), msg.offset(), *args))

                producer.produce(
                    TOPIC,
                    key=key,
                    value=value,
                    headers=headers,
                    partition=partition,
                    timestamp=timestamp,
                    on_delivery=delivered,
                )
            assert producer.flush(60) == 0
    return sorted(sent)


def log_end_offsets(bootstrap: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    specs = {TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    return {tp.partition: f.result(30).offset for tp, f in admin.list_offsets(specs).items()}


def consume_everything(bootstrap: str, count: int) -> list[Sent]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "adoption-check", "enable.auto.commit": False}
    )
    got: list[Sent] = []
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=count, timeout=1):
                assert msg.error() is None, msg.error()
                got.append(
                    Sent(
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        list(msg.headers() or []),
                        msg.timestamp()[1],
                    )
                )
    finally:
        consumer.close()
    return sorted(got)


def adopt_partition_directories(kafka_dir: Path, kpybroker_dir: Path, topic: str) -> None:
    """The migration step: each of Kafka's ``<topic>-<n>`` directories replaces kpybroker's,
    whose ``partition.metadata`` (the topic id of kpybroker's metadata) stays."""
    for source in sorted(kafka_dir.glob(f"{topic}-*")):
        target = kpybroker_dir / source.name
        assert (target / PARTITION_METADATA).exists(), f"create {topic} in kpybroker first"
        for old in target.iterdir():
            if old.name != PARTITION_METADATA:
                old.unlink()
        for new in source.iterdir():
            if new.name != PARTITION_METADATA:
                shutil.copy2(new, target / new.name)


def last_batch(partition_dir: Path) -> BatchHeader:
    """The header of the newest batch of a partition directory."""
    newest = max(partition_dir.glob("*.log"))
    return [header for _, header in iter_batches(newest.read_bytes())][-1]


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` of TOPIC for ``group`` (a consumer that never joins it)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(TOPIC, p, offset) for p, offset in offsets.items()]
        consumer.commit(offsets=tps, asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=30)}
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def kafka_written(
    tmp_path_factory: pytest.TempPathFactory, kafka_lib: Path
) -> Iterator[tuple[ReferenceKafka, list[Sent]]]:
    """A stopped Apache Kafka whose log directory holds TOPIC and GROUP's committed
    offsets, and what was sent to it."""
    kafka = ReferenceKafka(tmp_path_factory.mktemp("kafka"), lib=kafka_lib)
    kafka.start()
    try:
        ConfluentClient().create_topic(kafka.bootstrap, TOPIC, PARTITIONS, TOPIC_CONFIG)
        kafka.restart()  # a restart moves the leader epochs past the 0 of a new topic
        sent = produce_rounds(kafka.bootstrap)
        assert log_end_offsets(kafka.bootstrap) == {p: ROUNDS * PER_ROUND for p in range(3)}
        commit(kafka.bootstrap, GROUP, GROUP_OFFSETS)
    finally:
        assert kafka.stop() in kafka.clean_exit_codes
    yield kafka, sent


@pytest.fixture
def kpybroker_with_topic(tmp_path: Path) -> Iterator[ManagedBroker]:
    """A stopped kpybroker that created TOPIC (and its offsets topic) as Kafka had them."""
    broker = KpyBroker(tmp_path / "kpybroker", {"offsets.topic.num.partitions": OFFSETS_PARTITIONS})
    broker.start()
    try:
        ConfluentClient().create_topic(broker.bootstrap, TOPIC, PARTITIONS, TOPIC_CONFIG)
        commit(broker.bootstrap, "kpybroker-group", {0: 1})  # creates __consumer_offsets
        assert broker.stop() == 0
        yield broker
    finally:
        broker.stop()


@pytest.mark.parametrize("recover", [False, True], ids=["trusted", "recovered"])
def test_kpybroker_adopts_kafka_partition_directories(
    kafka_written: tuple[ReferenceKafka, list[Sent]],
    kpybroker_with_topic: ManagedBroker,
    kafka_lib: Path,
    recover: bool,
) -> None:
    """As copied, or (without kpybroker's clean-shutdown marker) checked batch by batch
    with every index rebuilt."""
    kafka, sent = kafka_written
    broker = kpybroker_with_topic
    for partition in range(PARTITIONS):
        assert len(list((kafka.log_dir / f"{TOPIC}-{partition}").glob("*.log"))) >= ROUNDS
    adopt_partition_directories(kafka.log_dir, broker.log_dir, TOPIC)
    adopt_partition_directories(kafka.log_dir, broker.log_dir, "__consumer_offsets")
    if recover:
        (broker.log_dir / ".kafka_cleanshutdown").unlink()
    broker.start()
    assert ("since no clean shutdown file was found" in broker.log_text()) == recover
    try:
        assert consume_everything(broker.bootstrap, len(sent)) == sent
        assert log_end_offsets(broker.bootstrap) == {p: ROUNDS * PER_ROUND for p in range(3)}

        # The idempotent producer's state came along: a retry of its last batch is
        # known, a gap in its sequence is refused, and its next sequence appends.
        last = last_batch(broker.log_dir / f"{TOPIC}-2")
        assert last.producer_id >= 0

        def batch(base_sequence: int, count: int) -> bytes:
            return build_batch(
                [NewRecord(b"k", b"v", (), None)] * count,
                producer_id=last.producer_id,
                producer_epoch=last.producer_epoch,
                base_sequence=base_sequence,
            )

        last_sequence = last.base_sequence + last.last_offset_delta
        end = ROUNDS * PER_ROUND
        with RawConnection(broker.bootstrap) as conn:
            retry = batch(last.base_sequence, last.last_offset_delta + 1)
            assert produce_error(conn.request(produce_request(TOPIC, 2, retry))) == (
                ErrorCode.NONE,
                last.base_offset,
            )
            gap = batch(last_sequence + 2, 1)
            code, _ = produce_error(conn.request(produce_request(TOPIC, 2, gap)))
            assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            following = batch(last_sequence + 1, 1)
            assert produce_error(conn.request(produce_request(TOPIC, 2, following))) == (
                ErrorCode.NONE,
                end,
            )
        # A new idempotent producer gets an ID above those of the adopted logs.
        offsets: list[int] = []
        producer = Producer(ConfluentClient.producer_config(broker.bootstrap, "none", True))
        producer.produce(
            TOPIC,
            b"new",
            partition=2,
            on_delivery=lambda err, msg: offsets.append(err or msg.offset()),
        )
        assert producer.flush(30) == 0 and offsets == [end + 1]
        assert committed(broker.bootstrap, GROUP) == GROUP_OFFSETS
    finally:
        broker.stop()
    # Kafka's segments followed by kpybroker's appends: one log to Kafka's own tool.
    files = [path for path in segment_files(broker.log_dir) if path.parent.name.startswith(TOPIC)]
    result = dump_log_segments(kafka_lib, files, "--deep-iteration", "--verify-index-only")
    assert result.returncode == 0 and problem_lines(result) == [], result.describe()
    # The tool's first-record quirk (see dump_log) shows on Kafka's own segments too.
    kafka_segment = sorted((kafka.log_dir / f"{TOPIC}-0").glob("*.log"))[1]
    copied = broker.log_dir / kafka_segment.parent.name / kafka_segment.name
    assert f"Non-consecutive offsets in {copied}\n  -1 is followed by" in result.stderr


def test_a_directory_with_kafkas_topic_id_is_set_aside_intact(
    kafka_written: tuple[ReferenceKafka, list[Sent]], kpybroker_with_topic: ManagedBroker
) -> None:
    """Kafka's ``partition.metadata`` copied too: the topic ID is not the cluster's, so
    kpybroker keeps the files in a ``-stray`` directory, as Kafka would, and serves an
    empty partition; nothing is lost for a second try."""
    kafka, _ = kafka_written
    broker = kpybroker_with_topic
    source = kafka.log_dir / f"{TOPIC}-0"
    target = broker.log_dir / source.name
    shutil.rmtree(target)
    shutil.copytree(source, target)
    broker.start()
    try:
        assert log_end_offsets(broker.bootstrap)[0] == 0
        [stray] = broker.log_dir.glob(f"{TOPIC}-0.*-stray")
        assert sorted(p.name for p in stray.glob("*.log")) == sorted(
            p.name for p in source.glob("*.log")
        )
        assert (stray / PARTITION_METADATA).read_text() == (source / PARTITION_METADATA).read_text()
    finally:
        broker.stop()
