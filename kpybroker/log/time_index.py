"""The time index (``<base>.timeindex``): 12-byte entries of int64 timestamp, int32 relative offset.

An entry ``(T, O)`` says: every record up to offset ``O`` has a timestamp of at
most ``T``. Entries are added only when the segment's max timestamp grows, so
both columns only increase (Kafka's ``TimeIndex``).
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right

from kpybroker.log.index import CorruptIndexError, SparseIndex

NO_TIMESTAMP = -1


class TimeIndex(SparseIndex):
    __slots__ = ()

    ENTRY = struct.Struct(">qi")

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key, value - self.base_offset)

    def _decode(self, first: int, second: int) -> tuple[int, int]:
        return first, self.base_offset + second

    def _check(self, keys: array[int], values: array[int]) -> None:
        for i in range(1, len(keys)):
            if keys[i] < keys[i - 1] or values[i] < values[i - 1]:
                raise CorruptIndexError(f"{self.path}: entry {i} is below entry {i - 1}")
        if values and values[0] < self.base_offset:
            raise CorruptIndexError(f"{self.path}: first offset below the base offset")

    def is_full(self) -> bool:
        """Full one entry early: the last slot is kept for the entry written at roll/close."""
        return self.entries >= self.max_entries - 1

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, or ``(-1, base_offset)`` when empty."""
        last = self.last()
        return last if last is not None else (NO_TIMESTAMP, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add ``(timestamp, offset)`` if the timestamp is above the last entry's.

        ``skip_full_check`` is for the final entry written when the segment rolls
        or closes, which uses the slot ``is_full`` keeps free.
        """
        keys, values = self._columns()  # read once: this runs for every indexed batch
        if not skip_full_check and len(keys) >= self.max_entries - 1:
            raise ValueError(f"time index {self.path} is full")
        if keys and offset < values[-1]:
            raise ValueError(f"offset {offset} is below the last time index entry {values[-1]}")
        if timestamp > (keys[-1] if keys else NO_TIMESTAMP):
            self._append(timestamp, offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """The last entry with a timestamp at or below ``timestamp``, or ``(-1, base_offset)``."""
        keys, values = self._columns()
        i = bisect_right(keys, timestamp) - 1
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return keys[i], values[i]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is at or above ``offset``."""
        _, values = self._columns()
        self.truncate_to_entries(bisect_left(values, offset))
