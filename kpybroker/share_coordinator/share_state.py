"""What the share coordinator keeps per share partition, and what it answers about one.

``ShareGroupOffset`` is Kafka's class of that name: the durable state of one
share partition (group, topic ID, partition) as the last ShareSnapshot and the
ShareUpdates after it add up to. ``StateAnswer`` is one key's answer to any
of the five share-state requests: the error (and Kafka's message for it) and,
for the reads, the state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from kpybroker.protocol.errors import ErrorCode
from kpybroker.share_coordinator.persister import PartitionState, StateBatch

#: A state epoch or snapshot epoch not yet set (Kafka's ``ShareGroupOffset.DEFAULT_EPOCH``).
DEFAULT_EPOCH = 0
#: Kafka's ``ShareGroupOffset.NO_TIMESTAMP``: ShareUpdate records carry no timestamps.
NO_TIMESTAMP = 0
#: "Not changed" in a write's start offset, leader epoch and delivery complete count.
UNCHANGED = -1


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """One share partition's state: its epochs, start offset, in-flight batches and times.

    ``create_timestamp`` is when the last snapshot was made; ``write_timestamp`` when it was
    last written. They differ only for a snapshot rewritten by the cold-partition pass.
    """

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = UNCHANGED
    create_timestamp: int = NO_TIMESTAMP
    write_timestamp: int = NO_TIMESTAMP

    def partition_state(self, *, with_batches: bool = True) -> PartitionState:
        """The state as the persister hands it out."""
        return PartitionState(
            state_epoch=self.state_epoch,
            start_offset=self.start_offset,
            leader_epoch=self.leader_epoch,
            batches=self.batches if with_batches else (),
            delivery_complete_count=self.delivery_complete_count,
        )

    def replace(self, **changes: object) -> ShareGroupOffset:
        return replace(self, **changes)  # type: ignore[arg-type]


class StateAnswer(NamedTuple):
    """One key's answer: NONE and the state (reads) or Kafka's error and its message."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    state: PartitionState | None = None
