"""KIP-848's consumer group protocol: ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).

ConsumerGroupHeartbeat versions: 0 lets the coordinator make up the member
ID of a joining member that sends none; 1 adds the regular-expression
subscription and requires the client to bring its own member ID (KIP-1082).
Both are flexible. ConsumerGroupDescribe versions: 1 adds each member's
type (1, the consumer protocol, for every member here).

The group state machine, assignors and records live in kpybroker/coordinator
(``consumer_group_protocol``). Served only while ``consumer`` is among
``group.coordinator.rebalance.protocols`` (otherwise neither API is
advertised, as in Kafka).

Authorization, as Kafka's request handler: a heartbeat needs READ on the
group, and DESCRIBE on every topic it names (TOPIC_AUTHORIZATION_FAILED
otherwise); a description needs DESCRIBE on the group, else that group is
answered GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from kpybroker.apis.groups import caller_of
from kpybroker.apis.support.authorization import may_read_group
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.features import consumer_protocol_enabled
from kpybroker.apis.support.registry import api
from kpybroker.coordinator.consumer_group_protocol import heartbeat_error
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import consumer_group_describe, consumer_group_heartbeat
from kpybroker.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedConsumerGroup,
)
from kpybroker.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kpybroker.security.acls.model import AclOperation, ResourceType


@api(consumer_group_heartbeat, 0, 1)
async def handle_consumer_group_heartbeat(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    if not consumer_protocol_enabled(ctx):
        return heartbeat_error(ErrorCode.UNSUPPORTED_VERSION)
    if not may_read_group(ctx, request.group_id):
        return heartbeat_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = request.subscribed_topic_names or []
    refused = [n for n in names if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, n)]
    if refused:
        return heartbeat_error(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            f"The client is not authorized to access topics: {sorted(refused)}",
        )
    return await ctx.services.groups.consumer_group_heartbeat(caller_of(ctx), request)


@api(consumer_group_describe, 0, 1)
async def handle_consumer_group_describe(
    ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    refused: list[DescribedConsumerGroup] = []
    allowed: list[str] = []
    for group_id in request.group_ids:
        if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            allowed.append(group_id)
        else:
            refused.append(
                DescribedConsumerGroup(
                    group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
                )
            )
    described = ctx.services.groups.describe_consumer_groups(allowed)
    if request.include_authorized_operations:
        for group in described:
            if not group.error_code:
                group.authorized_operations = ctx.authorized_operations(
                    ResourceType.GROUP, group.group_id
                )
    return ConsumerGroupDescribeResponse(groups=described + refused)
