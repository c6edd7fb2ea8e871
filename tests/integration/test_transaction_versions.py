"""Transaction versions 1 and 2 (KIP-890), and the partition verification of part 1.

- The broker's ``transaction.version`` (Kafka: the feature level chosen at
  format time, which the reference broker gets as ``--feature``) is what
  ApiVersions finalizes, and the Java client follows it: under version 2 every
  transaction bumps the producer epoch (EndTxn v5) and its partitions are added
  by their first write (Produce v12); under version 1 the epoch stays and the
  client adds partitions itself. Kafka's own ProducerPerformance runs both, and
  a read_committed console consumer reads every record.
- On the wire: Produce v12 adds a partition the client never named;
  a produce before v12 to a partition never added is refused when verification
  is on (it would otherwise open a transaction nobody ends): INVALID_TXN_STATE,
  or from v11 TRANSACTION_ABORTABLE; it is accepted when it is off. EndTxn v5
  answers the bumped epoch, which the next write must use, while a write with
  the old epoch is INVALID_PRODUCER_EPOCH.

Every test passes against Apache Kafka too (``KPYBROKER_TEST_TARGET=kafka``).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kpybroker.cluster.broker_client import BrokerConnection, PeerAddress
from kpybroker.coordinator.partitioning import partition_for
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.api_versions import ApiVersionsRequest
from kpybroker.protocol.messages.end_txn import EndTxnRequest
from kpybroker.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kpybroker.protocol.records import build_batch
from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.java import CONSOLE_CONSUMER
from tests.helpers.process import ToolRunner
from tests.helpers.replication_cluster import ReplicatedCluster, cluster, zookeeper
from tests.integration.test_transactions_cluster import TRANSACTIONAL
from tests.integration.test_transactions_java import (
    COORDINATOR_RETRIABLE,
    PRODUCER_PERFORMANCE,
    TRANSACTIONS_COMMAND,
    consume,
    create_topic,
    init_producer_id,
    only_row,
    transactions,
)

__all__ = ["cluster", "zookeeper"]  # fixtures
pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("version", [1, 2])
def test_java_producer_follows_the_finalized_transaction_version(
    broker_factory: BrokerFactory, java_tool: ToolRunner, version: int
) -> None:
    broker = broker_factory({"transaction.version": version})
    topic, transactional_id, count = f"tv{version}", f"tv{version}-id", 3000
    create_topic(broker.bootstrap, topic, 2)
    java_tool(
        PRODUCER_PERFORMANCE, "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--num-records", str(count), "--record-size", "50", "--throughput", "3000",
        "--transactional-id", transactional_id, "--transaction-duration-ms", "100",
    ).check()  # fmt: skip
    assert len(consume(java_tool, broker, topic, count)) == count
    described = only_row(
        transactions(java_tool, broker, "describe", "--transactional-id", transactional_id)
    )
    assert described["TransactionState"] == "CompleteCommit", described
    epoch = int(described["ProducerEpoch"])
    if version == 2:
        assert epoch > 3, described  # one bump per transaction, after InitProducerId's
    else:
        assert epoch == 0, described


async def request(broker: ManagedBroker, body: object, version: int) -> object:
    connection = BrokerConnection(PeerAddress(broker.host, broker.port), "tv-test", timeout_s=30)
    await connection.connect()
    try:
        return await connection.request(body, version)
    finally:
        connection.close()


async def initialized(broker: ManagedBroker, transactional_id: str) -> tuple[int, int]:
    """InitProducerId for ``transactional_id``: its producer id and epoch."""
    connection = BrokerConnection(PeerAddress(broker.host, broker.port), "tv-test", timeout_s=30)
    await connection.connect()
    try:
        init = await init_producer_id(connection, transactional_id)
    finally:
        connection.close()
    return init.producer_id, init.producer_epoch


def produce_request(
    transactional_id: str, topic: str, producer_id: int, epoch: int, sequence: int
) -> ProduceRequest:
    batch = build_batch(
        [(None, b"value")],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=True,
    )
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=10000,
        topic_data=[TopicProduceData(name=topic, partition_data=[PartitionProduceData(0, batch)])],
    )


#: What a failed verification answers while the coordinator finishes the previous
#: transaction: NOT_ENOUGH_REPLICAS, and from Produce v12 CONCURRENT_TRANSACTIONS.
VERIFICATION_RETRIABLE = (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.CONCURRENT_TRANSACTIONS)


async def produce_until_settled(broker: ManagedBroker, body: ProduceRequest, version: int):
    """The partition's answer, retrying what the producer would retry (the coordinator
    finishing the previous transaction)."""
    deadline = time.monotonic() + 30
    while True:
        response = await request(broker, body, version)
        [[answer]] = [t.partition_responses for t in response.responses]  # type: ignore[attr-defined]
        if answer.error_code not in VERIFICATION_RETRIABLE or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.1)


async def end_txn(broker: ManagedBroker, body: EndTxnRequest, version: int):
    deadline = time.monotonic() + 30
    while True:
        answer = await request(broker, body, version)
        if answer.error_code not in COORDINATOR_RETRIABLE or time.monotonic() > deadline:  # type: ignore[attr-defined]
            return answer
        await asyncio.sleep(0.1)


def test_api_versions_finalizes_the_transaction_version(broker_factory: BrokerFactory) -> None:
    for version in (1, 2):
        broker = broker_factory({"transaction.version": version})
        answer = asyncio.run(request(broker, ApiVersionsRequest("t", "1"), 4))
        finalized = {f.name: f.max_version_level for f in answer.finalized_features}  # type: ignore[attr-defined]
        supported = {f.name: f.max_version for f in answer.supported_features}  # type: ignore[attr-defined]
        assert finalized["transaction.version"] == version
        assert supported["transaction.version"] >= 2
        broker.stop()


def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(
    broker: ManagedBroker, java_tool: ToolRunner
) -> None:
    topic, transactional_id = "implicit-add", "implicit-add-id"
    create_topic(broker.bootstrap, topic, 1)

    async def scenario() -> None:
        pid, epoch = await initialized(broker, transactional_id)
        produced = await produce_until_settled(
            broker, produce_request(transactional_id, topic, pid, epoch, 0), 12
        )
        assert produced.error_code == ErrorCode.NONE, produced
        described = only_row(
            transactions(java_tool, broker, "describe", "--transactional-id", transactional_id)
        )
        assert described["TransactionState"] == "Ongoing", described
        assert described["TopicPartitions"] == f"{topic}-0", described
        ended = await end_txn(broker, EndTxnRequest(transactional_id, pid, epoch, True), 5)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            ErrorCode.NONE,
            pid,
            epoch + 1,
        )
        # Once the markers are written (with the new epoch) the old epoch is fenced; the
        # new one opens the next transaction at sequence 0. (Before that, Kafka too lets
        # an old-epoch write join the transaction being committed.)
        wait_for_state(java_tool, broker, transactional_id, "CompleteCommit")
        stale = await produce_until_settled(
            broker, produce_request(transactional_id, topic, pid, epoch, 1), 12
        )
        assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH, stale
        fresh = await produce_until_settled(
            broker, produce_request(transactional_id, topic, pid, epoch + 1, 0), 12
        )
        assert fresh.error_code == ErrorCode.NONE, fresh
        aborted = await end_txn(broker, EndTxnRequest(transactional_id, pid, epoch + 1, False), 5)
        assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.NONE, epoch + 2)

    asyncio.run(scenario())
    assert consume(java_tool, broker, topic, 1) == ["value"]


def wait_for_state(
    java_tool: ToolRunner, broker: ManagedBroker, transactional_id: str, state: str
) -> None:
    deadline = time.monotonic() + 30
    while True:
        described = only_row(
            transactions(java_tool, broker, "describe", "--transactional-id", transactional_id)
        )
        if described["TransactionState"] == state:
            return
        assert time.monotonic() < deadline, described
        time.sleep(0.2)


@pytest.mark.parametrize(("verification", "version"), [(True, 10), (True, 11), (False, 11)])
def test_produce_to_a_partition_never_added(
    broker_factory: BrokerFactory, verification: bool, version: int
) -> None:
    """Verification refuses the write: INVALID_TXN_STATE before v11, TRANSACTION_ABORTABLE
    from v11 (the client aborts the transaction); without it the write opens one."""
    broker = broker_factory({"transaction.partition.verification.enable": verification})
    topic, transactional_id = "never-added", "never-added-id"
    create_topic(broker.bootstrap, topic, 1)

    async def scenario() -> ErrorCode:
        body = produce_request(
            transactional_id, topic, *await initialized(broker, transactional_id), 0
        )
        return ErrorCode((await produce_until_settled(broker, body, version)).error_code)

    expected = ErrorCode.NONE
    if verification:
        expected = ErrorCode.TRANSACTION_ABORTABLE if version >= 11 else ErrorCode.INVALID_TXN_STATE
    assert asyncio.run(scenario()) == expected


@pytest.mark.parametrize("cluster", [TRANSACTIONAL], indirect=True)
def test_version_2_in_a_cluster(cluster: ReplicatedCluster, java_tool: ToolRunner) -> None:
    """Three brokers: the leaders of most partitions are not the coordinator, and add each
    partition with AddPartitionsToTxn v5 over the inter-broker listener."""
    topic, transactional_id, count = "tv2-cluster", "tv2-cluster-id", 3000
    cluster.create_topic(topic, 3, 3)
    java_tool(
        PRODUCER_PERFORMANCE, "--bootstrap-server", cluster.bootstrap, "--topic", topic,
        "--num-records", str(count), "--record-size", "50", "--throughput", "3000",
        "--transactional-id", transactional_id, "--transaction-duration-ms", "100",
        "--command-property", "acks=all",
    ).check()  # fmt: skip
    result = java_tool(
        CONSOLE_CONSUMER, "--bootstrap-server", cluster.bootstrap, "--topic", topic,
        "--from-beginning", "--isolation-level", "read_committed",
        "--max-messages", str(count), "--timeout-ms", "60000",
    ).check()  # fmt: skip
    assert len(result.stdout.splitlines()) == count, result.describe()
    coordinator = cluster.state("__transaction_state", partition_for(transactional_id, 3)).leader
    leaders = {cluster.state(topic, p).leader for p in range(3)}
    assert leaders - {coordinator}, "every partition led by the coordinator: nothing remote"
    described = java_tool(
        TRANSACTIONS_COMMAND, "--bootstrap-server", cluster.bootstrap,
        "describe", "--transactional-id", transactional_id,
    ).check()  # fmt: skip
    row = only_row(described)
    assert row["TransactionState"] == "CompleteCommit" and int(row["ProducerEpoch"]) > 3, row
