"""Transactional offset commits: TxnOffsetCommit, and the end of their transactions.

Kafka's ``OffsetMetadataManager.commitTransactionalOffset`` and
``replayEndTransactionMarker``. A producer in a transaction commits its
consumer group's offsets with TxnOffsetCommit (after AddOffsetsToTxn added the
group's ``__consumer_offsets`` partition to the transaction). The offset
records are appended as a transactional batch of that producer, and the
offsets stay pending (``offset_store.PendingOffsets``) until the transaction
coordinator writes the transaction's end marker to the partition: a commit
makes them the group's committed offsets, an abort drops them. Loading the
partition replays the same records and markers (``loader``), so pending
offsets survive a restart or a move of the coordinator as pending.

Validation follows Kafka's ``validateTransactionalOffsetCommit`` (KIP-447
since v3: the member and generation are checked when given), for classic and
consumer (KIP-848) groups alike. Its errors are TxnOffsetCommit v6's
(GROUP_ID_NOT_FOUND for a member's commit to a group that does not exist,
STALE_MEMBER_EPOCH for a consumer group member at another epoch); the request
handler tells older versions ILLEGAL_GENERATION instead, as Kafka does. The producer's
epoch is checked by the log when the batch is appended (INVALID_PRODUCER_EPOCH
for a fenced one), as Kafka's coordinator origin is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kpybroker.coordinator.committed_offsets import (
    OffsetManager,
    PartitionErrors,
    fail_partitions,
    java_length,
    topic_id_of,
)
from kpybroker.coordinator.consumer_group import ConsumerGroup
from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.group import ClassicGroup
from kpybroker.coordinator.interface import Effects, Token
from kpybroker.coordinator.offsets_topic_records import OffsetAndMetadata, OffsetRecord, Producer
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

log = logging.getLogger(__name__)

#: A consumer group checks a transactional commit the same at every version (the
#: version only decides which OffsetCommit a KIP-848 member may use).
TXN_API_VERSION = -1


def txn_commit_error_response(
    request: TxnOffsetCommitRequest, error: ErrorCode
) -> TxnOffsetCommitResponse:
    """Every requested partition answered with ``error`` (Kafka's ``getErrorResponse``)."""
    answers = PartitionErrors(TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition)
    answers.add_all(request.topics, error)
    return TxnOffsetCommitResponse(topics=answers.result())


class TransactionalOffsets:
    def __init__(
        self, offsets: OffsetManager, settings: CoordinatorSettings, clock: Callable[[], int]
    ) -> None:
        self.offsets = offsets
        self.pending = offsets.pending
        self.membership = offsets.membership
        self.settings = settings
        self.clock = clock

    def commit(self, out: Effects, token: Token, request: TxnOffsetCommitRequest) -> None:
        """Append the offsets as the producer's transactional batch; answer once replicated."""
        try:
            self.group_for_commit(request)
        except KafkaError as exc:
            out.reply(token, txn_commit_error_response(request, exc.code))
            return
        now = self.clock()
        answers = PartitionErrors(TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition)
        records: list[OffsetRecord] = []
        for topic in request.topics:
            topic_id = topic_id_of(topic)
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                if java_length(metadata) > self.settings.offset_metadata_max_bytes:
                    error = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    answers.add(topic.name, p.partition_index, error, topic_id)
                    continue
                answers.add(topic.name, p.partition_index, ErrorCode.NONE, topic_id)
                value = OffsetAndMetadata(
                    p.committed_offset, p.committed_leader_epoch, metadata, now
                )
                records.append(OffsetRecord(request.group_id, topic.name, p.partition_index, value))
        response = TxnOffsetCommitResponse(topics=answers.result())
        if not records:
            out.reply(token, response)
            return
        producer = Producer(request.producer_id, request.producer_epoch)

        def appended(done: Effects, error: ErrorCode) -> None:
            if error:
                fail_partitions(response.topics, error)
                if append.base_offset >= 0:  # written, then lost: its offsets are not pending
                    for index, r in enumerate(records):
                        self.pending.discard_written(
                            producer.producer_id,
                            r.group,
                            r.topic,
                            r.partition,
                            append.offset_of(index),
                        )
            done.reply(token, response)

        append = out.append(records, appended, producer)

    def group_for_commit(self, request: TxnOffsetCommitRequest) -> ClassicGroup | ConsumerGroup:
        """The group; a simple one is created for a producer outside group management."""
        generation = request.generation_id_or_member_epoch
        consumer_group = self.offsets.consumer_groups.group(request.group_id)
        if consumer_group is not None:
            consumer_group.validate_offset_commit(
                request.member_id,
                request.group_instance_id,
                generation,
                api_version=TXN_API_VERSION,
                transactional=True,
            )
            return consumer_group
        group = self.membership.group(request.group_id)
        if group is None:
            if generation >= 0:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
            group = self.membership.create_group(request.group_id)
        group.validate_offset_commit(
            request.member_id, request.group_instance_id, generation, transactional=True
        )
        return group

    def end(self, producer_id: int, committed: bool) -> None:
        """The producer's end marker is in the log: its pending offsets commit or go.

        A committed offset replaces the group's only if its record is the later
        one in the log: a plain OffsetCommit written after the transactional
        one (and before the marker) wins, whatever compaction later keeps.
        """
        ended = self.pending.end(producer_id)
        if not committed:
            return
        stored = self.offsets.offsets
        for group_id, topics in ended.items():
            for topic, partitions in topics.items():
                for partition, value in partitions.items():
                    existing = stored.find(group_id, topic, partition)
                    if existing is None or value.record_offset > existing.record_offset:
                        stored.put(group_id, topic, partition, value)
                    else:
                        log.info(
                            "group %s: the committed offset of %s-%d (record %d) is newer than "
                            "producer %d's transactional one (record %d): kept",
                            group_id,
                            topic,
                            partition,
                            existing.record_offset,
                            producer_id,
                            value.record_offset,
                        )
