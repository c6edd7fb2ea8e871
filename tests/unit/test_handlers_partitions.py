"""Handlers of the per-partition APIs against fakes of their services (no broker, no I/O).

Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords and
DescribeProducers: how each maps the request onto the replicas it is given,
and Kafka's answer for what the replicas refuse.
"""

from __future__ import annotations

import uuid

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    delete_records,
    describe_producers,
    fetch,
    list_offsets,
    offset_for_leader_epoch,
    produce,
)
from kpybroker.protocol.records import NewRecord, build_batch
from tests.helpers.fake_services import (
    FakePartition,
    FakeReplicas,
    FakeTopics,
    call,
    services,
    topic_of,
)


def replicas_with(*parts: tuple[str, int, FakePartition]) -> FakeReplicas:
    replicas = FakeReplicas()
    for topic, index, partition in parts:
        replicas.partitions[(topic, index)] = partition
    return replicas


def fetch_request(
    parts: list[tuple[str, int, int]],
    *,
    session_epoch: int = -1,
    ids: dict[str, bytes] | None = None,
) -> object:
    """A consumer's Fetch; with ``ids``, the topics are named by id (v13+)."""
    by_topic: dict[str, list[fetch.FetchPartition]] = {}
    for topic, index, offset in parts:
        by_topic.setdefault(topic, []).append(
            fetch.FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=1 << 20)
        )
    return fetch.FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        session_epoch=session_epoch,
        topics=[
            fetch.FetchTopic(topic=t, topic_id=(ids or {}).get(t, bytes(16)), partitions=ps)
            for t, ps in by_topic.items()
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def test_fetch_answers_refused_partitions_last_with_empty_records() -> None:
    batch = build_batch([NewRecord(None, b"v")])
    replicas = replicas_with(("t", 0, FakePartition(records=batch, high_watermark=1)))
    request = fetch_request([("nope", 0, 0), ("t", 0, 0), ("t", 0, 99)])
    response = call(services(replicas=replicas), request, 12)
    answers = [
        (r.topic, p.partition_index, p.error_code) for r in response.responses for p in r.partitions
    ]
    # ("t", 0) named twice is read once, at its last offset: out of range; "nope" comes last.
    assert answers == [("t", 0, ErrorCode.OFFSET_OUT_OF_RANGE), ("nope", 0, 3)]
    for topic in response.responses:
        for part in topic.partitions:
            assert part.records == b"" and part.high_watermark == -1


def test_fetch_reads_and_reports_the_high_watermark() -> None:
    batch = build_batch([NewRecord(None, b"v")])
    partition = FakePartition(records=batch, high_watermark=1)
    response = call(
        services(replicas=replicas_with(("t", 0, partition))), fetch_request([("t", 0, 0)]), 12
    )
    [part] = response.responses[0].partitions
    assert (part.error_code, part.high_watermark, bytes(part.records)) == (0, 1, batch)
    assert part.aborted_transactions is None  # read_uncommitted


def test_an_incremental_fetch_names_a_session_that_cannot_exist() -> None:
    response = call(services(), fetch_request([("t", 0, 0)], session_epoch=3), 12)
    assert response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert response.responses == []


def test_fetch_hints_the_leader_from_v16_for_a_partition_hosted_elsewhere() -> None:
    replicas = FakeReplicas()
    replicas.elsewhere.add(("t", 0))
    topic_id = uuid.uuid4().bytes
    replicas.ids[topic_id] = "t"
    request = fetch_request([("t", 0, 0)], ids={"t": topic_id})
    old = call(services(replicas=replicas), request, 15)
    new = call(services(replicas=replicas), request, 16)
    assert new.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert old.responses[0].partitions[0].current_leader.leader_id == -1
    assert new.responses[0].partitions[0].current_leader.leader_id == 1
    assert [e.node_id for e in new.node_endpoints] == []  # leader 1 is not a live broker here


def produce_request(
    topic: str, records: bytes, *, acks: int = -1, topic_id: bytes = bytes(16)
) -> object:
    return produce.ProduceRequest(
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            produce.TopicProduceData(
                name=topic,
                topic_id=topic_id,
                partition_data=[produce.PartitionProduceData(index=0, records=records)],
            )
        ],
    )


def test_a_batch_kafka_cannot_walk_fails_the_whole_produce() -> None:
    broken = bytearray(build_batch([NewRecord(None, b"v")]))
    broken[8:12] = (0).to_bytes(4, "big")
    response = call(services(), produce_request("t", bytes(broken)), 9)
    [part] = response.responses[0].partition_responses
    assert part.error_code == ErrorCode.CORRUPT_MESSAGE
    assert part.error_message == "Record size 0 is less than the minimum record overhead (14)"
    assert (part.base_offset, part.log_start_offset) == (-1, -1)


def test_transactional_records_without_a_transactional_id_fail_the_whole_produce() -> None:
    records = build_batch(
        [NewRecord(None, b"v")], producer_id=5, producer_epoch=0, base_sequence=0,
        transactional=True,
    )  # fmt: skip
    [part] = call(services(), produce_request("t", records), 9).responses[0].partition_responses
    # Kafka's error answer has no message (ProduceRequest.getErrorResponse).
    assert (part.error_code, part.error_message) == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        None,
    )
    assert (part.base_offset, part.log_start_offset) == (-1, -1)


