"""Authorization of the config, cluster and partition admin APIs, as Kafka 4.4 does it.

DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs, ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments, DescribeCluster,
DescribeTopicPartitions, ListConfigResources, DeleteRecords and DescribeProducers
against fakes and a real ``AclAuthorizer``: the refused answers' codes, messages,
defaults and order, permission before existence, and the authorized-operations fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    alter_configs,
    alter_partition_reassignments,
    delete_records,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    elect_leaders,
    incremental_alter_configs,
    list_config_resources,
    list_partition_reassignments,
)
from kpybroker.security.acls.authorizer import AclAuthorizer
from kpybroker.security.acls.model import CLUSTER_NAME, AclOperation, ResourceType
from tests.helpers.fake_services import FakeReplicas, FakeTopics, call, services, topic_of
from tests.unit.test_authz_admin_topics import ALICE, ZERO_ID, granting

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
# Config resource type ids.
CONFIG_TOPIC, CONFIG_BROKER, CONFIG_LOGGER, CONFIG_METRICS, CONFIG_GROUP = 2, 4, 8, 16, 32
TOPIC_AUTHZ = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_AUTHZ = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_AUTHZ = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
NOT_COMPUTED = -(2**31)


def as_alice(request: Any, version: int, authorizer: AclAuthorizer, **kwargs: Any) -> Any:
    return call(services(authorizer=authorizer, **kwargs), request, version, principal=ALICE)


def needs(operation: str) -> str:
    """The message of a refused cluster operation, as this broker words Kafka's."""
    return f"needs {operation} permission."


# -- DescribeConfigs ----------------------------------------------------------------------


def describe(*resources: tuple[int, str]) -> describe_configs.DescribeConfigsRequest:
    return describe_configs.DescribeConfigsRequest(
        resources=[
            describe_configs.DescribeConfigsResource(
                resource_type=kind, resource_name=name, configuration_keys=["retention.ms"]
            )
            for kind, name in resources
        ]
    )


def test_describe_configs_answers_refused_resources_last() -> None:
    topics = FakeTopics(topic_of("open"), topic_of("closed"))
    authorizer = granting((TOPIC, "open", AclOperation.ALTER_CONFIGS))  # implies DESCRIBE_CONFIGS
    request = describe(
        (CONFIG_TOPIC, "closed"),
        (CONFIG_GROUP, "g"),
        (CONFIG_TOPIC, "open"),
        (CONFIG_BROKER, "0"),
        (CONFIG_TOPIC, "missing"),
    )
    results = as_alice(request, 4, authorizer, topics=topics).results
    assert [(r.resource_name, r.error_code, r.error_message) for r in results] == [
        ("open", 0, ""),
        ("closed", TOPIC_AUTHZ, "Topic authorization failed."),
        ("g", GROUP_AUTHZ, "Group authorization failed."),
        ("0", CLUSTER_AUTHZ, "Cluster authorization failed."),
        ("missing", TOPIC_AUTHZ, "Topic authorization failed."),  # no existence leak
    ]
    assert [r.name for r in results[0].configs] == ["retention.ms"]
    assert all(r.configs == [] for r in results[1:])


def test_describe_configs_of_an_allowed_missing_topic() -> None:
    authorizer = granting((TOPIC, "missing", AclOperation.DESCRIBE_CONFIGS))
    [result] = as_alice(describe((CONFIG_TOPIC, "missing")), 4, authorizer).results
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("authorizer", [None, granting()])
def test_an_unknown_resource_type_fails_the_whole_describe(authorizer: AclAuthorizer) -> None:
    topics = FakeTopics(topic_of("t"))
    request = describe((CONFIG_TOPIC, "t"), (3, "x"))
    results = as_alice(request, 4, authorizer, topics=topics).results
    message = (
        "This most likely occurs because of a request being malformed by the client library "
        "or the message was sent to an incompatible broker. See the broker logs for more details."
    )
    assert [(r.resource_name, r.error_code, r.error_message, r.configs) for r in results] == [
        ("t", ErrorCode.INVALID_REQUEST, message, []),
        ("x", ErrorCode.INVALID_REQUEST, message, []),
    ]


# -- AlterConfigs, IncrementalAlterConfigs ------------------------------------------------


def alter(*resources: tuple[int, str, dict[str, str | None]]) -> alter_configs.AlterConfigsRequest:
    return alter_configs.AlterConfigsRequest(
        resources=[
            alter_configs.AlterConfigsResource(
                resource_type=kind,
                resource_name=name,
                configs=[
                    alter_configs.AlterableConfig(name=k, value=v) for k, v in configs.items()
                ],
            )
            for kind, name, configs in resources
        ],
        validate_only=False,
    )


def outcomes(response: Any) -> list[tuple[str, int, str | None]]:
    return [(r.resource_name, r.error_code, r.error_message) for r in response.responses]


