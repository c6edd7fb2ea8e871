"""The cleaner's key -> latest offset map (Kafka's ``OffsetMap``/``SkimpyOffsetMap``).

Kafka stores a 16-byte MD5 of each key in a fixed array sized by
``log.cleaner.dedupe.buffer.size``, filled up to
``log.cleaner.io.buffer.load.factor``. Here a dict holds the keys themselves
(no hash collisions), and the same two settings bound the memory it may take,
estimated per entry. When the map is full the cleaner stops mapping; the rest
of the dirty section is cleaned in a later round, exactly as in Kafka.

The map is filled a batch at a time (``put_all``: one dict update, no Python
work per record), and it answers, for a range of offsets of the mapped
section, whether any key's latest record is there (``maps_none_between``): a
batch of that section without one has nothing to keep, which the cleaner
then knows without reading its records.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from itertools import islice

# Estimated bytes a dict entry costs beyond its key's bytes: the slot, the bytes
# object's header, the int, and the dict's spare capacity.
ENTRY_OVERHEAD = 120


class OffsetMap:
    """Latest offset of each key seen from ``start`` on, within a memory budget."""

    def __init__(self, memory_bytes: int, load_factor: float, start: int = 0) -> None:
        self._budget = int(memory_bytes * load_factor)
        self._used = 0
        self._offsets: dict[bytes, int] = {}
        #: the mapped offsets in order, built when first asked for (``maps_none_between``)
        self._sorted: list[int] | None = None
        #: the first offset mapped: records below it are not in the map
        self.start = start
        self.latest_offset = -1
        #: False once a batch had a record outside its offset range (a malformed batch):
        #: a range without mapped offsets then says nothing about the batch
        self.records_within_batches = True

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        """No more keys may be put (Kafka checks before every put, new key or not)."""
        return self._used >= self._budget

    def put(self, key: bytes, offset: int) -> None:
        """Map ``key`` to ``offset``, which also becomes the latest offset mapped (as in
        Kafka's ``SkimpyOffsetMap.put``: a map that fills inside a batch has mapped the
        records put before it, and the round's end offset follows the last one)."""
        if key not in self._offsets:
            self._used += len(key) + ENTRY_OVERHEAD
        self._offsets[key] = offset
        self.latest_offset = offset
        self._sorted = None

    def put_all(self, keys: Sequence[bytes], offsets: Sequence[int]) -> bool:
        """``put`` each key with its offset, in order, checking ``full`` before each; False
        when the map filled up on the way (the keys before were put).

        When the batch fits even if every key is new, no check can fail, so the
        keys go in with one dict update; the new ones are the dict's last entries.
        """
        if self._used + sum(map(len, keys)) + ENTRY_OVERHEAD * len(keys) > self._budget:
            for key, offset in zip(keys, offsets, strict=True):
                if self.full:
                    return False
                self.put(key, offset)
            return True
        if keys:
            before = len(self._offsets)
            self._offsets.update(zip(keys, offsets, strict=True))
            added = len(self._offsets) - before
            new = islice(reversed(self._offsets), added)
            self._used += sum(map(len, new)) + ENTRY_OVERHEAD * added
            self.latest_offset = offsets[-1]
            self._sorted = None
        return True

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, -1 when it is not in the map."""
        return self._offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        """Record that every offset up to ``offset`` has been mapped."""
        self.latest_offset = max(self.latest_offset, offset)

    def maps_none_between(self, first: int, last: int) -> bool:
        """True when ``[first, last]`` lies in the mapped section and no key's latest offset
        is in it. For a batch with that range whose records were all put (neither aborted
        nor control data), each record then has a later one of its key, or no key."""
        if not self.records_within_batches or first < self.start or last > self.latest_offset:
            return False
        if self._sorted is None:
            self._sorted = sorted(self._offsets.values())
        i = bisect_left(self._sorted, first)
        return i == len(self._sorted) or self._sorted[i] > last
