"""A partition hosted on this broker: its log and its leadership state.

The high watermark is kept by the log apart from its end offset. A leader
advances it to the smallest end offset across the in-sync replicas; while
this broker is the only one in the ISR that is its own end offset, right
after each append.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from kpybroker.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


@dataclass
class LeaderState:
    """Who leads a partition, as recorded in its state znode."""

    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: bytes
    log: object  # kpybroker.log.PartitionLog
    broker_id: int
    state: LeaderState
    min_insync_replicas: int = 1
    waiters: set[asyncio.Future] = field(default_factory=set)

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing: a client's view of the epoch must match ours (-1 skips the check)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.state.leader_epoch:
            return
        if current_leader_epoch > self.state.leader_epoch:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)

    def append_as_leader(self, batch: memoryview, required_acks: int):
        if required_acks == -1 and len(self.state.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {self.state.isr} is insufficient to satisfy "
                f"the min.isr requirement of {self.min_insync_replicas} for partition "
                f"{self.topic}-{self.index}",
            )
        try:
            result = self.log.append(batch, self.state.leader_epoch)
        except OSError as exc:
            log.error("append to %s-%d failed: %s", self.topic, self.index, exc)
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"Disk error when trying to access log file: {exc}"
            ) from exc
        self.maybe_advance_high_watermark()
        self.wake_waiters()
        return result

    def maybe_advance_high_watermark(self) -> None:
        """As leader, move the high watermark up to what every in-sync replica has.

        While this broker is the only in-sync replica that is its own log end,
        also right after a restart: the checkpointed high watermark may lag the
        log by a few seconds of acknowledged records.
        """
        if self.is_leader and self.state.isr == [self.broker_id]:
            self.log.update_high_watermark(self.log.log_end_offset)

    def read_records(self, offset: int, max_bytes: int, min_one: bool):
        """File ranges of whole batches from ``offset``, below the high watermark."""
        return self.log.read(offset, max_bytes, self.log.high_watermark, min_one_message=min_one)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.log.end_offset_for_epoch(epoch)

    def wake_waiters(self) -> None:
        if self.waiters:
            waiters, self.waiters = self.waiters, set()
            for fut in waiters:
                if not fut.done():
                    fut.set_result(True)