def test_alter_configs_answers_in_request_order_with_kafka_messages() -> None:
    topics = FakeTopics(topic_of("open"), topic_of("closed"))
    authorizer = granting((TOPIC, "open", AclOperation.ALTER_CONFIGS))
    retention = {"retention.ms": "1000"}
    request = alter(
        (CONFIG_BROKER, "0", retention),
        (CONFIG_TOPIC, "closed", retention),
        (CONFIG_TOPIC, "open", retention),
        (CONFIG_GROUP, "g", {}),
        (CONFIG_METRICS, "m", {}),
        (CONFIG_LOGGER, "0", {}),
        (CONFIG_TOPIC, "missing", retention),
    )
    response = as_alice(request, 2, authorizer, topics=topics)
    assert outcomes(response) == [
        ("0", CLUSTER_AUTHZ, None),  # the broker's own refusal has no message
        ("closed", TOPIC_AUTHZ, "Topic authorization failed."),
        ("open", 0, None),
        ("g", GROUP_AUTHZ, "Group authorization failed."),
        ("m", CLUSTER_AUTHZ, "Cluster authorization failed."),
        ("0", ErrorCode.INVALID_REQUEST, "Unknown resource type 8"),  # not a type to alter
        ("missing", TOPIC_AUTHZ, "Topic authorization failed."),
    ]


