"""AddOffsetsToTxn (key 25): a transaction will commit offsets of this consumer group.

The coordinator adds the group's ``__consumer_offsets`` partition to the
transaction, so that its end marker reaches that partition and the group
coordinator makes the transaction's offset commits visible or drops them.
Versions: 2 lets the answer be PRODUCER_FENCED (older clients get
INVALID_PRODUCER_EPOCH), 3 is flexible, 4 only adds TRANSACTION_ABORTABLE.

Authorization, as Kafka's handler: WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
(GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kpybroker.apis.support.authorization import may_read_group, may_write_transaction
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.producer_fencing import fenced_error_for
from kpybroker.apis.support.registry import api
from kpybroker.metadata.topic_names import OFFSETS_TOPIC
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import add_offsets_to_txn
from kpybroker.protocol.messages.add_offsets_to_txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)
from kpybroker.transaction_coordinator.shard import ProducerIdAndEpoch

PRODUCER_FENCED_FROM = 2


@api(add_offsets_to_txn, 0, 4)
async def handle_add_offsets_to_txn(
    ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    if not may_write_transaction(ctx, request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not may_read_group(ctx, request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    offsets_partition = (OFFSETS_TOPIC, ctx.services.groups.partition_for(request.group_id))
    error = await ctx.services.transactions.add_partitions(
        request.transactional_id,
        ProducerIdAndEpoch(request.producer_id, request.producer_epoch),
        [offsets_partition],
    )
    return AddOffsetsToTxnResponse(
        error_code=fenced_error_for(ctx.api_version, error, PRODUCER_FENCED_FROM)
    )
