"""Kafka's own ``kafka-dump-log.sh`` (``DumpLogSegments``) reads kpybroker's files.

A real broker takes a mixed workload from real clients: batches in every codec,
an idempotent producer, a transactional producer with a committed and an
aborted transaction, a compacted topic the cleaner has really compacted (with
tombstones), DeleteRecords, and enough records to roll segments. After it
stops, DumpLogSegments reads every ``.log`` (deep iteration), ``.index`` and
``.timeindex`` (verified against the log, and sanity-checked as Kafka does at
start), ``.snapshot`` and ``.txnindex`` file of its log directory without a
complaint, and what it prints is what the workload sent; its decoders read the
group and transaction coordinators' records. A broker killed with SIGKILL
leaves files it reads as well.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.helpers.brokers import ManagedBroker, launcher
from tests.helpers.clients import CODECS, ConfluentClient
from tests.helpers.dump_log import (
    DumpedRecord,
    batches_of,
    dump_log_segments,
    dumped_sections,
    fields_of,
    problem_lines,
    records_of,
    segment_files,
)
from tests.helpers.log_life import (
    FAST_LOG_TASKS,
    create_topic,
    produce_each,
    wait_until,
)

pytestmark = pytest.mark.timeout(240)

PER_CODEC = 200
#: Small segments, and an index entry every few batches, so that every file has content.
SMALL_SEGMENTS = {"segment.bytes": 4096, "index.interval.bytes": 256}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": 1024,
    "index.interval.bytes": 128,
    "min.cleanable.dirty.ratio": 0.01,
    "delete.retention.ms": 3_600_000,
}
BROKER = {
    **FAST_LOG_TASKS,
    "offsets.topic.num.partitions": 2,
    "transaction.state.log.num.partitions": 2,
}


def produce(bootstrap: str, topic: str, count: int, **config: object) -> None:
    """``count`` records with keys, values and a header, one partition, acks=all, in
    batches that fit ``SMALL_SEGMENTS``."""
    producer = Producer(
        ConfluentClient.producer_config(bootstrap, **{"batch.size": 2048, **config})
    )
    failures: list[object] = []
    for i in range(count):
        producer.produce(
            topic,
            key=b"key-%d" % i,
            value=b"value-%d" % i,
            headers=[("h", b"%d" % i)],
            partition=0,
            on_delivery=lambda err, _msg: err and failures.append(err),
        )
    assert producer.flush(60) == 0 and not failures, failures


def transact(bootstrap: str, topic: str) -> None:
    """Three committed records, two aborted ones, then one more committed."""
    producer = Producer(
        ConfluentClient.producer_config(bootstrap, "none", True, **{"transactional.id": "dump-txn"})
    )
    producer.init_transactions(30)
    for values, commit in (([b"c0", b"c1", b"c2"], True), ([b"a0", b"a1"], False), ([b"c3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, key=value, value=value, partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def cleaner_checkpoint(broker: ManagedBroker) -> str:
    """The cleaner's checkpoint file, empty before its first round."""
    path = broker.log_dir / "cleaner-offset-checkpoint"
    return path.read_text() if path.exists() else ""


@pytest.fixture(scope="module")
def stopped_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedBroker]:
    """A broker that took the whole workload, then stopped cleanly."""
    with launcher(tmp_path_factory.mktemp("dump-log")) as brokers:
        broker = brokers(BROKER)
        bootstrap = broker.bootstrap
        create_topic(bootstrap, "codecs", SMALL_SEGMENTS)
        for codec in CODECS:
            produce(bootstrap, "codecs", PER_CODEC, **{"compression.type": codec})
        create_topic(bootstrap, "idempotent", SMALL_SEGMENTS)
        produce(bootstrap, "idempotent", 300, **{"enable.idempotence": True, "linger.ms": 0})
        create_topic(bootstrap, "transactions", {})
        transact(bootstrap, "transactions")
        create_topic(bootstrap, "compacted", COMPACTED)
        pairs = [(b"k%d" % (i % 5), b"v%03d" % i) for i in range(60)] + [(b"k0", None)]
        produce_each(bootstrap, "compacted", pairs + [(b"k9", b"v%03d" % i) for i in range(30)])
        wait_until(
            lambda: "compacted 0 " in cleaner_checkpoint(broker),
            "the cleaner to compact 'compacted'",
            timeout=60,
        )
        create_topic(bootstrap, "deleted", SMALL_SEGMENTS)
        produce(bootstrap, "deleted", 300, **{"linger.ms": 0})
        admin = AdminClient({"bootstrap.servers": bootstrap})
        [future] = admin.delete_records([TopicPartition("deleted", 0, 250)]).values()
        assert future.result(timeout=30).low_watermark == 250
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dump-group"})
        consumer.commit(offsets=[TopicPartition("codecs", 0, 123)], asynchronous=False)
        consumer.close()
        assert broker.stop() == 0
        yield broker


