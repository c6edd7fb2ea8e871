"""KIP-932's share group protocol: ShareGroupHeartbeat (76), ShareGroupDescribe (77).

Version 1 of each is Kafka's first stable one (version 0 was Kafka 4.0's early
access, removed in 4.1): ShareGroupHeartbeat v1 needs the member ID the client
made itself. Both are flexible.

Share groups are on, as Kafka 4.4 decides (``isShareGroupProtocolEnabled``),
when the ``share.version`` feature is finalized at 1 or more (a new Kafka 4.2+
cluster's level; kpybroker's ``share.version`` config) or ``group.share.enable``
is set. Otherwise these APIs, ShareFetch, ShareAcknowledge and the share group
offset APIs are not advertised (``api_versions``) and answer UNSUPPORTED_VERSION.

The group state machine lives in kpybroker/coordinator (``share_group_protocol``).

Authorization, as Kafka's request handler: a heartbeat needs READ on the group
(GROUP_AUTHORIZATION_FAILED), a member ID of 1 to 36 characters (INVALID_REQUEST, no
message), then DESCRIBE on every topic it subscribes to
(TOPIC_AUTHORIZATION_FAILED, without saying which). A description needs
DESCRIBE on the group, else that group is answered GROUP_AUTHORIZATION_FAILED
(ahead of the others); with an authorizer, a group whose members are assigned a
topic the caller may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, its
members hidden.
"""

from __future__ import annotations

from kpybroker.apis.groups import caller_of
from kpybroker.apis.support.authorization import may_read_group
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.features import share_groups_enabled
from kpybroker.apis.support.registry import api
from kpybroker.coordinator.share_group_protocol import heartbeat_error
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import share_group_describe, share_group_heartbeat
from kpybroker.protocol.messages.share_group_describe import (
    DescribedShareGroup,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from kpybroker.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kpybroker.security.acls.model import AclOperation, ResourceType

UNAUTHORIZED_TOPICS = (
    "The group has described topic(s) that the client is not authorized to describe."
)
#: The longest member ID Kafka's request handler takes (a UUID's text, KafkaApis.isMemberIdValid).
MAX_MEMBER_ID_LENGTH = 36


def valid_member_id(member_id: str | None) -> bool:
    """Kafka's ``KafkaApis.isMemberIdValid``, for ShareGroupHeartbeat, ShareFetch and
    ShareAcknowledge: present, not empty, at most 36 characters (a blank one passes)."""
    return bool(member_id) and len(member_id) <= MAX_MEMBER_ID_LENGTH


@api(share_group_heartbeat, 1, 1)
async def handle_share_group_heartbeat(
    ctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    if not share_groups_enabled(ctx):
        return heartbeat_error(ErrorCode.UNSUPPORTED_VERSION)
    if not may_read_group(ctx, request.group_id):
        return heartbeat_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not valid_member_id(request.member_id):
        # Kafka 4.4 refuses an empty or overlong member ID before its coordinator, without a
        # message (a blank one gets the coordinator's "MemberId can't be empty.").
        return heartbeat_error(ErrorCode.INVALID_REQUEST)
    names = set(request.subscribed_topic_names or ())
    if len(ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(names):
        return heartbeat_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return await ctx.services.groups.share_group_heartbeat(caller_of(ctx), request)


@api(share_group_describe, 1, 1)
async def handle_share_group_describe(
    ctx: RequestContext, request: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    if not share_groups_enabled(ctx):
        return ShareGroupDescribeResponse(
            groups=[
                DescribedShareGroup(group_id=g, error_code=ErrorCode.UNSUPPORTED_VERSION)
                for g in request.group_ids
            ]
        )
    refused: list[DescribedShareGroup] = []
    allowed: list[str] = []
    for group_id in request.group_ids:
        if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            allowed.append(group_id)
        else:
            refused.append(
                DescribedShareGroup(
                    group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
                )
            )
    described = ctx.services.groups.describe_share_groups(allowed)
    if request.include_authorized_operations:
        for group in described:
            if not group.error_code:
                group.authorized_operations = ctx.authorized_operations(
                    ResourceType.GROUP, group.group_id
                )
    groups = refused + described
    if ctx.services.authorizer is not None:
        groups = [_hide_unauthorized_topics(ctx, group) for group in groups]
    return ShareGroupDescribeResponse(groups=groups)


def _hide_unauthorized_topics(
    ctx: RequestContext, group: DescribedShareGroup
) -> DescribedShareGroup:
    """Clients are not allowed to see topics they may not DESCRIBE (Kafka's handler)."""
    names = {tp.topic_name for member in group.members for tp in member.assignment.topic_partitions}
    if len(ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names)) == len(names):
        return group
    return DescribedShareGroup(
        group_id=group.group_id,
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        error_message=UNAUTHORIZED_TOPICS,
        members=[],
    )
