"""FindCoordinator (key 10): which broker coordinates a group.

Versions: 0 names a group; 1 adds the key type (0 group, 1 transaction) and
an error message; 2 is the same; 3 is flexible; 4 takes a batch of keys and
answers each with its own node and error (Java's admin client looks up many
groups at once). 5 (transaction verification errors) and 6 (share-group
keys) are not implemented.

As in Kafka, the first lookup creates ``__consumer_offsets``. Kafka answers
that lookup COORDINATOR_NOT_AVAILABLE and the client retries; here the
creation and loading of the (empty) partitions is quick, so the answer names
the coordinator at once. Transactions are not implemented: a transaction key
is answered COORDINATOR_NOT_AVAILABLE, any other key type INVALID_REQUEST.
"""

from __future__ import annotations

from kpybroker.apis.registry import RequestContext, api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import find_coordinator
from kpybroker.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

BATCHED_FROM = 4
GROUP_KEY, TRANSACTION_KEY = 0, 1
# Kafka's Errors messages, which v1-3 carry in error_message.
MESSAGES = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_REQUEST: (
        "This most likely occurs because of a request being malformed by the client library "
        "or the message was sent to an incompatible broker. See the broker logs for more "
        "details."
    ),
}


async def locate(ctx: RequestContext, key_type: int, key: str) -> Coordinator:
    broker = ctx.broker
    if key_type == GROUP_KEY:
        error, node_id = await broker.coordinator.find_coordinator(key)
    elif key_type == TRANSACTION_KEY:
        error, node_id = ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
    else:
        error, node_id = ErrorCode.INVALID_REQUEST, -1
    address = next((b for b in broker.live_brokers(ctx.listener) if b.broker_id == node_id), None)
    if address is None or error:
        error = error or ErrorCode.COORDINATOR_NOT_AVAILABLE
        return Coordinator(
            key=key, node_id=-1, host="", port=-1, error_code=error, error_message=MESSAGES[error]
        )
    return Coordinator(key=key, node_id=node_id, host=address.host, port=address.port)


@api(find_coordinator, 0, 4)
async def handle_find_coordinator(
    ctx: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    if ctx.api_version >= BATCHED_FROM:
        found = [await locate(ctx, request.key_type, key) for key in request.coordinator_keys]
        return FindCoordinatorResponse(coordinators=found)
    one = await locate(ctx, request.key_type, request.key)
    return FindCoordinatorResponse(
        error_code=one.error_code,
        error_message=one.error_message,
        node_id=one.node_id,
        host=one.host,
        port=one.port,
    )