def test_alter_configs_checks_duplicates_and_nulls_before_permission() -> None:
    request = alter(
        (CONFIG_TOPIC, "twice", {}),
        (CONFIG_TOPIC, "twice", {}),
        (CONFIG_TOPIC, "null", {"retention.ms": None}),
    )
    response = as_alice(request, 2, granting())
    assert outcomes(response) == [
        ("twice", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."),
        ("twice", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."),
        ("null", ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"),
    ]


def incremental(
    *resources: tuple[int, str, list[tuple[str, int, str | None]]],
) -> incremental_alter_configs.IncrementalAlterConfigsRequest:
    return incremental_alter_configs.IncrementalAlterConfigsRequest(
        resources=[
            incremental_alter_configs.AlterConfigsResource(
                resource_type=kind,
                resource_name=name,
                configs=[
                    incremental_alter_configs.AlterableConfig(
                        name=key, config_operation=op, value=value
                    )
                    for key, op, value in ops
                ],
            )
            for kind, name, ops in resources
        ],
        validate_only=False,
    )


def test_incremental_alter_configs_checks_broker_loggers_and_unknown_operations() -> None:
    topics = FakeTopics(topic_of("open"), topic_of("closed"))
    authorizer = granting((TOPIC, "open", AclOperation.ALTER_CONFIGS))
    odd = [("retention.ms", 7, "1")]
    request = incremental(
        (CONFIG_LOGGER, "0", [("kafka", 0, "DEBUG")]),
        (CONFIG_TOPIC, "closed", odd),
        (CONFIG_TOPIC, "open", odd),
        (CONFIG_TOPIC, "open", [("retention.ms", 0, None)]),
    )
    response = as_alice(request, 1, authorizer, topics=topics)
    assert outcomes(response) == [
        ("0", CLUSTER_AUTHZ, None),
        ("closed", TOPIC_AUTHZ, "Topic authorization failed."),  # before the operation check
        ("open", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."),
        ("open", ErrorCode.INVALID_REQUEST, "Each resource must appear at most once."),
    ]
    allowed = as_alice(incremental((CONFIG_TOPIC, "open", odd)), 1, authorizer, topics=topics)
    assert outcomes(allowed) == [("open", ErrorCode.INVALID_REQUEST, "Unknown operations type 7")]


def test_alter_configs_of_a_topic_with_alter_configs() -> None:
    topics = FakeTopics(topic_of("t"))
    built = services(topics=topics, authorizer=granting((TOPIC, "t", AclOperation.ALTER_CONFIGS)))
    response = call(built, alter((CONFIG_TOPIC, "t", {"retention.ms": "1000"})), 2, ALICE)
    assert outcomes(response) == [("t", 0, None)]
    assert built.cluster.topic_overrides("t") == {"retention.ms": "1000"}


# -- DescribeLogDirs ----------------------------------------------------------------------


@pytest.mark.parametrize(("version", "code"), [(2, 0), (3, CLUSTER_AUTHZ)])
def test_describe_log_dirs_needs_describe_on_the_cluster(
    tmp_path: Path, version: int, code: int
) -> None:
    request = describe_log_dirs.DescribeLogDirsRequest(topics=None)
    refused = as_alice(request, version, granting(), log_dir=tmp_path)
    # v1-2 have no error field: the answer looks like a broker without directories.
    assert (refused.error_code, refused.results) == (code, [])
    allowed = as_alice(
        request, version, granting((CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE)), log_dir=tmp_path
    )
    assert [r.log_dir for r in allowed.results] == [str(tmp_path.resolve())]


# -- ElectLeaders, the reassignment APIs --------------------------------------------------


def elect(topics: dict[str, list[int]] | None) -> elect_leaders.ElectLeadersRequest:
    wanted = (
        None
        if topics is None
        else [elect_leaders.TopicPartitions(topic=t, partitions=p) for t, p in topics.items()]
    )
    return elect_leaders.ElectLeadersRequest(election_type=0, topic_partitions=wanted)


def test_elect_leaders_needs_alter_on_the_cluster() -> None:
    response = as_alice(elect({"b": [1, 0], "a": [0]}), 2, granting())
    assert response.error_code == CLUSTER_AUTHZ
    answered = [
        (r.topic, p.partition_id, p.error_code, p.error_message)
        for r in response.replica_election_results
        for p in r.partition_result
    ]
    assert [a[:3] for a in answered] == [
        ("b", 1, CLUSTER_AUTHZ),
        ("b", 0, CLUSTER_AUTHZ),
        ("a", 0, CLUSTER_AUTHZ),
    ]
    assert all(a[3].startswith("Request ") and a[3].endswith(needs("ALTER")) for a in answered)
    everything = as_alice(elect(None), 0, granting())
    assert (everything.error_code, everything.replica_election_results) == (0, [])


def test_alter_partition_reassignments_needs_alter_on_the_cluster() -> None:
    request = alter_partition_reassignments.AlterPartitionReassignmentsRequest(
        allow_replication_factor_change=False,
        topics=[
            alter_partition_reassignments.ReassignableTopic(
                name="t",
                partitions=[
                    alter_partition_reassignments.ReassignablePartition(
                        partition_index=i, replicas=[0]
                    )
                    for i in (2, 0)
                ],
            )
        ],
    )
    response = as_alice(request, 1, granting((CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE)))
    assert response.error_code == CLUSTER_AUTHZ and response.error_message.endswith(needs("ALTER"))
    assert response.allow_replication_factor_change is True  # Kafka's error answer's default
    [topic] = response.responses
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [
        (2, CLUSTER_AUTHZ),
        (0, CLUSTER_AUTHZ),
    ]
    assert {p.error_message for p in topic.partitions} == {response.error_message}


def test_list_partition_reassignments_needs_describe_on_the_cluster() -> None:
    topics = FakeTopics(topic_of("t", 3))
    request = list_partition_reassignments.ListPartitionReassignmentsRequest(
        topics=[
            list_partition_reassignments.ListPartitionReassignmentsTopics(
                name="t", partition_indexes=[1, 0]
            )
        ]
    )
    response = as_alice(request, 0, granting(), topics=topics)
    assert response.error_code == CLUSTER_AUTHZ
    assert response.error_message.endswith(needs("DESCRIBE"))
    [topic] = response.topics
    assert [(p.partition_index, p.replicas) for p in topic.partitions] == [(1, []), (0, [])]
    everything = list_partition_reassignments.ListPartitionReassignmentsRequest(topics=None)
    assert as_alice(everything, 0, granting()).topics == []
    allowed = as_alice(
        request, 0, granting((CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE)), topics=topics
    )
    assert (allowed.error_code, allowed.topics) == (0, [])


# -- DescribeCluster, DescribeTopicPartitions ---------------------------------------------


@pytest.mark.parametrize(
    ("authorizer", "include", "operations"),
    [
        (None, True, 8096),
        (granting(), True, 0),
        (granting((CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE)), True, 1 << 8),
        (granting((CLUSTER, CLUSTER_NAME, AclOperation.ALTER)), True, (1 << 7) | (1 << 8)),
        (granting(), False, NOT_COMPUTED),
    ],
)
def test_describe_cluster_operations_need_describe_on_the_cluster(
    authorizer: AclAuthorizer | None, include: bool, operations: int
) -> None:
    request = describe_cluster.DescribeClusterRequest(include_cluster_authorized_operations=include)
    response = as_alice(request, 1, authorizer)
    assert (response.error_code, response.cluster_authorized_operations) == (0, operations)
    assert [b.broker_id for b in response.brokers] == [0]  # no check on the brokers


def describe_partitions(*names: str) -> describe_topic_partitions.DescribeTopicPartitionsRequest:
    return describe_topic_partitions.DescribeTopicPartitionsRequest(
        topics=[describe_topic_partitions.TopicRequest(name=n) for n in names],
        response_partition_limit=2000,
    )


def test_describe_topic_partitions_refuses_named_topics_last() -> None:
    topics = FakeTopics(topic_of("a", 2), topic_of("b"), topic_of("c"))
    authorizer = granting(
        (TOPIC, "a", AclOperation.READ),
        (TOPIC, "c", AclOperation.DESCRIBE),
        (TOPIC, "nope", AclOperation.DESCRIBE),
    )
    response = as_alice(
        describe_partitions("zz", "b", "c", "a", "nope"), 0, authorizer, topics=topics
    )
    described = [
        (t.name, t.error_code, t.topic_authorized_operations, len(t.partitions))
        for t in response.topics
    ]
    read_describe, describe_only = (1 << 3) | (1 << 8), 1 << 8
    assert described == [
        ("a", 0, read_describe, 2),
        ("c", 0, describe_only, 1),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, describe_only, 0),
        ("b", TOPIC_AUTHZ, NOT_COMPUTED, 0),
        ("zz", TOPIC_AUTHZ, NOT_COMPUTED, 0),  # whether or not it exists
    ]
    assert {(t.topic_id, t.is_internal) for t in response.topics[3:]} == {(ZERO_ID, False)}


def test_describe_all_topic_partitions_leaves_refused_topics_out() -> None:
    topics = FakeTopics(topic_of("a"), topic_of("b"))
    response = as_alice(
        describe_partitions(), 0, granting((TOPIC, "b", AclOperation.DESCRIBE)), topics=topics
    )
    assert [t.name for t in response.topics] == ["b"]
    everything = as_alice(describe_partitions(), 0, None, topics=topics)
    assert [(t.name, t.topic_authorized_operations) for t in everything.topics] == [
        ("a", 3576),
        ("b", 3576),
    ]


# -- ListConfigResources ------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_list_config_resources_needs_describe_configs_on_the_cluster(version: int) -> None:
    topics = FakeTopics(topic_of("t"))
    request = list_config_resources.ListConfigResourcesRequest(resource_types=[])
    refused = as_alice(request, version, granting(), topics=topics)
    assert (refused.error_code, refused.config_resources) == (CLUSTER_AUTHZ, [])
    allowed = as_alice(
        request,
        1,
        granting((CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE_CONFIGS)),
        topics=topics,
    )
    listed = [(r.resource_type, r.resource_name) for r in allowed.config_resources]
    assert listed == [(CONFIG_LOGGER, "0"), (CONFIG_BROKER, "0"), (CONFIG_TOPIC, "t")]


# -- DeleteRecords, DescribeProducers -----------------------------------------------------


def test_delete_records_needs_delete_on_the_topic() -> None:
    replicas = FakeReplicas()
    replicas.elsewhere |= {("a", 0), ("b", 0)}
    request = delete_records.DeleteRecordsRequest(
        topics=[
            delete_records.DeleteRecordsTopic(
                name=name,
                partitions=[delete_records.DeleteRecordsPartition(partition_index=0, offset=0)],
            )
            for name in ("a", "b", "missing-hidden", "missing-seen")
        ],
        timeout_ms=1000,
    )
    authorizer = granting(
        (TOPIC, "a", AclOperation.DELETE), (TOPIC, "missing-seen", AclOperation.DELETE)
    )
    topics = as_alice(request, 2, authorizer, replicas=replicas).topics
    assert [
        (t.name, t.partitions[0].error_code, t.partitions[0].low_watermark) for t in topics
    ] == [
        ("a", ErrorCode.NOT_LEADER_OR_FOLLOWER, -1),
        ("b", TOPIC_AUTHZ, -1),
        ("missing-hidden", TOPIC_AUTHZ, -1),
        ("missing-seen", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    ]


def test_describe_producers_needs_read_on_the_topic() -> None:
    topics = FakeTopics(topic_of("a"), topic_of("b"))
    replicas = FakeReplicas()
    replicas.elsewhere.add(("a", 0))
    request = describe_producers.DescribeProducersRequest(
        topics=[
            describe_producers.TopicRequest(name=name, partition_indexes=[0, 1])
            for name in ("a", "b", "bad name!", "missing-seen", "missing-hidden")
        ]
    )
    authorizer = granting(
        (TOPIC, "a", AclOperation.READ), (TOPIC, "missing-seen", AclOperation.READ)
    )
    answer = as_alice(request, 0, authorizer, topics=topics, replicas=replicas).topics
    first = {t.name: (t.partitions[0].error_code, t.partitions[0].error_message) for t in answer}
    assert first["a"] == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
    assert first["b"] == (TOPIC_AUTHZ, "Topic authorization failed.")
    assert first["bad name!"][0] == ErrorCode.INVALID_TOPIC_EXCEPTION  # before permission
    assert first["missing-seen"] == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "This server does not host this topic-partition.",
    )
    assert first["missing-hidden"] == (TOPIC_AUTHZ, "Topic authorization failed.")
    assert [len(t.partitions) for t in answer] == [2] * 5
