"""TxnOffsetCommit (key 28): a transactional producer commits its consumer group's offsets.

The offsets are appended to the group's ``__consumer_offsets`` partition as
part of the producer's transaction and stay invisible to OffsetFetch until
its end marker commits them (``kpybroker.coordinator.transactional_offsets``).

Versions: 2 adds the committed leader epoch (and its clients know
COORDINATOR_LOAD_IN_PROGRESS: older ones are told COORDINATOR_NOT_AVAILABLE,
as in Kafka, since 0.11-2.0 clients could crash on it); 3 (KIP-447) is
flexible and carries the member ID, generation and group.instance.id, which
the coordinator checks when given; 4 only adds TRANSACTION_ABORTABLE. 5 is
transaction version 2 (KIP-890): its clients send no AddOffsetsToTxn, and
the group's ``__consumer_offsets`` partition is added to the transaction
here, by asking the transaction coordinator; before v5 it is verified there
when ``transaction.partition.verification.enable`` is on. A failed add or
verification answers every partition: retriable failures as
COORDINATOR_NOT_AVAILABLE (Kafka's group coordinator turns the
NOT_ENOUGH_REPLICAS of the verification into that), fencing and
INVALID_TXN_STATE as they are. 6 (KIP-1319) names topics by ID instead of
name, in the request and the answer (an ID the metadata does not have is
UNKNOWN_TOPIC_ID), and is told the coordinator's errors as they are: a member
committing to a group that does not exist gets GROUP_ID_NOT_FOUND and a
consumer group member at another epoch STALE_MEMBER_EPOCH, where older
versions get ILLEGAL_GENERATION for both (Kafka's ``OffsetMetadataManager``
maps them so by version; here the coordinator answers as for v6 and this
handler maps them back for older versions).

As in Kafka's request handler, partitions of unknown topics are answered
UNKNOWN_TOPIC_OR_PARTITION here and never reach the coordinator. Topics named
by ID (v6) are given their names here, after the transactional ID and group
are authorized and before the topics are, and the coordinator sees names.

Authorization, as Kafka's handler, before any of that: WRITE on the
transactional id, then READ on the group (every partition asked for is
otherwise TRANSACTIONAL_ID_AUTHORIZATION_FAILED, or GROUP_AUTHORIZATION_FAILED),
then READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from kpybroker.apis.offsets import answer_refused_and_unknown
from kpybroker.apis.support.authorization import may_read_group, may_write_transaction
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.apis.support.txn_verification import RETRIABLE
from kpybroker.coordinator.committed_offsets import PartitionErrors
from kpybroker.metadata.topic_names import OFFSETS_TOPIC
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import txn_offset_commit
from kpybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kpybroker.transaction_coordinator.shard import ProducerIdAndEpoch

LOAD_IN_PROGRESS_FROM = 2
ABORTABLE_FROM = 4
IMPLICIT_ADD_FROM = 5
TOPIC_IDS_FROM = 6
#: The coordinator's errors that versions before 6 are told as ILLEGAL_GENERATION.
GROUP_ERRORS_FROM = 6


async def offsets_partition_error(
    ctx: RequestContext, request: TxnOffsetCommitRequest
) -> ErrorCode:
    """Add (v5) or verify the group's offsets partition in the transaction."""
    add = ctx.api_version >= IMPLICIT_ADD_FROM
    if not add and not ctx.services.config().get("transaction.partition.verification.enable"):
        return ErrorCode.NONE
    partition = (OFFSETS_TOPIC, ctx.services.groups.partition_for(request.group_id))
    errors = await ctx.services.txn_verifier.add_or_verify(
        request.transactional_id,
        ProducerIdAndEpoch(request.producer_id, request.producer_epoch),
        [partition],
        add=add,
        abortable_known=ctx.api_version >= ABORTABLE_FROM,
    )
    error = errors[partition]
    return ErrorCode.COORDINATOR_NOT_AVAILABLE if error in RETRIABLE else error


def refusal(ctx: RequestContext, request: TxnOffsetCommitRequest) -> ErrorCode:
    """Why the principal may not commit for this transaction and group (NONE: it may)."""
    if not may_write_transaction(ctx, request.transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not may_read_group(ctx, request.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return ErrorCode.NONE


def older_error(error: int, request: TxnOffsetCommitRequest) -> int:
    """What a client before v6 is told for the coordinator's ``error`` (as for v6).

    Kafka answers ILLEGAL_GENERATION for a member's commit to a group it does not
    have (a share group's ID is that too), and for a stale member epoch; without
    a member (generation -1) a group it cannot use stays GROUP_ID_NOT_FOUND.
    """
    if error == ErrorCode.STALE_MEMBER_EPOCH:
        return ErrorCode.ILLEGAL_GENERATION
    if error == ErrorCode.GROUP_ID_NOT_FOUND and request.generation_id_or_member_epoch >= 0:
        return ErrorCode.ILLEGAL_GENERATION
    return error


@api(txn_offset_commit, 0, 6)
async def handle_txn_offset_commit(
    ctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    by_id = ctx.api_version >= TOPIC_IDS_FROM
    answers = PartitionErrors(
        TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition, by_id=by_id
    )
    refused = refusal(ctx, request)
    if refused:
        answers.add_all(request.topics, refused)
        return TxnOffsetCommitResponse(topics=answers.result())
    answer_refused_and_unknown(ctx, request, answers, by_id=by_id)
    if request.topics:
        error = await offsets_partition_error(ctx, request)
        if error:
            answers.add_all(request.topics, error)
        else:
            response = await ctx.services.groups.commit_transactional_offsets(request)
            answers.merge(response.topics)
    for topic in answers.topics.values():
        for p in topic.partitions:
            if ctx.api_version < GROUP_ERRORS_FROM:
                p.error_code = older_error(p.error_code, request)
            if (
                ctx.api_version < LOAD_IN_PROGRESS_FROM
                and p.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            ):
                p.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return TxnOffsetCommitResponse(topics=answers.result())
