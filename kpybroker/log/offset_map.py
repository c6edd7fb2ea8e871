"""The cleaner's key -> latest offset map (Kafka's ``OffsetMap``/``SkimpyOffsetMap``).

Kafka stores a 16-byte MD5 of each key in a fixed array sized by
``log.cleaner.dedupe.buffer.size``, filled up to
``log.cleaner.io.buffer.load.factor``. Here a dict holds the keys themselves
(no hash collisions), and the same two settings bound the memory it may take,
estimated per entry. When the map is full the cleaner stops mapping; the rest
of the dirty section is cleaned in a later round, exactly as in Kafka.
"""

from __future__ import annotations

# Estimated bytes a dict entry costs beyond its key's bytes: the slot, the bytes
# object's header, the int, and the dict's spare capacity.
ENTRY_OVERHEAD = 120


class OffsetMap:
    """Latest offset of each key seen, within a memory budget."""

    def __init__(self, memory_bytes: int, load_factor: float) -> None:
        self._budget = int(memory_bytes * load_factor)
        self._used = 0
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

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

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, -1 when it is not in the map."""
        return self._offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        """Record that every offset up to ``offset`` has been mapped."""
        self.latest_offset = max(self.latest_offset, offset)
