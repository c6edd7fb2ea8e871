"""Authorization of the data APIs, as Kafka 4.4 answers them: Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch and Metadata, with a real ACL authorizer over fake services."""

from __future__ import annotations

from kpybroker.apis.support.metadata_answers import NO_OPERATIONS
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    fetch,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)
from kpybroker.protocol.records import NewRecord, build_batch
from kpybroker.security.acls.authorizer import AclAuthorizer
from kpybroker.security.acls.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kpybroker.security.principal import KafkaPrincipal
from tests.helpers.fake_services import (
    FakePartition,
    FakeReplicas,
    FakeTopics,
    call,
    services,
    topic_of,
)

ALICE = KafkaPrincipal.user("alice")
TOPIC = ResourceType.TOPIC
DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def allow(
    authorizer: AclAuthorizer,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    principal: str = "User:alice",
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> None:
    authorizer.add(
        AclBinding(
            ResourcePattern(resource_type, name, PatternType.LITERAL),
            AccessControlEntry(principal, "*", operation, permission),
        )
    )


def replicas(*names: str) -> FakeReplicas:
    found = FakeReplicas()
    for name in names:
        found.partitions[(name, 0)] = FakePartition(
            records=build_batch([NewRecord(None, b"v")]), high_watermark=1
        )
    return found


# -- Produce -----------------------------------------------------------------------------


def produce_request(*topics: str, transactional_id: str | None = None) -> object:
    batch = build_batch([NewRecord(None, b"v")])
    return produce.ProduceRequest(
        transactional_id=transactional_id,
        acks=1,
        timeout_ms=1000,
        topic_data=[
            produce.TopicProduceData(
                name=t, partition_data=[produce.PartitionProduceData(index=0, records=batch)]
            )
            for t in topics
        ],
    )


def test_produce_needs_write_on_each_topic_asked_before_existence() -> None:
    authz = AclAuthorizer()
    allow(authz, AclOperation.WRITE, TOPIC, "ok")
    svc = services(authorizer=authz)
    response = call(svc, produce_request("ok", "absent"), 9, ALICE)
    codes = {t.name: t.partition_responses[0].error_code for t in response.responses}
    assert codes == {"ok": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "absent": DENIED}
    refused = response.responses[1].partition_responses[0]
    assert (refused.base_offset, refused.log_start_offset, refused.error_message) == (-1, -1, None)


def test_produce_without_an_authorizer_is_unchanged() -> None:
    response = call(services(), produce_request("absent"), 9, ALICE)
    codes = [t.partition_responses[0].error_code for t in response.responses]
    assert codes == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


def test_transactional_produce_needs_write_on_the_transactional_id() -> None:
    authz = AclAuthorizer()
    allow(authz, AclOperation.WRITE, TOPIC, "t")
    batch = build_batch([NewRecord(None, b"v")], producer_id=1, producer_epoch=0, base_sequence=0)
    request = produce_request("t", transactional_id="tx")
    request.topic_data[0].partition_data[0].records = _transactional(batch)
    response = call(services(replicas=replicas("t"), authorizer=authz), request, 9, ALICE)
    assert response.responses[0].partition_responses[0].error_code == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )


def _transactional(batch: bytes) -> bytes:
    from kpybroker.protocol import records

    data = bytearray(batch)
    data[records.ATTRIBUTES_OFFSET + 1] |= records.TRANSACTIONAL_MASK
    return bytes(data)


# -- Fetch -------------------------------------------------------------------------------


