"""The sparse offset index (``<base>.index``) and the append-only file machinery it shares
with the time index.

Each ``.index`` entry is 8 bytes: int32 offset relative to the segment's base
offset, int32 byte position of a batch in the ``.log`` file. Entries are
sparse (one per ``index.interval.bytes`` of log, see ``Segment``), so a lookup
finds the greatest entry at or below the target and the segment scans batch
headers forward from there.

Preallocation. Kafka preallocates index files to ``segment.index.bytes``,
memory-maps them and trims them when a segment rolls or the broker stops. This
module grows the files by appending each entry with ``os.write`` instead, and
keeps a copy of the entries in two ``array('q')`` columns for ``bisect``:

* the file length always equals the number of valid entries, so a crash leaves
  at most a torn last entry (detected by ``length % entry size``) rather than a
  tail of zero entries that only a clean shutdown would have trimmed;
* Kafka reads such files unchanged: it derives the entry count of an existing
  index from its length, and resizes the active segment's index itself;
* "index full" still follows ``segment.index.bytes`` (``max_entries``), so
  segments roll at the same points as Kafka's;
* an entry is written every ~4 KiB of log, so one extra small write per index
  interval costs nothing measurable, and no mmap resizing is needed;
* a rebuild (crash recovery, a lost index) adds an entry per 4 KiB of a whole
  segment at once: inside ``writing_in_bulk`` they are written in one write at
  the end (a write per entry was a quarter of the time to recover 2 GB).

Indexes are loaded on first use: a broker with many old segments does not read
every index at startup. A loaded index that fails its ordering checks is
reported through ``on_corrupt`` so the segment can rebuild it from the log.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

from kpybroker.log.log_config import INT_MAX
from kpybroker.log.open_files import OPEN_FILES

log = logging.getLogger(__name__)


class CorruptIndexError(ValueError):
    """An index file whose entries are out of order or do not fit its segment."""


class SparseIndex:
    """An append-only file of fixed-size ``(key, value)`` entries, mirrored in memory.

    Subclasses define the on-disk entry layout (``ENTRY``, ``_encode``, ``_decode``)
    and which ordering makes the entries valid (``_check``).
    """

    # Two per segment, and a broker has a segment or more per partition: no __dict__ each.
    __slots__ = (
        "_dirty",
        "_keys",
        "_on_corrupt",
        "_pending",
        "_values",
        "base_offset",
        "file",
        "max_entries",
    )

    ENTRY: ClassVar[struct.Struct]

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_entries: int,
        on_corrupt: Callable[[], None],
        *,
        created: bool = False,
    ) -> None:
        """``created``: the file is made now, so there is nothing on disk to read back."""
        #: The write handle (only an active segment's index is written), opened on use.
        self.file = OPEN_FILES.file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._on_corrupt = on_corrupt
        self._keys: array[int] | None = array("q") if created else None
        self._values: array[int] | None = array("q") if created else None
        # Entries written since the last fsync; flush() skips the fsync when none were.
        self._dirty = False
        # Encoded entries not yet written, inside ``writing_in_bulk``.
        self._pending: bytearray | None = None
        path.touch(exist_ok=True)

    @property
    def path(self) -> Path:
        return self.file.path

    # -- loading ----------------------------------------------------------

    def _columns(self) -> tuple[array[int], array[int]]:
        if self._keys is None or self._values is None:
            self._keys, self._values = self._read_file()
        return self._keys, self._values

    def _read_file(self) -> tuple[array[int], array[int]]:
        data = self.path.read_bytes()
        usable = len(data) - len(data) % self.ENTRY.size
        keys: array[int] = array("q")
        values: array[int] = array("q")
        for raw in self.ENTRY.iter_unpack(memoryview(data)[:usable]):
            key, value = self._decode(*raw)
            keys.append(key)
            values.append(value)
        try:
            if usable != len(data):
                raise CorruptIndexError(f"{self.path} has a torn last entry")
            self._check(keys, values)
        except CorruptIndexError as exc:
            log.warning("rebuilding index: %s", exc)
            self._keys, self._values = array("q"), array("q")
            self._truncate_file(0)
            self._on_corrupt()
            return self._keys, self._values
        return keys, values

    def last_entry_on_disk(self) -> tuple[int, int] | None:
        """The last entry as stored, without loading the index (None when empty).

        Raises ``CorruptIndexError`` when the file length is not a whole number
        of entries: the cheap open-time check that decides whether to rebuild.
        """
        size = self.path.stat().st_size
        if size % self.ENTRY.size:
            raise CorruptIndexError(f"{self.path} has a torn last entry")
        if size == 0:
            return None
        with self.path.open("rb") as f:
            f.seek(size - self.ENTRY.size)
            return self._decode(*self.ENTRY.unpack(f.read(self.ENTRY.size)))

    def last(self) -> tuple[int, int] | None:
        """The last entry, read from the file when the index is not loaded (None when empty).

        Lets the max-timestamp query and log loading look at many segments
        without loading each segment's whole index.
        """
        if self._keys is None:
            try:
                return self.last_entry_on_disk()
            except CorruptIndexError:
                pass  # loading below reports it and rebuilds
        keys, values = self._columns()
        return (keys[-1], values[-1]) if keys else None

    # -- subclass hooks ---------------------------------------------------

    def _encode(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def _decode(self, first: int, second: int) -> tuple[int, int]:
        raise NotImplementedError

    def _check(self, keys: array[int], values: array[int]) -> None:
        raise NotImplementedError

    # -- state ------------------------------------------------------------

    @property
    def entries(self) -> int:
        return len(self._columns()[0])

    @property
    def size_in_bytes(self) -> int:
        """The index's size on disk, read from the file while the index is not loaded."""
        if self._keys is None:
            return self.path.stat().st_size
        return len(self._keys) * self.ENTRY.size

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def _append(self, key: int, value: int) -> None:
        """Write one entry (or keep it for the bulk write); a failed or short write (disk
        full) leaves the file as it was."""
        keys, values = self._columns()
        entry = self._encode(key, value)
        if self._pending is not None:
            self._pending += entry
        else:
            self._write(entry, len(keys))
        keys.append(key)
        values.append(value)

    @contextlib.contextmanager
    def writing_in_bulk(self) -> Iterator[None]:
        """Entries appended inside are written in one write when the block ends (also when
        it raises, so the file keeps matching the entries in memory)."""
        written = len(self._columns()[0])
        self._pending = bytearray()
        try:
            yield
        finally:
            pending, self._pending = self._pending, None
            if pending:
                try:
                    self._write(pending, written)
                except OSError:
                    self.truncate_to_entries(written)
                    raise

    def _write(self, data: bytes | bytearray, entries_before: int) -> None:
        """Append encoded entries; on a failed or short write the file is cut back to
        ``entries_before`` entries."""
        self._dirty = True
        try:
            if self.file.open().write(data) != len(data):
                raise OSError(errno.ENOSPC, "short write", str(self.path))
        except OSError:
            self._truncate_file(entries_before)
            raise

    def truncate_to_entries(self, count: int) -> None:
        keys, values = self._columns()
        if count < len(keys):
            del keys[count:]
            del values[count:]
            self._truncate_file(count)

    def _truncate_file(self, count: int) -> None:
        os.truncate(self.path, count * self.ENTRY.size)
        self._dirty = True

    def reset(self) -> None:
        """Drop every entry (the first step of rebuilding from the log)."""
        self._keys, self._values = array("q"), array("q")
        self._truncate_file(0)

    def flush(self) -> None:
        """fsync the file if it changed since the last flush (through a short-lived
        descriptor when the write handle is closed)."""
        if self._dirty:
            self.file.sync()
            self._dirty = False

    def close(self) -> None:
        """Release the write handle; the entries stay readable (they are in memory)."""
        self.file.close()

    def unload(self) -> None:
        """Forget the in-memory copy of an inactive segment's index (reloaded on use)."""
        self.close()
        self._keys = self._values = None

    def delete(self) -> None:
        self.unload()
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        """Move the file (compaction's ``.cleaned`` -> ``.swap`` -> final name steps)."""
        self.file.rename(path)

    def relative(self, offset: int) -> int:
        return offset - self.base_offset

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` fits the int32 relative offset of this segment's index entries."""
        return 0 <= offset - self.base_offset <= INT_MAX


class OffsetIndex(SparseIndex):
    """``<base>.index``: offset -> byte position of a batch boundary in the segment."""

    __slots__ = ()

    ENTRY = struct.Struct(">ii")

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key - self.base_offset, value)

    def _decode(self, first: int, second: int) -> tuple[int, int]:
        return self.base_offset + first, second

    def _check(self, keys: array[int], values: array[int]) -> None:
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1] or values[i] <= values[i - 1]:
                raise CorruptIndexError(f"{self.path}: entry {i} is not above entry {i - 1}")
        if keys and keys[0] < self.base_offset:
            raise CorruptIndexError(f"{self.path}: first offset below the base offset")

    def append(self, offset: int, position: int) -> None:
        """Add an entry for the batch ending at ``offset`` that starts at ``position``."""
        keys, _ = self._columns()
        if keys and offset <= keys[-1]:
            raise ValueError(f"offset {offset} is not above the last index entry {keys[-1]}")
        if len(keys) >= self.max_entries:
            raise ValueError(f"offset index {self.path} is full")
        self._append(offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The greatest entry at or below ``offset``, or ``(base_offset, 0)``."""
        keys, values = self._columns()
        i = bisect_right(keys, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return keys[i], values[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """The greatest entry whose batch starts at or before ``position``, or ``(base, 0)``."""
        keys, values = self._columns()
        i = bisect_right(values, position) - 1
        if i < 0:
            return self.base_offset, 0
        return keys[i], values[i]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry at or above ``offset``."""
        keys, _ = self._columns()
        self.truncate_to_entries(bisect_left(keys, offset))

    @property
    def last_offset(self) -> int:
        last = self.last()
        return last[0] if last else self.base_offset
