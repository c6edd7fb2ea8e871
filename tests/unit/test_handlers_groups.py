"""Handlers of the group, offset and producer-id APIs against fakes of their services.

FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch (v10: topics named by ID), DescribeGroups, ListGroups, DeleteGroups and InitProducerId:
what each handler does itself (version differences, unknown partitions,
messages) apart from what it hands to the group coordinator.
"""

from __future__ import annotations

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    delete_groups,
    find_coordinator,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_fetch,
    sync_group,
)
from kpybroker.protocol.messages.join_group import JoinGroupResponse
from kpybroker.protocol.messages.leave_group import LeaveGroupResponse, MemberResponse
from kpybroker.protocol.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kpybroker.protocol.messages.offset_fetch import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)
from kpybroker.transaction_coordinator.shard import InitResult, ProducerIdAndEpoch
from tests.helpers.fake_services import (
    FakeGroups,
    FakeTopics,
    FakeTransactions,
    call,
    services,
    topic_of,
)


async def coordinator_is_self(group_id: str) -> tuple[ErrorCode, int]:
    return ErrorCode.NONE, 0


def test_find_coordinator_names_the_broker_with_kafkas_messages() -> None:
    groups = FakeGroups(find_coordinator=coordinator_is_self)
    old = call(services(groups=groups), find_coordinator.FindCoordinatorRequest(key="g"), 2)
    assert (old.error_code, old.error_message, old.node_id, old.port) == (0, "NONE", 0, 9092)
    new = call(
        services(groups=groups),
        find_coordinator.FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]),
        4,
    )
    assert [(c.key, c.error_code, c.error_message) for c in new.coordinators] == [("g", 0, "")]
    transactions = FakeTransactions(find_coordinator=coordinator_is_self)
    answer = call(
        services(groups=groups, transactions=transactions),
        find_coordinator.FindCoordinatorRequest(key_type=1, coordinator_keys=["t"]),
        4,
    )
    assert [(c.key, c.error_code, c.node_id) for c in answer.coordinators] == [("t", 0, 0)]
    assert transactions.calls == [("find_coordinator", ("t",))]
    share = call(
        services(groups=groups),
        find_coordinator.FindCoordinatorRequest(key_type=2, coordinator_keys=["s"]),
        4,
    )
    assert share.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


def test_join_group_v0_uses_the_session_timeout_for_the_rebalance() -> None:
    async def join(caller: object, request: join_group.JoinGroupRequest) -> JoinGroupResponse:
        return JoinGroupResponse(member_id="m", protocol_name=None)

    groups = FakeGroups(join_group=join)
    request = join_group.JoinGroupRequest(
        group_id="g", session_timeout_ms=6000, member_id="", protocol_type="consumer", protocols=[]
    )
    response = call(services(groups=groups), request, 0)
    [(_, (caller, sent))] = groups.calls
    assert sent.rebalance_timeout_ms == 6000
    assert caller.client_host == "/127.0.0.1"
    assert response.protocol_name == ""  # not nullable before v7


def test_sync_group_v5_needs_the_protocol_type_and_name() -> None:
    request = sync_group.SyncGroupRequest(
        group_id="g", generation_id=1, member_id="m", protocol_type=None, protocol_name=None
    )
    groups = FakeGroups()
    response = call(services(groups=groups), request, 5)
    assert response.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert groups.calls == []


def test_leave_group_before_v3_reports_the_members_error_at_the_top() -> None:
    async def leave(group_id: str, members: list) -> LeaveGroupResponse:
        return LeaveGroupResponse(
            members=[MemberResponse(member_id=m.member_id, error_code=25) for m in members]
        )

    request = leave_group.LeaveGroupRequest(group_id="g", member_id="m")
    response = call(services(groups=FakeGroups(leave_group=leave)), request, 2)
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_offset_commit_answers_unknown_partitions_without_the_coordinator() -> None:
    async def commit(
        caller: object, request: offset_commit.OffsetCommitRequest
    ) -> OffsetCommitResponse:
        return OffsetCommitResponse(topics=[])

    groups = FakeGroups(commit_offsets=commit)
    topics = FakeTopics(topic_of("t", 1))
    request = offset_commit.OffsetCommitRequest(
        group_id="g",
        topics=[
            offset_commit.OffsetCommitRequestTopic(
                name=name,
                partitions=[
                    offset_commit.OffsetCommitRequestPartition(
                        partition_index=i, committed_offset=5, committed_metadata=None
                    )
                    for i in (0, 3)
                ],
            )
            for name in ("t", "nope")
        ],
    )
    response = call(services(topics=topics, groups=groups), request, 8)
    errors = {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }
    assert errors == {("t", 3): 3, ("nope", 0): 3, ("nope", 3): 3}
    [(_, (_, sent))] = groups.calls
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in sent.topics] == [
        ("t", [0])
    ]


