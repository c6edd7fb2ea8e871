"""ApiVersions (key 18): the API keys and version ranges this broker implements.

They come from the API index (``support/api_index.py``), not from the handlers, which
are imported at their APIs' first requests, after ApiVersions has been answered.

v0-2 have an empty request; v3 added the client's software name and version
(checked against Kafka's pattern, INVALID_REQUEST otherwise) and made the
message flexible and added the features; v4 only lets features with a
minimum of 0 be listed; v5 (KIP-1242) lets the client name the cluster and
the node it means to reach, both or neither (INVALID_REQUEST otherwise): a
request naming another cluster id or another node id is answered
REBOOTSTRAP_REQUIRED, with no APIs, so that the client goes back to its
bootstrap servers. As in Kafka, only a request the broker handles is checked:
on a SASL listener the ApiVersions before authentication (Kafka's
``SaslServerAuthenticator``) is answered without that check. The response
always travels with header v0 (see protocol/framing.py). A request newer than
v5 is answered in dispatch, before it gets here.

The features: ``transaction.version`` (levels 0-2; 2 is KIP-890's epoch
bump at every transaction and implicit partition addition), finalized at the
broker's ``transaction.version`` setting: clients such as Kafka's own use
version 2 only when it is finalized; and ``group.version`` (levels 0-1; 1 is
KIP-848's consumer group protocol), finalized at 1 while ``consumer`` is
among ``group.coordinator.rebalance.protocols``, when ConsumerGroupHeartbeat
and ConsumerGroupDescribe are advertised too; and ``share.version`` (levels
0-1; 1 is KIP-932's share groups), finalized at the broker's ``share.version``
setting (1, as a new Kafka 4.2+ cluster has it): the share group APIs
(ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge and the
share group offset APIs) are advertised while share groups are on
(``support.features.share_groups_enabled``). A level of 0 is not listed as
finalized, as in Kafka.
"""

from __future__ import annotations

import re

from kpybroker.apis.support.api_index import API_INDEX
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.features import (
    SHARE_VERSION,
    SHARE_VERSION_LEVELS,
    consumer_protocol_enabled,
    share_groups_enabled,
    share_version,
)
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import api_versions
from kpybroker.protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
TRANSACTION_VERSION = "transaction.version"
#: The levels of ``transaction.version`` this broker implements.
TRANSACTION_VERSION_LEVELS = (0, 2)
FEATURES_FROM = 3
#: Older clients fail on a supported feature whose minimum is 0 (KAFKA-17492).
MIN_LEVEL_0_FROM = 4
#: The finalized levels come from the static config: they never change while it runs.
FINALIZED_FEATURES_EPOCH = 0
#: Where the request may name the cluster and node it is meant for (KIP-1242).
TARGET_FROM = 5
NO_NODE_ID = -1


GROUP_VERSION = "group.version"
#: The levels of ``group.version`` this broker implements.
GROUP_VERSION_LEVELS = (0, 1)
#: The APIs of ``group.version`` 1, advertised only while it is finalized.
CONSUMER_PROTOCOL_APIS = frozenset({68, 69})
#: The APIs of share groups: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
#: ShareAcknowledge, Describe/Alter/DeleteShareGroupOffsets.
SHARE_GROUP_APIS = frozenset({76, 77, 78, 79, 90, 91, 92})


def advertised_versions(excluded: frozenset[int] = frozenset()) -> list[ApiVersion]:
    return [
        ApiVersion(key, indexed.advertised_min, indexed.max_version)
        for key, indexed in sorted(API_INDEX.items())
        if key not in excluded
    ]


def refusal(ctx: RequestContext, request: ApiVersionsRequest, check_target: bool) -> ErrorCode:
    """Kafka's ``ApiVersionsRequest.isValid`` (INVALID_REQUEST), then, when
    ``check_target``, whether the request is meant for this cluster and node."""
    if ctx.api_version >= TARGET_FROM and (request.cluster_id is None) != (
        request.node_id == NO_NODE_ID
    ):
        return ErrorCode.INVALID_REQUEST
    if ctx.api_version >= 3 and not (
        SOFTWARE_NAME.fullmatch(request.client_software_name or "")
        and SOFTWARE_NAME.fullmatch(request.client_software_version or "")
    ):
        return ErrorCode.INVALID_REQUEST
    if check_target and ctx.api_version >= TARGET_FROM and request.cluster_id is not None:
        cluster = ctx.services.cluster
        if request.cluster_id != cluster.cluster_id or request.node_id != cluster.broker_id:
            return ErrorCode.REBOOTSTRAP_REQUIRED
    return ErrorCode.NONE


async def answer_before_authentication(
    ctx: RequestContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    """ApiVersions on a SASL listener before authentication: no cluster or node check."""
    return await handle_api_versions(ctx, request, check_target=False)


@api(api_versions, 0, 5)
async def handle_api_versions(
    ctx: RequestContext, request: ApiVersionsRequest, *, check_target: bool = True
) -> ApiVersionsResponse:
    error = refusal(ctx, request, check_target)
    if error:
        # Kafka's error response lists no APIs; librdkafka then retries with v0.
        return ApiVersionsResponse(error_code=error)
    consumer_protocol = consumer_protocol_enabled(ctx)
    excluded = frozenset() if consumer_protocol else CONSUMER_PROTOCOL_APIS
    if not share_groups_enabled(ctx):
        excluded |= SHARE_GROUP_APIS
    response = ApiVersionsResponse(
        error_code=ErrorCode.NONE, api_keys=advertised_versions(excluded)
    )
    if ctx.api_version >= FEATURES_FROM:
        finalized = {
            GROUP_VERSION: 1 if consumer_protocol else 0,
            SHARE_VERSION: share_version(ctx),
            TRANSACTION_VERSION: ctx.services.config().get(TRANSACTION_VERSION),
        }
        for name, (low, high) in (
            (GROUP_VERSION, GROUP_VERSION_LEVELS),
            (SHARE_VERSION, SHARE_VERSION_LEVELS),
            (TRANSACTION_VERSION, TRANSACTION_VERSION_LEVELS),
        ):
            if low > 0 or ctx.api_version >= MIN_LEVEL_0_FROM:
                response.supported_features.append(SupportedFeatureKey(name, low, high))
            level = finalized[name]
            if level:
                response.finalized_features.append(FinalizedFeatureKey(name, level, level))
        response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH
    return response