def test_produce_by_an_unknown_topic_id() -> None:
    request = produce_request("", build_batch([NewRecord(None, b"v")]), topic_id=uuid.uuid4().bytes)
    [part] = call(services(), request, 13).responses[0].partition_responses
    assert part.error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_produce_with_invalid_acks() -> None:
    request = produce_request("t", build_batch([NewRecord(None, b"v")]), acks=2)
    [part] = call(services(), request, 9).responses[0].partition_responses
    assert part.error_code == ErrorCode.INVALID_REQUIRED_ACKS


def list_offsets_request(parts: list[tuple[str, int, int]]) -> object:
    by_topic: dict[str, list[list_offsets.ListOffsetsPartition]] = {}
    for topic, index, timestamp in parts:
        by_topic.setdefault(topic, []).append(
            list_offsets.ListOffsetsPartition(partition_index=index, timestamp=timestamp)
        )
    return list_offsets.ListOffsetsRequest(
        replica_id=-1,
        topics=[list_offsets.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def test_list_offsets_refuses_duplicates_and_timestamps_the_version_does_not_know() -> None:
    replicas = replicas_with(("t", 0, FakePartition(high_watermark=4)), ("t", 1, FakePartition()))
    request = list_offsets_request([("t", 0, -1), ("t", 1, -3), ("t", 0, -2), ("t", 2, -1)])
    [topic] = call(services(replicas=replicas), request, 6).topics
    answers = {p.partition_index: (p.error_code, p.offset) for p in topic.partitions}
    assert answers == {
        0: (ErrorCode.INVALID_REQUEST, -1),
        1: (ErrorCode.UNSUPPORTED_VERSION, -1),  # max timestamp needs v7
        2: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    }


def test_list_offsets_v11_earliest_pending_upload() -> None:
    """-6 (KIP-1023) needs v11; nothing is tiered here, so it is -1 with no leader epoch, as
    Kafka answers for a topic without remote storage (and as -5 is)."""
    replicas = replicas_with(("t", 0, FakePartition(high_watermark=4)))
    for version, expected in ((10, ErrorCode.UNSUPPORTED_VERSION), (11, ErrorCode.NONE)):
        request = list_offsets_request([("t", 0, -6)])
        [topic] = call(services(replicas=replicas), request, version).topics
        [part] = topic.partitions
        assert (part.error_code, part.timestamp, part.offset, part.leader_epoch) == (
            expected,
            -1,
            -1,
            -1,
        )


def test_list_offsets_latest_is_the_high_watermark_for_a_consumer() -> None:
    replicas = replicas_with(("t", 0, FakePartition(high_watermark=4)))
    [topic] = call(services(replicas=replicas), list_offsets_request([("t", 0, -1)]), 8).topics
    [part] = topic.partitions
    assert (part.error_code, part.offset, part.leader_epoch) == (0, 4, 0)


def test_offset_for_leader_epoch_of_a_partition_nobody_has() -> None:
    request = offset_for_leader_epoch.OffsetForLeaderEpochRequest(
        topics=[
            offset_for_leader_epoch.OffsetForLeaderTopic(
                topic="t",
                partitions=[
                    offset_for_leader_epoch.OffsetForLeaderPartition(partition=0, leader_epoch=0)
                ],
            )
        ]
    )
    [topic] = call(services(), request, 4).topics
    [part] = topic.partitions
    assert (part.error_code, part.end_offset) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)


def test_delete_records_of_a_partition_hosted_elsewhere() -> None:
    replicas = FakeReplicas()
    replicas.elsewhere.add(("t", 0))
    request = delete_records.DeleteRecordsRequest(
        topics=[
            delete_records.DeleteRecordsTopic(
                name="t",
                partitions=[
                    delete_records.DeleteRecordsPartition(partition_index=i, offset=0)
                    for i in (0, 1)
                ],
            )
        ],
        timeout_ms=1000,
    )
    [topic] = call(services(replicas=replicas), request, 2).topics
    answers = [(p.partition_index, p.error_code, p.low_watermark) for p in topic.partitions]
    assert answers == [
        (0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1),
        (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    ]


def test_describe_producers_of_an_unknown_topic() -> None:
    request = describe_producers.DescribeProducersRequest(
        topics=[describe_producers.TopicRequest(name="nope", partition_indexes=[0])]
    )
    [topic] = call(services(topics=FakeTopics(topic_of("t"))), request, 0).topics
    [part] = topic.partitions
    assert part.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_with_a_stale_leader_epoch_is_fenced_with_the_current_leader() -> None:
    # A one-node Kafka cannot be made to bump an epoch, so this is held here: Kafka's
    # processResponseCallback gives FENCED_LEADER_EPOCH the current leader from v16.
    topic_id = uuid.uuid4().bytes
    replicas = replicas_with(("t", 0, FakePartition(high_watermark=1, leader_epoch=3)))
    replicas.ids[topic_id] = "t"
    request = fetch_request([("t", 0, 0)], ids={"t": topic_id})
    request.topics[0].partitions[0].current_leader_epoch = 1
    [part] = call(services(replicas=replicas), request, 16).responses[0].partitions
    assert part.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (part.high_watermark, part.records, part.aborted_transactions) == (-1, b"", None)
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 5)
