"""Whole answers of the APIs that ``error_paths.py`` does not ask, at several versions.

Each asks an API with what succeeds beside what fails, and observes the
whole response (``Probe.answer``), so that every field the schemas let be
null is compared with Kafka's choice of null or empty (``nullable.py``
names, for each such field, the scenario that shows it).
"""

from __future__ import annotations

from typing import Any

from kpybroker.protocol.messages import (
    alter_partition_reassignments,
    alter_replica_log_dirs,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    elect_leaders,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_partition_reassignments,
    metadata,
    offset_delete,
    sync_group,
)

from .error_paths import commit_request, ready_coordinator
from .probe import Probe, error, scenario
from .scenarios import COORDINATOR_LOADING, assignment, subscription

#: Texts that are Kafka's own documentation of a config, not behaviour.
DOCUMENTATION = ("*documentation",)


@scenario
def metadata_answers(p: Probe) -> None:
    """Metadata at each version where its response changes, for known, unknown and bad names."""
    p.create_topic("diff-md", 2)
    for v in (0, 1, 2, 4, 7, 8, 9, 10, 12, 13):
        # Before v4 a request may create what it names: the unknown name waits for v4.
        names = ["diff-md", "bad name!"] if v < 4 else ["diff-md", "diff-md-missing", "bad name!"]
        request = metadata.MetadataRequest(
            topics=[metadata.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        # Kafka 4.4 answers the names it does not know (unknown and invalid alike) after the
        # ones it does, in java.util.HashSet order (KafkaApis.getTopicMetadata's removeAll).
        p.answer(f"v{v}", request, v, unordered=("topics",))
    [known] = p.metadata(["diff-md"]).topics
    by_id = metadata.MetadataRequest(
        topics=[
            metadata.MetadataRequestTopic(name=None, topic_id=known.topic_id),
            metadata.MetadataRequestTopic(name=None, topic_id=b"\x01" * 16),
        ],
        allow_auto_topic_creation=False,
    )
    for v in (12, 13):
        p.answer(f"v{v} by id", by_id, v)


@scenario
def group_member_answers(p: Probe) -> None:
    """JoinGroup, SyncGroup, DescribeGroups and LeaveGroup for a static and a dynamic member."""
    group, topic = "diff-gm", "diff-gm-topic"
    p.create_topic(topic, 1)
    ready_coordinator(p, group)
    for v in (5, 7, 9):
        gid = f"{group}-{v}"
        join = join_group.JoinGroupRequest(
            group_id=gid,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            group_instance_id="static-1",
            protocol_type="consumer",
            protocols=[
                join_group.JoinGroupRequestProtocol(name="range", metadata=subscription(topic))
            ],
        )
        ready_coordinator(p, gid)
        joined = p.answer(f"join v{v} static", join, v)
        if joined is None or joined.error_code:
            continue
        sync = sync_group.SyncGroupRequest(
            group_id=gid,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id="static-1",
            protocol_type="consumer",
            protocol_name="range",
            assignments=[
                sync_group.SyncGroupRequestAssignment(
                    member_id=joined.member_id, assignment=assignment(topic, [0])
                )
            ],
        )
        after = f"after join v{v}"
        p.answer(f"sync v5 static, {after}", sync, 5)
        describe = describe_groups.DescribeGroupsRequest(groups=[gid])
        p.answer(f"describe v5, {after}", describe, 5)
        leave = leave_group.LeaveGroupRequest(
            group_id=gid,
            members=[
                leave_group.MemberIdentity(member_id="", group_instance_id="static-1"),
                leave_group.MemberIdentity(member_id="diff-gm-nobody"),
            ],
        )
        p.answer(f"leave v5, {after}", leave, 5)


@scenario
def describe_configs_answers(p: Probe) -> None:
    """DescribeConfigs with synonyms and documentation, of a topic with an override."""
    p.create_topic("diff-dc", 1, {"retention.ms": "7200000"})
    for v in (1, 3, 4):
        request = describe_configs.DescribeConfigsRequest(
            resources=[
                describe_configs.DescribeConfigsResource(
                    resource_type=2,
                    resource_name="diff-dc",
                    configuration_keys=["retention.ms", "cleanup.policy", "compression.type"],
                )
            ],
            include_synonyms=True,
            include_documentation=True,
        )
        # Synonyms keep their order (precedence); the configs come in Kafka's map order.
        unordered = ("results/configs",)
        p.answer(f"v{v} with synonyms", request, v, varies=DOCUMENTATION, unordered=unordered)


def partitions(*pairs: tuple[str, list[int]], kind: Any) -> list[Any]:
    return [kind(topic, indexes) for topic, indexes in pairs]


@scenario
def partition_admin_answers(p: Probe) -> None:
    """ElectLeaders, reassignments, DescribeProducers, DescribeTopicPartitions: mixed outcomes."""
    p.create_topic("diff-pa", 2)
    wanted = (("diff-pa", [0, 7]), ("diff-nope", [0]))
    for v in (0, 1, 2):
        request = elect_leaders.ElectLeadersRequest(
            election_type=0,
            topic_partitions=partitions(*wanted, kind=elect_leaders.TopicPartitions),
            timeout_ms=10000,
        )
        p.answer(f"elect v{v}", request, v, unordered=("replica_election_results",))
    for v in (0, 1):
        request = alter_partition_reassignments.AlterPartitionReassignmentsRequest(
            timeout_ms=10000,
            topics=[
                alter_partition_reassignments.ReassignableTopic(
                    name=name,
                    partitions=[
                        alter_partition_reassignments.ReassignablePartition(
                            partition_index=i, replicas=replicas
                        )
                        for i, replicas in parts
                    ],
                )
                for name, parts in (
                    ("diff-pa", [(0, None), (1, [p.node_id]), (7, [p.node_id])]),
                    ("diff-nope", [(0, [p.node_id])]),
                )
            ],
        )
        p.answer(f"reassign v{v}", request, v)
    listed = list_partition_reassignments.ListPartitionReassignmentsRequest(
        timeout_ms=10000,
        topics=partitions(
            *wanted, kind=list_partition_reassignments.ListPartitionReassignmentsTopics
        ),
    )
    p.answer("list reassignments v0", listed, 0)
    producers = describe_producers.DescribeProducersRequest(
        topics=partitions(*wanted, kind=describe_producers.TopicRequest)
    )
    p.answer("describe producers v0", producers, 0, unordered=("topics", "topics/partitions"))
    described = describe_topic_partitions.DescribeTopicPartitionsRequest(
        topics=[describe_topic_partitions.TopicRequest(name=n) for n in ("diff-pa", "diff-nope")],
        response_partition_limit=1,
    )
    p.answer("describe topic partitions v0", described, 0)


@scenario
def describe_cluster_answers(p: Probe) -> None:
    """DescribeCluster v0-v2, with and without the cluster's authorized operations; v2 with
    and without fenced brokers (KIP-1073: none is fenced on a running single-node cluster)."""
    for v in (0, 1, 2):
        for ops in (False, True):
            request = describe_cluster.DescribeClusterRequest(
                include_cluster_authorized_operations=ops, endpoint_type=1
            )
            p.answer(f"v{v} operations {ops}", request, v, varies=("cluster_id",))
    for fenced in (False, True):
        request = describe_cluster.DescribeClusterRequest(
            endpoint_type=1, include_fenced_brokers=fenced
        )
        p.answer(f"v2 fenced brokers {fenced}", request, 2, varies=("cluster_id",))


#: Where the broker keeps its data, and how full that disk is: each broker's own.
LOG_DIR_PLACE = ("results/log_dir", "results/total_bytes", "results/usable_bytes")


def cordon_request(p: Probe, value: str | None) -> Any:
    """IncrementalAlterConfigs v1 of this broker's ``cordoned.log.dirs``: SET, or DELETE."""
    return incremental_alter_configs.IncrementalAlterConfigsRequest(
        resources=[
            incremental_alter_configs.AlterConfigsResource(
                resource_type=4,
                resource_name=str(p.node_id),
                configs=[
                    incremental_alter_configs.AlterableConfig(
                        name="cordoned.log.dirs",
                        config_operation=1 if value is None else 0,
                        value=value,
                    )
                ],
            )
        ],
        validate_only=False,
    )


@scenario
def describe_log_dirs_answers(p: Probe) -> None:
    """DescribeLogDirs v1-v5; v5's is_cordoned (KIP-1066) with this broker's log directory
    cordoned (cordoned.log.dirs, a dynamic per-broker config), then all of them (*), then
    none again."""
    p.create_topic("diff-ld", 1)
    request = describe_log_dirs.DescribeLogDirsRequest(
        topics=[
            describe_log_dirs.DescribableLogDirTopic(topic="diff-ld", partitions=[0, 3]),
            describe_log_dirs.DescribableLogDirTopic(topic="diff-nope", partitions=[0]),
        ]
    )
    for v in (1, 2, 3, 4, 5):
        p.answer(f"v{v}", request, v, varies=LOG_DIR_PLACE)
    [result] = p.call(request, 5).results
    p.answer("cordon a directory not in log.dirs", cordon_request(p, "/diff-nowhere"), 1)
    for label, value, cordoned in (
        ("its directory", result.log_dir, True),
        ("every directory (*)", "*", True),
        ("none (deleted)", None, False),
    ):
        p.answer(f"cordon {label}", cordon_request(p, value), 1)
        # Kafka applies a dynamic broker config when its metadata record is replayed.
        p.retry(
            lambda: p.call(request, 5).results[0].is_cordoned,
            lambda found, want=cordoned: found == want,
            f"is_cordoned {cordoned}",
        )
        p.answer(f"v5 after cordoning {label}", request, 5, varies=LOG_DIR_PLACE)


@scenario
def alter_replica_log_dirs_answers(p: Probe) -> None:
    """AlterReplicaLogDirs v1-v2 on a broker with one log directory: a partition to the
    directory it is in (nothing to do), to a path not in log.dirs, a partition number
    its topic does not have and partitions of an unknown topic, in one request."""
    p.create_topic("diff-ard", 1)
    [result] = p.call(describe_log_dirs.DescribeLogDirsRequest(topics=None), 1).results
    dirs = [
        (result.log_dir, "diff-ard", [0]),
        ("/diff-nowhere", "diff-ard-elsewhere", [0]),
        (result.log_dir, "diff-ard-nope", [0, 1]),
        (result.log_dir, "diff-ard", [5]),
    ]
    request = alter_replica_log_dirs.AlterReplicaLogDirsRequest(
        dirs=[
            alter_replica_log_dirs.AlterReplicaLogDir(
                path=path, topics=[alter_replica_log_dirs.AlterReplicaLogDirTopic(t, parts)]
            )
            for path, t, parts in dirs
        ]
    )
    for v in (1, 2):
        p.answer(f"v{v}", request, v, unordered=("results", "results/partitions"))


@scenario
def group_protocol_answers(p: Probe) -> None:
    """JoinGroup before member-id rounds, Heartbeat, ListGroups, OffsetDelete, InitProducerId."""
    topic = "diff-gp-topic"
    p.create_topic(topic, 1)
    for v in (0, 1, 3):
        gid = f"diff-gp-{v}"
        ready_coordinator(p, gid)
        join = join_group.JoinGroupRequest(
            group_id=gid,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[
                join_group.JoinGroupRequestProtocol(name="range", metadata=subscription(topic))
            ],
        )
        # Kafka loads a new __consumer_offsets partition a moment after FindCoordinator.
        joined = p.retry(
            lambda r=join, v=v: p.call(r, v),
            lambda a: error(a.error_code) not in COORDINATOR_LOADING,
            f"{gid}'s coordinator",
        )
        p.see_whole(f"join v{v} new member", join, v, joined)
        member = joined.member_id
        for hv in (0, 3, 4):
            beat = heartbeat.HeartbeatRequest(group_id=gid, generation_id=99, member_id=member)
            p.answer(f"heartbeat v{hv} wrong generation, after join v{v}", beat, hv)
    for hv in (0, 4):
        beat = heartbeat.HeartbeatRequest(group_id="diff-gp-never", generation_id=1, member_id="m")
        p.answer(f"heartbeat v{hv} unknown group", beat, hv)
    for v in (0, 3, 4):
        # Only this scenario's groups: the other scenarios' are in other states.
        answer = p.call(list_groups.ListGroupsRequest(states_filter=[]), v)
        mine = sorted(
            [g.group_id, g.protocol_type, g.group_state]
            for g in answer.groups
            if g.group_id.startswith("diff-gp-")
        )
        p.see(f"list v{v}", [error(answer.error_code), mine])
    ready_coordinator(p, "diff-gp-empty")
    p.retry(
        lambda: p.call(commit_request("diff-gp-empty", [(topic, 0, 4)]), 2).topics[0],
        lambda t: t.partitions[0].error_code == 0,
        "a commit",
    )
    delete = offset_delete.OffsetDeleteRequest(
        group_id="diff-gp-empty",
        topics=[
            offset_delete.OffsetDeleteRequestTopic(
                name=name,
                partitions=[
                    offset_delete.OffsetDeleteRequestPartition(partition_index=i) for i in parts
                ],
            )
            for name, parts in ((topic, [0, 5]), ("diff-nope", [0]))
        ],
    )
    p.answer("offset delete v0", delete, 0, unordered=("topics", "topics/partitions"))
    for v in (0, 2, 3, 4, 5):
        request = init_producer_id.InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=-1
        )
        p.retry(lambda r=request, v=v: p.call(r, v), lambda a: a.error_code == 0, "InitProducerId")
        p.answer(f"init producer id v{v}", request, v)
