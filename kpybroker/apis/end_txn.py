"""EndTxn (key 26): commit or abort the producer's transaction.

The coordinator writes PrepareCommit or PrepareAbort, answers, then writes
the markers to every partition of the transaction and finally the Complete
state; a retry of a completed EndTxn is answered NONE, a commit of an
aborting transaction (or the reverse) INVALID_TXN_STATE, as Kafka.
Versions: 2 lets the answer be PRODUCER_FENCED (older clients get
INVALID_PRODUCER_EPOCH), 3 is flexible, 4 only adds TRANSACTION_ABORTABLE.
5 is transaction version 2 (KIP-890): the coordinator bumps the epoch at
every EndTxn and answers with the producer id and epoch the client goes on
with (-1 and -1 with an error); an abort with no transaction open is then
allowed. The version of the request decides, as in Kafka, whatever the
broker advertises as finalized.

Authorization, as Kafka's handler: WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (producer id and epoch -1 in v5).
"""

from __future__ import annotations

from kpybroker.apis.support.authorization import may_write_transaction
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.producer_fencing import fenced_error_for
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import end_txn
from kpybroker.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kpybroker.transaction_coordinator.shard import ProducerIdAndEpoch

PRODUCER_FENCED_FROM = 2
TRANSACTION_VERSION_2_FROM = 5


@api(end_txn, 0, 5)
async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not may_write_transaction(ctx, request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    version_2 = ctx.api_version >= TRANSACTION_VERSION_2_FROM
    result = await ctx.services.transactions.end_txn(
        request.transactional_id,
        ProducerIdAndEpoch(request.producer_id, request.producer_epoch),
        request.committed,
        2 if version_2 else 1,
    )
    response = EndTxnResponse(
        error_code=fenced_error_for(ctx.api_version, result.error, PRODUCER_FENCED_FROM)
    )
    if version_2:
        response.producer_id = result.producer_id
        response.producer_epoch = result.producer_epoch
    return response
