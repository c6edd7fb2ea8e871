"""The classic group protocol: JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13).

JoinGroup versions: 0 has no rebalance timeout (the session timeout stands
in); 1 adds it; 2 throttle time; 3 is the same; 4 makes an unknown member
fetch its ID first (MEMBER_ID_REQUIRED); 5 adds group.instance.id (static
membership, FENCED_INSTANCE_ID); 6 is flexible; 7 returns the protocol type
and lets the protocol name be null (older versions get ""); 8 adds a reason;
9 lets a rejoining static leader skip the assignment.

SyncGroup versions: 1 throttle time; 2 the same; 3 group.instance.id; 4 is
flexible; 5 must name the protocol type and name (INCONSISTENT_GROUP_PROTOCOL
when either is null, as in Kafka's request handler), checked against the
group's.

Heartbeat versions: 1 throttle time; 2 the same; 3 group.instance.id; 4 is
flexible.

LeaveGroup versions: 1 throttle time; 2 the same; 3 removes a batch of
members, by member ID or, for an admin removing static members, by instance
ID alone, each with its own error (v0-2 carry one member and one error); 4 is
flexible; 5 adds a reason per member.

The protocol itself lives in kpybroker/coordinator; these handlers shape each
version's request and answer. Member metadata and assignments pass through
as opaque bytes.

Authorization, as Kafka's request handler: each of the four needs READ on the
group, checked before the coordinator is asked (SyncGroup v5's missing
protocol is refused before it); a refusal is GROUP_AUTHORIZATION_FAILED with
the answer's other fields at their error values.
"""

from __future__ import annotations

from kpybroker.apis.support.authorization import may_read_group
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.coordinator.interface import Caller
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import heartbeat, join_group, leave_group, sync_group
from kpybroker.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kpybroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kpybroker.protocol.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
)
from kpybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

NULLABLE_PROTOCOL_NAME_FROM = 7
BATCHED_LEAVE_FROM = 3
PROTOCOL_NAMED_FROM = 5


def caller_of(ctx: RequestContext) -> Caller:
    """The request's client, its host written as Java's InetAddress prints it ("/1.2.3.4")."""
    return Caller(
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.client_host}",
        api_version=ctx.api_version,
    )


@api(join_group, 0, 9)
async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    if not may_read_group(ctx, request.group_id):
        return JoinGroupResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
            generation_id=-1,
            protocol_name=None if ctx.api_version >= NULLABLE_PROTOCOL_NAME_FROM else "",
            leader="",
            member_id="",
            members=[],
        )
    if ctx.api_version == 0:
        request.rebalance_timeout_ms = request.session_timeout_ms
    response = await ctx.services.groups.join_group(caller_of(ctx), request)
    if ctx.api_version < NULLABLE_PROTOCOL_NAME_FROM and response.protocol_name is None:
        response.protocol_name = ""
    return response


@api(sync_group, 0, 5)
async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    if ctx.api_version >= PROTOCOL_NAMED_FROM and (
        request.protocol_type is None or request.protocol_name is None
    ):
        return SyncGroupResponse(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if not may_read_group(ctx, request.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    return await ctx.services.groups.sync_group(request)


@api(heartbeat, 0, 4)
async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not may_read_group(ctx, request.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return await ctx.services.groups.heartbeat(request)


@api(leave_group, 0, 5)
async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if not may_read_group(ctx, request.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    batched = ctx.api_version >= BATCHED_LEAVE_FROM
    members = request.members if batched else [MemberIdentity(member_id=request.member_id)]
    response = await ctx.services.groups.leave_group(request.group_id, members)
    if not batched and not response.error_code and response.members:
        response.error_code = response.members[0].error_code
    return response