def test_offset_fetch_v1_gives_a_group_error_to_every_partition_asked_for() -> None:
    def fetch_offsets(group: object) -> OffsetFetchResponseGroup:
        return OffsetFetchResponseGroup(group_id="g", error_code=ErrorCode.NOT_COORDINATOR)

    request = offset_fetch.OffsetFetchRequest(
        group_id="g",
        topics=[offset_fetch.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])],
    )
    response = call(services(groups=FakeGroups(fetch_offsets=fetch_offsets)), request, 1)
    assert [(p.partition_index, p.error_code) for p in response.topics[0].partitions] == [
        (0, ErrorCode.NOT_COORDINATOR),
        (1, ErrorCode.NOT_COORDINATOR),
    ]


def test_offset_fetch_v8_asks_per_group() -> None:
    def fetch_offsets(group: offset_fetch.OffsetFetchRequestGroup) -> OffsetFetchResponseGroup:
        partition = OffsetFetchResponsePartitions(
            partition_index=0, committed_offset=7, metadata=""
        )
        return OffsetFetchResponseGroup(
            group_id=group.group_id,
            topics=[OffsetFetchResponseTopics(name="t", partitions=[partition])],
        )

    request = offset_fetch.OffsetFetchRequest(
        groups=[offset_fetch.OffsetFetchRequestGroup(group_id=g, topics=None) for g in ("a", "b")]
    )
    response = call(services(groups=FakeGroups(fetch_offsets=fetch_offsets)), request, 8)
    assert [(g.group_id, g.topics[0].partitions[0].committed_offset) for g in response.groups] == [
        ("a", 7),
        ("b", 7),
    ]


