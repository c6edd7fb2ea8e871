"""Which error a per-partition request gets from a broker that cannot serve the partition.

Kafka's rule is ``ReplicaManager.getPartitionOrError`` (core/.../server/ReplicaManager.scala,
the same in 4.1.2's bytecode): a partition this broker holds no replica of is
NOT_LEADER_OR_FOLLOWER when the cluster metadata has it, so that the client
refreshes its metadata and goes to a replica; one the cluster does not have is
UNKNOWN_TOPIC_OR_PARTITION. Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
DeleteRecords and DescribeProducers all go through it (OffsetForLeaderEpoch
spells the same three cases out in ``lastOffsetForLeaderEpoch``); Produce and
Fetch v16 add the current leader from the metadata (KIP-951), and Fetch
resolves topic IDs against the whole metadata (``topicIdsToNames``), so a topic
named by ID is NOT_LEADER_OR_FOLLOWER there too, not UNKNOWN_TOPIC_ID.
DescribeProducers reads any local replica, leader or follower
(``Partition.activeProducerState`` uses ``log``, not ``leaderLogIfLocal``).

The first test (partitions the cluster does not have) runs against both
targets. The others need a partition hosted elsewhere, which a single-node
reference Kafka cannot have: they run on a three-broker kpybroker cluster on
ZooKeeper only (kpybroker.testing's, in this process), and are skipped with
``KPYBROKER_TEST_TARGET=kafka``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kpybroker.protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from kpybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kpybroker.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kpybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kpybroker.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kpybroker.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kpybroker.testing import KafkaCluster
from tests.helpers.brokers import ManagedBroker, selected_target
from tests.helpers.groups_wire import Wire, find_coordinator
from tests.helpers.process import wait_until
from tests.helpers.wire import record_batch

pytestmark = pytest.mark.timeout(180)

on_a_cluster = pytest.mark.skipif(
    selected_target() == "kafka",
    reason="needs a partition hosted on another broker: a single-node Kafka has none",
)

#: One partition's answer to a request: (error code, the whole partition answer, the response).
Answer = tuple[int, Any, Any]


def delete_records(wire: Wire, topic: str, partition: int) -> Answer:
    parts = [DeleteRecordsPartition(partition_index=partition, offset=0)]
    request = DeleteRecordsRequest(
        topics=[DeleteRecordsTopic(name=topic, partitions=parts)], timeout_ms=5000
    )
    response = wire.call(request, 2)
    [answer] = response.topics[0].partitions
    assert answer.low_watermark == -1
    return answer.error_code, answer, response


def produce(wire: Wire, topic: str, partition: int) -> Answer:
    data = [PartitionProduceData(index=partition, records=bytes(record_batch([b"x"])))]
    request = ProduceRequest(
        acks=1, timeout_ms=5000, topic_data=[TopicProduceData(name=topic, partition_data=data)]
    )
    response = wire.call(request, 11)
    [answer] = response.responses[0].partition_responses
    assert (answer.base_offset, answer.error_message) == (-1, None)
    return answer.error_code, answer, response


def list_offsets(wire: Wire, topic: str, partition: int) -> Answer:
    parts = [ListOffsetsPartition(partition_index=partition, timestamp=-1)]
    request = ListOffsetsRequest(
        replica_id=-1, topics=[ListOffsetsTopic(name=topic, partitions=parts)]
    )
    response = wire.call(request, 9)
    [answer] = response.topics[0].partitions
    assert (answer.offset, answer.timestamp) == (-1, -1)
    return answer.error_code, answer, response


def offset_for_leader_epoch(wire: Wire, topic: str, partition: int) -> Answer:
    parts = [OffsetForLeaderPartition(partition=partition, current_leader_epoch=0, leader_epoch=0)]
    request = OffsetForLeaderEpochRequest(
        replica_id=-1, topics=[OffsetForLeaderTopic(topic=topic, partitions=parts)]
    )
    response = wire.call(request, 4)
    [answer] = response.topics[0].partitions
    return answer.error_code, answer, response


def fetch_by_name(wire: Wire, topic: str, partition: int) -> Answer:
    parts = [FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 16)]
    response = wire.call(
        FetchRequest(max_wait_ms=0, topics=[FetchTopic(topic=topic, partitions=parts)]), 12
    )
    [answer] = response.responses[0].partitions
    assert (answer.high_watermark, bytes(answer.records)) == (-1, b"")
    return answer.error_code, answer, response


def describe_producers(wire: Wire, topic: str, partition: int) -> Answer:
    request = DescribeProducersRequest(
        topics=[TopicRequest(name=topic, partition_indexes=[partition])]
    )
    response = wire.call(request, 0)
    [answer] = response.topics[0].partitions
    return answer.error_code, answer, response


PER_PARTITION_APIS: dict[str, Callable[[Wire, str, int], Answer]] = {
    "DeleteRecords": delete_records,
    "Produce": produce,
    "ListOffsets": list_offsets,
    "OffsetForLeaderEpoch": offset_for_leader_epoch,
    "Fetch": fetch_by_name,
    "DescribeProducers": describe_producers,
}


def fetch_by_id(wire: Wire, topic_id: bytes, partition: int) -> Any:
    """Fetch v16, which names the topic by ID and answers with the current leader."""
    parts = [FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 16)]
    request = FetchRequest(max_wait_ms=0, topics=[FetchTopic(topic_id=topic_id, partitions=parts)])
    return wire.call(request, 16)


def every_error(bootstrap: str, topic: str, partition: int) -> dict[str, int]:
    with Wire(bootstrap) as wire:
        return {name: ask(wire, topic, partition)[0] for name, ask in PER_PARTITION_APIS.items()}


def topic_metadata(bootstrap: str, topic: str) -> Any:
    """The topic as this broker's Metadata v12 has it: its ID, each partition's leader and epoch."""
    with Wire(bootstrap) as wire:
        [meta] = wire.call(MetadataRequest(topics=[MetadataRequestTopic(name=topic)]), 12).topics
    return meta


def topic_id_of(bootstrap: str, topic: str) -> bytes:
    return topic_metadata(bootstrap, topic).topic_id


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    """Three brokers (ids 0, 1, 2) on a ZooKeeper of their own."""
    with KafkaCluster(3) as started:
        yield started


def test_partitions_the_cluster_does_not_have(module_broker: ManagedBroker) -> None:
    """UNKNOWN_TOPIC_OR_PARTITION from every API, for a partition past a topic's last, a
    topic that does not exist, and an internal topic's missing partition (Produce and
    DeleteRecords look at the metadata before refusing an internal topic)."""
    bootstrap = module_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("single", 1, 1)])["single"].result(30)
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    everywhere = dict.fromkeys(PER_PARTITION_APIS, unknown)
    assert every_error(bootstrap, "single", 5) == everywhere
    assert every_error(bootstrap, "no-such-topic", 0) == everywhere
    find_coordinator(bootstrap, "any")  # creates __consumer_offsets
    assert every_error(bootstrap, "__consumer_offsets", 9999) == everywhere
    with Wire(bootstrap) as wire:
        [data] = fetch_by_id(wire, topic_id_of(bootstrap, "single"), 5).responses[0].partitions
        assert data.error_code == unknown
        # DescribeProducers: a missing topic is refused with a message, a missing partition
        # of a known topic (getPartitionOrError) without one.
        assert describe_producers(wire, "no-such-topic", 0)[1].error_message == (
            "This server does not host this topic-partition."
        )
        assert describe_producers(wire, "single", 5)[1].error_message is None


def create_placed(cluster: KafkaCluster, topic: str, replicas: list[int]) -> Any:
    """One partition on exactly these brokers, once every broker's metadata has it and its
    leader; that partition's metadata."""
    admin = cluster.admin()  # kept alive until the answer: its destruction cancels the request
    created = admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas])])
    created[topic].result(30)

    def everyone_knows() -> bool:
        return all(
            [p.leader_id for p in topic_metadata(b.bootstrap_servers, topic).partitions]
            == replicas[:1]
            for b in cluster.brokers
        )

    wait_until(everyone_knows, 30, 0.05, f"every broker to know {topic}")
    return topic_metadata(cluster.brokers[0].bootstrap_servers, topic).partitions[0]


