"""ApiVersions (key 18): the API keys and version ranges this broker implements.

v0-2 have an empty request; v3 added the client's software name and version
(checked against Kafka's pattern, INVALID_REQUEST otherwise) and made the
message flexible; v4 only lets features with a minimum of 0 be listed. The
response always travels with header v0 (see protocol/framing.py). A request
newer than v4 is answered in dispatch, before it gets here.
"""

from __future__ import annotations

import re

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import REGISTRY, api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import api_versions
from kpybroker.protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
)

SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def advertised_versions() -> list[ApiVersion]:
    return [
        ApiVersion(spec.key, spec.advertised_min, spec.max_version)
        for spec in sorted(REGISTRY.values(), key=lambda s: s.key)
    ]


@api(api_versions, 0, 4)
async def handle_api_versions(
    ctx: RequestContext, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (
        SOFTWARE_NAME.fullmatch(request.client_software_name or "")
        and SOFTWARE_NAME.fullmatch(request.client_software_version or "")
    ):
        # Kafka's error response lists no APIs; librdkafka then retries with v0.
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=advertised_versions())
