"""Handlers of the cluster, topic, config and controller APIs against fakes of their services.

ApiVersions, Metadata, DescribeCluster, CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs, ListConfigResources, DescribeLogDirs,
ElectLeaders and the reassignment APIs: each handler only maps the request
onto the services it is given, so each is tested with nothing else.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from kpybroker.apis import all_apis
from kpybroker.apis.api_versions import answer_before_authentication
from kpybroker.apis.support.context import RequestContext
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
from kpybroker.topic_admin import TOO_MANY_ADDED
from tests.helpers.fake_services import FakeGroups, FakeTopics, call, services, topic_of


def test_api_versions_advertises_the_registry() -> None:
    request = api_versions.ApiVersionsRequest(
        client_software_name="unit-test", client_software_version="1.0"
    )
    response = call(services(), request, 3)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {key: (s.advertised_min, s.max_version) for key, s in all_apis().items()}


def test_api_versions_v5_checks_the_cluster_and_node_it_names() -> None:
    """KIP-1242: both or neither (INVALID_REQUEST); another cluster or node is
    REBOOTSTRAP_REQUIRED, with no APIs listed; before authentication (SASL) it is not
    checked, as Kafka's ``SaslServerAuthenticator`` does not."""
    fake = services()
    ours, node = fake.cluster.cluster_id, fake.cluster.broker_id

    def ask(cluster_id: str | None, node_id: int, version: int = 5) -> tuple[int, int]:
        request = api_versions.ApiVersionsRequest(
            client_software_name="unit-test",
            client_software_version="1.0",
            cluster_id=cluster_id,
            node_id=node_id,
        )
        response = call(fake, request, version)
        return response.error_code, len(response.api_keys)

    listed = len(all_apis())
    assert ask(None, -1) == (ErrorCode.NONE, listed)
    assert ask(ours, node) == (ErrorCode.NONE, listed)
    assert ask("another-cluster", node) == (ErrorCode.REBOOTSTRAP_REQUIRED, 0)
    assert ask(ours, node + 1) == (ErrorCode.REBOOTSTRAP_REQUIRED, 0)
    assert ask(ours, -1) == (ErrorCode.INVALID_REQUEST, 0)
    assert ask(None, node) == (ErrorCode.INVALID_REQUEST, 0)
    assert ask("another-cluster", node, version=4) == (ErrorCode.NONE, listed)  # not sent
    before = RequestContext(fake, 5, 1, "c", "127.0.0.1", "L", api_name="ApiVersions")
    for cluster_id, node_id, expected in (
        ("another-cluster", node + 1, ErrorCode.NONE),
        (ours, -1, ErrorCode.INVALID_REQUEST),
    ):
        request = api_versions.ApiVersionsRequest(
            client_software_name="unit-test",
            client_software_version="1.0",
            cluster_id=cluster_id,
            node_id=node_id,
        )
        response = asyncio.run(answer_before_authentication(before, request))
        assert response.error_code == expected


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


def test_metadata_v13_answers_a_top_level_error_code_of_none() -> None:
    """Kafka sets the top-level code only in the answer it makes of an exception."""
    topics = FakeTopics(topic_of("a", 2))
    v12 = call(services(topics=topics), metadata_request("a", "nope"), 12)
    v13 = call(services(topics=topics), metadata_request("a", "nope"), 13)
    assert v13.error_code == ErrorCode.NONE
    assert [(t.name, t.error_code) for t in v13.topics] == [
        (t.name, t.error_code) for t in v12.topics
    ]


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


def test_describe_cluster_v2_lists_every_broker_unfenced() -> None:
    """KIP-1073: kpybroker's registered brokers are all live (registrations are ephemeral),
    so asking for fenced brokers too adds none, and none is fenced."""
    fake = services()
    fake.cluster.brokers = {0: 9092, 2: 9094}
    for fenced_too in (False, True):
        request = describe_cluster.DescribeClusterRequest(include_fenced_brokers=fenced_too)
        response = call(fake, request, 2)
        assert [(b.broker_id, b.port, b.is_fenced) for b in response.brokers] == [
            (0, 9092, False),
            (2, 9094, False),
        ]


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


def test_create_topics_over_kafkas_controller_bounds_refuses_every_topic() -> None:
    """More than 10,000 partitions in all, or more than 10,000 metadata records (a topic,
    its partitions and its configs) among the topics that pass validation: every topic of
    the request gets POLICY_VIOLATION and nothing is created, as from Kafka 4."""
    topics = FakeTopics(topic_of("taken"))
    topics.refuse["taken"] = KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "exists")
    configs = [create_topics.CreatableTopicConfig(name=f"k{i}", value="v") for i in range(2)]
    many_configs = creatable("c", 9_999)
    many_configs.configs = configs
    cases = {
        "Excessively large number of partitions per request.": [
            creatable("a", 5_000),
            creatable("b", 5_001),
            creatable("twice", 1),  # named twice: not counted, but answered the refusal too
            creatable("twice", 1),
        ],
        "Unable to perform excessively large batch operation.": [many_configs],
    }
    for message, asked in cases.items():
        request = create_topics.CreateTopicsRequest(topics=asked, timeout_ms=1000)
        response = call(services(topics=topics), request, 7)
        assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
            (t.name, ErrorCode.POLICY_VIOLATION, message) for t in asked
        ]
        assert all(kwargs["validate_only"] for _, kwargs in topics.created)
    # Only the topics that pass validation write records: 9,999 here, so it is created.
    request = create_topics.CreateTopicsRequest(
        topics=[creatable("d", 9_998), creatable("taken", 1)], timeout_ms=1000
    )
    response = call(services(topics=topics), request, 7)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("d", 0),
        ("taken", ErrorCode.TOPIC_ALREADY_EXISTS),
    ]
    assert "d" in topics.topics


def test_create_partitions_adding_over_ten_thousand_refuses_every_topic() -> None:
    topics = FakeTopics(topic_of("a"), topic_of("b", 3))
    for count, refused in ((10_002, True), (10_001, False)):
        asked = [("nope", 9_000), ("b", 2), ("a", count)]  # unknown and fewer count for nothing
        request = create_partitions.CreatePartitionsRequest(
            topics=[
                create_partitions.CreatePartitionsTopic(name=n, count=c, assignments=None)
                for n, c in asked
            ],
            timeout_ms=1000,
            validate_only=False,
        )
        results = call(services(topics=topics), request, 3).results
        policy = [(name, ErrorCode.POLICY_VIOLATION, TOO_MANY_ADDED) for name, _ in asked]
        assert ([(r.name, r.error_code, r.error_message) for r in results] == policy) == refused


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


def test_describe_log_dirs_v5_says_which_directories_are_cordoned(tmp_path: Path) -> None:
    """``cordoned.log.dirs`` names directories, or ``*`` all of them (KIP-1066)."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    request = describe_log_dirs.DescribeLogDirsRequest(topics=None)
    for cordoned, expected in (
        ("", {first: False, second: False}),
        (str(second), {first: False, second: True}),
        ("*", {first: True, second: True}),
    ):
        config = {"log.dirs": f"{first},{second}", "cordoned.log.dirs": cordoned}
        fake = services(log_dir=first, config=config)
        fake.logs.log_dirs.append(second)
        response = call(fake, request, 5)
        assert {Path(r.log_dir): r.is_cordoned for r in response.results} == {
            d.resolve(): c for d, c in expected.items()
        }


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
