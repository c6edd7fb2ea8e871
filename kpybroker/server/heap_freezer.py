"""Keeps the broker's long-lived state out of Python's full garbage collections.

CPython's cyclic collector scans every tracked object in a full (generation 2)
collection, and runs one whenever the objects promoted since the last one exceed a
quarter of the old generation. A broker with many partitions holds millions of
long-lived objects (partitions, logs, segments, indexes, metadata), and requests
that touch thousands of partitions promote thousands more while they wait: at
20,000 partitions with one producer and one consumer on every partition, 73 full
collections took 0.4 to 6.6 s each on the event loop (a loaded 2-core machine),
each one a pause for every client.

Most of that state lives as long as its partition. ``gc.freeze()`` moves every
tracked object into the permanent generation, which collections skip, so this
freezes the heap once the broker has loaded its logs and again whenever it hosts
more partitions than at the last freeze. Frozen objects are still freed by
reference counting; only reference cycles among them wait. When partitions go
away (topics deleted, replicas moved), the heap is unfrozen, and at the next call
collected in full (their cycles freed) and frozen again: one full collection per
second at most while partitions keep going away, none in the steady state.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


class HeapFreezer:
    """``settle(partitions)``: called with the number of hosted partitions now and then,
    freezes the heap when it grew since the last call and unfreezes it when it shrank."""

    def __init__(self) -> None:
        self._partitions = 0
        self._thawed = False

    def settle(self, partitions: int) -> None:
        if partitions < self._partitions:
            gc.unfreeze()
            self._thawed = True
        elif partitions > self._partitions or self._thawed:
            # Garbage goes first (all of it after a thaw), not into the permanent generation.
            gc.collect(2 if self._thawed else 1)
            gc.freeze()
            self._thawed = False
            if log.isEnabledFor(logging.DEBUG):  # counting walks every frozen object
                log.debug("froze %d objects at %d partitions", gc.get_freeze_count(), partitions)
        self._partitions = partitions
