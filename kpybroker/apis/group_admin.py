"""Group administration: DescribeGroups (15), ListGroups (16), DeleteGroups (42).

DescribeGroups versions: 1 throttle time; 2 the same; 3 may ask for the
authorized operations; 4 returns group.instance.id; 5 is flexible. A group
this coordinator does not know is described as Dead with no error (v6's
GROUP_ID_NOT_FOUND is not implemented). Member metadata is returned only for
a Stable group, assignments always, both as the members sent them:
kafka-consumer-groups decodes them itself.

ListGroups versions: 1 throttle time; 2 the same; 3 is flexible; 4 filters by
state (case-insensitive) and returns each group's state. v5 (group types,
KIP-848) is not implemented; Java's admin client then filters by protocol
type itself.

DeleteGroups versions: 1 the same; 2 is flexible. Only an Empty group can be
deleted (NON_EMPTY_GROUP otherwise); its offsets go with it, as tombstones in
``__consumer_offsets``.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.messages import delete_groups, describe_groups, list_groups
from kpybroker.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from kpybroker.protocol.messages.describe_groups import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kpybroker.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse

AUTHORIZED_OPERATIONS_FROM = 3
# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what a group allows when no
# authorizer is configured (Kafka's AclEntry.supportedOperations(GROUP)).
GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))


@api(describe_groups, 0, 5)
async def handle_describe_groups(
    ctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    groups = ctx.services.groups.describe_groups(request.groups)
    if ctx.api_version >= AUTHORIZED_OPERATIONS_FROM and request.include_authorized_operations:
        for group in groups:
            if not group.error_code:
                group.authorized_operations = GROUP_OPERATIONS
    return DescribeGroupsResponse(groups=groups)


@api(list_groups, 0, 4)
async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    error, groups = ctx.services.groups.list_groups(request.states_filter)
    return ListGroupsResponse(error_code=error, groups=groups)


@api(delete_groups, 0, 2)
async def handle_delete_groups(
    ctx: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    results = await ctx.services.groups.delete_groups(request.groups_names)
    return DeleteGroupsResponse(results=results)
