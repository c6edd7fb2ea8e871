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
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from kpybroker.apis.support.context import RequestContext, TopicPartition
from kpybroker.apis.support.producer_fencing import fenced_error_for
from kpybroker.apis.support.registry import api
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


async def add_or_verify(
    ctx: RequestContext,
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partitions: list[TopicPartition],
    verify_only: bool,
) -> dict[TopicPartition, ErrorCode]:
    topics = ctx.services.cluster.topics()
    unknown = [
        tp for tp in partitions if tp[0] not in topics or tp[1] not in topics[tp[0]].partitions
    ]
    if unknown:
        errors = dict.fromkeys(partitions, ErrorCode.OPERATION_NOT_ATTEMPTED)
        errors.update(dict.fromkeys(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
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
        producer = ProducerIdAndEpoch(
            request.v3_and_below_producer_id, request.v3_and_below_producer_epoch
        )
        errors = await add_or_verify(
            ctx,
            request.v3_and_below_transactional_id,
            producer,
            requested(request.v3_and_below_topics),
            verify_only=False,
        )
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=by_topic(errors))

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
