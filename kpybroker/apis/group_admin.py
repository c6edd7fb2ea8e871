"""Group administration: DescribeGroups (15), ListGroups (16), DeleteGroups (42).

DescribeGroups versions: 1 throttle time; 2 the same; 3 may ask for the
authorized operations; 4 returns group.instance.id; 5 is flexible. A group
this coordinator does not know, or a consumer (KIP-848) or share (KIP-932)
group, is described as Dead, with no error before v6 and with GROUP_ID_NOT_FOUND
and its message from v6 (KIP-1043), as Kafka does; ConsumerGroupDescribe and
ShareGroupDescribe describe those.
Member metadata is returned only for a Stable group, assignments always,
both as the members sent them: kafka-consumer-groups decodes them itself.

ListGroups versions: 1 throttle time; 2 the same; 3 is flexible; 4 filters by
state (case-insensitive) and returns each group's state; 5 filters by type
(classic, consumer, share; case-insensitive) and returns each group's type.

DeleteGroups versions: 1 the same; 2 is flexible; 3 adds each group's error
message. Only an Empty group can be deleted (NON_EMPTY_GROUP otherwise); its
offsets go with it, as tombstones in ``__consumer_offsets``, and a share
group's share state is deleted from the share coordinator first.

Authorization, as Kafka's request handler: DescribeGroups needs DESCRIBE on
each group, and answers the refused ones GROUP_AUTHORIZATION_FAILED ahead of
the described ones; ListGroups lists every group to a principal with DESCRIBE
on the cluster, otherwise only those it may DESCRIBE (silently, without
logging the others); DeleteGroups needs DELETE on each group, and appends the
refused ones after the coordinator's results.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import delete_groups, describe_groups, list_groups
from kpybroker.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from kpybroker.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kpybroker.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from kpybroker.security.acls.model import AclOperation, ResourceType

AUTHORIZED_OPERATIONS_FROM = 3
GROUP_ID_NOT_FOUND_FROM = 6
DEAD_STATE = "Dead"
GROUP = ResourceType.GROUP


@api(describe_groups, 0, 6)
async def handle_describe_groups(
    ctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    refused: list[DescribedGroup] = []
    allowed: list[str] = []
    for group_id in request.groups:
        if ctx.authorize(AclOperation.DESCRIBE, GROUP, group_id):
            allowed.append(group_id)
        else:
            refused.append(
                DescribedGroup(
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )
            )
    described = ctx.services.groups.describe_groups(allowed)
    if ctx.api_version >= GROUP_ID_NOT_FOUND_FROM:
        for group in described:
            if not group.error_code and group.group_state == DEAD_STATE:
                group.error_code = ErrorCode.GROUP_ID_NOT_FOUND
    if ctx.api_version >= AUTHORIZED_OPERATIONS_FROM and request.include_authorized_operations:
        for group in described:
            if not group.error_code:
                group.authorized_operations = ctx.authorized_operations(GROUP, group.group_id)
    return DescribeGroupsResponse(groups=refused + described)


@api(list_groups, 0, 5)
async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    sees_all = ctx.authorize_cluster(AclOperation.DESCRIBE, log_if_denied=False)
    error, groups = ctx.services.groups.list_groups(request.states_filter, request.types_filter)
    if not sees_all:
        groups = [
            g
            for g in groups
            if ctx.authorize(AclOperation.DESCRIBE, GROUP, g.group_id, log_if_denied=False)
        ]
    return ListGroupsResponse(error_code=error, groups=groups)


@api(delete_groups, 0, 3)
async def handle_delete_groups(
    ctx: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(request.groups_names))
    deletable = ctx.authorized_names(AclOperation.DELETE, GROUP, names)
    results = await ctx.services.groups.delete_groups([n for n in names if n in deletable])
    refused = [
        DeletableGroupResult(group_id=n, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        for n in names
        if n not in deletable
    ]
    return DeleteGroupsResponse(results=[*results, *refused])
