"""From a request frame to response parts: header, version check, handler, encoding.

Kafka closes the connection, without an answer, on a request it cannot parse,
an unknown API key or an unsupported version. ApiVersions is the exception: a
too-new ApiVersions request gets a v0 UNSUPPORTED_VERSION answer carrying the
supported range, so that the client can retry with a version the broker knows.

The request quota (``request_percentage``) is charged here, for every API but
the ones brokers send each other, with the time the handler spent
(``request_time``); a client over it gets the throttle time in its answer's
``throttle_time_ms`` (the larger of it and a byte-rate throttle the handler
set), which the connection then honours by muting itself.

Every request a handler ran for is counted here, with the time from its decoding
to its encoded response (Kafka's RequestsPerSec and TotalTimeMs, ``metrics``).

An API's handler module is imported at its first request (``load_api``); from then on
finding the handler is one dict lookup.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import Any

from kpybroker.apis import load_api
from kpybroker.apis.support.api_index import API_INDEX
from kpybroker.apis.support.context import RequestContext, Services
from kpybroker.apis.support.registry import REGISTRY, ApiSpec, CloseConnection, Handler
from kpybroker.metrics.request_stats import RequestStats
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
from kpybroker.server.request_time import TimedCoroutine

log = logging.getLogger(__name__)

MALFORMED = (DecodeError, struct.error, UnicodeDecodeError, ValueError, IndexError)
#: APIs only brokers send (Kafka's ``clusterAction``): never charged to a request quota.
WRITE_TXN_MARKERS_KEY = 27
FETCH_KEY = 1


def unsupported_api_versions(correlation_id: int) -> list[Any]:
    indexed = API_INDEX[API_VERSIONS_KEY]
    body = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersion(API_VERSIONS_KEY, indexed.advertised_min, indexed.max_version)],
    )
    return frame_response(response_header(API_VERSIONS_KEY, 0, correlation_id), body.encode(0))


async def handle(handler: Any, ctx: RequestContext, request: Any, api_key: int) -> Any:
    """Run the handler; with request quotas on, charge the client for its time."""
    quota = ctx.services.quotas.request if ctx.services is not None else None
    if quota is None or not quota.quotas_enabled or _exempt(api_key, request):
        return await handler(ctx, request)
    timed = TimedCoroutine(handler(ctx, request))
    response = await timed
    now_ms = time.monotonic_ns() // 1_000_000
    user, client_id = ctx.principal.name, ctx.client_id or ""
    throttle_ms = quota.record_request_time(user, client_id, timed.elapsed_ns, now_ms)
    if throttle_ms and response is not None and hasattr(response, "throttle_time_ms"):
        response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
    return response


def _exempt(api_key: int, request: Any) -> bool:
    """Broker-to-broker requests: transaction markers, and followers' fetches."""
    if api_key == WRITE_TXN_MARKERS_KEY:
        return True
    return api_key == FETCH_KEY and _from_follower(request)


def _from_follower(fetch_request: Any) -> bool:
    # replica_id before v15, replica_state from then on; the other is -1.
    return max(fetch_request.replica_id, fetch_request.replica_state.replica_id) >= 0


def _record(stats: RequestStats, spec: ApiSpec, version: int, request: Any, started: int) -> None:
    """Count the request and its time, a fetch also as Kafka's FetchConsumer or
    FetchFollower."""
    elapsed_ms = (time.perf_counter_ns() - started) / 1e6
    stats.record(spec.name, version, elapsed_ms)
    if spec.key == FETCH_KEY:
        role = "FetchFollower" if _from_follower(request) else "FetchConsumer"
        stats.record(role, version, elapsed_ms)


async def answer(
    frame: bytearray,
    services: Services,
    client_host: str,
    listener: str,
    principal: KafkaPrincipal = ANONYMOUS,
    connection_id: str = "",
    *,
    handler: Handler | None = None,
) -> tuple[list[Any], Any] | None:
    """Handle one request frame: the framed response parts and the response object (None
    when the answer was made before any handler ran); None when there is no answer.
    ``handler`` replaces the API's registered one (ApiVersions before authentication)."""
    api_key, api_version, correlation_id = peek_api(frame)
    spec = REGISTRY.get(api_key) or load_api(api_key)
    if spec is None:
        raise CloseConnection(f"unknown API key {api_key}")
    if not spec.accepts(api_version):
        if api_key == API_VERSIONS_KEY and api_version > spec.max_version:
            return unsupported_api_versions(correlation_id), None
        raise CloseConnection(f"unsupported {spec.name} version {api_version}")
    started = time.perf_counter_ns()
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
        request_size=len(frame),
        connection_id=connection_id,
    )
    try:
        response = await handle(handler or spec.handler, ctx, request, api_key)
        if response is None:
            return None
        parts = frame_response(
            response_header(api_key, api_version, correlation_id), response.encode(api_version)
        )
        return parts, response
    finally:
        _record(services.request_stats, spec, api_version, request, started)
