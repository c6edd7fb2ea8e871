"""Kafka's text checkpoint files (``CheckpointFile``) and the atomic write they rely on.

Format, byte for byte what Kafka writes::

    0\\n                 version
    2\\n                 number of entries
    orders 0 1523\\n     one entry per line, fields separated by one space
    orders 1 977\\n

Offset checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``) carry
``topic partition offset`` entries; ``leader-epoch-checkpoint`` carries
``epoch startOffset``. Both use version 0.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from kpybroker.log.names import TEMP_SUFFIX

CHECKPOINT_VERSION = 0


class CorruptCheckpointError(ValueError):
    """A checkpoint file that does not parse; callers fall back to a safe default."""


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file.

    Written to ``<path>.tmp`` (Kafka's temp name), fsynced, renamed over the
    target, then the directory is fsynced so the rename itself is durable. A
    failed write removes the temp file and leaves the target as it was.
    ``sync=False`` keeps the rename atomic but skips both fsyncs, for files that
    carry their own checksum and may be rebuilt when lost.
    """
    tmp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk must not keep a half-written copy around
        raise
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """fsync a directory so that entries created, renamed or removed in it survive a crash."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def format_checkpoint(lines: Iterable[str]) -> bytes:
    """Render entry lines (already formatted) into the versioned checkpoint text."""
    body = list(lines)
    head = [str(CHECKPOINT_VERSION), str(len(body))]
    return "".join(line + "\n" for line in head + body).encode()


def parse_checkpoint(text: str, fields_per_line: int, where: object) -> list[list[str]]:
    """Split a checkpoint into entry field lists, checking version and entry count.

    As Kafka's reader: an empty file, or one with only a version line, has no entries.
    """
    lines = text.splitlines()
    if not lines:
        return []
    try:
        version = int(lines[0])
        expected = int(lines[1]) if len(lines) > 1 else 0
    except ValueError as exc:
        raise CorruptCheckpointError(f"malformed checkpoint header in {where}") from exc
    if version != CHECKPOINT_VERSION:
        raise CorruptCheckpointError(f"unknown checkpoint version {version} in {where}")
    entries = [line.split() for line in lines[2:]]
    for entry in entries:
        if len(entry) != fields_per_line:
            raise CorruptCheckpointError(f"malformed line {' '.join(entry)!r} in {where}")
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"expected {expected} entries, found {len(entries)} in {where}"
        )
    return entries


def write_offset_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    """Write ``topic partition offset`` lines for every partition, in the mapping's order
    (as Kafka: its order is the map's). Not sorted: at 100,000 partitions sorting took a
    quarter of a second in one call, which holds the interpreter's lock, so the event loop
    stood still while the checkpoint thread sorted."""
    lines = (f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items())
    atomic_write(path, format_checkpoint(lines))


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Read an offset checkpoint; a missing file is empty, a corrupt one raises."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    entries = parse_checkpoint(text, 3, path)
    try:
        return {(t, int(p)): int(o) for t, p, o in entries}
    except ValueError as exc:
        raise CorruptCheckpointError(f"malformed offset in {path}") from exc


def write_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]]) -> None:
    """Write ``epoch startOffset`` lines (the ``leader-epoch-checkpoint`` file)."""
    atomic_write(path, format_checkpoint(f"{epoch} {offset}" for epoch, offset in entries))


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    entries = parse_checkpoint(text, 2, path)
    try:
        return [(int(e), int(o)) for e, o in entries]
    except ValueError as exc:
        raise CorruptCheckpointError(f"malformed entry in {path}") from exc
