"""The share group handlers (76, 77, 90-92) against fakes: the share.version gate,
ApiVersions, and Kafka's authorization of each API."""

from __future__ import annotations

from typing import Any

import pytest

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    alter_share_group_offsets as alter,
)
from kpybroker.protocol.messages import (
    api_versions,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
)
from kpybroker.protocol.messages import (
    delete_share_group_offsets as delete,
)
from kpybroker.protocol.messages import (
    describe_share_group_offsets as describe,
)
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
from tests.helpers.fake_services import FakeGroups, FakeTopics, call, services, topic_of

ALICE = KafkaPrincipal.user("alice")
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
SHARE_APIS = {76, 77, 78, 79, 90, 91, 92}
OFF = {"share.version": "0"}


def granting(*grants: tuple[ResourceType, str, AclOperation]) -> AclAuthorizer:
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
    return call(services(**kwargs), request, version, principal=ALICE)


def heartbeat(topics: list[str] | None = None) -> Any:
    return share_group_heartbeat.ShareGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=topics or ["t"]
    )


# -- share.version -----------------------------------------------------------------------------


def test_a_fresh_broker_advertises_share_groups_like_kafka_4_4() -> None:
    answer = call(services(), api_versions.ApiVersionsRequest("x", "1"), 4)
    assert SHARE_APIS - {78, 79} <= {k.api_key for k in answer.api_keys}
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert (ranges[76], ranges[77], ranges[90], ranges[91], ranges[92]) == (
        (1, 1),
        (1, 1),
        (0, 1),
        (0, 0),
        (0, 0),
    )
    supported = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
    finalized = {f.name: f.max_version_level for f in answer.finalized_features}
    assert (supported["share.version"], finalized["share.version"]) == ((0, 1), 1)


def test_share_version_0_turns_share_groups_off() -> None:
    off = services(config=OFF)
    answer = call(off, api_versions.ApiVersionsRequest("x", "1"), 4)
    assert not SHARE_APIS & {k.api_key for k in answer.api_keys}
    assert "share.version" not in {f.name for f in answer.finalized_features}
    assert call(off, heartbeat(), 1).error_code == ErrorCode.UNSUPPORTED_VERSION
    described = call(off, share_group_describe.ShareGroupDescribeRequest(["g", "h"], False), 1)
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("g", ErrorCode.UNSUPPORTED_VERSION),
        ("h", ErrorCode.UNSUPPORTED_VERSION),
    ]
    offsets = call(off, describe.DescribeShareGroupOffsetsRequest([_describe_group()]), 1)
    assert offsets.groups[0].error_code == ErrorCode.UNSUPPORTED_VERSION
    assert call(off, alter.AlterShareGroupOffsetsRequest("g", []), 0).error_code == (
        ErrorCode.UNSUPPORTED_VERSION
    )
    assert call(off, delete.DeleteShareGroupOffsetsRequest("g", []), 0).error_code == (
        ErrorCode.UNSUPPORTED_VERSION
    )
    fetch = share_fetch.ShareFetchRequest(group_id="g", member_id="m", share_session_epoch=0)
    assert call(off, fetch, 2).error_code == ErrorCode.UNSUPPORTED_VERSION
    ack = share_acknowledge.ShareAcknowledgeRequest(
        group_id="g", member_id="m", share_session_epoch=1
    )
    assert call(off, ack, 2).error_code == ErrorCode.UNSUPPORTED_VERSION
    # group.share.enable turns them on whatever the feature's level.
    on = services(config={**OFF, "group.share.enable": "true"})
    assert SHARE_APIS - {78, 79} <= {
        k.api_key for k in call(on, api_versions.ApiVersionsRequest("x", "1"), 4).api_keys
    }


# -- ShareGroupHeartbeat and ShareGroupDescribe --------------------------------------------------


