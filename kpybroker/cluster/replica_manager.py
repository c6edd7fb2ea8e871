"""The partitions this broker hosts, and the waits of fetches on their appends."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from kpybroker.cluster.partition import Partition
from kpybroker.protocol.errors import ErrorCode, KafkaError


class ReplicaManager:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.topic_names: dict[bytes, str] = {}

    def add(self, partition: Partition) -> None:
        self.partitions[(partition.topic, partition.index)] = partition
        self.topic_names[partition.topic_id] = partition.topic

    def remove_topic(self, topic: str) -> list[Partition]:
        removed = [p for key, p in self.partitions.items() if key[0] == topic]
        for p in removed:
            del self.partitions[(topic, p.index)]
            self.topic_names.pop(p.topic_id, None)
            p.wake_waiters()
        return removed

    def topic_name(self, topic_id: bytes) -> str | None:
        return self.topic_names.get(topic_id)

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_partition(self, topic: str, index: int) -> Partition:
        """The partition if this broker leads it; Kafka's errors otherwise."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    def leader_hint(self, topic: str, index: int) -> tuple[int, int]:
        """(leader id, leader epoch) for the current-leader field of an error answer."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            return -1, -1
        return partition.state.leader, partition.state.leader_epoch

    async def wait_for_append(self, partitions: Iterable[Partition], timeout: float) -> bool:
        """Wait until any of ``partitions`` gets new data, or ``timeout`` seconds pass.

        One future is parked on every partition's waiter list; an append
        resolves it. Nothing runs while the wait lasts.
        """
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        partitions = list(partitions)
        for p in partitions:
            p.waiters.add(fut)
        handle = loop.call_later(timeout, lambda: fut.done() or fut.set_result(False))
        try:
            return await fut
        finally:
            handle.cancel()
            for p in partitions:
                p.waiters.discard(fut)
