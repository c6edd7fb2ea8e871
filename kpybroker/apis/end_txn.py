"""EndTxn (key 26): commit or abort the producer's transaction.

The coordinator writes PrepareCommit or PrepareAbort, answers, then writes
the markers to every partition of the transaction and finally the Complete
state; a retry of a completed EndTxn is answered NONE, a commit of an
aborting transaction (or the reverse) INVALID_TXN_STATE, as Kafka.
Versions: 2 lets the answer be PRODUCER_FENCED (older clients get
INVALID_PRODUCER_EPOCH), 3 is flexible, 4 only adds TRANSACTION_ABORTABLE.
5 (an epoch bump at every transaction, transaction version 2) is not
implemented: the broker does not advertise ``transaction.version`` 2.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.producer_fencing import fenced_error_for
from kpybroker.apis.support.registry import api
from kpybroker.protocol.messages import end_txn
from kpybroker.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kpybroker.transaction_coordinator.shard import ProducerIdAndEpoch

PRODUCER_FENCED_FROM = 2


@api(end_txn, 0, 4)
async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    error = await ctx.services.transactions.end_txn(
        request.transactional_id,
        ProducerIdAndEpoch(request.producer_id, request.producer_epoch),
        request.committed,
    )
    return EndTxnResponse(error_code=fenced_error_for(ctx.api_version, error, PRODUCER_FENCED_FROM))
