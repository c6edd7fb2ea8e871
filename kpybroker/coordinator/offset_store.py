"""A shard's offsets in memory: committed ones by group, pending transactional ones by producer.

Kafka's ``OffsetMetadataManager.Offsets``, ``pendingTransactionalOffsets``
and ``openTransactionsByGroup``. A TxnOffsetCommit's offsets stay pending
under their producer id until the end marker of its transaction: a commit
makes them the group's committed offsets, an abort drops them. Until then
OffsetFetch does not return them, and a fetch that requires stable offsets
is told the partition is unstable.
"""

from __future__ import annotations

from collections.abc import Iterator

from kpybroker.coordinator.offsets_topic_records import OffsetAndMetadata

TopicOffsets = dict[int, OffsetAndMetadata]


class GroupOffsets(dict[str, dict[str, TopicOffsets]]):
    """Offsets by group, topic and partition; a level left empty is dropped."""

    def find(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.get(group, {}).get(topic, {}).get(partition)

    def put(self, group: str, topic: str, partition: int, value: OffsetAndMetadata) -> None:
        self.setdefault(group, {}).setdefault(topic, {})[partition] = value

    def discard(self, group: str, topic: str, partition: int) -> None:
        topics = self.get(group)
        if topics is None or topic not in topics:
            return
        topics[topic].pop(partition, None)
        if not topics[topic]:
            del topics[topic]
        if not topics:
            del self[group]

    def partitions(self, group: str) -> Iterator[tuple[str, int]]:
        for topic, partitions in self.get(group, {}).items():
            for partition in partitions:
                yield topic, partition


class PendingOffsets:
    """The offsets of open transactions, by producer id, and each group's open producers."""

    def __init__(self) -> None:
        self.by_producer: dict[int, GroupOffsets] = {}
        self.open_by_group: dict[str, set[int]] = {}

    def get(
        self, producer_id: int, group: str, topic: str, partition: int
    ) -> OffsetAndMetadata | None:
        offsets = self.by_producer.get(producer_id)
        return None if offsets is None else offsets.find(group, topic, partition)

    def put(
        self, producer_id: int, group: str, topic: str, partition: int, value: OffsetAndMetadata
    ) -> None:
        self.by_producer.setdefault(producer_id, GroupOffsets()).put(group, topic, partition, value)
        self.open_by_group.setdefault(group, set()).add(producer_id)

    def has_open_transactions(self, group: str) -> bool:
        return group in self.open_by_group

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        """Whether an open transaction commits an offset of this partition for the group."""
        return any(
            self.by_producer[producer_id].find(group, topic, partition) is not None
            for producer_id in self.open_by_group.get(group, ())
        )

    def partitions(self, group: str) -> set[tuple[str, int]]:
        """The partitions with a pending offset of the group, in any open transaction."""
        return {
            key
            for producer_id in self.open_by_group.get(group, ())
            for key in self.by_producer[producer_id].partitions(group)
        }

    def of_topic(self, topic: str) -> set[tuple[str, int]]:
        """(group, partition) of every pending offset of ``topic``."""
        return {
            (group, partition)
            for offsets in self.by_producer.values()
            for group, topics in offsets.items()
            for partition in topics.get(topic, ())
        }

    def discard(self, group: str, topic: str, partition: int) -> None:
        """A tombstone of the partition's offset also deletes its pending ones (Kafka's replay).

        The producer stays open for the group, as in Kafka: its transaction is
        still to end, and holds the group (see ``OffsetManager.expired``).
        """
        for producer_id in self.open_by_group.get(group, ()):
            self.by_producer[producer_id].discard(group, topic, partition)

    def discard_written(
        self, producer_id: int, group: str, topic: str, partition: int, record_offset: int
    ) -> None:
        """Forget the pending offset written at ``record_offset`` if it is still the pending one.

        Its append failed: Kafka reverts its state to before the write.
        """
        value = self.get(producer_id, group, topic, partition)
        if value is not None and value.record_offset == record_offset:
            self.by_producer[producer_id].discard(group, topic, partition)

    def end(self, producer_id: int) -> GroupOffsets:
        """Close the producer's transaction: its pending offsets, no longer pending."""
        offsets = self.by_producer.pop(producer_id, GroupOffsets())
        # Every group it wrote to, including those whose pending offsets a tombstone deleted.
        for group, producers in list(self.open_by_group.items()):
            producers.discard(producer_id)
            if not producers:
                del self.open_by_group[group]
        return offsets
