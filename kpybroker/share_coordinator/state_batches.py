"""Merging a share partition's state batches: Kafka's ``PersisterStateBatchCombiner``.

The coordinator keeps, per share partition, non-overlapping batches of offsets
each in one delivery state with one delivery count. A write brings the
batches that changed; ``combine`` lays them over the kept ones:

- batches wholly below the start offset are dropped and one across it is cut
  at it (a start offset of -1 leaves them all);
- where batches overlap, each offset takes the state of the batch Kafka ranks
  highest: the higher delivery count, then the higher state (AVAILABLE <
  ACKNOWLEDGED < ARCHIVED). A record's delivery count only grows and its
  terminal states come last, so that is its newer state, whichever batch
  arrived first;
- adjacent offsets left in the same state and count form one batch.

Offsets are not walked one by one: the batches' ends cut the offset line into
runs, each covered by the same batches, so a batch of a million offsets costs
as much as one of ten.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

from kpybroker.share_coordinator.persister import StateBatch

NO_START_OFFSET = -1


def _rank(batch: StateBatch) -> tuple[int, int]:
    return batch.delivery_count, batch.delivery_state


def prune(batches: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    """The parts of ``batches`` at or past ``start_offset`` (all of them for -1)."""
    if start_offset == NO_START_OFFSET:
        return [b for b in batches if b.first_offset <= b.last_offset]
    kept = []
    for b in batches:
        if b.last_offset < start_offset or b.first_offset > b.last_offset:
            continue
        kept.append(b if b.first_offset >= start_offset else b._replace(first_offset=start_offset))
    return kept


def combine(
    kept: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    """``new`` laid over ``kept``, cut at ``start_offset``: sorted, non-overlapping batches."""
    batches = prune([*kept, *new], start_offset)
    if len(batches) < 2:
        return tuple(batches)
    batches.sort(key=lambda b: (b.first_offset, b.last_offset, _rank(b)))
    cuts = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    merged: list[StateBatch] = []
    covering: list[tuple[int, int, int, StateBatch]] = []  # max-heap on rank
    following = 0
    for run_start, run_end in itertools.pairwise(cuts):
        while following < len(batches) and batches[following].first_offset <= run_start:
            b = batches[following]
            count, state = _rank(b)
            heapq.heappush(covering, (-count, -state, following, b))
            following += 1
        while covering and covering[0][3].last_offset < run_start:
            heapq.heappop(covering)
        if not covering:
            continue
        best = covering[0][3]
        last = merged[-1] if merged else None
        if last is not None and last.last_offset + 1 == run_start and _rank(last) == _rank(best):
            merged[-1] = last._replace(last_offset=run_end - 1)
        else:
            merged.append(
                StateBatch(run_start, run_end - 1, best.delivery_state, best.delivery_count)
            )
    return tuple(merged)
