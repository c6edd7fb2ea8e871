"""ListConfigResources (key 74): the config resources the cluster knows, by type.

Versions: 0 (Kafka's ListClientMetricsResources) lists client-metrics resources
only; 1 takes resource types (none means every supported type), names each
resource's type, and answers UNSUPPORTED_VERSION for a type it does not list.

As in Kafka 4.4, the answer holds groups, then broker loggers, then brokers (by
id), then topics (by name, internal ones included); groups and client metrics
count only when they have configs (``kafka-configs.sh --describe --entity-type
groups`` lists the groups it finds here). Groups come by name here (Kafka's
order is its map's). Broker loggers, like brokers, are one per live broker, by
id. kpybroker has no client-metrics configs, so that type is accepted and lists
nothing.

It needs DESCRIBE_CONFIGS on the cluster, checked first: a refusal is
CLUSTER_AUTHORIZATION_FAILED and an empty list; a principal allowed sees every
resource, with no check of its own.
"""

from __future__ import annotations

from kpybroker.apis.support.config_resources import ResourceType
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import list_config_resources
from kpybroker.protocol.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from kpybroker.security.acls.model import AclOperation

SUPPORTED_TYPES = (
    ResourceType.TOPIC,
    ResourceType.BROKER,
    ResourceType.BROKER_LOGGER,
    ResourceType.CLIENT_METRICS,
    ResourceType.GROUP,
)


@api(list_config_resources, 0, 1)
async def handle_list_config_resources(
    ctx: RequestContext, request: ListConfigResourcesRequest
) -> ListConfigResourcesResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if ctx.api_version == 0:
        return ListConfigResourcesResponse()  # no client-metrics resources
    wanted = set(request.resource_types or SUPPORTED_TYPES)
    if not wanted <= set(SUPPORTED_TYPES):
        return ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    found = []
    if ResourceType.GROUP in wanted:
        found += [
            ConfigResource(group_id, ResourceType.GROUP)
            for group_id in sorted(ctx.services.cluster.configured_groups())
        ]
    for kind in (ResourceType.BROKER_LOGGER, ResourceType.BROKER):
        if kind in wanted:
            found += [
                ConfigResource(str(broker_id), kind)
                for broker_id in sorted(ctx.services.cluster.live_broker_ids())
            ]
    if ResourceType.TOPIC in wanted:
        found += [
            ConfigResource(name, ResourceType.TOPIC)
            for name in sorted(ctx.services.cluster.topics())
        ]
    return ListConfigResourcesResponse(config_resources=found)
