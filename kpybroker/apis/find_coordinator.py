"""FindCoordinator (key 10): which broker coordinates a group or a transactional id.

Versions: 0 names a group; 1 adds the key type (0 group, 1 transaction) and
an error message; 2 is the same; 3 is flexible; 4 takes a batch of keys and
answers each with its own node and error (Java's admin client looks up many
groups at once); 5 only lets the answer be TRANSACTION_ABORTABLE (KIP-890),
which this broker never gives, so it is 4's. 6 adds the share key type
(KIP-932): a key "group:topicId:partition" names the share coordinator of
that share partition, the leader of its partition of ``__share_group_state``.

As in Kafka, the first lookup creates ``__consumer_offsets``. Kafka answers
that lookup COORDINATOR_NOT_AVAILABLE and the client retries; here the
creation and loading of the (empty) partitions is quick, so the answer names
the coordinator at once. A transaction key names the leader of the id's
partition of ``__transaction_state``, created the same way on first lookup,
as is ``__share_group_state`` for a share key. A share key below v6 is
INVALID_REQUEST, as is one Kafka's ``SharePartitionKey.validate`` refuses
(three fields, a non-blank group id, a topic ID, an integer partition), and
any other key type.

The error messages are Kafka's, who answers v1-3 with ``Errors.message()``,
on success too: "NONE", the enum's name. In v4+ its per-key message is
empty for every answer its ``getCoordinator`` gives, success or error, and
the default message only when the whole request fails, as for an unknown
key type.

Authorization, as Kafka's ``getCoordinator``, before the lookup: a group key
needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), a transaction key
DESCRIBE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). A
refused key is answered like any failed lookup: in v4+ its entry, with no
message; in v0-3 the whole answer, with the code's default message. A share
key needs CLUSTER_ACTION on the cluster (only brokers look them up); Kafka
fails the whole request without it, so each key is CLUSTER_AUTHORIZATION_FAILED
with the default message.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode, default_message
from kpybroker.protocol.messages import find_coordinator
from kpybroker.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kpybroker.security.acls.model import AclOperation, ResourceType
from kpybroker.share_coordinator.persister import parse_share_key

BATCHED_FROM = 4
SHARE_FROM = 6
GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2


async def locate(ctx: RequestContext, key_type: int, key: str) -> Coordinator:
    services = ctx.services
    if key_type == GROUP_KEY:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return no_coordinator(key, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        error, node_id = await services.groups.find_coordinator(key)
    elif key_type == TRANSACTION_KEY:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return no_coordinator(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        error, node_id = await services.transactions.find_coordinator(key)
    elif key_type == SHARE_KEY:
        if ctx.api_version < SHARE_FROM:
            return no_coordinator(key, ErrorCode.INVALID_REQUEST)
        if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
            refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return no_coordinator(key, refused, default_message(refused))
        try:
            share_key = parse_share_key(key)
        except ValueError:
            return no_coordinator(key, ErrorCode.INVALID_REQUEST)
        error, node_id = await services.share_state.find_coordinator(share_key.coordinator_key())
    else:
        # Kafka fails the whole request (its CoordinatorType lookup throws), and
        # its error answer carries the default message, in v4+ too.
        invalid = ErrorCode.INVALID_REQUEST
        return no_coordinator(key, invalid, default_message(invalid))
    address = next(
        (b for b in services.cluster.live_brokers(ctx.listener) if b.broker_id == node_id), None
    )
    if address is None or error:
        return no_coordinator(key, error or ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return Coordinator(key=key, node_id=node_id, host=address.host, port=address.port)


def no_coordinator(key: str, error: ErrorCode, message: str = "") -> Coordinator:
    """An error answer: Kafka's ``Node.noNode()`` and, in v4+, no message (empty)."""
    return Coordinator(
        key=key, node_id=-1, host="", port=-1, error_code=error, error_message=message
    )


@api(find_coordinator, 0, 6)
async def handle_find_coordinator(
    ctx: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    if ctx.api_version >= BATCHED_FROM:
        found = [await locate(ctx, request.key_type, key) for key in request.coordinator_keys]
        return FindCoordinatorResponse(coordinators=found)
    one = await locate(ctx, request.key_type, request.key)
    return FindCoordinatorResponse(
        error_code=one.error_code,
        error_message=default_message(one.error_code),
        node_id=one.node_id,
        host=one.host,
        port=one.port,
    )