async def commit_echo(
    caller: object, request: offset_commit.OffsetCommitRequest
) -> OffsetCommitResponse:
    """The coordinator's answer to a commit: no error, each topic with its name and ID."""
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=t.name,
                topic_id=t.topic_id,
                partitions=[
                    OffsetCommitResponsePartition(partition_index=p.partition_index)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def commit_by_id(*topics: tuple[bytes, list[int]]) -> offset_commit.OffsetCommitRequest:
    return offset_commit.OffsetCommitRequest(
        group_id="g",
        topics=[
            offset_commit.OffsetCommitRequestTopic(
                topic_id=topic_id,
                partitions=[
                    offset_commit.OffsetCommitRequestPartition(
                        partition_index=i, committed_offset=5, committed_metadata=None
                    )
                    for i in indexes
                ],
            )
            for topic_id, indexes in topics
        ],
    )


def test_offset_commit_v10_names_topics_by_id() -> None:
    t, u = topic_of("t", 1), topic_of("u", 1)
    unknown, other = bytes(range(16)), bytes(range(1, 17))
    groups = FakeGroups(commit_offsets=commit_echo)
    request = commit_by_id((t.topic_id, [0, 3]), (unknown, [0, 1]), (u.topic_id, [0]), (other, [2]))
    response = call(services(topics=FakeTopics(t, u), groups=groups), request, 10)
    # Names are not on the wire from v10; each topic is answered under its ID, two
    # unknown IDs apart, the handler's answers first (in request order), then the
    # coordinator's, under the same entry for a topic already answered (Kafka's builder).
    assert [
        (r.name, r.topic_id, [(p.partition_index, p.error_code) for p in r.partitions])
        for r in response.topics
    ] == [
        ("", t.topic_id, [(3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (0, 0)]),
        ("", unknown, [(0, ErrorCode.UNKNOWN_TOPIC_ID), (1, ErrorCode.UNKNOWN_TOPIC_ID)]),
        ("", other, [(2, ErrorCode.UNKNOWN_TOPIC_ID)]),
        ("", u.topic_id, [(0, 0)]),
    ]
    [(_, (_, sent))] = groups.calls
    assert [
        (s.name, s.topic_id, [p.partition_index for p in s.partitions]) for s in sent.topics
    ] == [
        ("t", t.topic_id, [0]),
        ("u", u.topic_id, [0]),
    ]


def test_offset_commit_v10_with_only_unknown_ids_does_not_ask_the_coordinator() -> None:
    groups = FakeGroups(commit_offsets=commit_echo)
    unknown = bytes(range(16))
    response = call(services(groups=groups), commit_by_id((unknown, [0])), 10)
    assert [(r.topic_id, r.partitions[0].error_code) for r in response.topics] == [
        (unknown, ErrorCode.UNKNOWN_TOPIC_ID)
    ]
    assert groups.calls == []


def test_offset_commit_v9_still_names_topics() -> None:
    t = topic_of("t", 1)
    groups = FakeGroups(commit_offsets=commit_echo)
    request = commit_by_id((t.topic_id, [0]))
    request.topics[0].name = "t"
    response = call(services(topics=FakeTopics(t), groups=groups), request, 9)
    # The ID is not on the wire before v10: decoded, it is the zero UUID.
    assert [(r.name, r.topic_id, r.partitions[0].error_code) for r in response.topics] == [
        ("t", bytes(16), 0)
    ]


def fetch_by_id(*topic_ids: bytes) -> offset_fetch.OffsetFetchRequest:
    return offset_fetch.OffsetFetchRequest(
        groups=[
            offset_fetch.OffsetFetchRequestGroup(
                group_id="g",
                topics=[
                    offset_fetch.OffsetFetchRequestTopics(topic_id=i, partition_indexes=[0, 1])
                    for i in topic_ids
                ],
            )
        ]
    )


def fetched_7(group: offset_fetch.OffsetFetchRequestGroup) -> OffsetFetchResponseGroup:
    """The coordinator: offset 7 for every partition asked for (t's and gone's when all)."""
    if group.topics is None:
        asked = [("t", [0]), ("gone", [0])]
    else:
        asked = [(t.name, t.partition_indexes) for t in group.topics]
    return OffsetFetchResponseGroup(
        group_id=group.group_id,
        topics=[
            OffsetFetchResponseTopics(
                name=name,
                partitions=[
                    OffsetFetchResponsePartitions(partition_index=i, committed_offset=7)
                    for i in indexes
                ],
            )
            for name, indexes in asked
        ],
    )


def test_offset_fetch_v10_names_topics_by_id() -> None:
    t = topic_of("t", 2)
    unknown = bytes(range(16))
    groups = FakeGroups(fetch_offsets=fetched_7)
    response = call(
        services(topics=FakeTopics(t), groups=groups), fetch_by_id(unknown, t.topic_id), 10
    )
    [group] = response.groups
    assert group.error_code == 0
    # The coordinator's topics first, then the unknown ID's, with offset -1.
    assert [
        (
            r.name,
            r.topic_id,
            [(p.partition_index, p.committed_offset, p.error_code) for p in r.partitions],
        )
        for r in group.topics
    ] == [
        ("", t.topic_id, [(0, 7, 0), (1, 7, 0)]),
        ("", unknown, [(0, -1, ErrorCode.UNKNOWN_TOPIC_ID), (1, -1, ErrorCode.UNKNOWN_TOPIC_ID)]),
    ]
    [(_, (sent,))] = groups.calls
    assert [(s.name, s.topic_id) for s in sent.topics] == [("t", t.topic_id)]


def test_offset_fetch_v10_all_topics_gives_ids_and_leaves_out_unknown_topics() -> None:
    t = topic_of("t", 1)
    request = offset_fetch.OffsetFetchRequest(
        groups=[offset_fetch.OffsetFetchRequestGroup(group_id="g", topics=None)]
    )
    groups = FakeGroups(fetch_offsets=fetched_7)
    [group] = call(services(topics=FakeTopics(t), groups=groups), request, 10).groups
    assert [(r.topic_id, r.partitions[0].committed_offset) for r in group.topics] == [
        (t.topic_id, 7)
    ]
    # v9 names them all, known to the metadata or not.
    [group] = call(services(topics=FakeTopics(t), groups=groups), request, 9).groups
    assert [r.name for r in group.topics] == ["t", "gone"]


def test_group_admin_passes_through_the_coordinator() -> None:
    async def delete(names: list[str]) -> list:
        return [delete_groups.DeletableGroupResult(group_id=n, error_code=69) for n in names]

    groups = FakeGroups(
        delete_groups=delete, list_groups=lambda states, types=(): (ErrorCode.NONE, [])
    )
    deleted = call(
        services(groups=groups), delete_groups.DeleteGroupsRequest(groups_names=["x"]), 2
    )
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("x", 69)]
    listed = call(services(groups=groups), list_groups.ListGroupsRequest(states_filter=[]), 4)
    assert (listed.error_code, listed.groups) == (0, [])


def test_init_producer_id_allocates_an_id_or_asks_the_transaction_coordinator() -> None:
    async def fenced(tid: str, timeout_ms: int, expected: object) -> InitResult:
        return InitResult(ErrorCode.PRODUCER_FENCED)

    transactions = FakeTransactions(init_producer_id=fenced)
    svc = services(transactions=transactions)
    first = call(svc, init_producer_id.InitProducerIdRequest(transactional_id=None), 4)
    second = call(svc, init_producer_id.InitProducerIdRequest(transactional_id=None), 4)
    assert (first.producer_id, second.producer_id, first.producer_epoch) == (1000, 1001, 0)
    request = init_producer_id.InitProducerIdRequest(
        transactional_id="t", transaction_timeout_ms=60_000, producer_id=7, producer_epoch=2
    )
    assert call(svc, request, 4).error_code == ErrorCode.PRODUCER_FENCED
    # Clients below v4 do not know PRODUCER_FENCED: Kafka answers INVALID_PRODUCER_EPOCH.
    assert call(svc, request, 3).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert transactions.calls[0] == (
        "init_producer_id",
        ("t", 60_000, ProducerIdAndEpoch(7, 2)),
    )
    half = init_producer_id.InitProducerIdRequest(transactional_id=None, producer_id=7)
    refused = call(svc, half, 4)
    # Kafka's error answer carries no producer: id and epoch -1.
    assert (refused.error_code, refused.producer_id, refused.producer_epoch) == (
        ErrorCode.INVALID_REQUEST,
        -1,
        -1,
    )
