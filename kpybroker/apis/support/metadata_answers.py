"""The topic entries of Metadata answers, and the cache of their encodings.

Metadata (and DescribeTopicPartitions) describe a topic the same way; with
thousands of partitions building and encoding that entry costs tens of
milliseconds, and clients ask for every topic often, so ``TopicAnswers``
keeps each topic's encoded entry until something it depends on changes.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kpybroker.metadata.model import TopicMetadata
from kpybroker.protocol._codec import Encoded
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.metadata import MetadataResponsePartition, MetadataResponseTopic
from kpybroker.topic_admin import Topic

#: The authorized operations field when it was not asked for (Kafka's Int.MinValue).
NO_OPERATIONS = -(2**31)


def topic_metadata(
    topic: Topic,
    operations: int,
    live: Collection[int],
    offline: Collection[tuple[int, int]] = (),
) -> MetadataResponseTopic:
    """One topic's entry, with ``operations`` as its authorized operations; a partition
    whose leader is not among ``live`` has none. Offline replicas are those of brokers not
    ``live`` and the ``offline`` (broker, partition) pairs: replicas in a failed log dir."""
    partitions = []
    for index in sorted(topic.partitions):
        state = topic.partitions[index]
        leader_alive = state.leader in live
        partitions.append(
            MetadataResponsePartition(
                error_code=ErrorCode.NONE if leader_alive else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=index,
                leader_id=state.leader if leader_alive else -1,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                offline_replicas=[
                    r for r in state.replicas if r not in live or (r, index) in offline
                ],
            )
        )
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=operations,
    )


@dataclass(frozen=True, slots=True)
class _Answer:
    meta: TopicMetadata
    live: frozenset[int]
    offline: frozenset[tuple[int, int]]
    encoded: Encoded


class TopicAnswers:
    """Encoded topic entries of Metadata answers, per (topic, version, authorized operations).

    An entry stands while the topic's cached view is the same object (the
    cluster cache replaces it on any change of the topic, its partitions'
    states or its configs) and the same brokers are live. Entries of topics
    that no longer exist are dropped once they outnumber the live ones.
    """

    def __init__(self) -> None:
        # topic -> (version, authorized operations) -> answer
        self._answers: dict[str, dict[tuple[int, int], _Answer]] = {}

    def get(
        self,
        version: int,
        topic: Topic,
        operations: int,
        live: frozenset[int],
        offline: frozenset[tuple[int, int]] = frozenset(),
    ) -> Encoded:
        """The entry of ``topic``; ``operations`` is the requester's authorized operations
        field (NO_OPERATIONS when not asked for): principals that may do the same share it.
        ``offline``: as ``topic_metadata``'s."""
        answers = self._answers.setdefault(topic.name, {})
        key = (version, operations)
        answer = answers.get(key)
        if (
            answer is None
            or answer.meta is not topic.meta
            or answer.live != live
            or answer.offline != offline
        ):
            entry = topic_metadata(topic, operations, live, offline)
            answer = _Answer(topic.meta, live, offline, entry.encode_bytes(version))
            answers[key] = answer
        return answer.encoded

    def prune(self, existing: Collection[str]) -> None:
        """Forget the topics not in ``existing`` (called when entries may be stale)."""
        self._answers = {name: a for name, a in self._answers.items() if name in existing}

    def __len__(self) -> int:
        """How many topics have entries."""
        return len(self._answers)