@on_a_cluster
def test_a_broker_without_a_replica_answers_not_leader_or_follower(
    cluster: KafkaCluster,
) -> None:
    """Broker 1 holds no replica of placed-0 (broker 0 does): NOT_LEADER_OR_FOLLOWER from
    every API, with the leader as hint where Kafka gives one; placed-7 does not exist
    anywhere: UNKNOWN_TOPIC_OR_PARTITION."""
    state = create_placed(cluster, "placed", [0])
    bystander = cluster.brokers[1].bootstrap_servers
    everywhere = dict.fromkeys(PER_PARTITION_APIS, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert every_error(bystander, "placed", 0) == everywhere
    with Wire(bystander) as wire:
        assert describe_producers(wire, "placed", 0)[1].error_message is None
    assert every_error(bystander, "placed", 7) == dict.fromkeys(
        PER_PARTITION_APIS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    with Wire(bystander) as wire:
        _, answer, response = produce(wire, "placed", 0)
        assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (
            state.leader_id,
            state.leader_epoch,
        )
        assert [n.node_id for n in response.node_endpoints] == [0]
        fetched = fetch_by_id(wire, topic_id_of(bystander, "placed"), 0)
    [data] = fetched.responses[0].partitions
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (data.current_leader.leader_id, data.current_leader.leader_epoch) == (
        state.leader_id,
        state.leader_epoch,
    )
    assert [n.node_id for n in fetched.node_endpoints] == [0]


@on_a_cluster
def test_describe_producers_answers_from_a_follower(cluster: KafkaCluster) -> None:
    """The follower (broker 2) describes the producer it replicated, as the leader does;
    broker 1, without a replica, answers NOT_LEADER_OR_FOLLOWER."""
    create_placed(cluster, "watched", [0, 2])
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True}
    )
    for i in range(3):
        producer.produce("watched", b"%d" % i, partition=0)
    assert producer.flush(30) == 0

    def producers_on(broker_id: int) -> Answer:
        with Wire(cluster.brokers[broker_id].bootstrap_servers) as wire:
            return describe_producers(wire, "watched", 0)

    wait_until(lambda: producers_on(2)[1].active_producers, 30, 0.05, "the follower's producers")
    leader, follower = producers_on(0)[1], producers_on(2)[1]
    assert (leader.error_code, follower.error_code) == (ErrorCode.NONE, ErrorCode.NONE)
    assert [(p.producer_id, p.last_sequence) for p in follower.active_producers] == [
        (p.producer_id, p.last_sequence) for p in leader.active_producers
    ]
    assert [p.last_sequence for p in leader.active_producers] == [2]
    assert producers_on(1)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
