"""Authorization of the group APIs, as Kafka 4.4's request handlers do it.

JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups,
DeleteGroups, OffsetCommit, OffsetFetch, OffsetDelete and FindCoordinator
against fakes of their services and a real ``AclAuthorizer``: what a
refused principal is answered (codes, field values, order, omissions), that
the coordinator is not asked about what was refused, and that permission is
checked before existence.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    delete_groups,
    describe_groups,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
    sync_group,
)
from kpybroker.protocol.messages.describe_groups import DescribedGroup
from kpybroker.protocol.messages.join_group import JoinGroupResponse
from kpybroker.protocol.messages.list_groups import ListedGroup
from kpybroker.protocol.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kpybroker.protocol.messages.offset_delete import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kpybroker.protocol.messages.offset_fetch import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)
from kpybroker.security.acls.authorizer import AclAuthorizer
from kpybroker.security.acls.model import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kpybroker.security.principal import KafkaPrincipal
from tests.helpers.fake_services import FakeGroups, FakeTopics, call, services, topic_of

ALICE = KafkaPrincipal.user("alice")
GROUP, TOPIC, CLUSTER = ResourceType.GROUP, ResourceType.TOPIC, ResourceType.CLUSTER
READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
NOT_COMPUTED = -(2**31)
GROUP_AUTHZ, TOPIC_AUTHZ = (
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
)


def granting(*grants: tuple[ResourceType, str, AclOperation]) -> AclAuthorizer:
    """An authorizer that allows alice exactly ``grants`` (and what they imply)."""
    authorizer = AclAuthorizer(super_users=(), allow_if_no_acls=False)
    for resource_type, name, operation in grants:
        authorizer.add(
            AclBinding(
                ResourcePattern(resource_type, name, PatternType.LITERAL),
                AccessControlEntry(str(ALICE), "*", operation, AclPermissionType.ALLOW),
            )
        )
    return authorizer


def as_alice(request: Any, version: int, **kwargs: Any) -> Any:
    """``call`` for alice, with services built from ``kwargs``."""
    return call(services(**kwargs), request, version, principal=ALICE)


def errors_of(topics: list[Any]) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.error_code) for t in topics for p in t.partitions]


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------------------------------


def join_request() -> join_group.JoinGroupRequest:
    return join_group.JoinGroupRequest(
        group_id="g", session_timeout_ms=6000, member_id="", protocol_type="consumer", protocols=[]
    )


@pytest.mark.parametrize(("version", "protocol_name"), [(6, ""), (7, None)])
def test_join_group_refused_without_read_on_the_group(
    version: int, protocol_name: str | None
) -> None:
    groups = FakeGroups()
    answer = as_alice(
        join_request(), version, groups=groups, authorizer=granting((GROUP, "g", DESCRIBE))
    )
    assert (answer.error_code, answer.generation_id, answer.leader, answer.member_id) == (
        GROUP_AUTHZ,
        -1,
        "",
        "",
    )
    assert (answer.members, answer.protocol_name) == ([], protocol_name)
    assert groups.calls == []


def test_join_group_with_read_on_the_group_reaches_the_coordinator() -> None:
    async def join(caller: object, request: object) -> JoinGroupResponse:
        return JoinGroupResponse(member_id="m", protocol_name="range")

    groups = FakeGroups(join_group=join)
    answer = as_alice(join_request(), 7, groups=groups, authorizer=granting((GROUP, "g", READ)))
    assert (answer.error_code, answer.member_id) == (0, "m")
    assert [name for name, _ in groups.calls] == ["join_group"]


def test_sync_group_checks_the_protocol_before_the_group() -> None:
    missing = sync_group.SyncGroupRequest(
        group_id="g", generation_id=1, member_id="m", protocol_type=None, protocol_name=None
    )
    answer = as_alice(missing, 5, authorizer=granting())
    assert answer.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    named = sync_group.SyncGroupRequest(
        group_id="g", generation_id=1, member_id="m", protocol_type="consumer", protocol_name="r"
    )
    groups = FakeGroups()
    answer = as_alice(named, 5, groups=groups, authorizer=granting())
    assert (answer.error_code, answer.assignment) == (GROUP_AUTHZ, b"")
    assert groups.calls == []


def test_heartbeat_and_leave_group_refused_with_the_code_only() -> None:
    groups = FakeGroups()
    beat = heartbeat.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    assert as_alice(beat, 4, groups=groups, authorizer=granting()).error_code == GROUP_AUTHZ
    for version, request in (
        (2, leave_group.LeaveGroupRequest(group_id="g", member_id="m")),
        (
            5,
            leave_group.LeaveGroupRequest(
                group_id="g", members=[leave_group.MemberIdentity(member_id="m")]
            ),
        ),
    ):
        answer = as_alice(request, version, groups=groups, authorizer=granting())
        assert (answer.error_code, answer.members) == (GROUP_AUTHZ, [])
    assert groups.calls == []


# -- DescribeGroups, ListGroups, DeleteGroups --------------------------------------------


def described(group_ids: list[str]) -> list[DescribedGroup]:
    return [
        DescribedGroup(group_id=g, group_state="Stable", protocol_type="consumer")
        for g in group_ids
    ]


def test_describe_groups_answers_refused_groups_first() -> None:
    groups = FakeGroups(describe_groups=described)
    request = describe_groups.DescribeGroupsRequest(
        groups=["a", "secret", "b"], include_authorized_operations=True
    )
    authorizer = granting((GROUP, "a", DESCRIBE), (GROUP, "b", READ))
    answer = as_alice(request, 5, groups=groups, authorizer=authorizer)
    assert [(g.group_id, g.error_code) for g in answer.groups] == [
        ("secret", GROUP_AUTHZ),
        ("a", 0),
        ("b", 0),
    ]
    refused = answer.groups[0]
    assert (refused.group_state, refused.protocol_type, refused.protocol_data) == ("", "", "")
    assert (refused.members, refused.authorized_operations) == ([], NOT_COMPUTED)
    # READ implies DESCRIBE.
    assert [g.authorized_operations for g in answer.groups[1:]] == [1 << 8, 1 << 3 | 1 << 8]
    assert groups.calls == [("describe_groups", (["a", "b"],))]


def test_describe_groups_operations_only_when_asked_for() -> None:
    request = describe_groups.DescribeGroupsRequest(groups=["a"])
    answer = as_alice(
        request,
        5,
        groups=FakeGroups(describe_groups=described),
        authorizer=granting((GROUP, "a", DESCRIBE)),
    )
    assert answer.groups[0].authorized_operations == NOT_COMPUTED
    request.include_authorized_operations = True
    open_broker = as_alice(request, 5, groups=FakeGroups(describe_groups=described))
    # Every operation a group supports when no authorizer is configured.
    assert open_broker.groups[0].authorized_operations == 3400


def listed(states: object, types: object = ()) -> tuple[ErrorCode, list[ListedGroup]]:
    return ErrorCode.NONE, [ListedGroup(group_id=g, protocol_type="consumer") for g in "abc"]


def test_list_groups_filters_silently_without_describe_on_the_cluster(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="kafka.authorizer.logger")
    request = list_groups.ListGroupsRequest(states_filter=[])
    groups = FakeGroups(list_groups=listed)
    answer = as_alice(
        request, 4, groups=groups, authorizer=granting((GROUP, "b", DESCRIBE), (GROUP, "c", READ))
    )
    assert (answer.error_code, [g.group_id for g in answer.groups]) == (0, ["b", "c"])
    assert caplog.records == []  # neither the cluster nor the group refusals are logged
    everything = as_alice(
        request, 4, groups=groups, authorizer=granting((CLUSTER, CLUSTER_NAME, DESCRIBE))
    )
    assert [g.group_id for g in everything.groups] == ["a", "b", "c"]


def test_delete_groups_appends_refused_groups_after_the_coordinators_results() -> None:
    async def delete(names: list[str]) -> list[Any]:
        return [delete_groups.DeletableGroupResult(group_id=n, error_code=0) for n in names]

    groups = FakeGroups(delete_groups=delete)
    request = delete_groups.DeleteGroupsRequest(groups_names=["x", "a", "x", "b", "a"])
    authorizer = granting((GROUP, "a", DELETE), (GROUP, "b", DELETE))
    answer = as_alice(request, 2, groups=groups, authorizer=authorizer)
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        ("a", 0),
        ("b", 0),
        ("x", GROUP_AUTHZ),
    ]
    assert groups.calls == [("delete_groups", (["a", "b"],))]


# -- OffsetCommit, OffsetDelete ----------------------------------------------------------


def commit_request(ids: tuple[bytes, ...] = ()) -> offset_commit.OffsetCommitRequest:
    """Partitions 0 and 3 of secret, t and nope; of the topics of ``ids`` if given (v10)."""
    named = [{"topic_id": i} for i in ids] or [{"name": n} for n in ("secret", "t", "nope")]
    return offset_commit.OffsetCommitRequest(
        group_id="g",
        topics=[
            offset_commit.OffsetCommitRequestTopic(
                **topic,
                partitions=[
                    offset_commit.OffsetCommitRequestPartition(
                        partition_index=i, committed_offset=5
                    )
                    for i in (0, 3)
                ],
            )
            for topic in named
        ],
    )


async def commit_all(caller: object, request: Any) -> OffsetCommitResponse:
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


def test_offset_commit_refused_group_fails_every_partition() -> None:
    groups = FakeGroups(commit_offsets=commit_all)
    answer = as_alice(
        commit_request(),
        8,
        groups=groups,
        topics=FakeTopics(topic_of("t")),
        authorizer=granting((GROUP, "g", DESCRIBE), (TOPIC, "t", READ)),
    )
    assert errors_of(answer.topics) == [
        (name, i, GROUP_AUTHZ) for name in ("secret", "t", "nope") for i in (0, 3)
    ]
    assert groups.calls == []


def test_offset_commit_refuses_topics_before_looking_them_up() -> None:
    groups = FakeGroups(commit_offsets=commit_all)
    answer = as_alice(
        commit_request(),
        8,
        groups=groups,
        topics=FakeTopics(topic_of("t"), topic_of("secret")),
        authorizer=granting((GROUP, "g", READ), (TOPIC, "t", READ), (TOPIC, "nope", READ)),
    )
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert errors_of(answer.topics) == [
        ("secret", 0, TOPIC_AUTHZ),
        ("secret", 3, TOPIC_AUTHZ),
        ("t", 3, unknown),
        ("t", 0, 0),
        ("nope", 0, unknown),
        ("nope", 3, unknown),
    ]
    [(_, (_, sent))] = groups.calls
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in sent.topics] == [
        ("t", [0])
    ]


def test_offset_commit_v10_answers_unknown_ids_before_the_topic_acls() -> None:
    # Kafka names the topics first: an unknown ID is UNKNOWN_TOPIC_ID whatever the ACLs,
    # a known one is refused by its name.
    secret, t = topic_of("secret"), topic_of("t")
    unknown = bytes(range(16))
    ids = (secret.topic_id, t.topic_id, unknown)
    groups = FakeGroups(commit_offsets=commit_all)
    answer = as_alice(
        commit_request(ids),
        10,
        groups=groups,
        topics=FakeTopics(secret, t),
        authorizer=granting((GROUP, "g", READ), (TOPIC, "t", READ)),
    )
    assert [
        (a.topic_id, p.partition_index, p.error_code) for a in answer.topics for p in a.partitions
    ] == [
        (secret.topic_id, 0, TOPIC_AUTHZ),
        (secret.topic_id, 3, TOPIC_AUTHZ),
        (t.topic_id, 3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (t.topic_id, 0, 0),
        (unknown, 0, ErrorCode.UNKNOWN_TOPIC_ID),
        (unknown, 3, ErrorCode.UNKNOWN_TOPIC_ID),
    ]
    # A refused group answers every topic under its ID, unknown or not.
    refused = as_alice(
        commit_request(ids), 10, groups=groups, topics=FakeTopics(secret, t), authorizer=granting()
    )
    assert [
        (a.topic_id, p.partition_index, p.error_code) for a in refused.topics for p in a.partitions
    ] == [(i, p, GROUP_AUTHZ) for i in ids for p in (0, 3)]


def delete_request() -> offset_delete.OffsetDeleteRequest:
    return offset_delete.OffsetDeleteRequest(
        group_id="g",
        topics=[
            offset_delete.OffsetDeleteRequestTopic(
                name=name,
                partitions=[offset_delete.OffsetDeleteRequestPartition(partition_index=0)],
            )
            for name in ("secret", "t", "nope")
        ],
    )


async def delete_all(request: Any) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(
        topics=[
            OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponsePartition(partition_index=p.partition_index)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def test_offset_delete_needs_delete_on_the_group() -> None:
    groups = FakeGroups(delete_offsets=delete_all)
    answer = as_alice(
        delete_request(),
        0,
        groups=groups,
        topics=FakeTopics(topic_of("t")),
        authorizer=granting((GROUP, "g", READ), (TOPIC, "t", READ)),
    )
    assert (answer.error_code, answer.topics) == (GROUP_AUTHZ, [])
    assert groups.calls == []


def test_offset_delete_needs_read_on_each_topic() -> None:
    groups = FakeGroups(delete_offsets=delete_all)
    answer = as_alice(
        delete_request(),
        0,
        groups=groups,
        topics=FakeTopics(topic_of("t"), topic_of("secret")),
        authorizer=granting((GROUP, "g", DELETE), (TOPIC, "t", READ), (TOPIC, "nope", READ)),
    )
    assert answer.error_code == 0
    assert errors_of(answer.topics) == [
        ("secret", 0, TOPIC_AUTHZ),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 0, 0),
    ]
    [(_, (sent,))] = groups.calls
    assert [t.name for t in sent.topics] == ["t"]


# -- OffsetFetch -------------------------------------------------------------------------


def committed(request: Any) -> OffsetFetchResponseGroup:
    """The coordinator's answer: offset 7 for what is asked, or for t and secret when all."""
    if request.topics is None:
        asked = [("t", [0]), ("secret", [0])]
    else:
        asked = [(t.name, t.partition_indexes) for t in request.topics]
    return OffsetFetchResponseGroup(
        group_id=request.group_id,
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


def fetch_topics(*names: str) -> list[offset_fetch.OffsetFetchRequestTopic]:
    return [offset_fetch.OffsetFetchRequestTopic(name=n, partition_indexes=[0, 1]) for n in names]


def test_offset_fetch_v1_puts_the_group_refusal_on_every_partition() -> None:
    groups = FakeGroups(fetch_offsets=committed)
    request = offset_fetch.OffsetFetchRequest(group_id="g", topics=fetch_topics("t", "u"))
    answer = as_alice(request, 1, groups=groups, authorizer=granting((TOPIC, "t", DESCRIBE)))
    assert [
        (t.name, p.partition_index, p.error_code, p.committed_offset, p.metadata)
        for t in answer.topics
        for p in t.partitions
    ] == [(n, i, GROUP_AUTHZ, -1, "") for n in ("t", "u") for i in (0, 1)]
    assert groups.calls == []


def test_offset_fetch_v2_to_v7_refuse_the_group_at_the_top() -> None:
    request = offset_fetch.OffsetFetchRequest(group_id="g", topics=None)
    answer = as_alice(request, 7, groups=FakeGroups(fetch_offsets=committed), authorizer=granting())
    assert (answer.error_code, answer.topics) == (GROUP_AUTHZ, [])


def test_offset_fetch_appends_refused_topics_after_the_coordinators() -> None:
    groups = FakeGroups(fetch_offsets=committed)
    request = offset_fetch.OffsetFetchRequest(group_id="g", topics=fetch_topics("secret", "t"))
    authorizer = granting((GROUP, "g", DESCRIBE), (TOPIC, "t", DESCRIBE))
    answer = as_alice(request, 6, groups=groups, authorizer=authorizer)
    assert answer.error_code == 0
    assert [
        (t.name, p.partition_index, p.error_code, p.committed_offset)
        for t in answer.topics
        for p in t.partitions
    ] == [
        ("t", 0, 0, 7),
        ("t", 1, 0, 7),
        ("secret", 0, TOPIC_AUTHZ, -1),
        ("secret", 1, TOPIC_AUTHZ, -1),
    ]
    [(_, (sent,))] = groups.calls
    assert [t.name for t in sent.topics] == ["t"]


def test_offset_fetch_all_topics_leaves_out_what_the_principal_may_not_see() -> None:
    request = offset_fetch.OffsetFetchRequest(group_id="g", topics=None)
    authorizer = granting((GROUP, "g", DESCRIBE), (TOPIC, "t", READ))
    answer = as_alice(request, 5, groups=FakeGroups(fetch_offsets=committed), authorizer=authorizer)
    assert [t.name for t in answer.topics] == ["t"]


def test_offset_fetch_v8_answers_each_group_on_its_own() -> None:
    groups = FakeGroups(fetch_offsets=committed)
    request = offset_fetch.OffsetFetchRequest(
        groups=[
            offset_fetch.OffsetFetchRequestGroup(group_id="secret", topics=None),
            offset_fetch.OffsetFetchRequestGroup(
                group_id="g",
                topics=[offset_fetch.OffsetFetchRequestTopics(name="u", partition_indexes=[0])],
            ),
        ]
    )
    answer = as_alice(request, 8, groups=groups, authorizer=granting((GROUP, "g", DESCRIBE)))
    assert [(g.group_id, g.error_code, errors_of(g.topics)) for g in answer.groups] == [
        ("secret", GROUP_AUTHZ, []),
        ("g", 0, [("u", 0, TOPIC_AUTHZ)]),
    ]
    [(_, (sent,))] = groups.calls
    assert (sent.group_id, sent.topics) == ("g", [])  # not None: that would mean every topic


def test_offset_fetch_v10_refuses_unknown_ids_and_undescribable_topics_in_request_order() -> None:
    secret, t = topic_of("secret"), topic_of("t")
    unknown = bytes(range(16))
    groups = FakeGroups(fetch_offsets=committed)
    request = offset_fetch.OffsetFetchRequest(
        groups=[
            offset_fetch.OffsetFetchRequestGroup(
                group_id="g",
                topics=[
                    offset_fetch.OffsetFetchRequestTopics(topic_id=i, partition_indexes=[0])
                    for i in (secret.topic_id, unknown, t.topic_id)
                ],
            )
        ]
    )
    answer = as_alice(
        request,
        10,
        groups=groups,
        topics=FakeTopics(secret, t),
        authorizer=granting((GROUP, "g", DESCRIBE), (TOPIC, "t", DESCRIBE)),
    )
    [group] = answer.groups
    assert [
        (a.topic_id, p.error_code, p.committed_offset) for a in group.topics for p in a.partitions
    ] == [
        (t.topic_id, 0, 7),
        (secret.topic_id, TOPIC_AUTHZ, -1),
        (unknown, ErrorCode.UNKNOWN_TOPIC_ID, -1),
    ]
    [(_, (sent,))] = groups.calls
    assert [a.name for a in sent.topics] == ["t"]


def test_offset_fetch_group_error_from_the_coordinator_replaces_the_refusals() -> None:
    def not_coordinator(request: Any) -> OffsetFetchResponseGroup:
        return OffsetFetchResponseGroup(group_id="g", error_code=ErrorCode.NOT_COORDINATOR)

    request = offset_fetch.OffsetFetchRequest(group_id="g", topics=fetch_topics("secret"))
    answer = as_alice(
        request,
        7,
        groups=FakeGroups(fetch_offsets=not_coordinator),
        authorizer=granting((GROUP, "g", DESCRIBE)),
    )
    assert (answer.error_code, answer.topics) == (ErrorCode.NOT_COORDINATOR, [])


# -- FindCoordinator ---------------------------------------------------------------------


async def coordinator_is_self(key: str) -> tuple[ErrorCode, int]:
    return ErrorCode.NONE, 0


def test_find_coordinator_v4_refuses_each_key_on_its_own() -> None:
    groups = FakeGroups(find_coordinator=coordinator_is_self)
    transactions = FakeGroups(find_coordinator=coordinator_is_self)
    authorizer = granting((GROUP, "ok", DESCRIBE), (ResourceType.TRANSACTIONAL_ID, "tx", DESCRIBE))
    grouped = as_alice(
        find_coordinator.FindCoordinatorRequest(key_type=0, coordinator_keys=["no", "ok"]),
        4,
        groups=groups,
        authorizer=authorizer,
    )
    assert [
        (c.key, c.error_code, c.error_message, c.node_id, c.host, c.port)
        for c in grouped.coordinators
    ] == [("no", GROUP_AUTHZ, "", -1, "", -1), ("ok", 0, "", 0, "127.0.0.1", 9092)]
    assert groups.calls == [("find_coordinator", ("ok",))]
    txn = as_alice(
        find_coordinator.FindCoordinatorRequest(key_type=1, coordinator_keys=["tx", "other"]),
        5,
        transactions=transactions,
        authorizer=authorizer,
    )
    assert [(c.key, c.error_code, c.node_id) for c in txn.coordinators] == [
        ("tx", 0, 0),
        ("other", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1),
    ]


@pytest.mark.parametrize(
    ("key_type", "error", "message"),
    [
        (0, GROUP_AUTHZ, "Group authorization failed."),
        (
            1,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "Transactional Id authorization failed.",
        ),
    ],
)
def test_find_coordinator_v1_to_v3_refuse_the_whole_answer(
    key_type: int, error: ErrorCode, message: str
) -> None:
    groups = FakeGroups(find_coordinator=coordinator_is_self)
    request = find_coordinator.FindCoordinatorRequest(key="k", key_type=key_type)
    answer = as_alice(request, 3, groups=groups, transactions=groups, authorizer=granting())
    assert (answer.error_code, answer.error_message) == (error, message)
    assert (answer.node_id, answer.host, answer.port) == (-1, "", -1)
    assert groups.calls == []


def test_find_coordinator_v0_groups_need_describe() -> None:
    groups = FakeGroups(find_coordinator=coordinator_is_self)
    request = find_coordinator.FindCoordinatorRequest(key="g")
    refused = as_alice(request, 0, groups=groups, authorizer=granting((GROUP, "h", DESCRIBE)))
    assert (refused.error_code, refused.node_id) == (GROUP_AUTHZ, -1)
    allowed = as_alice(request, 0, groups=groups, authorizer=granting((GROUP, "g", READ)))
    assert (allowed.error_code, allowed.node_id, allowed.port) == (0, 0, 9092)


# -- without an authorizer -----------------------------------------------------------------


def test_without_an_authorizer_nothing_is_refused() -> None:
    async def beat(request: object) -> heartbeat.HeartbeatResponse:
        return heartbeat.HeartbeatResponse()

    groups = FakeGroups(
        heartbeat=beat,
        delete_offsets=delete_all,
        fetch_offsets=committed,
        commit_offsets=commit_all,
        list_groups=listed,
    )
    topics = FakeTopics(topic_of("t"), topic_of("secret"))
    svc = services(groups=groups, topics=topics)
    beat = heartbeat.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    assert call(svc, beat, 4, principal=ALICE).error_code == 0
    deleted = call(svc, delete_request(), 0, principal=ALICE)
    assert errors_of(deleted.topics) == [
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("secret", 0, 0),
        ("t", 0, 0),
    ]
    committed_ = call(svc, commit_request(), 8, principal=ALICE)
    assert {error for *_, error in errors_of(committed_.topics)} == {
        0,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    everything = offset_fetch.OffsetFetchRequest(group_id="g", topics=None)
    assert [t.name for t in call(svc, everything, 7, principal=ALICE).topics] == ["t", "secret"]
    listing = call(svc, list_groups.ListGroupsRequest(states_filter=[]), 4, principal=ALICE)
    assert [g.group_id for g in listing.groups] == ["a", "b", "c"]
