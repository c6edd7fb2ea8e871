"""InitProducerId (key 22): a producer id and epoch, for idempotent and transactional producers.

Versions: 2 is flexible; 3 lets a producer pass its current id and epoch
(KIP-360); 4 and 5 only change which errors the client may retry.

Without a transactional id the producer is idempotent: a fresh id at epoch 0
from the id blocks, whatever id and epoch it passes (as Kafka). With one,
the transaction coordinator of that id answers: it bumps the epoch (fencing
older producers of the id), aborts a transaction the previous epoch left
open, and answers CONCURRENT_TRANSACTIONS while one completes. An id and
epoch must be passed together (INVALID_REQUEST otherwise, as Kafka), and a
client below v4 gets INVALID_PRODUCER_EPOCH where newer ones get
PRODUCER_FENCED, which it does not know.

Authorization, as Kafka's handler, comes first: a transactional producer
needs WRITE on its transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
an idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some topic,
whichever (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kpybroker.apis.support.authorization import may_write_transaction
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.producer_fencing import fenced_error_for
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import init_producer_id
from kpybroker.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from kpybroker.security.acls.model import AclOperation, ResourceType
from kpybroker.transaction_coordinator.shard import ProducerIdAndEpoch
from kpybroker.transaction_coordinator.transaction_state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

PRODUCER_FENCED_FROM = 4


def refusal(ctx: RequestContext, transactional_id: str | None) -> ErrorCode:
    """Why the principal may not have a producer id (NONE: it may)."""
    if transactional_id is not None:
        if may_write_transaction(ctx, transactional_id):
            return ErrorCode.NONE
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    idempotent = ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE, log_if_denied=False)
    if idempotent or ctx.authorize_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC):
        return ErrorCode.NONE
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def failed(error: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        error_code=error, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH
    )


@api(init_producer_id, 0, 5)
async def handle_init_producer_id(
    ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    refused = refusal(ctx, request.transactional_id)
    if refused:
        return failed(refused)
    has_id = request.producer_id != NO_PRODUCER_ID
    if has_id != (request.producer_epoch != NO_PRODUCER_EPOCH):
        return failed(ErrorCode.INVALID_REQUEST)
    if request.transactional_id is None:
        producer_id = await ctx.services.producer_ids.next_id()
        return InitProducerIdResponse(
            error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0
        )
    expected = ProducerIdAndEpoch(request.producer_id, request.producer_epoch) if has_id else None
    result = await ctx.services.transactions.init_producer_id(
        request.transactional_id, request.transaction_timeout_ms, expected
    )
    return InitProducerIdResponse(
        error_code=fenced_error_for(ctx.api_version, result.error, PRODUCER_FENCED_FROM),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
