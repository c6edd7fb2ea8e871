"""DescribeTransactions (key 65) and ListTransactions (key 66), for ``kafka-transactions.sh``.

DescribeTransactions v0 answers each id from its coordinator (the admin
client sends each id to the broker FindCoordinator named):
TRANSACTIONAL_ID_NOT_FOUND for an id it does not know, NOT_COORDINATOR when
the id's partition is led elsewhere. The start time is -1 outside a
transaction, as Kafka keeps it.

ListTransactions answers the ids this broker coordinates. Its filters, all
optional: states (a state Kafka does not have is echoed in
``unknown_state_filters`` and matches nothing), producer ids, from v1 a
minimum duration (ids whose transaction started longer ago than that, in
any state, as Kafka counts it; an id that never started one passes), and from
v2 a regular expression the whole transactional id must match (Kafka uses
Java's ``Pattern``; Python's ``re`` agrees on the common syntax). An invalid
expression is INVALID_REGULAR_EXPRESSION.

Authorization, as Kafka's handlers: DescribeTransactions needs DESCRIBE on
each transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and leaves out
of a transaction's topics those the principal may not DESCRIBE;
ListTransactions leaves out the ids it may not DESCRIBE. Nothing else tells
the principal what it was not shown.
"""

from __future__ import annotations

import re

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import describe_transactions, list_transactions
from kpybroker.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)
from kpybroker.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kpybroker.protocol.messages.list_transactions import (
    TransactionState as ListedTransaction,
)
from kpybroker.security.acls.model import AclOperation, ResourceType
from kpybroker.transaction_coordinator.shard import ListFilter
from kpybroker.transaction_coordinator.transaction_state import TxnState


def describe_one(ctx: RequestContext, transactional_id: str) -> TransactionState:
    if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        error, txn = ctx.services.transactions.describe(transactional_id)
    else:
        error, txn = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    if txn is None:
        return TransactionState(
            error_code=error,
            transactional_id=transactional_id,
            transaction_state="",
            transaction_timeout_ms=0,
            transaction_start_time_ms=0,
            producer_id=0,
            producer_epoch=0,
        )
    current = txn.current
    topics: dict[str, list[int]] = {}
    for topic, index in sorted(current.partitions):
        topics.setdefault(topic, []).append(index)
    return TransactionState(
        error_code=ErrorCode.NONE,
        transactional_id=transactional_id,
        transaction_state=current.state.kafka_name,
        transaction_timeout_ms=current.timeout_ms,
        transaction_start_time_ms=current.start_timestamp_ms,
        producer_id=current.producer_id,
        producer_epoch=current.producer_epoch,
        topics=[
            TopicData(topic=name, partitions=indexes)
            for name, indexes in topics.items()
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        ],
    )


@api(describe_transactions, 0, 0)
async def handle_describe_transactions(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(
        transaction_states=[describe_one(ctx, tid) for tid in request.transactional_ids]
    )


@api(list_transactions, 0, 2)
async def handle_list_transactions(
    ctx: RequestContext, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    states = {name: TxnState.from_name(name) for name in request.state_filters}
    unknown = [name for name, state in states.items() if state is None]
    known = frozenset(state for state in states.values() if state is not None)
    matches = None
    if request.transactional_id_pattern:
        try:
            matches = re.compile(request.transactional_id_pattern).fullmatch
        except re.error:
            return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION)
    if unknown and not known:
        # Only unknown states were asked for: nothing can match.
        return ListTransactionsResponse(error_code=ErrorCode.NONE, unknown_state_filters=unknown)
    wanted = ListFilter(
        states=known,
        producer_ids=frozenset(request.producer_id_filters),
        min_duration_ms=request.duration_filter,
        transactional_id_matches=None if matches is None else lambda tid: matches(tid) is not None,
    )
    error, found = ctx.services.transactions.list_transactions(wanted)
    return ListTransactionsResponse(
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[
            ListedTransaction(
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                transaction_state=txn.state.kafka_name,
            )
            for txn in found
            if ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn.transactional_id
            )
        ],
    )