def fetch_request(*topics: str, replica_id: int = -1) -> object:
    return fetch.FetchRequest(
        replica_id=replica_id,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=[
            fetch.FetchTopic(
                topic=t,
                partitions=[
                    fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
            for t in topics
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def test_a_consumer_needs_read_on_each_topic() -> None:
    authz = AclAuthorizer()
    allow(authz, AclOperation.READ, TOPIC, "ok")
    svc = services(replicas=replicas("ok", "no"), authorizer=authz)
    response = call(svc, fetch_request("ok", "no", "absent"), 12, ALICE)
    codes = {t.topic: t.partitions[0].error_code for t in response.responses}
    assert codes == {"ok": ErrorCode.NONE, "no": DENIED, "absent": DENIED}
    assert [t.topic for t in response.responses] == ["ok", "no", "absent"]


def test_a_follower_needs_cluster_action_or_gets_nothing() -> None:
    authz = AclAuthorizer()
    allow(authz, AclOperation.READ, TOPIC, "t")
    svc = services(replicas=replicas("t"), authorizer=authz)
    response = call(svc, fetch_request("t", replica_id=1), 12, ALICE)
    assert response.responses[0].partitions[0].error_code == DENIED
    allow(authz, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster")
    response = call(svc, fetch_request("t", replica_id=1), 12, ALICE)
    assert response.responses[0].partitions[0].error_code == ErrorCode.NONE


# -- ListOffsets and OffsetForLeaderEpoch -------------------------------------------------


def test_list_offsets_appends_the_topics_it_may_not_describe() -> None:
    authz = AclAuthorizer()
    allow(authz, AclOperation.DESCRIBE, TOPIC, "ok")
    request = list_offsets.ListOffsetsRequest(
        replica_id=-1,
        topics=[
            list_offsets.ListOffsetsTopic(
                name=t, partitions=[list_offsets.ListOffsetsPartition(0, timestamp=-1)]
            )
            for t in ("no", "ok")
        ],
    )
    response = call(services(replicas=replicas("ok", "no"), authorizer=authz), request, 7, ALICE)
    assert [(t.name, t.partitions[0].error_code) for t in response.topics] == [
        ("ok", ErrorCode.NONE),
        ("no", DENIED),
    ]
    assert (
        response.topics[1].partitions[0].offset,
        response.topics[1].partitions[0].timestamp,
    ) == (
        -1,
        -1,
    )


def test_offset_for_leader_epoch_needs_describe_unless_cluster_action() -> None:
    authz = AclAuthorizer()
    request = offset_for_leader_epoch.OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            offset_for_leader_epoch.OffsetForLeaderTopic(
                topic="t",
                partitions=[offset_for_leader_epoch.OffsetForLeaderPartition(0, leader_epoch=0)],
            )
        ],
    )
    svc = services(replicas=replicas("t"), authorizer=authz)
    refused = call(svc, request, 4, ALICE).topics[0].partitions[0]
    assert (refused.error_code, refused.leader_epoch, refused.end_offset) == (DENIED, -1, -1)
    allow(authz, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster")
    assert call(svc, request, 4, ALICE).topics[0].partitions[0].error_code == ErrorCode.NONE


# -- Metadata ----------------------------------------------------------------------------


def metadata_request(*names: str | None, create: bool = False, operations: bool = False) -> object:
    topics = None if names == (None,) else [metadata.MetadataRequestTopic(name=n) for n in names]
    return metadata.MetadataRequest(
        topics=topics,
        allow_auto_topic_creation=create,
        include_cluster_authorized_operations=operations,
        include_topic_authorized_operations=operations,
    )


def test_every_topic_is_only_the_ones_the_principal_may_describe() -> None:
    authz = AclAuthorizer()
    allow(authz, AclOperation.READ, TOPIC, "mine")  # READ implies DESCRIBE
    svc = services(topics=FakeTopics(topic_of("mine"), topic_of("theirs")), authorizer=authz)
    response = call(svc, metadata_request(None), 12, ALICE)
    assert [t.name for t in response.topics] == ["mine"]


def test_named_topics_the_principal_may_not_describe_come_last_whether_they_exist_or_not() -> None:
    authz = AclAuthorizer()
    allow(authz, AclOperation.DESCRIBE, TOPIC, "mine")
    allow(authz, AclOperation.DESCRIBE, TOPIC, "missing")
    svc = services(topics=FakeTopics(topic_of("mine"), topic_of("theirs")), authorizer=authz)
    response = call(svc, metadata_request("theirs", "nowhere", "missing", "mine"), 12, ALICE)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("mine", ErrorCode.NONE),
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("theirs", DENIED),
        ("nowhere", DENIED),
    ]
    assert response.topics[2].topic_id == bytes(16)


def test_auto_creation_needs_create() -> None:
    authz = AclAuthorizer()
    allow(authz, AclOperation.DESCRIBE, TOPIC, "new")
    topics = FakeTopics()
    svc = services(topics=topics, authorizer=authz, config={"auto.create.topics.enable": "true"})
    response = call(svc, metadata_request("new", create=True), 12, ALICE)
    assert [(t.name, t.error_code) for t in response.topics] == [("new", DENIED)]
    assert topics.created == []
    allow(authz, AclOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster")
    response = call(svc, metadata_request("new", create=True), 12, ALICE)
    assert response.topics[0].error_code == ErrorCode.NONE and topics.created


def test_authorized_operations_are_the_principals() -> None:
    authz = AclAuthorizer()
    allow(authz, AclOperation.READ, TOPIC, "t")
    svc = services(topics=FakeTopics(topic_of("t")), authorizer=authz)
    response = call(svc, metadata_request("t", operations=True), 10, ALICE)
    assert response.topics[0].topic_authorized_operations == (1 << 3) | (1 << 8)  # READ, DESCRIBE
    assert response.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
    plain = call(services(topics=FakeTopics(topic_of("t"))), metadata_request("t"), 10, ALICE)
    assert plain.topics[0].topic_authorized_operations == NO_OPERATIONS
    everything = call(
        services(topics=FakeTopics(topic_of("t"))), metadata_request("t", operations=True), 10
    )
    assert everything.topics[0].topic_authorized_operations == 3576
    assert everything.cluster_authorized_operations == 8096