@pytest.fixture(scope="module")
def log_dump(stopped_broker: ManagedBroker, kafka_lib: Path) -> dict[Path, list[str]]:
    """One DumpLogSegments run over every file; its output checked for complaints."""
    files = segment_files(stopped_broker.log_dir)
    result = dump_log_segments(
        kafka_lib, files, "--deep-iteration", "--print-data-log", "--verify-index-only"
    )
    assert result.returncode == 0, result.describe()
    # Compaction leaves holes in the offsets of a compacted log, in Kafka's files too.
    compacted = re.compile(r"/compacted-0/")
    assert problem_lines(result, compacted) == [], result.describe()
    sections = dumped_sections(result.stdout)
    assert set(sections) == set(files)
    return sections


def sections_of(dump: dict[Path, list[str]], partition: str, suffix: str) -> list[list[str]]:
    """The sections of one partition's files with ``suffix``, in offset order."""
    return [
        lines
        for path, lines in sorted(dump.items())
        if path.parent.name == partition and path.name.endswith(suffix)
    ]


def log_records(dump: dict[Path, list[str]], partition: str) -> list:
    return [r for lines in sections_of(dump, partition, ".log") for r in records_of(lines)]


def test_indexes_pass_kafkas_sanity_check(stopped_broker: ManagedBroker, kafka_lib: Path) -> None:
    files = segment_files(stopped_broker.log_dir, (".index", ".timeindex"))
    result = dump_log_segments(kafka_lib, files, "--index-sanity-check")
    assert result.returncode == 0 and problem_lines(result) == [], result.describe()
    verdicts = {path: lines for path, lines in dumped_sections(result.stdout).items()}
    passed = [path for path, lines in verdicts.items() if lines == [f"{path} passed sanity check."]]
    empty = [path for path, lines in verdicts.items() if lines == [f"{path} is empty."]]
    assert sorted(passed + empty) == sorted(files)
    assert len(passed) > len(files) / 2  # most segments have index entries


def test_every_codec_reads_back_record_for_record(log_dump) -> None:
    records = log_records(log_dump, "codecs-0")
    assert [r.offset for r in records] == list(range(len(CODECS) * PER_CODEC))
    keys = [r.key for r in records]
    assert keys == [f"key-{i}" for _ in CODECS for i in range(PER_CODEC)]
    assert records[-1].payload == f"value-{PER_CODEC - 1}"
    codecs = {
        b["compresscodec"]
        for lines in sections_of(log_dump, "codecs-0", ".log")
        for b in batches_of(lines)
    }
    assert codecs == set(CODECS)
    assert len(sections_of(log_dump, "codecs-0", ".log")) > 1  # segments rolled


def test_producer_snapshots_hold_the_idempotent_producer(log_dump) -> None:
    batches = [
        b for lines in sections_of(log_dump, "idempotent-0", ".log") for b in batches_of(lines)
    ]
    [producer_id] = {b["producerId"] for b in batches}
    assert int(producer_id) >= 0
    assert [int(b["lastSequence"]) for b in batches][-1] == 299
    snapshots = sections_of(log_dump, "idempotent-0", ".snapshot")
    assert len(snapshots) > 1  # one per rolled segment, and one at the clean shutdown's log end
    [entry] = fields_of(snapshots[-1])
    assert (entry["producerId"], entry["lastSequence"], entry["lastOffset"]) == (
        producer_id,
        "299",
        "299",
    )


