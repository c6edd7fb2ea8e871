"""Kafka's in-flight batches of a share partition: kept to word refused acknowledgements
as Kafka does.

Kafka's ``SharePartition`` caches a partition's in-flight records as batches:

- the new records one acquisition takes, cut at the log's batch boundaries once a piece
  holds the ShareFetch's ``BatchSize`` records (``BatchOptimizedStrategy.createBatches``);
- after a load, one batch per persisted state batch.

A batch is tracked whole until something touches only part of it, or asks for it record
by record: an acknowledgement of a subset or with a type per record, an acquisition of a
subset, the start offset moving inside it, or records of it archived apart from the rest.
From then on Kafka tracks it record by record for as long as it is cached.

Which of the two a batch is decides the message of a refused acknowledgement: "The batch
is not in the acquired state." for a batch tracked whole, "The offset is not acquired."
for one tracked record by record. kpybroker keeps the records' states in runs
(``share_partition.Run``); these batches hold no state, only their bounds and how Kafka
would track them, and serve ``SharePartition.check_acquired`` alone.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass


@dataclass(slots=True)
class InFlightBatch:
    """Offsets ``first..last`` (inclusive), cached together by Kafka."""

    first: int
    last: int
    #: Tracked record by record (Kafka's ``offsetState`` is set), not as a whole.
    per_offset: bool = False


class InFlightBatches:
    """A share partition's in-flight batches, in offset order and contiguous."""

    def __init__(self) -> None:
        self.batches: list[InFlightBatch] = []

    def add(self, first: int, last: int, bases: Iterable[int] = (), batch_size: int = 0) -> None:
        """New records ``first..last``, cached together; with ``bases`` (the fetched log
        batches' base offsets, ascending), cut as Kafka's batch-optimized acquisition cuts
        them: at a log batch's base once the piece holds ``batch_size`` records."""
        current = first
        if last - first + 1 > batch_size:
            for base in bases:
                if base > last:
                    break
                if base > current and base - current >= batch_size:
                    self.batches.append(InFlightBatch(current, base - 1))
                    current = base
        self.batches.append(InFlightBatch(current, last))

    def overlapping(self, first: int, last: int) -> Iterator[InFlightBatch]:
        """The batches holding any of ``first..last``, in order."""
        i = max(0, bisect_right(self.batches, first, key=_first_offset) - 1)
        while i < len(self.batches) and self.batches[i].first <= last:
            if self.batches[i].last >= first:
                yield self.batches[i]
            i += 1

    def track_per_offset(
        self, first: int, last: int, when: Callable[[InFlightBatch], bool] | None = None
    ) -> None:
        """Batches holding any of ``first..last`` are tracked record by record from now on:
        all of them, or those for which ``when`` holds (the condition under which Kafka
        switches a batch, at each place it does)."""
        for batch in self.overlapping(first, last):
            if not batch.per_offset and (when is None or when(batch)):
                batch.per_offset = True

    def drop_below(self, start_offset: int) -> None:
        """Forget the batches wholly below ``start_offset``; one it falls inside stays, as
        in Kafka's cache."""
        del self.batches[: bisect_right(self.batches, start_offset, key=_end_offset)]


def _first_offset(batch: InFlightBatch) -> int:
    return batch.first


def _end_offset(batch: InFlightBatch) -> int:
    return batch.last + 1