def test_heartbeat_needs_read_on_the_group_then_describe_on_its_topics() -> None:
    groups = FakeGroups(
        share_group_heartbeat=_answer(
            share_group_heartbeat.ShareGroupHeartbeatResponse(member_id="m")
        )
    )
    refused = as_alice(heartbeat(), 1, groups=groups, authorizer=granting((TOPIC, "t", DESCRIBE)))
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        None,
    )
    hidden = as_alice(
        heartbeat(["t", "u"]),
        1,
        groups=groups,
        authorizer=granting((GROUP, "g", READ), (TOPIC, "t", DESCRIBE)),
    )
    assert (hidden.error_code, hidden.error_message) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    assert groups.calls == []
    allowed = as_alice(
        heartbeat(["t"]),
        1,
        groups=groups,
        authorizer=granting((GROUP, "g", READ), (TOPIC, "t", DESCRIBE)),
    )
    assert (allowed.error_code, allowed.member_id) == (0, "m")
    ((method, (caller, _)),) = groups.calls
    assert (method, caller.client_host) == ("share_group_heartbeat", "/127.0.0.1")


def test_an_empty_member_id_is_refused_without_a_message() -> None:
    groups = FakeGroups()
    request = heartbeat()
    request.member_id = ""
    answer = call(services(groups=groups), request, 1)
    assert (answer.error_code, answer.error_message) == (ErrorCode.INVALID_REQUEST, None)
    assert groups.calls == []


def test_describe_hides_groups_assigned_topics_the_caller_may_not_describe() -> None:
    def described(group_ids: list[str]) -> list[Any]:
        def group(group_id: str, topic: str) -> Any:
            member = share_group_describe.DescribedShareGroupMember(
                member_id="m",
                assignment=share_group_describe.MemberAssignment(
                    [share_group_describe.DescribedTopicPartitions(b"\x01" * 16, topic, [0])]
                ),
            )
            return share_group_describe.DescribedShareGroup(
                group_id=group_id, group_state="Stable", members=[member]
            )

        return [group(g, "secret" if g == "b" else "t") for g in group_ids]

    groups = FakeGroups(describe_share_groups=described)
    authorizer = granting((GROUP, "a", DESCRIBE), (GROUP, "b", DESCRIBE), (TOPIC, "t", DESCRIBE))
    request = share_group_describe.ShareGroupDescribeRequest(["a", "b", "c"], True)
    answer = as_alice(request, 1, groups=groups, authorizer=authorizer)
    rows = [(g.group_id, g.error_code, g.error_message, len(g.members)) for g in answer.groups]
    assert rows == [
        ("c", ErrorCode.GROUP_AUTHORIZATION_FAILED, None, 0),
        ("a", 0, None, 1),
        (
            "b",
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "The group has described topic(s) that the client is not authorized to describe.",
            0,
        ),
    ]
    assert answer.groups[1].authorized_operations == 1 << AclOperation.DESCRIBE


# -- the offset admin APIs ------------------------------------------------------------------------


def _describe_group(topics: list[str] | None = None) -> Any:
    return describe.DescribeShareGroupOffsetsRequestGroup(
        "g",
        None
        if topics is None
        else [describe.DescribeShareGroupOffsetsRequestTopic(t, [0]) for t in topics],
    )