def test_transaction_index_holds_the_aborted_transaction(log_dump) -> None:
    records = log_records(log_dump, "transactions-0")
    data = [(r.offset, r.key) for r in records if not r.control]
    markers = [r.offset for r in records if r.control]
    assert data == [(0, "c0"), (1, "c1"), (2, "c2"), (4, "a0"), (5, "a1"), (7, "c3")]
    assert markers == [3, 6, 8]
    [[aborted]] = [
        fields_of(lines) for lines in sections_of(log_dump, "transactions-0", ".txnindex")
    ]
    batches = batches_of(sections_of(log_dump, "transactions-0", ".log")[0])
    assert (aborted["producerId"], aborted["firstOffset"], aborted["lastOffset"]) == (
        batches[0]["producerId"],
        "4",
        "6",
    )


def test_compacted_log_keeps_the_newest_of_each_key(log_dump) -> None:
    records = log_records(log_dump, "compacted-0")
    assert len(records) < 91  # the cleaner removed records
    newest: dict[str | None, DumpedRecord] = {}
    for record in records:
        newest[record.key] = record
    assert {k: r.payload for k, r in newest.items() if k != "k9"} == {
        "k1": "v056",
        "k2": "v057",
        "k3": "v058",
        "k4": "v059",
        "k0": None,  # the tombstone, within delete.retention.ms
    }


def test_deleted_records_are_gone_from_the_files(log_dump) -> None:
    records = log_records(log_dump, "deleted-0")
    assert records[-1].offset == 299
    assert records[0].offset <= 250  # whole segments below the log start offset are deleted
    assert len(sections_of(log_dump, "deleted-0", ".log")) < len(
        sections_of(log_dump, "codecs-0", ".log")
    )


@pytest.mark.parametrize(
    ("topic", "decoder", "expected"),
    [
        ("__consumer_offsets", "--offsets-decoder", '"group":"dump-group"'),
        ("__transaction_state", "--transaction-log-decoder", '"transactionalId":"dump-txn"'),
    ],
)
def test_internal_topics_decode_with_kafkas_decoders(
    stopped_broker: ManagedBroker, kafka_lib: Path, topic: str, decoder: str, expected: str
) -> None:
    """The group and transaction coordinators' records, in Kafka's schemas."""
    logs = [
        p
        for p in segment_files(stopped_broker.log_dir, [".log"])
        if p.parent.name.startswith(topic)
    ]
    result = dump_log_segments(kafka_lib, logs, decoder)
    assert result.returncode == 0 and problem_lines(result) == [], result.describe()
    assert expected in result.stdout, result.describe()


def test_files_left_by_a_kill_9_read_as_well(tmp_path: Path, kafka_lib: Path) -> None:
    """A crash leaves the active segment's files as they were at the last write:
    Kafka's tool still reads them all and finds nothing wrong."""
    with launcher(tmp_path) as brokers:
        broker = brokers(BROKER)
        create_topic(broker.bootstrap, "crashed", SMALL_SEGMENTS)
        produce(
            broker.bootstrap,
            "crashed",
            300,
            **{"enable.idempotence": True, "compression.type": "lz4"},
        )
        broker.kill()
    files = segment_files(broker.log_dir)
    assert len([p for p in files if p.name.endswith(".log")]) > 1
    result = dump_log_segments(kafka_lib, files, "--deep-iteration", "--verify-index-only")
    assert result.returncode == 0 and problem_lines(result) == [], result.describe()
    indexes = [p for p in files if p.suffix in (".index", ".timeindex")]
    result = dump_log_segments(kafka_lib, indexes, "--index-sanity-check")
    assert result.returncode == 0 and problem_lines(result) == [], result.describe()
    assert result.stdout.count("passed sanity check.") >= len(indexes) - 1, result.describe()
