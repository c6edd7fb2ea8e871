"""Topics named by ID (KIP-516): Produce v13 and Fetch v13+, as Kafka 4.1's Java client
sends them once its metadata has topic IDs. Passes against Apache Kafka too
(``KPYBROKER_TEST_TARGET=kafka``)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kpybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from kpybroker.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kpybroker.protocol.records import iter_batches
from tests.helpers.brokers import ManagedBroker
from tests.helpers.groups_wire import Wire
from tests.helpers.wire import record_batch

pytestmark = pytest.mark.timeout(120)


def produce_by_id(wire: Wire, topic_id: bytes, partition: int, values: list[bytes], acks: int = -1):
    data = [PartitionProduceData(index=partition, records=bytes(record_batch(values)))]
    request = ProduceRequest(
        acks=acks,
        timeout_ms=10_000,
        topic_data=[TopicProduceData(topic_id=topic_id, partition_data=data)],
    )
    return wire.call(request, 13)


def test_produce_and_fetch_by_topic_id(module_broker: ManagedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    admin.create_topics([NewTopic("by-id", 2, 1)])["by-id"].result(30)
    with Wire(module_broker.bootstrap) as wire:
        [meta] = wire.call(MetadataRequest(topics=[MetadataRequestTopic(name="by-id")]), 12).topics
        topic_id = meta.topic_id

        [answer] = produce_by_id(wire, topic_id, 1, [b"a", b"b"]).responses
        assert answer.topic_id == topic_id
        [part] = answer.partition_responses
        assert (part.index, part.error_code, part.base_offset) == (1, ErrorCode.NONE, 0)

        for unknown in (uuid.uuid4().bytes, bytes(16)):
            [answer] = produce_by_id(wire, unknown, 0, [b"x"]).responses
            [part] = answer.partition_responses
            assert (answer.topic_id, part.error_code, part.base_offset) == (
                unknown,
                ErrorCode.UNKNOWN_TOPIC_ID,
                -1,
            )
        [answer] = produce_by_id(wire, topic_id, 7, [b"x"]).responses
        assert answer.partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        fetch = FetchRequest(
            max_wait_ms=0,
            topics=[
                FetchTopic(
                    topic_id=topic_id,
                    partitions=[
                        FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=1 << 20)
                    ],
                )
            ],
        )
        [data] = wire.call(fetch, 13).responses[0].partitions
        assert data.high_watermark == 2
        [(_, header)] = list(iter_batches(bytes(data.records)))
        assert (header.base_offset, header.last_offset_delta) == (0, 1)


def test_acks_0_produce_to_an_unknown_topic_id_closes_the_connection(
    module_broker: ManagedBroker,
) -> None:
    with Wire(module_broker.bootstrap) as wire:
        data = [PartitionProduceData(index=0, records=bytes(record_batch([b"x"])))]
        request = ProduceRequest(
            acks=0,
            timeout_ms=10_000,
            topic_data=[TopicProduceData(topic_id=uuid.uuid4().bytes, partition_data=data)],
        )
        wire.send_request(request, 13)
        wire.expect_closed()
