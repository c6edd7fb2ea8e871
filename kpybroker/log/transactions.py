"""The open and recently completed transactions of one partition, and from them the
first unstable offset (the ``ongoingTxns``/``unreplicatedTxns`` of Kafka's
``ProducerStateManager``, with ``CompletedTxn``).

A transaction opens at the base offset of its producer's first transactional
batch and stays *ongoing* until its marker is written. It is then *completed*
but still unstable until the high watermark passes the marker: a new leader
without the marker would reopen it. The first unstable offset is the first
offset of the earliest of both kinds; the last stable offset (what
read_committed consumers may read) is that offset, or the high watermark when
it is lower or there is none.

Transactions open at the log end, so ``ongoing`` (a dict, kept in insertion
order) is ordered by first offset and its first key is the earliest. Only
entries loaded from a snapshot come in any order; they are sorted on load.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple


class CompletedTxn(NamedTuple):
    """A transaction whose marker (at ``last_offset``) was just appended."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class TxnTracker:
    """Ongoing transactions by first offset, and completed ones not yet below the HWM."""

    # One per partition: slots, no __dict__ each.
    __slots__ = (
        "ongoing",
        "unreplicated",
    )

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # first offset -> producer id
        self.unreplicated: dict[int, int] = {}  # first offset -> marker offset

    def start(self, producer_id: int, first_offset: int) -> None:
        self.ongoing[first_offset] = producer_id

    def load(self, open_txns: Iterable[tuple[int, int]]) -> None:
        """Replace the state with the ``(producer id, first offset)`` of open transactions."""
        self.clear()
        for producer_id, first_offset in sorted(open_txns, key=lambda txn: txn[1]):
            self.ongoing[first_offset] = producer_id

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO right after ``txn`` completes, as its index entry records it: the first
        offset of the earliest other open transaction, else just past the marker
        (``ProducerStateManager.lastStableOffset``)."""
        for first_offset, producer_id in self.ongoing.items():
            if producer_id != txn.producer_id:
                return first_offset
        return txn.last_offset + 1

    def complete(self, txn: CompletedTxn) -> None:
        """The marker was appended: unstable until the high watermark passes it."""
        self.ongoing.pop(txn.first_offset, None)
        self.unreplicated[txn.first_offset] = txn.last_offset

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below ``high_watermark`` (also
        called with the log start offset: nothing below it can be read)."""
        if self.unreplicated:
            self.unreplicated = {
                first: last for first, last in self.unreplicated.items() if last >= high_watermark
            }

    def first_unstable_offset(self) -> int | None:
        first = next(iter(self.ongoing), None)
        if self.unreplicated:
            earliest = min(self.unreplicated)
            if first is None or earliest < first:
                return earliest
        return first

    def clear(self) -> None:
        self.ongoing.clear()
        self.unreplicated.clear()
