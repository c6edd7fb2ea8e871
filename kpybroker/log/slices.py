"""Passes over every partition, a slice at a time.

Some periodic work visits every partition (retention, checkpoints, the flush pass,
the ISR check). At 100,000 partitions one such pass holds the event loop for tenths of
a second, three times that on a loaded machine, and every client waits. Done a slice
at a time, with the loop serving others in between, no step takes long; the partitions
may change in between, so each slice is read when it is reached.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

#: Partitions visited by one step of a periodic pass.
HOUSEKEEPING_SLICE = 1000

K = TypeVar("K")
V = TypeVar("V")


def current_slices(mapping: Mapping[K, V]) -> Iterator[list[tuple[K, V]]]:
    """The items of the keys ``mapping`` holds now, ``HOUSEKEEPING_SLICE`` at a time; each
    slice read when it is reached: without the keys removed since, with the values that
    replaced others. Only the keys are copied up front (at 100,000 items, copying the
    items took 8 to 16 ms in one piece; the keys, half that)."""
    size = HOUSEKEEPING_SLICE
    keys = list(mapping)
    for start in range(0, len(keys), size):
        get = mapping.get
        yield [(k, v) for k in keys[start : start + size] if (v := get(k)) is not None]
