"""TxnOffsetCommit (key 28): a transactional producer commits its consumer group's offsets.

The offsets are appended to the group's ``__consumer_offsets`` partition as
part of the producer's transaction and stay invisible to OffsetFetch until
its end marker commits them (``kpybroker.coordinator.transactional_offsets``).

Versions: 2 adds the committed leader epoch (and its clients know
COORDINATOR_LOAD_IN_PROGRESS: older ones are told COORDINATOR_NOT_AVAILABLE,
as in Kafka, since 0.11-2.0 clients could crash on it); 3 (KIP-447) is
flexible and carries the member ID, generation and group.instance.id, which
the coordinator checks when given; 4 only adds TRANSACTION_ABORTABLE. 5 is
transaction version 2, in which the group coordinator adds the offsets
partition to the transaction itself, and 6 names topics by ID: neither is
implemented (this broker finalizes transaction version 1 only, and clients
use v4 at most with it).

As in Kafka's request handler, partitions of unknown topics are answered
UNKNOWN_TOPIC_OR_PARTITION here and never reach the coordinator.
"""

from __future__ import annotations

from kpybroker.apis.offsets import answer_unknown
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.coordinator.committed_offsets import PartitionErrors
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import txn_offset_commit
from kpybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

LOAD_IN_PROGRESS_FROM = 2


@api(txn_offset_commit, 0, 4)
async def handle_txn_offset_commit(
    ctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    answers = PartitionErrors(TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition)
    answer_unknown(ctx.services, request, answers)
    if request.topics:
        response = await ctx.services.groups.commit_transactional_offsets(request)
        answers.merge(response.topics)
    if ctx.api_version < LOAD_IN_PROGRESS_FROM:
        for topic in answers.topics.values():
            for p in topic.partitions:
                if p.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    p.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return TxnOffsetCommitResponse(topics=answers.result())
