"""Handlers of the cluster, topic, config and controller APIs against fakes of their services.

ApiVersions, Metadata, DescribeCluster, CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs, ListConfigResources, DescribeLogDirs,
ElectLeaders and the reassignment APIs: each handler only maps the request
onto the services it is given, so each is tested with nothing else.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from kpybroker.apis.support.registry import REGISTRY
from kpybroker.cluster.controller import NotControllerError
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import (
    alter_partition_reassignments,
    api_versions,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    elect_leaders,
    list_config_resources,
    metadata,
)
from tests.helpers.fake_services import FakeGroups, FakeTopics, call, services, topic_of


def test_api_versions_advertises_the_registry() -> None:
    request = api_versions.ApiVersionsRequest(
        client_software_name="unit-test", client_software_version="1.0"
    )
    response = call(services(), request, 3)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {key: (s.advertised_min, s.max_version) for key, s in REGISTRY.items()}


def metadata_request(*names: str | None, ids: tuple[bytes, ...] = ()) -> object:
    wanted = [metadata.MetadataRequestTopic(name=n) for n in names]
    wanted += [metadata.MetadataRequestTopic(name=None, topic_id=i) for i in ids]
    return metadata.MetadataRequest(topics=wanted, allow_auto_topic_creation=False)


def test_metadata_answers_unknown_ids_first_then_known_then_missing() -> None:
    topics = FakeTopics(topic_of("a", 2))
    response = call(
        services(topics=topics), metadata_request("nope", "a", ids=(uuid.uuid4().bytes,)), 12
    )
    answers = [(t.name, t.error_code) for t in response.topics]
    assert answers == [
        (None, ErrorCode.UNKNOWN_TOPIC_ID),
        ("a", ErrorCode.NONE),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert [b.node_id for b in response.brokers] == [0]


def test_metadata_auto_creates_the_offsets_topic_through_the_group_coordinator() -> None:
    topics = FakeTopics()

    async def ensure_offsets_topic() -> None:
        topics.topics["__consumer_offsets"] = topic_of("__consumer_offsets", 3)

    groups = FakeGroups(ensure_offsets_topic=ensure_offsets_topic)
    request = metadata.MetadataRequest(
        topics=[metadata.MetadataRequestTopic(name="__consumer_offsets")],
        allow_auto_topic_creation=True,
    )
    [topic] = call(services(topics=topics, groups=groups), request, 9).topics
    assert (topic.error_code, len(topic.partitions)) == (0, 3)
    assert topics.created == []  # not with the broker's defaults
    assert [name for name, _ in groups.calls] == ["ensure_offsets_topic"]


def test_describe_cluster_from_the_cluster_view() -> None:
    response = call(services(), describe_cluster.DescribeClusterRequest(), 1)
    assert (response.error_message, response.controller_id) == (None, 0)
    assert [(b.broker_id, b.port) for b in response.brokers] == [(0, 9092)]
    wrong = call(services(), describe_cluster.DescribeClusterRequest(endpoint_type=2), 1)
    assert wrong.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


def creatable(name: str, partitions: int = 1) -> create_topics.CreatableTopic:
    return create_topics.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
    )


def test_create_topics_maps_each_outcome_and_sends_no_message_on_success() -> None:
    topics = FakeTopics()
    topics.refuse["taken"] = KafkaError(
        ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'taken' already exists."
    )
    request = create_topics.CreateTopicsRequest(
        topics=[creatable("fresh", 2), creatable("taken")], timeout_ms=1000
    )
    response = call(services(topics=topics), request, 7)
    answers = [(t.name, t.error_code, t.error_message) for t in response.topics]
    assert answers == [
        ("fresh", 0, None),
        ("taken", ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'taken' already exists."),
    ]
    assert [name for name, _ in topics.created] == ["fresh"]


def test_delete_topics_of_a_topic_that_does_not_exist() -> None:
    topics = FakeTopics(topic_of("a"))
    request = delete_topics.DeleteTopicsRequest(topic_names=["a", "nope"], timeout_ms=1000)
    response = call(services(topics=topics), request, 5)
    # Kafka shuffles the answer, so that its order tells nothing of which topics exist.
    assert sorted((r.name, r.error_code) for r in response.responses) == [
        ("a", 0),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert topics.deleted == ["a"]


def test_create_partitions_reports_the_refusal() -> None:
    topics = FakeTopics(topic_of("a"))
    topics.refuse["a"] = KafkaError(
        ErrorCode.INVALID_PARTITIONS, "Topic already has 1 partition(s)."
    )
    request = create_partitions.CreatePartitionsRequest(
        topics=[create_partitions.CreatePartitionsTopic(name="a", count=1, assignments=None)],
        timeout_ms=1000,
        validate_only=False,
    )
    [result] = call(services(topics=topics), request, 3).results
    assert (result.error_code, result.error_message) == (
        ErrorCode.INVALID_PARTITIONS,
        "Topic already has 1 partition(s).",
    )


def test_describe_configs_of_an_unknown_topic_and_of_another_broker() -> None:
    request = describe_configs.DescribeConfigsRequest(
        resources=[
            describe_configs.DescribeConfigsResource(resource_type=2, resource_name="nope"),
            describe_configs.DescribeConfigsResource(resource_type=4, resource_name="7"),
        ]
    )
    results = call(services(), request, 4).results
    assert (results[0].error_code, results[0].error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "",
    )
    assert results[1].error_code == ErrorCode.INVALID_REQUEST


def test_list_config_resources_lists_topics_and_live_brokers() -> None:
    topics = FakeTopics(topic_of("b"), topic_of("a"))
    response = call(
        services(topics=topics),
        list_config_resources.ListConfigResourcesRequest(resource_types=[2, 4]),
        1,
    )
    assert [(r.resource_type, r.resource_name) for r in response.config_resources] == [
        (4, "0"),
        (2, "a"),
        (2, "b"),
    ]


def test_describe_log_dirs_of_an_empty_directory(tmp_path: Path) -> None:
    response = call(
        services(log_dir=tmp_path), describe_log_dirs.DescribeLogDirsRequest(topics=None), 4
    )
    [result] = response.results
    assert (result.log_dir, result.topics) == (str(tmp_path.resolve()), [])


class NotTheController:
    async def elect_leaders(self, partitions: object, unclean: bool) -> dict:
        raise NotControllerError()

    async def reassign(self, targets: object, allow: bool = True) -> dict:
        raise NotControllerError()


def test_controller_requests_sent_to_another_broker() -> None:
    elect = elect_leaders.ElectLeadersRequest(
        election_type=0,
        topic_partitions=[elect_leaders.TopicPartitions(topic="a", partitions=[0])],
    )
    assert (
        call(services(controller=NotTheController()), elect, 2).error_code
        == ErrorCode.NOT_CONTROLLER
    )
    reassign = alter_partition_reassignments.AlterPartitionReassignmentsRequest(topics=[])
    answer = call(services(controller=NotTheController()), reassign, 1)
    assert answer.error_code == ErrorCode.NOT_CONTROLLER
