"""Authorization on the secured pair: every API family refused, allowed, and refused again.

Each scenario acts as a user of its own (``access.py``), logged in on one of
the secured listeners, and asks its family's APIs three times or more: with
no ACL at all, with ACLs that allow what the requests need, and with a DENY
over that ALLOW (a DENY wins over any ALLOW; an ALLOW of READ, WRITE, DELETE
or ALTER implies DESCRIBE, one of ALTER_CONFIGS implies DESCRIBE_CONFIGS).
Every answer is observed whole. Each request names something the user may
act on beside something it may not or that does not exist, so the order of
the checks shows: Kafka authorizes before it looks a name up, so a missing
topic the user may not describe is TOPIC_AUTHORIZATION_FAILED, not
UNKNOWN_TOPIC_OR_PARTITION.

Names: a scenario's resources start with its user's name, so a PREFIXED ACL
on that name covers them all, and ``zz-`` names are ones no ACL covers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kpybroker.protocol.messages import (
    add_offsets_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    alter_user_scram_credentials,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    join_group,
    leave_group,
    list_groups,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
    txn_offset_commit,
)
from kpybroker.security.sasl.scram_credentials import ScramMechanism

from .access import (
    CLUSTER,
    Acl,
    AclOperation,
    ResourceType,
    add_scram_user,
    allow,
    deny,
    grant,
    login,
)
from .error_paths import (
    APPEND_TIME,
    T0,
    UNKNOWN_ID,
    Part,
    Topics,
    commit_request,
    fetch_request,
    list_offsets_request,
    produce_request,
    ready_coordinator,
)
from .probe import Probe, batch, error, secured_scenario
from .scenarios import assignment, subscription
from .transactions import (
    TXN_LOADING,
    Producer,
    add_request,
    end_request,
    init_request,
    ready_txn_coordinator,
    wait_for_state,
)

READ, WRITE, CREATE, DELETE = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                               AclOperation.DELETE)  # fmt: skip
ALTER, DESCRIBE, ALL = AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.ALL
DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
TOPIC, GROUP, TXN_ID = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
CLUSTER_TYPE = ResourceType.CLUSTER
#: Kafka answers from maps of partitions grouped by topic (Produce, ListOffsets, DeleteRecords).
BY_TOPIC = ("responses", "responses/partition_responses", "topics", "topics/partitions")


def session(p: Probe, user: str, listener: str, mechanism: str = "SCRAM-SHA-256") -> Probe:
    """``user``'s own connection: a client certificate on SSL, else a new SCRAM user's login."""
    if listener == "SSL":
        return p.session("SSL", user)
    add_scram_user(p, user)
    return login(p, listener, user, mechanism)


def phases(p: Probe, steps: Callable[[str], None], grants: list[tuple[str, list[Acl]]]) -> None:
    """``steps`` with no ACLs, then after each grant, under its label."""
    steps("no ACLs")
    for label, acls in grants:
        grant(p, acls)
        steps(label)


# -- Metadata, DescribeTopicPartitions, DescribeCluster ---------------------------------------


def metadata_request(
    names: list[str] | None,
    *,
    ids: list[bytes] | None = None,
    auto_create: bool = False,
    operations: bool = False,
) -> Any:
    topics = None if names is None else [metadata.MetadataRequestTopic(name=n) for n in names]
    if ids is not None:
        topics = [metadata.MetadataRequestTopic(name=None, topic_id=i) for i in ids]
    return metadata.MetadataRequest(
        topics=topics,
        allow_auto_topic_creation=auto_create,
        include_cluster_authorized_operations=operations,
        include_topic_authorized_operations=operations,
    )


@secured_scenario
def authz_metadata(p: Probe) -> None:
    """Metadata, DescribeTopicPartitions and DescribeCluster: hidden topics, operation bits."""
    user = "authz-md"
    a, b, missing = f"{user}-a", f"{user}-b", f"{user}-missing"
    topics = Topics(p)
    topics.create(a, 2)
    topics.create(b, 1)
    s = session(p, user, "SASL_PLAINTEXT")
    # Kafka answers the topics it found in java.util.HashSet order, the refused ones after.
    unordered = ("topics",)

    def steps(phase: str) -> None:
        s.answer(f"{phase}/Metadata v1 all topics", metadata_request(None), 1, unordered=unordered)
        s.answer(f"{phase}/Metadata v4", metadata_request([a, missing]), 4, unordered=unordered)
        auto = metadata_request([f"{user}-auto"], auto_create=True)
        s.answer(f"{phase}/Metadata v4 auto-creating", auto, 4)
        for v in (8, 10, 12):
            request = metadata_request([a, b, missing], operations=True)
            s.answer(f"{phase}/Metadata v{v} with operations", request, v, unordered=unordered)
        request = metadata_request(None, operations=True)
        s.answer(
            f"{phase}/Metadata v10 all topics with operations", request, 10, unordered=unordered
        )
        by_id = metadata_request(None, ids=[topics.id_of(a), UNKNOWN_ID], operations=True)
        s.answer(f"{phase}/Metadata v12 by id", by_id, 12, unordered=unordered)
        for label, names in (("named", [a, b, missing]), ("all topics", [])):
            request = describe_topic_partitions.DescribeTopicPartitionsRequest(
                topics=[describe_topic_partitions.TopicRequest(name=n) for n in names]
            )
            # Kafka appends the refused topics in java.util.HashSet order.
            s.answer(
                f"{phase}/DescribeTopicPartitions v0 {label}", request, 0, unordered=("topics",)
            )
        for v in (0, 1):
            request = describe_cluster.DescribeClusterRequest(
                include_cluster_authorized_operations=True
            )
            s.answer(f"{phase}/DescribeCluster v{v}", request, v, varies=("cluster_id",))

    phases(
        p,
        steps,
        [
            (
                "allowed",
                allow(user, TOPIC, f"{user}-", DESCRIBE, prefixed=True)
                + allow(user, TOPIC, a, READ)
                + allow(user, TOPIC, b, ALL)
                + allow(user, CLUSTER_TYPE, CLUSTER, DESCRIBE),
            ),
            (
                "denied over allowed",
                deny(user, TOPIC, b, DESCRIBE)
                + deny(user, TOPIC, a, READ)
                + deny(user, CLUSTER_TYPE, CLUSTER, DESCRIBE),
            ),
        ],
    )


# -- Produce ----------------------------------------------------------------------------------


@secured_scenario
def authz_produce(p: Probe) -> None:
    """Produce over SSL (the principal from the client certificate), by name and by id."""
    user = "authz-produce"
    topic = f"{user}-t"
    topics = Topics(p)
    topics.create(topic, 2)
    s = session(p, user, "SSL")

    def steps(phase: str) -> None:
        records = batch([b"v"], timestamp=T0)
        plan = {topic: [(0, records), (1, records)], f"{user}-missing": [(0, records)]}
        for v in (3, 9, 12, 13):
            request = produce_request(topics, plan)
            s.answer(f"{phase}/Produce v{v}", request, v, varies=APPEND_TIME, unordered=BY_TOPIC)
        # acks=0 has no answer: Kafka closes the connection on any error instead.
        silent = produce_request(topics, {topic: [(0, records)]})
        silent.acks = 0
        s.conn.send(silent, 9)
        s.see_connection(f"{phase}/Produce v9 acks=0/then")

    steps("no ACLs")
    transactional = produce.ProduceRequest(
        transactional_id=f"{user}-txn",
        acks=-1,
        timeout_ms=10000,
        topic_data=[
            produce.TopicProduceData(
                name=topic,
                partition_data=[
                    produce.PartitionProduceData(
                        index=0,
                        records=batch(
                            [b"t"],
                            timestamp=T0,
                            producer_id=1,
                            producer_epoch=0,
                            base_sequence=0,
                            transactional=True,
                        ),
                    )
                ],
            )
        ],
    )
    s.answer("no ACLs/Produce v9 transactional", transactional, 9)
    grant(p, allow(user, TOPIC, user, WRITE, prefixed=True))
    steps("WRITE allowed")
    s.answer("WRITE allowed/Produce v9 transactional", transactional, 9)
    grant(p, deny(user, TOPIC, topic, WRITE))
    steps("WRITE denied over allowed")


# -- Fetch, ListOffsets, OffsetForLeaderEpoch ----------------------------------------------


@secured_scenario
def authz_fetch(p: Probe) -> None:
    """Fetch (as a consumer and as a follower), ListOffsets, OffsetForLeaderEpoch over SASL_SSL."""
    user = "authz-fetch"
    topic, missing = f"{user}-t", f"{user}-missing"
    topics = Topics(p)
    topics.create(topic, 1)
    p.produce(topic, 0, batch([b"one", b"two"], timestamp=T0))
    s = session(p, user, "SASL_SSL", "SCRAM-SHA-512")

    def steps(phase: str) -> None:
        parts = [Part(topic, 0), Part(missing, 0)]
        for v in (4, 12, 13, 17):
            s.answer(f"{phase}/Fetch v{v}", fetch_request(topics, v, parts), v)
        follower = fetch_request(topics, 12, [Part(topic, 0)], replica_id=0)
        s.answer(f"{phase}/Fetch v12 as a follower", follower, 12)
        for v in (1, 6, 10):
            request = list_offsets_request([Part(topic, 0, -1), Part(missing, 0, -2)])
            s.answer(f"{phase}/ListOffsets v{v}", request, v, unordered=BY_TOPIC)
        for v in (2, 4):
            request = offset_for_leader_epoch.OffsetForLeaderEpochRequest(
                replica_id=-1,
                topics=[
                    offset_for_leader_epoch.OffsetForLeaderTopic(
                        topic=name,
                        partitions=[
                            offset_for_leader_epoch.OffsetForLeaderPartition(
                                partition=0, current_leader_epoch=-1, leader_epoch=0
                            )
                        ],
                    )
                    for name in (topic, missing)
                ],
            )
            s.answer(f"{phase}/OffsetForLeaderEpoch v{v}", request, v)

    phases(
        p,
        steps,
        [
            ("READ allowed", allow(user, TOPIC, user, READ, prefixed=True)),
            # DENY READ leaves the DESCRIBE that the ALLOW READ implies: ListOffsets still works.
            ("READ denied over allowed", deny(user, TOPIC, topic, READ)),
        ],
    )


# -- Groups -----------------------------------------------------------------------------------


def join_request(group: str, topic: str, member_id: str = "") -> Any:
    return join_group.JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[join_group.JoinGroupRequestProtocol(name="range", metadata=subscription(topic))],
    )


def member_steps(s: Probe, phase: str, group: str, topic: str) -> None:
    """JoinGroup (twice: the member id round), SyncGroup, Heartbeat, LeaveGroup of one member."""
    first = s.answer(f"{phase}/JoinGroup v5", join_request(group, topic), 5)
    member = first.member_id if first is not None and first.member_id else "zz-member"
    joined = s.answer(f"{phase}/JoinGroup v5 with member id", join_request(group, topic, member), 5)
    generation = joined.generation_id if joined is not None and joined.error_code == 0 else 1
    sync = sync_group.SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member,
        assignments=[
            sync_group.SyncGroupRequestAssignment(
                member_id=member, assignment=assignment(topic, [0])
            )
        ],
    )
    s.answer(f"{phase}/SyncGroup v3", sync, 3)
    beat = heartbeat.HeartbeatRequest(group_id=group, generation_id=generation, member_id=member)
    s.answer(f"{phase}/Heartbeat v3", beat, 3)
    leave = leave_group.LeaveGroupRequest(
        group_id=group, members=[leave_group.MemberIdentity(member_id=member)]
    )
    s.answer(f"{phase}/LeaveGroup v3", leave, 3)


@secured_scenario
def authz_groups(p: Probe) -> None:
    """FindCoordinator, the member APIs, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete."""
    user = "authz-grp"
    topic, group, joining, doomed = f"{user}-t", f"{user}-g", f"{user}-join", f"{user}-del"
    other = "zz-authz-grp-other"
    p.create_topic(topic, 1)
    for name in (group, doomed):
        ready_coordinator(p, name)
        p.retry(
            lambda g=name: p.call(commit_request(g, [(topic, 0, 3)]), 2).topics[0],
            lambda t: t.partitions[0].error_code == 0,
            f"a commit for {name}",
        )
    ready_coordinator(p, joining)
    s = session(p, user, "SASL_PLAINTEXT")

    def steps(phase: str) -> None:
        request = find_coordinator.FindCoordinatorRequest(key=group, key_type=0)
        s.answer(f"{phase}/FindCoordinator v3", request, 3)
        request = find_coordinator.FindCoordinatorRequest(
            key_type=0, coordinator_keys=[group, other]
        )
        s.answer(f"{phase}/FindCoordinator v4", request, 4)
        member_steps(s, phase, joining, topic)
        for v in (3, 5):
            request = describe_groups.DescribeGroupsRequest(
                groups=[group, joining, other], include_authorized_operations=True
            )
            # Kafka asks each group's coordinator shard and answers in shard order.
            s.answer(f"{phase}/DescribeGroups v{v}", request, v, unordered=("groups",))
        s.answer(
            f"{phase}/ListGroups v4",
            list_groups.ListGroupsRequest(states_filter=[]),
            4,
            unordered=("groups",),
        )
        delete = offset_delete.OffsetDeleteRequest(
            group_id=group,
            topics=[
                offset_delete.OffsetDeleteRequestTopic(
                    name=topic,
                    partitions=[offset_delete.OffsetDeleteRequestPartition(partition_index=0)],
                )
            ],
        )
        s.answer(f"{phase}/OffsetDelete v0", delete, 0)
        for v in (0, 2):
            request = delete_groups.DeleteGroupsRequest(groups_names=[doomed, other])
            s.answer(f"{phase}/DeleteGroups v{v}", request, v, unordered=("results",))

    phases(
        p,
        steps,
        [
            (
                "allowed",
                allow(user, GROUP, user, READ, DESCRIBE, DELETE, prefixed=True)
                + allow(user, TOPIC, user, READ, prefixed=True),
            ),
            (
                "denied over allowed",
                deny(user, GROUP, joining, READ)
                + deny(user, GROUP, group, DESCRIBE)
                + deny(user, GROUP, doomed, DELETE),
            ),
        ],
    )


# -- Offsets ----------------------------------------------------------------------------------


@secured_scenario
def authz_offsets(p: Probe) -> None:
    """OffsetCommit and OffsetFetch (one group, several groups, all topics): group then topic."""
    user = "authz-off"
    topic, missing, group, other = f"{user}-t", f"{user}-missing", f"{user}-g", "zz-authz-off"
    topics = Topics(p)
    topics.create(topic, 2)
    ready_coordinator(p, group)
    p.retry(
        lambda: p.call(commit_request(group, [(topic, 0, 1)]), 2).topics[0],
        lambda t: t.partitions[0].error_code == 0,
        "the first commit",
    )
    s = session(p, user, "SASL_PLAINTEXT", "SCRAM-SHA-512")
    asked = [(topic, [0, 1]), (missing, [0])]

    def steps(phase: str) -> None:
        offsets = [(topic, 0, 5), (topic, 1, 6), (missing, 0, 1)]
        for v in (2, 7, 8, 9, 10):
            # v10 names topics by id: the missing topic's (unknown) id is checked before ACLs.
            s.answer(f"{phase}/OffsetCommit v{v}", commit_request(group, offsets, topics), v)
        for v in (1, 7):
            request = offset_fetch.OffsetFetchRequest(
                group_id=group,
                topics=[
                    offset_fetch.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in asked
                ],
                require_stable=False,
            )
            s.answer(f"{phase}/OffsetFetch v{v}", request, v)
        all_topics = offset_fetch.OffsetFetchRequest(group_id=group, topics=None)
        s.answer(f"{phase}/OffsetFetch v7 all topics", all_topics, 7)
        for v in (8, 9, 10):
            groups = [
                offset_fetch.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=[
                        offset_fetch.OffsetFetchRequestTopics(
                            name=t, topic_id=topics.id_of(t), partition_indexes=ps
                        )
                        for t, ps in asked
                    ],
                ),
                offset_fetch.OffsetFetchRequestGroup(group_id=group, topics=None),
                offset_fetch.OffsetFetchRequestGroup(group_id=other, topics=None),
            ]
            request = offset_fetch.OffsetFetchRequest(groups=groups, require_stable=False)
            s.answer(f"{phase}/OffsetFetch v{v} three groups", request, v)

    phases(
        p,
        steps,
        [
            ("group READ allowed", allow(user, GROUP, group, READ)),
            ("group and topic READ allowed", allow(user, TOPIC, user, READ, prefixed=True)),
            # The DESCRIBE an ALLOW READ implies is untouched: OffsetFetch still sees the topic.
            ("topic READ denied over allowed", deny(user, TOPIC, topic, READ)),
        ],
    )


# -- Topic administration ---------------------------------------------------------------------


@dataclass
class Admin:
    """The topic-admin scenario's user session and names: ``kept`` lives throughout (with three
    records), ``missing`` never exists, each phase ``n`` makes and deletes its own topics."""

    s: Probe
    topics: Topics
    user: str
    kept: str
    missing: str
    broker: str

    def creatable(self, name: str) -> Any:
        return create_topics.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[]
        )

    def create(self, phase: str, n: int) -> None:
        for v in (5, 7):
            request = create_topics.CreateTopicsRequest(
                topics=[self.creatable(f"{self.user}-new-{n}-v{v}"), self.creatable(self.kept)],
                timeout_ms=30000,
                validate_only=False,
            )
            # The controller appends the refused topics in java.util.HashSet order.
            unordered = ("topics", "topics/configs")
            self.s.answer(f"{phase}/CreateTopics v{v}", request, v, unordered=unordered)

    def partitions_and_deletion(self, phase: str, n: int) -> None:
        for v in (1, 3):
            request = create_partitions.CreatePartitionsRequest(
                topics=[
                    create_partitions.CreatePartitionsTopic(name=name, count=2, assignments=None)
                    for name in (self.kept, self.missing)
                ],
                timeout_ms=30000,
                validate_only=True,
            )
            # KRaft answers unknown topics first, then the controller's results.
            self.s.answer(f"{phase}/CreatePartitions v{v}", request, v, unordered=("results",))
        doomed, doomed_by_id = f"{self.user}-gone-{n}", f"{self.user}-gone-by-id-{n}"
        self.topics.create(doomed, 1)
        self.topics.create(doomed_by_id, 1)
        request = delete_topics.DeleteTopicsRequest(
            topic_names=[doomed, self.missing], timeout_ms=30000
        )
        # Kafka's controller shuffles DeleteTopics answers on purpose.
        self.s.answer(f"{phase}/DeleteTopics v1", request, 1, unordered=("responses",))
        request = delete_topics.DeleteTopicsRequest(
            topics=[
                delete_topics.DeleteTopicState(name=name, topic_id=topic_id)
                for name, topic_id in (
                    (self.missing, bytes(16)),
                    (None, self.topics.id_of(doomed_by_id)),
                    (None, UNKNOWN_ID),
                )
            ],
            timeout_ms=30000,
        )
        self.s.answer(f"{phase}/DeleteTopics v6", request, 6, unordered=("responses",))

    def configs(self, phase: str) -> None:
        """A topic's and the broker's configs, read and changed (validate_only)."""
        topic, broker = 2, 4
        for v in (1, 4):
            request = describe_configs.DescribeConfigsRequest(
                resources=[
                    describe_configs.DescribeConfigsResource(
                        resource_type=kind, resource_name=name, configuration_keys=keys
                    )
                    for kind, name, keys in (
                        (topic, self.kept, ["retention.ms"]),
                        (topic, self.missing, ["retention.ms"]),
                        (broker, self.broker, ["num.partitions"]),
                    )
                ],
                include_synonyms=False,
                include_documentation=False,
            )
            self.s.answer(f"{phase}/DescribeConfigs v{v}", request, v)
        changes = (
            (topic, self.kept, "retention.ms"),
            (topic, self.missing, "retention.ms"),
            (broker, self.broker, "log.retention.ms"),
        )
        for v in (0, 2):
            request = alter_configs.AlterConfigsRequest(
                resources=[
                    alter_configs.AlterConfigsResource(
                        resource_type=kind,
                        resource_name=name,
                        configs=[alter_configs.AlterableConfig(name=key, value="7200000")],
                    )
                    for kind, name, key in changes
                ],
                validate_only=True,
            )
            self.s.answer(f"{phase}/AlterConfigs v{v}", request, v)
        broker_logger = (8, self.broker, "root", "DEBUG")
        for v in (0, 1):
            request = incremental_alter_configs.IncrementalAlterConfigsRequest(
                resources=[
                    incremental_alter_configs.AlterConfigsResource(
                        resource_type=kind,
                        resource_name=name,
                        configs=[
                            incremental_alter_configs.AlterableConfig(
                                name=key, config_operation=0, value=value
                            )
                        ],
                    )
                    for kind, name, key, value in (
                        *((kind, name, key, "7200000") for kind, name, key in changes),
                        broker_logger,
                    )
                ],
                validate_only=True,
            )
            self.s.answer(f"{phase}/IncrementalAlterConfigs v{v}", request, v)

    def records_and_replicas(self, phase: str) -> None:
        """DeleteRecords, DescribeLogDirs, ElectLeaders and the reassignment APIs."""
        for v in (0, 2):
            request = delete_records.DeleteRecordsRequest(
                topics=[
                    delete_records.DeleteRecordsTopic(
                        name=name,
                        partitions=[
                            delete_records.DeleteRecordsPartition(partition_index=0, offset=1)
                        ],
                    )
                    for name in (self.kept, self.missing)
                ],
                timeout_ms=30000,
            )
            self.s.answer(f"{phase}/DeleteRecords v{v}", request, v, unordered=BY_TOPIC)
        for v in (1, 4):
            request = describe_log_dirs.DescribeLogDirsRequest(
                topics=[describe_log_dirs.DescribableLogDirTopic(topic=self.kept, partitions=[0])]
            )
            # Where each broker keeps its data, and the disk's size and free space.
            varies = ("results/log_dir", "results/total_bytes", "results/usable_bytes")
            self.s.answer(f"{phase}/DescribeLogDirs v{v}", request, v, varies=varies)
        for v in (0, 2):
            request = elect_leaders.ElectLeadersRequest(
                election_type=0,
                topic_partitions=[elect_leaders.TopicPartitions(topic=self.kept, partitions=[0])],
                timeout_ms=10000,
            )
            self.s.answer(f"{phase}/ElectLeaders v{v}", request, v)
        cancel = alter_partition_reassignments.ReassignablePartition(
            partition_index=0, replicas=None
        )
        request = alter_partition_reassignments.AlterPartitionReassignmentsRequest(
            timeout_ms=10000,
            topics=[
                alter_partition_reassignments.ReassignableTopic(name=self.kept, partitions=[cancel])
            ],
        )
        self.s.answer(f"{phase}/AlterPartitionReassignments v0", request, 0)
        request = list_partition_reassignments.ListPartitionReassignmentsRequest(
            timeout_ms=10000,
            topics=[
                list_partition_reassignments.ListPartitionReassignmentsTopics(
                    name=self.kept, partition_indexes=[0]
                )
            ],
        )
        self.s.answer(f"{phase}/ListPartitionReassignments v0", request, 0)

    def everything(self, phase: str, n: int) -> None:
        self.create(phase, n)
        self.partitions_and_deletion(phase, n)
        self.configs(phase)
        self.records_and_replicas(phase)


@secured_scenario
def authz_topic_admin(p: Probe) -> None:
    """CreateTopics (with and without DESCRIBE_CONFIGS), DeleteTopics, CreatePartitions,
    configs of a topic and the broker, DeleteRecords, DescribeLogDirs, leader elections and
    reassignments."""
    user = "authz-adm"
    topics = Topics(p)
    admin = Admin(
        session(p, user, "SASL_SSL"), topics, user, f"{user}-x", f"{user}-missing", str(p.node_id)
    )
    topics.create(admin.kept, 1)
    p.produce(admin.kept, 0, batch([b"a", b"b", b"c"], timestamp=T0))

    admin.everything("no ACLs", 0)
    grant(p, allow(user, TOPIC, f"{user}-new", CREATE, prefixed=True))
    admin.create("CREATE without DESCRIBE_CONFIGS", 1)
    grant(
        p,
        allow(user, TOPIC, user, ALL, prefixed=True)
        + allow(user, CLUSTER_TYPE, CLUSTER, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    )
    admin.everything("allowed", 2)
    grant(
        p,
        deny(user, TOPIC, admin.kept, DELETE, ALTER, ALTER_CONFIGS)
        + deny(user, TOPIC, f"{user}-new", CREATE, prefixed=True)
        + deny(user, TOPIC, f"{user}-gone", DELETE, prefixed=True)
        + deny(user, CLUSTER_TYPE, CLUSTER, ALTER, DESCRIBE_CONFIGS),
    )
    admin.everything("denied over allowed", 3)


# -- Transactions -----------------------------------------------------------------------------


@secured_scenario
def authz_transactions(p: Probe) -> None:
    """InitProducerId (transactional, idempotent), the transaction's requests, and the admin
    APIs that describe producers and transactions."""
    user = "authz-txn"
    topic, missing, group, tid = f"{user}-t", f"{user}-missing", f"{user}-g", f"{user}-id"
    other_tid = "zz-authz-txn-other"
    p.create_topic(topic, 1)
    ready_txn_coordinator(p, tid)
    ready_coordinator(p, group)
    s = session(p, user, "SASL_PLAINTEXT")
    producer = Producer(tid, 1, 0)  # what a refused producer still sends

    def add(label: str, parts: list[tuple[str, list[int]]]) -> None:
        request = add_request(producer.tid, producer.producer_id, producer.epoch, parts)
        s.answer(label, request, 3, unordered=("results_by_topic_v3_and_below",))

    def describe_steps(phase: str) -> None:
        request = describe_producers.DescribeProducersRequest(
            topics=[
                describe_producers.TopicRequest(name=name, partition_indexes=[0])
                for name in (topic, missing)
            ]
        )
        # The commit marker's append time (the broker's clock) is the producer's last timestamp.
        varies = ("topics/partitions/active_producers/last_timestamp",)
        s.answer(f"{phase}/DescribeProducers v0", request, 0, varies=varies, unordered=("topics",))
        request = describe_transactions.DescribeTransactionsRequest(
            transactional_ids=[tid, other_tid]
        )
        # When a transaction started: the broker's clock.
        varies = ("transaction_states/transaction_start_time_ms",)
        s.answer(f"{phase}/DescribeTransactions v0", request, 0, varies=varies)
        for v in (0, 1):
            request = list_transactions.ListTransactionsRequest(
                state_filters=[], producer_id_filters=[]
            )
            s.answer(f"{phase}/ListTransactions v{v}", request, v)

    def steps(phase: str) -> None:
        request = find_coordinator.FindCoordinatorRequest(key_type=1, coordinator_keys=[tid])
        s.answer(f"{phase}/FindCoordinator v4 transactional id", request, 4)
        answer = s.retry(
            lambda: s.call(init_request(tid), 3),
            lambda a: error(a.error_code) not in TXN_LOADING,
            f"{tid}'s coordinator",
        )
        s.see_whole(f"{phase}/InitProducerId v3 transactional", init_request(tid), 3, answer)
        if answer.error_code == 0:
            producer.producer_id, producer.epoch = answer.producer_id, answer.producer_epoch
            producer.sequence.clear()
        for v in (3, 5):
            s.answer(f"{phase}/InitProducerId v{v} idempotent", init_request(None), v)
        add(f"{phase}/AddPartitionsToTxn v3 with a missing topic", [(missing, [0]), (topic, [0])])
        add(f"{phase}/AddPartitionsToTxn v3 with __consumer_offsets",
            [("__consumer_offsets", [0]), (topic, [0])])  # fmt: skip
        add(f"{phase}/AddPartitionsToTxn v3", [(topic, [0])])
        records = producer.records(topic, 0, [b"t"])
        request = produce.ProduceRequest(
            transactional_id=tid,
            acks=-1,
            timeout_ms=10000,
            topic_data=[
                produce.TopicProduceData(
                    name=topic,
                    partition_data=[produce.PartitionProduceData(index=0, records=records)],
                )
            ],
        )
        s.answer(f"{phase}/Produce v9 transactional", request, 9, varies=APPEND_TIME)
        request = add_offsets_to_txn.AddOffsetsToTxnRequest(
            transactional_id=tid,
            producer_id=producer.producer_id,
            producer_epoch=producer.epoch,
            group_id=group,
        )
        s.answer(f"{phase}/AddOffsetsToTxn v3", request, 3)
        request = txn_offset_commit.TxnOffsetCommitRequest(
            transactional_id=tid,
            group_id=group,
            producer_id=producer.producer_id,
            producer_epoch=producer.epoch,
            topics=[
                txn_offset_commit.TxnOffsetCommitRequestTopic(
                    name=name,
                    partitions=[
                        txn_offset_commit.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=1, committed_metadata=""
                        )
                    ],
                )
                for name in (topic, missing)
            ],
        )
        s.answer(f"{phase}/TxnOffsetCommit v3", request, 3, unordered=("topics",))
        request = end_request(producer, committed=True)
        ended = s.answer(f"{phase}/EndTxn v3 commit", request, 3)
        if ended is not None and ended.error_code == 0:
            wait_for_state(p, tid, "CompleteCommit")
        describe_steps(phase)

    phases(
        p,
        steps,
        [
            (
                "allowed",
                allow(user, TXN_ID, user, WRITE, prefixed=True)
                + allow(user, TOPIC, user, WRITE, READ, prefixed=True)
                + allow(user, GROUP, user, READ, prefixed=True),
            ),
            # A prefixed DENY of WRITE on every topic of the user leaves no topic it may write:
            # the idempotent InitProducerId, which asks for WRITE on any topic, is refused too.
            (
                "denied over allowed",
                deny(user, TXN_ID, tid, WRITE) + deny(user, TOPIC, user, WRITE, prefixed=True),
            ),
        ],
    )


# -- ACLs, quotas, SCRAM credentials, the cluster ---------------------------------------------


def acl_creation(resource_type: ResourceType, name: str, principal: str) -> Any:
    return create_acls.AclCreation(
        resource_type=resource_type,
        resource_name=name,
        resource_pattern_type=3,
        principal=principal,
        host="*",
        operation=READ if resource_type != CLUSTER_TYPE else ALTER,
        permission_type=3,
    )


def acl_filter(name: str, principal: str) -> Any:
    return delete_acls.DeleteAclsFilter(
        resource_type_filter=TOPIC,
        resource_name_filter=name,
        pattern_type_filter=3,
        principal_filter=principal,
        host_filter="*",
        operation=READ,
        permission_type=3,
    )


def scram_upsertion(name: str) -> Any:
    mechanism = ScramMechanism.SCRAM_SHA_256
    salt = name.encode()
    return alter_user_scram_credentials.ScramCredentialUpsertion(
        name=name,
        mechanism=mechanism.type,
        iterations=4096,
        salt=salt,
        salted_password=mechanism.salted_password(f"{name}-secret", salt, 4096),
    )


@secured_scenario
def authz_cluster_admin(p: Probe) -> None:
    """The ACL APIs, client quotas and SCRAM credentials: what needs ALTER, DESCRIBE,
    ALTER_CONFIGS and DESCRIBE_CONFIGS on the cluster."""
    user = "authz-cl"
    target, quota_user = f"User:{user}-target", f"{user}-quota"
    s = session(p, user, "SASL_PLAINTEXT", "SCRAM-SHA-512")
    quota_entity = [alter_client_quotas.EntityData(entity_type="user", entity_name=quota_user)]
    described_quotas = describe_client_quotas.DescribeClientQuotasRequest(
        components=[
            describe_client_quotas.ComponentData(entity_type="user", match_type=0, match=quota_user)
        ],
        strict=False,
    )

    def steps(phase: str) -> None:
        for v in (1, 3):
            request = describe_acls.DescribeAclsRequest(
                resource_type_filter=1,
                resource_name_filter=None,
                pattern_type_filter=1,
                principal_filter=target,
                host_filter=None,
                operation=1,
                permission_type=1,
            )
            s.answer(f"{phase}/DescribeAcls v{v}", request, v)
        for v in (1, 3):
            request = create_acls.CreateAclsRequest(
                creations=[
                    acl_creation(TOPIC, f"{user}-t", target),
                    acl_creation(CLUSTER_TYPE, "zz-not-the-cluster", target),
                ]
            )
            s.answer(f"{phase}/CreateAcls v{v}", request, v)
        for v in (1, 3):
            request = delete_acls.DeleteAclsRequest(
                filters=[acl_filter(f"{user}-t", target), acl_filter("zz-none", target)]
            )
            s.answer(f"{phase}/DeleteAcls v{v}", request, v)
        for v in (0, 1):
            request = alter_client_quotas.AlterClientQuotasRequest(
                entries=[
                    alter_client_quotas.EntryData(
                        entity=quota_entity,
                        ops=[
                            alter_client_quotas.OpData(
                                key="producer_byte_rate", value=1048576.0 + v, remove=False
                            )
                        ],
                    )
                ],
                validate_only=False,
            )
            altered = s.answer(f"{phase}/AlterClientQuotas v{v}", request, v)
        if altered is not None and altered.entries[0].error_code == 0:
            p.retry(  # Kafka's brokers learn quotas from the metadata log, after the answer
                lambda: p.call(described_quotas, 1).entries,
                lambda entries: bool(entries) and entries[0].values[0].value == 1048577.0,
                "the quota",
            )
        for v in (0, 1):
            s.answer(f"{phase}/DescribeClientQuotas v{v}", described_quotas, v)
        request = describe_user_scram_credentials.DescribeUserScramCredentialsRequest(
            users=[
                describe_user_scram_credentials.UserName(name=name) for name in (user, "zz-nobody")
            ]
        )
        # Kafka's ScramImage.describe answers from a java.util.HashMap of the users asked for.
        unordered = ("results", "results/credential_infos")
        s.answer(f"{phase}/DescribeUserScramCredentials v0", request, 0, unordered=unordered)
        # Every user: the other scenarios' too (those that ran before). Refused, Kafka 4.4
        # fails to build its answer (its getErrorResponse reads the null list) and never answers.
        request = describe_user_scram_credentials.DescribeUserScramCredentialsRequest(users=None)
        label = f"{phase}/DescribeUserScramCredentials v0 every user"
        s.answer(label, request, 0, unordered=unordered, wait=10)
        request = alter_user_scram_credentials.AlterUserScramCredentialsRequest(
            deletions=[
                alter_user_scram_credentials.ScramCredentialDeletion(name="zz-nobody", mechanism=2)
            ],
            upsertions=[scram_upsertion(f"{user}-new")],
        )
        s.answer(f"{phase}/AlterUserScramCredentials v0", request, 0)

    phases(
        p,
        steps,
        [
            (
                "allowed",
                allow(
                    user, CLUSTER_TYPE, CLUSTER, ALTER, DESCRIBE, ALTER_CONFIGS, DESCRIBE_CONFIGS
                ),
            ),
            (
                "denied over allowed",
                deny(user, CLUSTER_TYPE, CLUSTER, ALTER, DESCRIBE_CONFIGS),
            ),
        ],
    )
