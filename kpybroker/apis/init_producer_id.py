"""InitProducerId (key 22): a producer ID for an idempotent producer.

Versions: 2 is flexible; 3 lets a producer pass its current ID and epoch
(KIP-360) — for a non-transactional producer Kafka ignores them and hands
out a fresh ID with epoch 0, and so does this broker; 4 and 5 only change
which errors the client may retry.

Transactions are not implemented: a request with a transactional ID gets
COORDINATOR_NOT_AVAILABLE, as from a cluster without a transaction
coordinator.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import init_producer_id
from kpybroker.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)


@api(init_producer_id, 0, 5)
async def handle_init_producer_id(
    ctx: RequestContext, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    producer_id = await ctx.services.producer_ids.next_id()
    return InitProducerIdResponse(
        error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0
    )
