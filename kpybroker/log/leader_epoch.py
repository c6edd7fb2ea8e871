"""The leader epoch cache and its ``leader-epoch-checkpoint`` file (``LeaderEpochFileCache``).

Each entry says "epoch E started at offset O". OffsetForLeaderEpoch answers from
it, so that a consumer or a returning follower can find where its copy of the
log diverged after a leader change (KIP-101, KIP-320).
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from pathlib import Path

from kpybroker.log.checkpoint import (
    CorruptCheckpointError,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)
from kpybroker.log.names import LEADER_EPOCH_CHECKPOINT
from kpybroker.log.str_paths import SplitPath

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Epoch start offsets, kept in memory and written through to the checkpoint on every change."""

    # One per partition: slots, no __dict__ each.
    __slots__ = (
        "_epochs",
        "_in_file",
        "_path_directory",
        "_path_name",
        "_starts",
    )

    path = SplitPath()

    def __init__(self, directory: Path) -> None:
        self.path = directory / LEADER_EPOCH_CHECKPOINT
        self._epochs: list[int] = []
        self._starts: list[int] = []
        try:
            entries = read_epoch_checkpoint(self.path)
        except CorruptCheckpointError as exc:
            log.warning("ignoring %s", exc)
            entries = []
        for epoch, start in entries:
            self._assign(epoch, start)
        #: What the checkpoint file holds: every change is written through and fsynced, and
        #: a write that would leave the file as it is is skipped.
        self._in_file = list(entries)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; a no-op for the current epoch.

        Called on every append, so the common case (same epoch) is one comparison.
        Batches without an epoch (-1) are not recorded. When the checkpoint cannot
        be written (disk full) the cache is left as it was and the error raised.
        """
        if epoch < 0 or start_offset < 0 or self._is_current(epoch, start_offset):
            return
        saved = self.entries
        self._assign(epoch, start_offset)
        try:
            self._write()
        except OSError:
            self._epochs = [e for e, _ in saved]
            self._starts = [o for _, o in saved]
            raise

    def _is_current(self, epoch: int, start_offset: int) -> bool:
        return bool(self._epochs) and self._epochs[-1] == epoch and start_offset >= self._starts[-1]

    def _assign(self, epoch: int, start_offset: int) -> bool:
        """Append an entry, first dropping any entries it would make non-monotonic."""
        if self._is_current(epoch, start_offset):
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            removed = (self._epochs.pop(), self._starts.pop())
            if removed[1] != start_offset:
                log.warning(
                    "epoch %d at %d replaced entry %s in %s",
                    epoch,
                    start_offset,
                    removed,
                    self.path,
                )
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetForLeaderEpoch (Kafka's ``endOffsetFor``).

        The latest epoch ends at the log end offset; an older one at the start of
        the next known epoch, reported with the largest known epoch at or below
        the requested one; an epoch below every known one reports itself with
        the first epoch's start; unknown or undefined epochs give ``(-1, -1)``.
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._epochs and self._epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the batch at ``offset`` was written in, or -1 when unknown."""
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (the log was truncated there)."""
        if self._drop_from_end(end_offset):
            self._write_after_truncation()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop epochs wholly below ``start_offset``; the one spanning it now starts there."""
        if self._drop_from_start(start_offset):
            self._write_after_truncation()

    def fit_to_log(self, log_start_offset: int, log_end_offset: int) -> None:
        """Loading: keep only the epochs of the log as loaded, leaving the file as it is.

        Every load fits the cache to the log again, so entries the file still has past
        either end do no harm, and the next change rewrites the file. This matters at
        start-up: an empty partition's entry (its epoch, starting at its end) is dropped
        here and assigned again when the partition becomes leader, and writing the file
        both times would cost two fsyncs per partition, seconds for a thousand of them.
        """
        self._drop_from_end(log_end_offset)
        self._drop_from_start(log_start_offset)

    def _drop_from_end(self, end_offset: int) -> bool:
        keep = bisect_left(self._starts, end_offset)
        if keep == len(self._starts):
            return False
        del self._epochs[keep:], self._starts[keep:]
        return True

    def _drop_from_start(self, start_offset: int) -> bool:
        drop = bisect_right(self._starts, start_offset)
        if drop == 0 or (drop == 1 and self._starts[0] == start_offset):
            return False
        epoch = self._epochs[drop - 1]
        del self._epochs[:drop], self._starts[:drop]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        return True

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._starts.clear()
            self._write()

    def _write(self) -> None:
        entries = self.entries
        if entries != self._in_file:
            write_epoch_checkpoint(self.path, entries)
            self._in_file = entries

    def _write_after_truncation(self) -> None:
        """Write a truncation, tolerating a full disk: unlike a new epoch it need not be
        durable at once (Kafka flushes it asynchronously), since loading truncates the cache
        to the log again; the next change rewrites the whole file."""
        try:
            self._write()
        except OSError as exc:
            log.warning("could not write %s (%s); the next change rewrites it", self.path, exc)
