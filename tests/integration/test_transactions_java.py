"""Transactions through Apache Kafka's own Java tools, with their output read as a user would.

- kafka-producer-perf-test (``ProducerPerformance``) with ``--transactional-id``
  and ``--transaction-duration-ms 100`` commits many short transactions of the
  Java client; the console consumer with ``--isolation-level read_committed``
  then reads every record. The tool only ever commits: aborts are covered with
  librdkafka and kafka-python in ``test_transactions_clients.py``.
- kafka-transactions.sh (``TransactionsCommand``): ``list`` and ``describe``
  show an id's producer id, epoch, state and partitions; ``describe-producers``
  shows the first offset of a transaction left open by librdkafka, and none
  once it commits; ``list --duration-filter`` keeps the ids whose transaction
  started longer ago than the filter, whatever their state, as Kafka does
  (kpybroker keeps only open ones: expected to fail there, strictly).
- ``find-hanging`` and ``abort``: a transactional batch written with a real
  producer id (InitProducerId) to a partition the coordinator never added to
  the transaction is a hanging transaction; it holds read_committed readers at
  its first offset until ``abort --start-offset`` sends the abort marker
  (Admin.abortTransaction: WriteTxnMarkers to the partition leader with the
  coordinator epoch DescribeProducers reported, 0 when there is none).

Both brokers check a transactional write with the coordinator first (KIP-890
verification, on by default since Kafka 3.6) and refuse that construction
(``test_transaction_versions.py``); the hanging test turns the check off with
``transaction.partition.verification.enable=false``. Every test passes
against Apache Kafka too (``KPYBROKER_TEST_TARGET=kafka``).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kpybroker.cluster.broker_client import BrokerConnection, PeerAddress
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kpybroker.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from kpybroker.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kpybroker.protocol.records import build_batch
from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.clients import confluent_end_offsets
from tests.helpers.java import CONSOLE_CONSUMER
from tests.helpers.process import ToolResult, ToolRunner

pytestmark = pytest.mark.timeout(240)

PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"

#: Errors the coordinator answers while it loads or finishes a previous transaction.
COORDINATOR_RETRIABLE = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)
FIND_COORDINATOR_VERSION = 3  # the last with a single key
INIT_PRODUCER_ID_VERSION = 4
PRODUCE_VERSION = 11  # 12 would let Kafka add the partition itself (KIP-890, transaction v2)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def transactions(java_tool: ToolRunner, broker: ManagedBroker, *args: str) -> ToolResult:
    """``kafka-transactions.sh --bootstrap-server <broker> args...``, which must succeed."""
    return java_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", broker.bootstrap, *args).check()


def table(result: ToolResult) -> list[dict[str, str]]:
    """The rows of a table printed by ToolsUtils.prettyPrintTable, keyed by header.

    Each cell is padded to its column's width and followed by a tab.
    """
    lines = [line for line in result.stdout.splitlines() if "\t" in line]
    assert lines, result.describe()
    header, *rows = ([cell.strip() for cell in line.split("\t")[:-1]] for line in lines)
    assert all(len(row) == len(header) for row in rows), result.describe()
    return [dict(zip(header, row, strict=True)) for row in rows]


def only_row(result: ToolResult, **wanted: str) -> dict[str, str]:
    """The single row of ``result``'s table whose cells have the ``wanted`` values."""
    rows = [row for row in table(result) if all(row[k] == v for k, v in wanted.items())]
    assert len(rows) == 1, result.describe()
    return rows[0]


def consume(
    java_tool: ToolRunner, broker: ManagedBroker, topic: str, count: int, *extra: str
) -> list[str]:
    """The lines of the console consumer reading ``count`` committed records from the start."""
    result = java_tool(
        CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--from-beginning", "--isolation-level", "read_committed",
        "--max-messages", str(count), "--timeout-ms", "60000", *extra,
    ).check()  # fmt: skip
    assert f"Processed a total of {count} messages" in result.stderr, result.describe()
    lines = result.stdout.splitlines()
    assert len(lines) == count, result.describe()
    return lines


def test_producer_performance_transactions_read_committed(
    broker: ManagedBroker, java_tool: ToolRunner
) -> None:
    """5,000 records in transactions of at most 100 ms, all read back by read_committed."""
    topic, transactional_id, count, size, partitions = "perf-txn", "perf-txn-id", 5000, 100, 3
    create_topic(broker.bootstrap, topic, partitions)
    started = time.monotonic()
    produced = java_tool(
        PRODUCER_PERFORMANCE, "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--num-records", str(count), "--record-size", str(size), "--throughput", "5000",
        "--transactional-id", transactional_id, "--transaction-duration-ms", "100",
        "--command-property", "acks=all", "linger.ms=5",
    ).check()  # fmt: skip
    elapsed = time.monotonic() - started
    summary = re.search(rf"^{count} records sent, ([\d.]+) records/sec", produced.stdout, re.M)
    assert summary is not None, produced.describe()
    print(f"ProducerPerformance: {summary.group(0)} (tool ran {elapsed:.1f} s)")

    lines = consume(java_tool, broker, topic, count)
    assert all(len(line) == size and line.isalpha() for line in lines), lines[:3]

    # Each transaction ended with a commit marker in each partition it wrote to: the log
    # holds one offset more per marker than records, and there were several transactions.
    markers = sum(confluent_end_offsets(broker.bootstrap, topic, partitions).values()) - count
    assert markers > partitions, f"{markers} markers for {count} records"
    print(f"{markers} commit markers")

    listed = only_row(transactions(java_tool, broker, "list"), TransactionalId=transactional_id)
    assert listed["TransactionState"] == "CompleteCommit", listed
    described = only_row(
        transactions(java_tool, broker, "describe", "--transactional-id", transactional_id)
    )
    assert described["ProducerId"] == listed["ProducerId"]
    assert described["TransactionState"] == "CompleteCommit"
    assert described["TopicPartitions"] == "", described


