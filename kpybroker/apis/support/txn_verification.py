"""KIP-890 on the Produce path: a producer's first write to a partition in a transaction.

Before it, the partition's leader asks the transaction's coordinator
(``PartitionVerifier``): for Produce v12 and later, whose clients (transaction
version 2) add no partitions themselves, to add the partition; for older
versions, when ``transaction.partition.verification.enable`` is on, to verify
that the client added it. A partition whose producer already has a
transaction of this epoch open here needs no question, as in Kafka's
``maybeStartTransactionVerificationForPartition``.

Each write gets the ``VerificationGuard`` it must present to the log, or the
error its partition is answered with, mapped as Kafka's ReplicaManager maps
verification failures: the retriable ones become NOT_ENOUGH_REPLICAS, which
every producer retries without refreshing its metadata, except
CONCURRENT_TRANSACTIONS from Produce v12 on (Kafka 4's clients of transaction
version 2 retry it, and it is the usual answer while the previous transaction
completes); INVALID_TXN_STATE (the partition is not in the transaction) and
fencing errors stay.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from kpybroker.apis.support.context import RequestContext, TopicPartition
from kpybroker.cluster.partition import Partition
from kpybroker.log.producer_state import VerificationGuard
from kpybroker.protocol import records
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.transaction_coordinator.shard import ProducerIdAndEpoch

#: Produce v12+ comes from clients of transaction version 2: the leader adds the partition.
IMPLICIT_ADD_FROM = 12
#: Produce v11+ clients know TRANSACTION_ABORTABLE.
ABORTABLE_FROM = 11
RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)

Verified = VerificationGuard | ErrorCode


def verification_applies(ctx: RequestContext) -> bool:
    return ctx.api_version >= IMPLICIT_ADD_FROM or bool(
        ctx.services.config().get("transaction.partition.verification.enable")
    )


async def verify_first_writes(
    ctx: RequestContext,
    transactional_id: str,
    writes: Mapping[TopicPartition, memoryview],
) -> dict[TopicPartition, Verified]:
    """The guard (or the error) of each transactional write this broker leads.

    ``writes`` maps each partition to its records; a partition this broker
    does not lead is left out of the answer (its produce fails on its own).
    """
    by_producer: dict[ProducerIdAndEpoch, dict[TopicPartition, Partition]] = defaultdict(dict)
    for tp, data in writes.items():
        try:
            partition = ctx.services.replicas.leader_partition(*tp)
        except KafkaError:
            continue
        header = records.parse_header(data)
        by_producer[ProducerIdAndEpoch(header.producer_id, header.producer_epoch)][tp] = partition
    verified: dict[TopicPartition, Verified] = {}
    for producer, partitions in by_producer.items():
        verified.update(await _verify(ctx, transactional_id, producer, partitions))
    return verified


async def _verify(
    ctx: RequestContext,
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partitions: Mapping[TopicPartition, Partition],
) -> dict[TopicPartition, Verified]:
    guards: dict[TopicPartition, Verified] = {}
    unverified = []

    def register() -> None:
        """A guard for every write, registered afresh before each question."""
        for tp, partition in partitions.items():
            guards[tp], needed = partition.start_txn_verification(
                producer.producer_id, producer.producer_epoch
            )
            if needed and tp not in unverified:
                unverified.append(tp)

    register()
    if not unverified:
        return guards
    errors = await ctx.services.txn_verifier.add_or_verify(
        transactional_id,
        producer,
        unverified,
        add=ctx.api_version >= IMPLICIT_ADD_FROM,
        abortable_known=ctx.api_version >= ABORTABLE_FROM,
        before_attempt=register,
    )
    for tp, error in errors.items():
        if error:
            guards[tp] = _for_producer(error, ctx.api_version)
    return guards


def _for_producer(error: ErrorCode, api_version: int) -> ErrorCode:
    if error == ErrorCode.CONCURRENT_TRANSACTIONS and api_version >= IMPLICIT_ADD_FROM:
        return error
    return ErrorCode.NOT_ENOUGH_REPLICAS if error in RETRIABLE else error
