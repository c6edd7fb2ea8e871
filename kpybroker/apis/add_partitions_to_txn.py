"""AddPartitionsToTxn (key 24): the partitions a transaction is about to write to.

Versions 0-3 come from producers: one transaction, and every partition gets
the coordinator's one answer. 2 lets the answer be PRODUCER_FENCED (older
clients get INVALID_PRODUCER_EPOCH), 3 is flexible. Versions 4 and 5 come
from partition leaders (KIP-890): a batch of transactions, each either added
or, with ``verify_only``, checked (a partition not in the open transaction
is TRANSACTION_ABORTABLE); 5 only adds that error to what a client may see.

As in Kafka's ``handleAddPartitionsToTxnRequest``, a partition the cluster
does not have fails the whole transaction's request: it is
UNKNOWN_TOPIC_OR_PARTITION and every other partition OPERATION_NOT_ATTEMPTED.

Authorization, as Kafka's: v4+ comes from brokers and needs CLUSTER_ACTION on
the cluster, else the whole answer is CLUSTER_AUTHORIZATION_FAILED. v0-3
needs WRITE on the transactional id (every partition is otherwise
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic: a refused topic
fails the request as an unknown partition does, with TOPIC_AUTHORIZATION_FAILED,
and a client may never add an internal topic (``__consumer_offsets``,
``__transaction_state``), even with no authorizer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping

from kpybroker.apis.support.authorization import may_write_transaction
from kpybroker.apis.support.context import RequestContext, TopicPartition
from kpybroker.apis.support.producer_fencing import fenced_error_for
from kpybroker.apis.support.registry import api
from kpybroker.metadata.topic_names import INTERNAL_TOPICS
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import add_partitions_to_txn
from kpybroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTransaction,
)
from kpybroker.security.acls.model import AclOperation, ResourceType
from kpybroker.transaction_coordinator.shard import ProducerIdAndEpoch

BATCHED_FROM = 4
PRODUCER_FENCED_FROM = 2


def requested(topics: Iterable[AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


def by_topic(errors: Mapping[TopicPartition, ErrorCode]) -> list[AddPartitionsToTxnTopicResult]:
    topics: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (name, index), error in errors.items():
        topics.setdefault(name, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=error)
        )
    return [
        AddPartitionsToTxnTopicResult(name=name, results_by_partition=results)
        for name, results in topics.items()
    ]


def unwritable_topics(ctx: RequestContext, partitions: list[TopicPartition]) -> set[str]:
    """The topics a producer may not add to its transaction: those it may not WRITE to, and
    the internal ones, which Kafka leaves out of the question (so never allowed)."""
    names = {topic for topic, _ in partitions}
    return names - ctx.authorized_names(
        AclOperation.WRITE, ResourceType.TOPIC, names - INTERNAL_TOPICS
    )


async def add_or_verify(
    ctx: RequestContext,
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partitions: list[TopicPartition],
    verify_only: bool,
    refused_topics: Collection[str] = (),
) -> dict[TopicPartition, ErrorCode]:
    """The transaction's answer for ``partitions``; a partition of ``refused_topics`` or one
    the cluster does not have fails them all, before the coordinator is asked."""
    topics = ctx.services.cluster.topics()
    failures = {
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp[0] in refused_topics
    }
    failures.update(
        (tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        for tp in partitions
        if tp not in failures and (tp[0] not in topics or tp[1] not in topics[tp[0]].partitions)
    )
    if failures:
        errors = dict.fromkeys(partitions, ErrorCode.OPERATION_NOT_ATTEMPTED)
        errors.update(failures)
        return errors
    transactions = ctx.services.transactions
    if verify_only:
        return transactions.verify_partitions(transactional_id, producer, partitions)
    version = 2 if ctx.api_version >= BATCHED_FROM else 1
    error = await transactions.add_partitions(transactional_id, producer, partitions, version)
    error = fenced_error_for(ctx.api_version, error, PRODUCER_FENCED_FROM)
    return dict.fromkeys(partitions, error)


@api(add_partitions_to_txn, 0, 5)
async def handle_add_partitions_to_txn(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    if ctx.api_version < BATCHED_FROM:
        transactional_id = request.v3_and_below_transactional_id
        partitions = requested(request.v3_and_below_topics)
        if not may_write_transaction(ctx, transactional_id):
            refused = dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=by_topic(refused))
        producer = ProducerIdAndEpoch(
            request.v3_and_below_producer_id, request.v3_and_below_producer_epoch
        )
        errors = await add_or_verify(
            ctx,
            transactional_id,
            producer,
            partitions,
            verify_only=False,
            refused_topics=unwritable_topics(ctx, partitions),
        )
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=by_topic(errors))
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    async def one(txn: AddPartitionsToTxnTransaction) -> AddPartitionsToTxnResult:
        errors = await add_or_verify(
            ctx,
            txn.transactional_id,
            ProducerIdAndEpoch(txn.producer_id, txn.producer_epoch),
            requested(txn.topics),
            txn.verify_only,
        )
        return AddPartitionsToTxnResult(
            transactional_id=txn.transactional_id, topic_results=by_topic(errors)
        )

    results = await asyncio.gather(*(one(txn) for txn in request.transactions))
    return AddPartitionsToTxnResponse(error_code=ErrorCode.NONE, results_by_transaction=results)