def test_describe_an_open_transaction(broker: ManagedBroker, java_tool: ToolRunner) -> None:
    """list, describe and describe-producers while librdkafka's transaction is open, and after."""
    topic, transactional_id = f"open-{uuid.uuid4().hex[:8]}", "open-txn-id"
    create_topic(broker.bootstrap, topic, 2)
    plain = Producer({"bootstrap.servers": broker.bootstrap})  # not idempotent: no producer id
    for i in range(3):
        plain.produce(topic, value=f"plain-{i}", partition=0)
    assert plain.flush(30) == 0
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 45000,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"in-txn-{i}", partition=0)
    producer.produce(topic, value="in-txn-p1", partition=1)
    assert producer.flush(30) == 0

    described = only_row(
        transactions(java_tool, broker, "describe", "--transactional-id", transactional_id)
    )
    assert described["TransactionalId"] == transactional_id
    assert described["ProducerEpoch"] == "0" and int(described["ProducerId"]) >= 0
    assert described["TransactionState"] == "Ongoing"
    assert described["TransactionTimeoutMs"] == "45000"
    assert int(described["CurrentTransactionStartTimeMs"]) > 0, described
    assert int(described["TransactionDurationMs"]) >= 0, described
    assert sorted(described["TopicPartitions"].split(",")) == [f"{topic}-0", f"{topic}-1"]
    producer_id = described["ProducerId"]

    listed = only_row(transactions(java_tool, broker, "list"), TransactionalId=transactional_id)
    assert listed == {
        "TransactionalId": transactional_id,
        "Coordinator": described["CoordinatorId"],
        "ProducerId": producer_id,
        "TransactionState": "Ongoing",
    }

    producers_args = ("describe-producers", "--topic", topic, "--partition", "0")
    state = only_row(transactions(java_tool, broker, *producers_args))
    assert state["ProducerId"] == producer_id and state["ProducerEpoch"] == "0"
    assert state["LastSequence"] == "4"  # five records, sequences 0-4
    assert state["CurrentTransactionStartOffset"] == "3"  # after the three plain records
    assert state["LatestCoordinatorEpoch"] == "-1"  # no marker written yet
    assert int(state["LastTimestamp"]) > 0

    producer.commit_transaction(30)
    state = only_row(transactions(java_tool, broker, *producers_args))
    assert state["ProducerId"] == producer_id
    assert state["CurrentTransactionStartOffset"] == "None", state
    assert int(state["LatestCoordinatorEpoch"]) >= 0, state
    committed = only_row(
        transactions(java_tool, broker, "describe", "--transactional-id", transactional_id)
    )
    assert committed["TransactionState"] == "CompleteCommit"
    assert committed["TopicPartitions"] == "", committed


def test_list_duration_filter(broker: ManagedBroker, java_tool: ToolRunner) -> None:
    """list --duration-filter MS: the ids whose transaction started more than MS ago.

    As Kafka's TransactionStateManager.listTransactionStates: whatever the state (a
    committed transaction counts from its start too), and an id with no transaction
    since InitProducerId, whose start time is -1, passes every filter.
    """
    topic = "duration-filter"
    create_topic(broker.bootstrap, topic, 1)
    producers = {
        tid: Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
        for tid in ("committed", "empty", "open")
    }
    for producer in producers.values():
        producer.init_transactions(30)
    for tid in ("committed", "open"):
        producers[tid].begin_transaction()
        producers[tid].produce(topic, value=tid)
        assert producers[tid].flush(30) == 0
    producers["committed"].commit_transaction(30)
    time.sleep(1.5)

    def listed(duration_ms: int) -> dict[str, str]:
        result = transactions(java_tool, broker, "list", "--duration-filter", str(duration_ms))
        return {row["TransactionalId"]: row["TransactionState"] for row in table(result)}

    assert listed(1000) == {"committed": "CompleteCommit", "empty": "Empty", "open": "Ongoing"}
    assert listed(600_000) == {"empty": "Empty"}


