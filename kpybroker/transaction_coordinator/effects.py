"""What the transaction shard asks its runtime to do: plain data, carried out in order.

- ``reply(token, result)`` completes a waiting request (at most once per token).
- ``append(records, on_done)`` writes records to the shard's partition of
  ``__transaction_state`` as one batch; ``on_done(effects, error)`` runs once
  the write is acknowledged by every in-sync replica, or failed.
- ``send_markers(markers, on_done)`` writes the transaction's end markers to
  the leaders of its partitions, retrying until each is written (or its
  partition is gone); ``on_done(effects, True)`` runs when all are, and
  ``on_done(effects, False)`` when a leader refused them for good (this
  coordinator or the producer's epoch is fenced).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kpybroker.protocol.errors import ErrorCode
from kpybroker.transaction_coordinator.transaction_log_records import TxnRecord
from kpybroker.transaction_coordinator.transaction_state import TopicPartition

Token = int


@dataclass(frozen=True, slots=True)
class TxnMarkers:
    """One transaction's end markers, for every partition it wrote to."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]
    #: The transaction's version (2: the epoch was bumped for the markers).
    transaction_version: int = 0


@dataclass(frozen=True, slots=True, eq=False)
class Append:
    records: Sequence[TxnRecord]
    on_done: Callable[[Effects, ErrorCode], None]


@dataclass(frozen=True, slots=True, eq=False)
class SendMarkers:
    markers: TxnMarkers
    on_done: Callable[[Effects, bool], None]


@dataclass(slots=True)
class Effects:
    replies: list[tuple[Token, Any]] = field(default_factory=list)
    appends: list[Append] = field(default_factory=list)
    markers: list[SendMarkers] = field(default_factory=list)

    def reply(self, token: Token | None, result: Any) -> None:
        if token is not None:
            self.replies.append((token, result))

    def append(
        self, records: Sequence[TxnRecord], on_done: Callable[[Effects, ErrorCode], None]
    ) -> None:
        self.appends.append(Append(records, on_done))

    def send_markers(self, markers: TxnMarkers, on_done: Callable[[Effects, bool], None]) -> None:
        self.markers.append(SendMarkers(markers, on_done))
