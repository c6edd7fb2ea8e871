"""Every response field the schemas let be null, and the scenario that compares it with Kafka.

A nullable field is where null and empty can be confused: kpybroker once
answered an errored Fetch partition with null records where Kafka sends
empty ones, and every librdkafka consumer hung. So each nullable field of
every response version kpybroker serves is listed here with the scenario
whose whole answers (``Probe.answer``) include it; the differential test
checks that the scenario really observed it on both brokers, where any null
against empty fails, and :func:`nullable_fields` (from the schemas and the
handler registry) keeps this table complete: a new API or field that is
not listed fails the suite.

A field a one-node Kafka cannot be made to send is listed in
:data:`NOT_ON_ONE_NODE` with what Kafka sends there instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import whole

#: (API, field path) -> the scenario whose whole answers show it.
NULLABLE: dict[tuple[str, str], str] = {
    ("Produce", "responses/partition_responses/record_errors/batch_index_error_message"): (
        "produce_error_paths"
    ),
    ("Produce", "responses/partition_responses/error_message"): "produce_error_paths",
    ("Fetch", "responses/partitions/aborted_transactions"): "fetch_error_paths",
    ("Fetch", "responses/partitions/records"): "fetch_error_paths",
    ("Metadata", "brokers/rack"): "metadata_answers",
    ("Metadata", "cluster_id"): "metadata_answers",
    ("Metadata", "topics/name"): "metadata_answers",
    ("OffsetFetch", "topics/partitions/metadata"): "group_offsets_error_paths",
    ("OffsetFetch", "groups/topics/partitions/metadata"): "group_offsets_error_paths",
    ("FindCoordinator", "error_message"): "find_coordinator_answers",
    ("FindCoordinator", "coordinators/error_message"): "find_coordinator_answers",
    ("JoinGroup", "protocol_type"): "group_member_answers",
    ("JoinGroup", "protocol_name"): "group_member_answers",
    ("JoinGroup", "members/group_instance_id"): "group_member_answers",
    ("LeaveGroup", "members/group_instance_id"): "group_member_answers",
    ("SyncGroup", "protocol_type"): "group_member_answers",
    ("SyncGroup", "protocol_name"): "group_member_answers",
    ("DescribeGroups", "groups/members/group_instance_id"): "group_member_answers",
    ("DescribeGroups", "groups/error_message"): "group_admin_error_paths",
    ("DeleteGroups", "results/error_message"): "group_admin_error_paths",
    ("ConsumerGroupHeartbeat", "error_message"): "consumer_group_heartbeat_error_paths",
    ("ConsumerGroupHeartbeat", "member_id"): "consumer_group_heartbeat_error_paths",
    ("ConsumerGroupHeartbeat", "assignment"): "consumer_group_member_life",
    ("ConsumerGroupDescribe", "groups/error_message"): "consumer_group_member_life",
    ("ConsumerGroupDescribe", "groups/members/instance_id"): "consumer_group_member_life",
    ("ConsumerGroupDescribe", "groups/members/rack_id"): "consumer_group_member_life",
    ("ConsumerGroupDescribe", "groups/members/subscribed_topic_regex"): (
        "consumer_group_member_life"
    ),
    ("CreateTopics", "topics/error_message"): "topic_admin_error_paths",
    ("CreateTopics", "topics/configs"): "topic_admin_error_paths",
    ("CreateTopics", "topics/configs/value"): "topic_admin_error_paths",
    ("DeleteTopics", "responses/name"): "topic_admin_error_paths",
    ("DeleteTopics", "responses/error_message"): "topic_admin_error_paths",
    ("DescribeConfigs", "results/error_message"): "topic_admin_error_paths",
    ("DescribeConfigs", "results/configs/value"): "describe_configs_answers",
    ("DescribeConfigs", "results/configs/synonyms/value"): "describe_configs_answers",
    ("DescribeConfigs", "results/configs/documentation"): "describe_configs_answers",
    ("AlterConfigs", "responses/error_message"): "alter_configs_error_paths",
    ("IncrementalAlterConfigs", "responses/error_message"): "alter_configs_error_paths",
    ("CreatePartitions", "results/error_message"): "topic_admin_error_paths",
    ("ElectLeaders", "replica_election_results/partition_result/error_message"): (
        "partition_admin_answers"
    ),
    ("AlterPartitionReassignments", "error_message"): "partition_admin_answers",
    ("AlterPartitionReassignments", "responses/partitions/error_message"): (
        "partition_admin_answers"
    ),
    ("ListPartitionReassignments", "error_message"): "partition_admin_answers",
    ("DescribeProducers", "topics/partitions/error_message"): "partition_admin_answers",
    ("DescribeTopicPartitions", "topics/name"): "partition_admin_answers",
    ("DescribeTopicPartitions", "topics/partitions/eligible_leader_replicas"): (
        "partition_admin_answers"
    ),
    ("DescribeTopicPartitions", "topics/partitions/last_known_elr"): "partition_admin_answers",
    ("DescribeTopicPartitions", "next_cursor"): "partition_admin_answers",
    ("DescribeCluster", "error_message"): "describe_cluster_answers",
    ("DescribeCluster", "brokers/rack"): "describe_cluster_answers",
    ("SaslAuthenticate", "error_message"): "sasl_authenticate_answers",
    ("DescribeAcls", "error_message"): "authz_cluster_admin",
    ("CreateAcls", "results/error_message"): "authz_cluster_admin",
    ("DeleteAcls", "filter_results/error_message"): "authz_cluster_admin",
    ("DeleteAcls", "filter_results/matching_acls/error_message"): "authz_cluster_admin",
    ("DescribeClientQuotas", "error_message"): "authz_cluster_admin",
    ("DescribeClientQuotas", "entries"): "authz_cluster_admin",
    ("DescribeClientQuotas", "entries/entity/entity_name"): "authz_cluster_admin",
    ("AlterClientQuotas", "entries/error_message"): "authz_cluster_admin",
    ("AlterClientQuotas", "entries/entity/entity_name"): "authz_cluster_admin",
    ("DescribeUserScramCredentials", "error_message"): "authz_cluster_admin",
    ("DescribeUserScramCredentials", "results/error_message"): "authz_cluster_admin",
    ("AlterUserScramCredentials", "results/error_message"): "authz_cluster_admin",
    ("ShareGroupHeartbeat", "error_message"): "share_group_heartbeat_error_paths",
    ("ShareGroupHeartbeat", "member_id"): "share_group_heartbeat_error_paths",
    ("ShareGroupHeartbeat", "assignment"): "share_group_heartbeat_error_paths",
    ("ShareGroupDescribe", "groups/error_message"): "share_group_describe_error_paths",
    ("ShareGroupDescribe", "groups/members/rack_id"): "share_group_describe_error_paths",
    ("ShareFetch", "error_message"): "share_fetch_acknowledge_cycle",
    ("ShareFetch", "responses/partitions/error_message"): "share_fetch_acknowledge_cycle",
    ("ShareFetch", "responses/partitions/acknowledge_error_message"): (
        "share_fetch_acknowledge_cycle"
    ),
    ("ShareAcknowledge", "error_message"): "share_session_error_paths",
    ("ShareAcknowledge", "responses/partitions/error_message"): "share_session_error_paths",
    ("DescribeShareGroupOffsets", "groups/error_message"): "share_group_offsets_error_paths",
    ("DescribeShareGroupOffsets", "groups/topics/partitions/error_message"): (
        "share_group_offsets_error_paths"
    ),
    ("AlterShareGroupOffsets", "error_message"): "share_group_offsets_error_paths",
    ("AlterShareGroupOffsets", "responses/partitions/error_message"): (
        "share_group_offsets_error_paths"
    ),
    ("DeleteShareGroupOffsets", "error_message"): "share_group_offsets_error_paths",
    ("DeleteShareGroupOffsets", "responses/error_message"): "share_group_offsets_error_paths",
    ("InitializeShareGroupState", "results/partitions/error_message"): "share_state_answers",
    ("ReadShareGroupState", "results/partitions/error_message"): "share_state_answers",
    ("WriteShareGroupState", "results/partitions/error_message"): "share_state_answers",
    ("DeleteShareGroupState", "results/partitions/error_message"): "share_state_answers",
    ("ReadShareGroupStateSummary", "results/partitions/error_message"): "share_state_answers",
}

#: Fields only an answer naming another broker carries, with what Kafka puts there.
NOT_ON_ONE_NODE: dict[tuple[str, str], str] = {
    ("Produce", "node_endpoints/rack"): (
        "node endpoints come only with NOT_LEADER_OR_FOLLOWER, which a lone broker never "
        "answers; Kafka sends the leader's Node.rack(), null when it has none, as kpybroker"
    ),
    ("Fetch", "node_endpoints/rack"): (
        "node endpoints come only with NOT_LEADER_OR_FOLLOWER, which a lone broker never "
        "answers; Kafka sends the leader's Node.rack(), null when it has none, as kpybroker"
    ),
    ("ShareFetch", "node_endpoints/rack"): (
        "node endpoints come only with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, which a "
        "lone broker never answers; Kafka sends the leader's Node.rack(), null when it has "
        "none, as kpybroker"
    ),
    ("ShareAcknowledge", "node_endpoints/rack"): (
        "node endpoints come only with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, which a "
        "lone broker never answers; Kafka sends the leader's Node.rack(), null when it has "
        "none, as kpybroker"
    ),
}


def nullable_fields(apis: Any) -> Iterator[tuple[str, str]]:
    """(API, field path) of every nullable response field in the versions each API serves.

    ``apis`` is kpybroker's handler registry (``all_apis().values()``).
    """
    for spec in apis:
        module = spec.request_class.__module__.rsplit(".", 1)[1]
        for path in _nullable(
            whole.response_fields(module), "", spec.min_version, spec.max_version
        ):
            yield spec.name, path


def _nullable(fields: list[Any], prefix: str, low: int, high: int) -> Iterator[str]:
    for field in fields:
        served = range(max(low, field.versions.low), min(high, field.versions.high) + 1)
        if not served:
            continue
        path = f"{prefix}{field.name}"
        if field.nullable is not None and any(v in field.nullable for v in served):
            yield path
        if field.is_struct:
            yield from _nullable(field.children, f"{path}/", low, high)


def observed(answered: set[tuple[str, str]], api: str, path: str) -> bool:
    """Whether a scenario's whole answers showed ``path`` of ``api`` (or a field inside it)."""
    return any(a == api and (p == path or p.startswith(f"{path}/")) for a, p in answered)
