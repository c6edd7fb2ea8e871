"""A ``SharePersister`` keeping share state in a dict, for unit tests of its users."""

from __future__ import annotations

from kpybroker.protocol.errors import ErrorCode
from kpybroker.share_coordinator.persister import PartitionState, ShareKey, StateBatch


class MemoryPersister:
    """Kafka's semantics, without a share coordinator: batches merged by offset (the newest
    state wins), those below the start offset dropped, stale state epochs fenced."""

    def __init__(self) -> None:
        self.states: dict[ShareKey, PartitionState] = {}
        self.writes: list[tuple[ShareKey, PartitionState]] = []

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        self.states[key] = PartitionState(state_epoch, start_offset)
        return ErrorCode.NONE

    async def read(
        self, key: ShareKey, leader_epoch: int
    ) -> tuple[ErrorCode, PartitionState | None]:
        state = self.states.get(key)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        self.states[key] = state = state._replace(leader_epoch=leader_epoch)
        return ErrorCode.NONE, state

    async def write(self, key: ShareKey, state: PartitionState) -> ErrorCode:
        kept = self.states.get(key)
        if kept is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if state.state_epoch < kept.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        if state.leader_epoch < kept.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        self.writes.append((key, state))
        offsets: dict[int, StateBatch] = {}
        for batch in (*kept.batches, *state.batches):
            for offset in range(batch.first_offset, batch.last_offset + 1):
                offsets[offset] = batch
        start = state.start_offset
        merged: list[StateBatch] = []
        for offset in sorted(o for o in offsets if o >= start):
            b = offsets[offset]
            last = merged[-1] if merged else None
            if (
                last
                and last.last_offset + 1 == offset
                and (last.delivery_state, last.delivery_count)
                == (b.delivery_state, b.delivery_count)
            ):
                merged[-1] = last._replace(last_offset=offset)
            else:
                merged.append(StateBatch(offset, offset, b.delivery_state, b.delivery_count))
        self.states[key] = PartitionState(
            state.state_epoch, start, state.leader_epoch, tuple(merged)
        )
        return ErrorCode.NONE

    async def read_summary(
        self, key: ShareKey, leader_epoch: int
    ) -> tuple[ErrorCode, PartitionState | None]:
        state = self.states.get(key)
        if state is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return ErrorCode.NONE, state._replace(batches=())

    async def delete(self, key: ShareKey) -> ErrorCode:
        self.states.pop(key, None)
        return ErrorCode.NONE
