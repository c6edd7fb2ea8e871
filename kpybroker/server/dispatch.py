"""From a request frame to response parts: header, version check, handler, encoding.

Kafka closes the connection, without an answer, on a request it cannot parse,
an unknown API key or an unsupported version. ApiVersions is the exception: a
too-new ApiVersions request gets a v0 UNSUPPORTED_VERSION answer carrying the
supported range, so that the client can retry with a version the broker knows.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

from kpybroker.apis.support.context import RequestContext, Services
from kpybroker.apis.support.registry import REGISTRY, CloseConnection
from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.framing import (
    API_VERSIONS_KEY,
    frame_response,
    parse_request_header,
    peek_api,
    response_header,
)
from kpybroker.protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from kpybroker.security.principal import ANONYMOUS, KafkaPrincipal

log = logging.getLogger(__name__)

MALFORMED = (DecodeError, struct.error, UnicodeDecodeError, ValueError, IndexError)


def unsupported_api_versions(correlation_id: int) -> list[Any]:
    spec = REGISTRY[API_VERSIONS_KEY]
    body = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersion(API_VERSIONS_KEY, spec.advertised_min, spec.max_version)],
    )
    return frame_response(response_header(API_VERSIONS_KEY, 0, correlation_id), body.encode(0))


async def dispatch(
    frame: bytearray,
    services: Services,
    client_host: str,
    listener: str,
    principal: KafkaPrincipal = ANONYMOUS,
) -> list[Any] | None:
    """Handle one request frame; return the framed response parts, or None for no response."""
    answered = await answer(frame, services, client_host, listener, principal)
    return None if answered is None else answered[0]


async def answer(
    frame: bytearray,
    services: Services,
    client_host: str,
    listener: str,
    principal: KafkaPrincipal = ANONYMOUS,
) -> tuple[list[Any], Any] | None:
    """``dispatch``, also returning the response object (None when the answer was made
    before any handler ran); None when the request has no answer."""
    api_key, api_version, correlation_id = peek_api(frame)
    spec = REGISTRY.get(api_key)
    if spec is None:
        raise CloseConnection(f"unknown API key {api_key}")
    if not spec.accepts(api_version):
        if api_key == API_VERSIONS_KEY and api_version > spec.max_version:
            return unsupported_api_versions(correlation_id), None
        raise CloseConnection(f"unsupported {spec.name} version {api_version}")
    try:
        header = parse_request_header(frame)
        request, _ = spec.request_class.decode(frame, header.body_offset, api_version)
    except MALFORMED as exc:
        raise CloseConnection(f"malformed {spec.name} v{api_version} request: {exc}") from None
    ctx = RequestContext(
        services=services,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=header.client_id,
        client_host=client_host,
        listener=listener,
        principal=principal,
        api_name=spec.name,
    )
    response = await spec.handler(ctx, request)
    if response is None:
        return None
    parts = frame_response(
        response_header(api_key, api_version, correlation_id), response.encode(api_version)
    )
    return parts, response