async def init_producer_id(
    connection: BrokerConnection, transactional_id: str
) -> InitProducerIdResponse:
    """InitProducerId for ``transactional_id``, once its coordinator (this broker) is ready."""
    deadline = time.monotonic() + 30
    while True:
        found = await connection.request(
            FindCoordinatorRequest(key=transactional_id, key_type=1), FIND_COORDINATOR_VERSION
        )
        error = found.error_code
        if error == ErrorCode.NONE:
            init = await connection.request(
                InitProducerIdRequest(
                    transactional_id=transactional_id, transaction_timeout_ms=60000
                ),
                INIT_PRODUCER_ID_VERSION,
            )
            if init.error_code == ErrorCode.NONE:
                return init
            error = init.error_code
        assert error in COORDINATOR_RETRIABLE and time.monotonic() < deadline, ErrorCode(error)
        await asyncio.sleep(0.2)


async def open_hanging_transaction(
    broker: ManagedBroker, transactional_id: str, topic: str, values: list[bytes]
) -> tuple[int, int]:
    """Write ``values`` as one transactional batch to partition 0 of ``topic``, never added.

    The producer id and epoch are real ones (InitProducerId with ``transactional_id``),
    so the coordinator knows the id, but no AddPartitionsToTxn names the partition:
    the coordinator will never end the transaction there. Returns (producer id, epoch).
    """
    connection = BrokerConnection(
        PeerAddress(broker.host, broker.port), "hanging-maker", timeout_s=30
    )
    await connection.connect()
    try:
        init = await init_producer_id(connection, transactional_id)
        batch = build_batch(
            [(None, value) for value in values],
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            base_sequence=0,
            transactional=True,
        )
        produced = await connection.request(
            ProduceRequest(
                transactional_id=transactional_id,
                acks=-1,
                timeout_ms=10000,
                topic_data=[
                    TopicProduceData(
                        name=topic, partition_data=[PartitionProduceData(index=0, records=batch)]
                    )
                ],
            ),
            PRODUCE_VERSION,
        )
    finally:
        connection.close()
    [[answer]] = [t.partition_responses for t in produced.responses]
    assert answer.error_code == ErrorCode.NONE and answer.base_offset == 0, answer
    return init.producer_id, init.producer_epoch


def test_find_hanging_and_abort(broker_factory: BrokerFactory, java_tool: ToolRunner) -> None:
    """find-hanging lists the transaction, abort ends it, read_committed reads past it."""
    broker = broker_factory({"transaction.partition.verification.enable": False})
    topic, transactional_id = "hanging-topic", "hanging-txn-id"
    create_topic(broker.bootstrap, topic, 1)
    hanging = [f"hanging-{i}".encode() for i in range(3)]
    producer_id, epoch = asyncio.run(
        open_hanging_transaction(broker, transactional_id, topic, hanging)
    )
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value="after-the-hanging-one", partition=0)
    assert plain.flush(30) == 0  # offset 3, behind the hanging transaction's first offset

    # The coordinator knows the id, in a state without the partition.
    described = only_row(
        transactions(java_tool, broker, "describe", "--transactional-id", transactional_id)
    )
    assert described["ProducerId"] == str(producer_id)
    assert described["TransactionState"] == "Empty" and described["TopicPartitions"] == ""

    # Only transactions open longer than --max-transaction-timeout (minutes) are candidates.
    # By broker, the tool lists the topics, describes them and asks that broker directly.
    timeout_args = ("--max-transaction-timeout", "0")
    by_broker = ("find-hanging", "--broker-id", described["CoordinatorId"], *timeout_args)
    found = only_row(transactions(java_tool, broker, *by_broker))
    expected = {
        "Topic": topic,
        "Partition": "0",
        "ProducerId": str(producer_id),
        "ProducerEpoch": str(epoch),
        "CoordinatorEpoch": "-1",
        "StartOffset": "0",
        "Duration(min)": "0",
    }
    assert {key: found[key] for key in expected} == expected, found

    # The hanging transaction holds read_committed readers at offset 0.
    held = java_tool(
        CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--from-beginning", "--isolation-level", "read_committed", "--timeout-ms", "5000",
    )  # fmt: skip
    assert held.stdout == "" and "Processed a total of 0 messages" in held.stderr, held.describe()

    aborted = transactions(
        java_tool, broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0"
    )
    assert aborted.stdout == "" and aborted.stderr == "", aborted.describe()
    by_topic = ("find-hanging", "--topic", topic, *timeout_args)
    assert table(transactions(java_tool, broker, *by_topic)) == []
    state = only_row(
        transactions(java_tool, broker, "describe-producers", "--topic", topic, "--partition", "0"),
        ProducerId=str(producer_id),
    )
    assert state["CurrentTransactionStartOffset"] == "None", state
    # Admin.abortTransaction sent coordinator epoch 0 (DescribeProducers had none).
    assert state["LatestCoordinatorEpoch"] == "0", state

    lines = consume(java_tool, broker, topic, 1, "--formatter-property", "print.offset=true")
    assert lines == ["Offset:3\tafter-the-hanging-one"]