def test_describe_offsets_answers_topics_the_caller_may_not_describe_as_refused() -> None:
    async def offsets(request: Any) -> Any:
        return describe.DescribeShareGroupOffsetsResponseGroup(
            group_id=request.group_id,
            topics=[
                describe.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name,
                    partitions=[describe.DescribeShareGroupOffsetsResponsePartition(0, 5)],
                )
                for t in request.topics
                or [
                    describe.DescribeShareGroupOffsetsRequestTopic("t", [0]),
                    describe.DescribeShareGroupOffsetsRequestTopic("u", [0]),
                ]
            ],
        )

    groups = FakeGroups(describe_share_group_offsets=offsets)
    authorizer = granting((GROUP, "g", DESCRIBE), (TOPIC, "t", DESCRIBE))
    named = as_alice(
        describe.DescribeShareGroupOffsetsRequest([_describe_group(["t", "u"])]),
        1,
        groups=groups,
        authorizer=authorizer,
    )
    rows = [
        (t.topic_name, p.start_offset, p.error_code)
        for t in named.groups[0].topics
        for p in t.partitions
    ]
    assert rows == [("t", 5, 0), ("u", -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    everything = as_alice(
        describe.DescribeShareGroupOffsetsRequest([_describe_group()]),
        1,
        groups=groups,
        authorizer=authorizer,
    )
    assert [t.topic_name for t in everything.groups[0].topics] == ["t"]
    refused = as_alice(
        describe.DescribeShareGroupOffsetsRequest([_describe_group(["t"])]),
        0,
        groups=groups,
        authorizer=granting(),
    )
    assert refused.groups[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


@pytest.mark.parametrize("error", [ErrorCode.NONE, ErrorCode.NON_EMPTY_GROUP])
def test_alter_offsets_refuses_unreadable_and_unknown_topics_per_partition(
    error: ErrorCode,
) -> None:
    async def altered(group_id: str, topics: list[Any]) -> Any:
        if error:
            return alter.AlterShareGroupOffsetsResponse(error_code=error, error_message="no")
        return alter.AlterShareGroupOffsetsResponse(
            responses=[
                alter.AlterShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name,
                    partitions=[
                        alter.AlterShareGroupOffsetsResponsePartition(p.partition_index)
                        for p in t.partitions
                    ],
                )
                for t in topics
            ]
        )

    groups = FakeGroups(alter_share_group_offsets=altered)
    topics = FakeTopics(topic_of("t"), topic_of("secret"))
    request = alter.AlterShareGroupOffsetsRequest(
        "g",
        [
            alter.AlterShareGroupOffsetsRequestTopic(
                name, [alter.AlterShareGroupOffsetsRequestPartition(0, 3)]
            )
            for name in ("t", "secret", "gone")
        ],
    )
    authorizer = granting((GROUP, "g", READ), (TOPIC, "t", READ), (TOPIC, "gone", READ))
    answer = as_alice(request, 0, groups=groups, topics=topics, authorizer=authorizer)
    if error:
        assert (answer.error_code, answer.error_message, answer.responses) == (error, "no", [])
        return
    rows = [(t.topic_name, t.partitions[0].error_code) for t in answer.responses]
    assert rows == [
        ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("gone", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 0),
    ]
    assert answer.responses[0].topic_id == topics.get("secret").topic_id
    assert [t.topic_name for t in groups.calls[0][1][1]] == ["t"]
    group_refused = as_alice(request, 0, groups=groups, topics=topics, authorizer=granting())
    assert group_refused.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_delete_offsets_needs_delete_on_the_group_and_read_on_each_topic() -> None:
    async def deleted(group_id: str, names: list[str]) -> Any:
        return delete.DeleteShareGroupOffsetsResponse(
            responses=[delete.DeleteShareGroupOffsetsResponseTopic(topic_name=n) for n in names]
        )

    groups = FakeGroups(delete_share_group_offsets=deleted)
    request = delete.DeleteShareGroupOffsetsRequest(
        "g", [delete.DeleteShareGroupOffsetsRequestTopic(n) for n in ("t", "secret")]
    )
    refused = as_alice(request, 0, groups=groups, authorizer=granting((GROUP, "g", READ)))
    assert refused.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    answer = as_alice(
        request, 0, groups=groups, authorizer=granting((GROUP, "g", DELETE), (TOPIC, "t", READ))
    )
    assert [(t.topic_name, t.error_code) for t in answer.responses] == [
        ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("t", 0),
    ]


def _answer(response: Any) -> Any:
    async def answer(*args: Any) -> Any:
        return response

    return answer
