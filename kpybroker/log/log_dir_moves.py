"""Moving a partition's log to another log directory while it serves (AlterReplicaLogDirs).

As Kafka's ``ReplicaAlterLogDirsThread`` does, a move makes a *future* log,
``<topic>-<partition>.<uuid>-future`` in the target directory, and fills it
from the current log the way a follower fills its log from a leader: whole
batches, byte for byte, with their offsets and leader epochs, so that the
future log builds its own indexes, producer state (idempotence) and
transaction index as it goes. The copy reads at most ``CHUNK_BYTES`` at a
time, in a worker thread, at most ``replica.alter.log.dirs.io.max.bytes.per.second``
(Kafka's quota on moves); the event loop only looks up where the next chunk
lies. A new future segment starts wherever the current log has one, so segment
files keep their names.

When the future log has caught up, it is fsynced in a worker thread, and once
it has caught up again (its log end is the current one's, checked on the loop,
where no append can interleave), the swap runs on the loop in one
go, which is the brief pause of appends Kafka's partition lock gives: the
future log takes the log start offset and high watermark, is closed (fsynced,
producer snapshot at its end), the current directory is renamed ``…-delete``,
the future one takes the partition's name, and the partition's ``PartitionLog``
continues from it (``PartitionLog.continue_as``), so that every holder of the
log (the partition, fetches in flight, the coordinators) keeps working. The old
directory is deleted in a worker thread.

Crash safety: until the current directory is renamed, the current log is the
partition's log, and the next start resumes the move, as Kafka's
``maybeAddLogDirFetchers`` does: the log manager loads the ``-future`` directory
(recovered, as any log after a crash) and ``LogDirMoves.resume`` continues the
copy from its end, or from the log start when it no longer continues the
current log. After that rename, the complete future log is the only one left,
and the next start makes it the partition's log (``settle_future_dirs``).

A truncation of the current log (a follower diverging from a new leader) or a
log start moving past what was copied restarts the copy from the log start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kpybroker.log.checkpoint import fsync_dir
from kpybroker.log.log_config import DOUBLE_MAX, LONG_MAX
from kpybroker.log.names import (
    delete_dir_name,
    future_dir_name,
    offset_from_filename,
    parse_partition_dir,
    partition_dir_name,
    special_dir_kind,
)
from kpybroker.log.partition_log import PartitionLog, ReadResult
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.records import parse_header

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: The most one step of the copy reads from the current log (and holds in memory).
CHUNK_BYTES = 1024 * 1024


class CopyRate:
    """Holds a move's copy to ``max_bytes_per_second`` from its start: before each chunk,
    sleeps until the bytes copied so far are within the rate (a strict bound, unlike the
    cleaner's sampled ``Throttler``, so that a small log moves no faster than asked)."""

    def __init__(self, max_bytes_per_second: float, stopped: threading.Event) -> None:
        self._rate = max_bytes_per_second
        self._stopped = stopped
        self._started = time.monotonic()
        self._copied = 0

    def wait_for(self, nbytes: int) -> None:
        """Count ``nbytes`` about to be copied, sleeping first while the copy is ahead of the
        rate; a stopped move wakes at once."""
        if self._rate < DOUBLE_MAX:
            ahead = self._copied / self._rate - (time.monotonic() - self._started)
            if ahead > 0:
                self._stopped.wait(ahead)
        self._copied += nbytes


@dataclass(eq=False)
class LogDirMove:
    """One partition's move: its current log, the future log, and whether the copy must
    start over (the current log was truncated under it)."""

    topic_partition: TopicPartition
    current: PartitionLog
    future: PartitionLog
    target_dir: Path
    rate: CopyRate
    restart: bool = False
    #: The current log's truncation hook before the move chained its own.
    previous_hook: Callable[[], None] = field(default=lambda: None, repr=False)
    #: Set when the move stops: cuts a throttling sleep in the worker thread short.
    stopped: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def offset_lag(self) -> int:
        """How far the future log is behind the current one (DescribeLogDirs' offset lag)."""
        return max(self.current.log_end_offset - self.future.log_end_offset, 0)


class LogDirMoves:
    """The moves in progress, one per partition at most.

    ``open_log(directory, like)`` opens (or creates empty, starting at ``like``'s log
    start offset) a partition directory as a log with ``like``'s config, topic id and
    offsets; ``swapping(move)`` is called on the loop as a swap begins, for the owner's
    bookkeeping (the cleaner lets go of the log; the partition counts in its new
    directory, whose offset checkpoints list it before it takes the partition's name).
    """

    def __init__(
        self,
        open_log: Callable[[Path, PartitionLog], PartitionLog],
        swapping: Callable[[LogDirMove], None],
        max_bytes_per_second: int = LONG_MAX,
    ) -> None:
        """``max_bytes_per_second`` is ``replica.alter.log.dirs.io.max.bytes.per.second``,
        each move's limit."""
        self._open_log = open_log
        self._swapping = swapping
        self._rate = DOUBLE_MAX if max_bytes_per_second >= LONG_MAX else max_bytes_per_second
        self.moves: dict[TopicPartition, LogDirMove] = {}

    def __iter__(self) -> Iterator[LogDirMove]:
        return iter(list(self.moves.values()))

    def start(self, tp: TopicPartition, current: PartitionLog, target_dir: Path) -> None:
        """Move ``current`` to ``target_dir``, replacing a move elsewhere (as Kafka does
        when the destination changes); a move already headed there goes on."""
        running = self.moves.get(tp)
        if running is not None:
            if running.target_dir == target_dir:
                return
            self.cancel(tp)
        future = self._open_log(target_dir / future_dir_name(partition_dir_name(*tp)), current)
        self._begin(tp, current, future)
        log.info("%s-%d: moving its log to %s", *tp, target_dir)

    def resume(self, tp: TopicPartition, current: PartitionLog, future: PartitionLog) -> None:
        """Go on with a move a stop interrupted, given its future log as loaded at start:
        from the future log's end when it continues ``current``, else from the log start
        (the current log's start moved past it, or the current log was truncated under it)."""
        move = self._begin(tp, current, future)
        if continues(current, future):
            log.info(
                "%s-%d: resuming the move to %s from offset %d",
                *tp,
                move.target_dir,
                future.log_end_offset,
            )
        else:
            move.restart = True
            log.info(
                "%s-%d: restarting the move to %s from the log start: its future log "
                "(end %d, epoch %d) does not continue the log",
                *tp,
                move.target_dir,
                future.log_end_offset,
                future.leader_epoch,
            )

    def _begin(self, tp: TopicPartition, current: PartitionLog, future: PartitionLog) -> LogDirMove:
        """Register a move of ``current`` into ``future``, watch the current log for
        truncations, and start copying (on the running event loop)."""
        stopped = threading.Event()
        move = LogDirMove(
            tp,
            current,
            future,
            future.directory.parent,
            CopyRate(self._rate, stopped),
            stopped=stopped,
        )
        self.moves[tp] = move
        previous_hook = move.previous_hook = current.before_truncation

        def on_truncation() -> None:
            previous_hook()
            move.restart = True

        current.before_truncation = on_truncation
        move.task = asyncio.get_running_loop().create_task(
            self._run(move), name=f"log-dir-move-{future.name}"
        )
        return move

    def cancel(self, tp: TopicPartition) -> None:
        """Stop a move and remove its future log (the partition is deleted or moves elsewhere).

        The future directory is renamed ``…-delete`` at once, so that no later start takes it
        for a finished move; it is deleted once the copy step in flight has returned.
        """
        move = self.moves.get(tp)
        if move is None:
            return
        self._end(move)
        _discard(move.future)
        log.info("%s-%d: move to %s stopped", *tp, move.target_dir)

    def close(self) -> None:
        """Broker shutdown: stop every move (the next start resumes them)."""
        for move in list(self.moves.values()):
            self._end(move)
            move.future.release_descriptors()

    def _end(self, move: LogDirMove) -> None:
        """Forget a move, now: its task stops (unless it is the caller) and the current
        log's truncation hook is what it was, before any new move of it chains its own."""
        del self.moves[move.topic_partition]
        move.stopped.set()
        if move.task is not None and move.task is not asyncio.current_task():
            move.task.cancel()
        move.current.before_truncation = move.previous_hook

    async def _run(self, move: LogDirMove) -> None:
        try:
            while not await self._step(move):
                pass
            # The copy's fsync, in a worker thread: the swap then only syncs the tail.
            await asyncio.to_thread(move.future.flush)
            while not await self._step(move):
                pass
            self._swap(move)
        except (OSError, KafkaError):
            log.exception("%s: moving the log to %s failed", move.current.name, move.target_dir)
            self.cancel(move.topic_partition)

    async def _step(self, move: LogDirMove) -> bool:
        """Copy one chunk; True once the future log has caught up (checked on the loop)."""
        current, future = move.current, move.future
        if move.restart or not (
            current.log_start_offset <= future.log_end_offset <= current.log_end_offset
        ):
            move.restart = False
            future.truncate_fully_and_start_at(current.log_start_offset)
        if future.log_end_offset == current.log_end_offset:
            return True
        chunk = current.read(
            future.log_end_offset, CHUNK_BYTES, current.log_end_offset, min_one_message=True
        )
        await asyncio.to_thread(_copy_chunk, chunk, future, move.rate)
        if move.stopped.is_set():
            raise asyncio.CancelledError
        return False

    def _swap(self, move: LogDirMove) -> None:
        """Make the caught-up future log the partition's log, on the loop without a pause
        (appends wait meanwhile: how long is logged)."""
        started = time.monotonic()
        current, future, tp = move.current, move.future, move.topic_partition
        future.update_high_watermark(current.high_watermark)
        future.increment_log_start_offset(current.log_start_offset)
        future.close()
        self._swapping(move)
        final = move.target_dir / partition_dir_name(*tp)
        old = current.directory
        retired = old.with_name(delete_dir_name(old.name))
        old.rename(retired)
        fsync_dir(old.parent)
        try:
            future.directory.rename(final)
        except OSError:
            retired.rename(old)  # the current log stays the partition's; the move is stopped
            raise
        # From here the new directory is the partition's: a failed fsync only risks that a
        # crash finds the swap undone, which the next start completes (settle_future_dirs).
        try:
            fsync_dir(final.parent)
        except OSError as exc:
            log.warning("%s: fsync of %s failed: %s", current.name, final.parent, exc)
        current.continue_as(self._open_log(final, current))
        self._end(move)
        _delete_in_background(retired)
        log.info(
            "%s: log moved to %s (the swap took %.0f ms)",
            current.name,
            move.target_dir,
            (time.monotonic() - started) * 1000,
        )


def continues(current: PartitionLog, future: PartitionLog) -> bool:
    """Whether ``future`` holds the start of ``current`` as it is now: its end lies within
    the current log, and its last leader epoch lasts in the current log at least until
    there (so the batches below are the same ones; as a follower checks with
    OffsetForLeaderEpoch)."""
    end = future.log_end_offset
    if not current.log_start_offset <= end <= current.log_end_offset:
        return False
    epoch = future.leader_epoch
    if epoch < 0:
        return True
    current_epoch, epoch_end = current.end_offset_for_epoch(epoch)
    return current_epoch == epoch and epoch_end >= end


def _copy_chunk(chunk: ReadResult, future: PartitionLog, rate: CopyRate) -> None:
    """Append a chunk of the current log to the future log (in a worker thread), first
    rolling the future log where the current one starts a segment (a read never spans
    two segments), at the same base offset.

    An empty future log whose start falls inside the first batch (DeleteRecords cut it)
    starts at that batch's segment instead (Kafka's future replica starts at the batch);
    the swap then gives it the current log start offset."""
    if not chunk.parts:
        return
    rate.wait_for(len(chunk))
    data = chunk.read_bytes()
    segment_base = offset_from_filename(chunk.parts[0].source.path.name)
    if segment_base is None:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"not a segment: {chunk.parts[0]}")
    if parse_header(data).base_offset < future.log_end_offset and future.size == 0:
        future.truncate_fully_and_start_at(segment_base)
    if segment_base > future.active_segment.base_offset:
        future.roll(segment_base)
    future.append_as_follower(data)


