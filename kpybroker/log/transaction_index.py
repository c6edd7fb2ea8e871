"""A segment's ``<base>.txnindex``: the aborted transactions whose ABORT marker it holds
(Kafka's ``TransactionIndex``, ``AbortedTxn``, ``TxnIndexSearchResult``).

A read_committed consumer gets, with each fetch, the aborted transactions that
overlap what it reads, and drops their batches itself; this index is how the
broker finds them without reading the log. Kafka's exact format, so the files
work both ways: entries of 34 bytes end to end, each ``version int16 (0),
producer_id int64, first_offset int64, last_offset int64 (the marker's offset),
last_stable_offset int64`` (the LSO right after the abort, which lets a search
stop early). Entries are in increasing ``last_offset`` order.

The file is created with the first entry (most segments never get one). The
entries are kept in memory once read: they are few (one per aborted
transaction) and a fetch then searches them without a system call. Each append
opens, writes and closes the file, so an idle index holds no descriptor;
``flush`` fsyncs it when it changed.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from kpybroker.log.index import CorruptIndexError
from kpybroker.log.str_paths import SplitPath

ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnSearchResult(NamedTuple):
    """Aborted transactions found in one index, and whether later segments need no search
    (an entry's LSO reached the upper bound: no later abort can start below it)."""

    aborted: list[AbortedTxn]
    complete: bool


def encode_entries(entries: list[AbortedTxn]) -> bytes:
    return b"".join(_ENTRY.pack(ABORTED_TXN_VERSION, *entry) for entry in entries)


def decode_entries(data: bytes, path: Path) -> list[AbortedTxn]:
    """Whole entries of ``data`` (a torn last entry is ignored, as Kafka's iterator does)."""
    entries = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, pos)
        if version > ABORTED_TXN_VERSION:
            raise CorruptIndexError(f"unexpected aborted transaction version {version} in {path}")
        entries.append(AbortedTxn(*fields))
    return entries


class TransactionIndex:
    """The aborted transactions of one segment, in a file created on first use."""

    # One per segment: slots, no __dict__ each.
    __slots__ = (
        "_dirty",
        "_entries",
        "_path_directory",
        "_path_name",
        "base_offset",
    )

    path = SplitPath()

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # None: not read yet
        self._dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            self._entries = decode_entries(data, self.path)
        return self._entries

    def append(self, txn: AbortedTxn) -> None:
        """Add one entry; its last offset must be above every other's (Kafka refuses too)."""
        entries = self.entries
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError(
                f"the last offset of appended transactions must increase: {txn.last_offset} is "
                f"not above {entries[-1].last_offset} in {self.path}"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, encode_entries([txn]))
        finally:
            os.close(fd)
        entries.append(txn)
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> TxnSearchResult:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``
        (``collectAbortedTxns``)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnSearchResult(found, True)
        return TxnSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (the log was cut there)."""
        entries = self.entries
        keep = next((i for i, txn in enumerate(entries) if txn.last_offset >= offset), None)
        if keep is None:
            return
        del entries[keep:]
        os.truncate(self.path, keep * ENTRY_SIZE)
        self._dirty = True

    def reset(self) -> None:
        """Remove every entry (recovery rebuilds them from the log)."""
        if self.path.exists():
            os.truncate(self.path, 0)
            self._dirty = True
        self._entries = []

    def flush(self) -> None:
        if not self._dirty:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._dirty = False
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(TransactionIndex.path.text(self), path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []
        self._dirty = False