def _discard(future: PartitionLog) -> None:
    """Rename a future log ``…-delete`` (atomic for a restart), then delete it. A disk error
    is logged (the future log then stays, and the next start resumes its move)."""
    future.release_descriptors()
    directory = future.directory
    retired = directory.with_name(delete_dir_name(directory.name))
    try:
        directory.rename(retired)
        fsync_dir(directory.parent)
    except FileNotFoundError:
        return
    except OSError as exc:
        log.warning("could not remove %s: %s", directory, exc)
        return
    _delete_in_background(retired)


def _delete_in_background(directory: Path) -> None:
    """Delete a directory renamed ``…-delete`` in a worker thread (a big log takes a while);
    with no event loop (a test), now. What is left is removed at the next start."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        shutil.rmtree(directory, ignore_errors=True)
        return
    loop.run_in_executor(None, shutil.rmtree, directory, True)


def settle_future_dirs(log_dirs: Iterable[Path]) -> dict[TopicPartition, Path]:
    """Resolve the future logs a stopped broker left, at start before any log is loaded.

    A future log whose current log is gone was complete (the swap had renamed the current
    one away): it takes the partition's name. One whose current log is in another
    directory is an unfinished move, returned to be resumed; another future log of the
    same partition, or one beside its current log, is deleted (no move leaves either)."""
    log_dirs = list(log_dirs)
    hosted = {
        tp: log_dir
        for log_dir in log_dirs
        for name in os.listdir(log_dir)
        if special_dir_kind(name) is None and (tp := parse_partition_dir(name)) is not None
    }
    unfinished: dict[TopicPartition, Path] = {}
    for log_dir in log_dirs:
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir() or special_dir_kind(child.name) != "future":
                continue
            tp = parse_partition_dir(child.name.rsplit(".", 1)[0])
            if tp is None or tp in unfinished or hosted.get(tp) == log_dir:
                log.info("removing %s, a future log that cannot be resumed", child)
                shutil.rmtree(child)
            elif tp in hosted:
                unfinished[tp] = child
            else:
                final = child.with_name(partition_dir_name(*tp))
                log.info("completing the move of %s-%d to %s", *tp, log_dir)
                child.rename(final)
                fsync_dir(log_dir)
                hosted[tp] = log_dir
    return unfinished
