"""All partition logs of this broker across its log directories (Kafka's ``LogManager``).

Each log directory holds ``meta.properties`` (whose cluster and broker id must
match ours), a ``.lock`` held while the broker runs, the three offset
checkpoints (recovery point, log start offset, high watermark) and, after a
clean shutdown, ``.kafka_cleanshutdown``, which lets the next start skip
recovery. Partition directories are ``<topic>-<partition>``; new partitions go
to the directory that has the fewest, or to the one AlterReplicaLogDirs named
for them, and ``moves`` (``log_dir_moves``) moves existing ones between
directories while they serve.

The broker's loop runs ``periodic_steps()`` about once a second; it does what
Kafka's scheduler threads do, each at its configured interval
(``LogManagerConfig``), a slice of the logs at a time. With
``log.cleaner.enable`` the manager also owns the ``LogCleaner``, whose ``run()``
the broker starts as a task; retention of compacted logs is then the cleaner's
job, as in Kafka.

A disk error in a directory takes it offline (``failures``, see
``log_dir_failure``): its logs are closed and forgotten, its checkpoints no
longer written, and new partitions go to the directories still online. A
directory that cannot be created, locked, validated or loaded at start-up is
offline from the start. When none is left the broker halts, as Kafka does.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import functools
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NoReturn

from kpybroker.log.checkpoint import (
    CorruptCheckpointError,
    fsync_dir,
    read_offset_checkpoint,
)
from kpybroker.log.checkpoint_writer import CheckpointWriter
from kpybroker.log.load_progress import DEFAULT_INTERVAL_S, DirLoadProgress
from kpybroker.log.log_cleaner import LogCleaner
from kpybroker.log.log_config import LogConfig, LogManagerConfig
from kpybroker.log.log_dir_failure import LogDirFailureChannel
from kpybroker.log.log_dir_moves import LogDirMove, LogDirMoves, settle_future_dirs
from kpybroker.log.metadata_files import (
    InconsistentMetadataError,
    ensure_meta_properties,
    take_clean_shutdown,
    write_clean_shutdown,
)
from kpybroker.log.names import (
    LOCK_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    METADATA_STORE_DIR,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_partition_dir,
    partition_dir_name,
    special_dir_kind,
)
from kpybroker.log.partition_log import PartitionLog, wall_clock_ms
from kpybroker.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from kpybroker.log.slices import current_slices
from kpybroker.protocol.errors import KafkaError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

KRAFT_METADATA_TOPIC = "__cluster_metadata"


class _AbortCleaning:
    """A log's truncation hook: stop the cleaner's round on the log's partition first.

    A slotted object of 48 bytes: a ``functools.partial`` with its argument tuple and its
    keyword dict was over 200, for each of the broker's logs.
    """

    __slots__ = ("_cleaner", "_tp")

    def __init__(self, cleaner: LogCleaner, tp: TopicPartition) -> None:
        self._cleaner = cleaner
        self._tp = tp

    def __call__(self) -> None:
        self._cleaner.abort(self._tp)


class LogDirLockedError(RuntimeError):
    """Another process (another broker) is using this log directory."""


class LogManager:
    """Owns every ``PartitionLog`` of this broker, their checkpoints, and clean shutdown."""

    def __init__(
        self,
        log_dirs: Sequence[Path],
        *,
        broker_id: int,
        cluster_id: str,
        config_for: Callable[[str], LogConfig] | None = None,
        time_ms: Callable[[], int] = wall_clock_ms,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        broker_epoch: int = -1,
        settings: LogManagerConfig | None = None,
        load_progress_interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        """Lock and check each directory, then load (recovering where needed) every partition.

        ``config_for(topic)`` gives a topic's effective config (broker defaults
        plus topic overrides) for the logs found on disk; default: Kafka's defaults.
        ``settings`` are the background intervals and the cleaner's settings. A long
        load reports its progress per directory at INFO every ``load_progress_interval_s``.
        Moves between log directories that the last stop interrupted resume as tasks of the
        running event loop.
        """
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self._config_for = config_for or (lambda _topic: LogConfig())
        self._time_ms = time_ms
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._broker_epoch = broker_epoch
        self._load_progress_interval_s = load_progress_interval_s
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        #: Partitions per log directory, with those being created: where new ones go.
        self._dir_load: Counter[Path] = Counter()
        self._deleted: list[PartitionLog] = []
        self._locks: list[int] = []
        #: Where AlterReplicaLogDirs asked a partition not created here yet to go (Kafka's
        #: ``preferredLogDirs``).
        self._preferred_dir: dict[TopicPartition, Path] = {}
        self.failures = LogDirFailureChannel(self._close_dir)
        self._checkpoints = CheckpointWriter()
        self.settings = settings or LogManagerConfig()
        self.moves = LogDirMoves(
            self._open_like, self._swapping, self.settings.alter_log_dirs_max_bytes_per_second
        )
        now = time_ms()
        intervals = self.settings
        # (what, task(now), interval): Kafka's scheduled tasks, run by periodic() when due;
        # each yields between slices of logs.
        self._tasks: list[tuple[str, Callable[[int], Iterator[None]], int]] = [
            ("retention", self._delete_old_segments, intervals.retention_check_interval_ms),
            (
                "producer expiration",
                self._remove_expired_producers,
                intervals.producer_expiration_check_interval_ms,
            ),
            (
                "high watermark checkpoint",
                lambda _now: self._checkpoint_steps(REPLICATION_OFFSET_CHECKPOINT, _high_watermark),
                intervals.high_watermark_checkpoint_interval_ms,
            ),
            (
                "recovery point checkpoint",
                lambda _now: self._checkpoint_steps(RECOVERY_POINT_CHECKPOINT, _recovery_point),
                intervals.recovery_point_checkpoint_interval_ms,
            ),
            (
                "log start offset checkpoint",
                lambda _now: self._checkpoint_steps(LOG_START_OFFSET_CHECKPOINT, _log_start),
                intervals.log_start_checkpoint_interval_ms,
            ),
        ]
        self._next_run = [now + interval for _, _, interval in self._tasks]
        self.cleaner: LogCleaner | None = None
        try:
            for log_dir in self.log_dirs:
                self._prepare_dir(log_dir, broker_id, cluster_id)
            if not self.online_dirs:
                _halt(
                    "Shutdown broker because none of the specified log dirs from "
                    f"{', '.join(map(str, self.log_dirs))} can be created or validated"
                )
            started = time.monotonic()
            unfinished_moves = settle_future_dirs(self.online_dirs)
            unclean = [d for d in self.online_dirs if not self._load_or_fail(d)]
            log.info(
                "Loaded %d logs in %.0f ms%s",
                len(self.logs),
                (time.monotonic() - started) * 1000,
                f" (unclean log dirs = {', '.join(map(str, unclean))})" if unclean else "",
            )
        except BaseException:
            self._unlock()
            raise
        if self.settings.cleaner.enable:
            self.cleaner = LogCleaner(
                self.settings.cleaner,
                self.online_dirs,
                self._compacted_logs,
                time_ms,
                self.fail_log,
            )
            for tp, partition_log in self.logs.items():
                self._guard_truncation(tp, partition_log)
        for tp, future_dir in unfinished_moves.items():
            self._resume_move(tp, future_dir)

    # -- startup ----------------------------------------------------------------------

    def _prepare_dir(self, log_dir: Path, broker_id: int, cluster_id: str) -> None:
        """Create, check, lock and claim ``log_dir``. A disk error takes it offline from
        the start (Kafka's ``createAndValidateLogDirs`` and ``lockLogDirs``); another
        broker holding its lock, or another cluster's or broker's ``meta.properties``,
        stops the start, as in Kafka."""
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            if not os.access(log_dir, os.R_OK | os.W_OK | os.X_OK):
                raise OSError(errno.EACCES, "not a readable and writable directory")
            self._lock(log_dir)
            ensure_meta_properties(log_dir, broker_id, cluster_id)
        except OSError as exc:
            self.failures.unusable_at_start(log_dir, exc)

    def _lock(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirLockedError(f"{log_dir} is in use by another broker") from None
        self._locks.append(fd)

    def _unlock(self) -> None:
        for fd in self._locks:
            os.close(fd)
        self._locks = []

    def _load_or_fail(self, log_dir: Path) -> bool:
        """``_load_dir``; a disk error takes the directory offline, closing the logs it
        loaded (Kafka's ``loadLogs``). True if it was shut down cleanly or failed."""
        try:
            return self._load_dir(log_dir)
        except OSError as exc:
            self.failures.take_offline(log_dir, f"Error while loading log dir {log_dir}", exc)
            return True

    def _load_dir(self, log_dir: Path) -> bool:
        """Open every partition log of ``log_dir``; True if it was shut down cleanly."""
        clean = take_clean_shutdown(log_dir)
        recovery_points = _read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        log_starts = _read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = _read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        partitions = list(self._partition_dirs(log_dir))
        progress = DirLoadProgress(
            log_dir,
            len(partitions),
            clean_shutdown=clean,
            interval_s=self._load_progress_interval_s,
        )
        for tp, child in partitions:
            started = time.monotonic()
            partition_log = PartitionLog(
                child,
                self._config_for(tp[0]),
                log_start_offset=log_starts.get(tp, 0),
                recovery_point=recovery_points.get(tp, 0),
                high_watermark=high_watermarks.get(tp, 0),
                clean_shutdown=clean,
                time_ms=self._time_ms,
                producer_id_expiration_ms=self._producer_id_expiration_ms,
            )
            self.logs[tp] = partition_log
            self._dir_of[tp] = log_dir
            self._dir_load[log_dir] += 1
            progress.loaded(
                partition_log.name,
                len(partition_log.segments),
                partition_log.log_start_offset,
                partition_log.log_end_offset,
                (time.monotonic() - started) * 1000,
            )
        return clean

    def _partition_dirs(self, log_dir: Path) -> Iterator[tuple[TopicPartition, Path]]:
        """The partition directories of ``log_dir``; leftovers of deleted ones are removed."""
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            kind = special_dir_kind(child.name)
            if kind == "delete":
                log.info("removing %s, deleted before the last shutdown", child)
                shutil.rmtree(child)
                continue
            if child.name == METADATA_STORE_DIR or kind == "future":
                continue  # future logs: a move's, loaded by _resume_move
            tp = parse_partition_dir(child.name)
            if kind is not None or tp is None or tp[0] == KRAFT_METADATA_TOPIC:
                log.info("ignoring %s: not a partition log", child)
                continue
            if tp in self.logs:
                raise RuntimeError(
                    f"partition {tp[0]}-{tp[1]} is in both {self._dir_of[tp]} and {log_dir}"
                )
            yield tp, child

    # -- partitions -------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def __iter__(self) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        return iter(list(self.logs.items()))

    def highest_producer_id(self) -> int:
        """The highest producer ID in the producer state of any log, -1 if none."""
        return max(
            (pid for plog in self.logs.values() for pid in plog.producer_state.producers),
            default=-1,
        )

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    @property
    def online_dirs(self) -> list[Path]:
        """The log directories not taken offline by a disk error."""
        return [d for d in self.log_dirs if d not in self.failures.offline]

    def fail_log(self, partition_log: PartitionLog, what: str, exc: OSError) -> None:
        """A file operation of ``partition_log`` failed: its directory goes offline."""
        self.failures.fail(partition_log.directory.parent, what, exc)

    def get_or_create(
        self, topic: str, partition: int, topic_id: bytes | None, config: LogConfig | None = None
    ) -> PartitionLog:
        """The partition's log, created in the least-used log directory if absent.

        An existing log keeps its config (change it with ``update_config``); a
        topic id different from the recorded one is INCONSISTENT_TOPIC_ID.
        """
        existing = self.logs.get((topic, partition))
        if existing is not None:
            existing.assign_topic_id(topic_id)
            return existing
        log_dir = self.place_new((topic, partition))
        try:
            created = self.open_new(log_dir, topic, partition, topic_id, config)
        except BaseException:
            self.unplace(log_dir)
            raise
        return self.adopt(log_dir, topic, partition, created)

    def place_new(self, tp: TopicPartition) -> Path:
        """The log directory for a new partition: the one AlterReplicaLogDirs asked for if
        it is online, else the online one holding the fewest (counting those being
        created); it counts the new one until ``adopt`` or ``unplace``."""
        preferred = self._preferred_dir.pop(tp, None)
        online = self.online_dirs
        log_dir = preferred if preferred in online else min(online, key=self._dir_load.__getitem__)
        self._dir_load[log_dir] += 1
        return log_dir

    def unplace(self, log_dir: Path) -> None:
        """A partition placed in ``log_dir`` was not created after all."""
        self._dir_load[log_dir] -= 1

    def open_new(
        self,
        log_dir: Path,
        topic: str,
        partition: int,
        topic_id: bytes | None,
        config: LogConfig | None = None,
        first_epoch: int | None = None,
    ) -> PartitionLog:
        """Create (or open) the partition's files in ``log_dir``, without registering
        the log: file I/O only, so that it may run in a worker thread while the event
        loop serves. ``first_epoch`` is the leader epoch the log starts with, recorded
        now so that becoming its leader writes no checkpoint on the event loop."""
        created = PartitionLog(
            log_dir / partition_dir_name(topic, partition),
            config or self._config_for(topic),
            topic_id,
            time_ms=self._time_ms,
            producer_id_expiration_ms=self._producer_id_expiration_ms,
        )
        if first_epoch is not None:
            created.maybe_assign_epoch_start_offset(first_epoch, created.log_end_offset)
        return created

    def adopt(
        self, log_dir: Path, topic: str, partition: int, partition_log: PartitionLog
    ) -> PartitionLog:
        """Manage a log ``open_new`` made in ``log_dir`` (placed there by ``place_new``)."""
        tp = (topic, partition)
        self.logs[tp] = partition_log
        self._dir_of[tp] = log_dir
        self._guard_truncation(tp, partition_log)
        log.info("created log for %s-%d in %s", topic, partition, log_dir)
        return partition_log

    def _guard_truncation(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        """Make a truncation of the log first stop the cleaner from reading its segments."""
        if self.cleaner is not None:
            partition_log.before_truncation = _AbortCleaning(self.cleaner, tp)

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic's new config to its logs (new segments pick up index settings)."""
        for (name, _), partition_log in self.logs.items():
            if name == topic:
                partition_log.config = config

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Delete a partition's log and directory; False if this broker has none."""
        return bool(self.delete_partitions(topic, [partition]))

    def delete_partitions(self, topic: str, partitions: Iterable[int]) -> list[int]:
        """Delete these partitions' logs and directories; the ones this broker had.

        A compaction round on one is aborted first (this waits for the cleaner's
        thread to let go of its segments) and its cleaner checkpoint entry goes. The
        cleaner checkpoint is rewritten and the renames are made durable once per log
        directory, not once per partition: these run on the event loop, and a topic of
        a hundred partitions deleted one ``fsync`` at a time held it for seconds.
        """
        deleted = {p: plog for p in partitions if (plog := self._forget((topic, p))) is not None}
        for plog in deleted.values():
            plog.mark_deleted()
        parents = {plog.directory.parent for plog in deleted.values()}
        if self.cleaner is not None:
            for log_dir in parents:
                self.cleaner.manager.prune_checkpoint(log_dir)
        for parent in parents:
            fsync_dir(parent)
        for partition, plog in deleted.items():
            plog.remove_files()
            self._deleted.append(plog)
            log.info("deleted log for %s-%d", topic, partition)
        return list(deleted)

    def set_aside_stray(self, topic: str, partition: int) -> Path | None:
        """Stop managing a partition's log and keep its files in a ``…-stray`` directory
        (Kafka's stray logs); None if this broker has none. For a log that belongs to no
        topic the cluster knows, e.g. one recorded with another topic id: its data may be
        an operator's (a migration with the wrong ``partition.metadata``), not garbage."""
        partition_log = self._forget((topic, partition))
        if partition_log is None:
            return None
        if self.cleaner is not None:
            self.cleaner.manager.prune_checkpoint(partition_log.directory.parent)
        return partition_log.set_aside()

    def _forget(self, tp: TopicPartition) -> PartitionLog | None:
        """Take a log out of this manager and out of the cleaner's rounds (the caller then
        prunes the cleaner's checkpoint); a move of it to another log directory stops first."""
        self.moves.cancel(tp)
        partition_log = self.logs.get(tp)
        if partition_log is None:
            return None
        if self.cleaner is not None:
            self.cleaner.abort(tp)
        del self.logs[tp]
        log_dir = self._dir_of.pop(tp)
        self._dir_load[log_dir] -= 1
        return partition_log

    # -- moves between log directories (AlterReplicaLogDirs) ---------------------------

    def find_log_dir(self, path: str) -> Path | None:
        """The log directory ``path`` names (as given in ``log.dirs`` or resolved), if any."""
        wanted = Path(path)
        for log_dir in self.log_dirs:
            if wanted in (log_dir, log_dir.absolute(), log_dir.resolve()):
                return log_dir
        return None

    def move_to(self, topic: str, partition: int, log_dir: Path) -> bool:
        """Move the partition's log to ``log_dir`` (nothing to do when it is there already,
        and a move elsewhere stops). False when this broker has no log of it yet: it is
        then created in ``log_dir`` (Kafka's ``maybeUpdatePreferredLogDir``)."""
        tp = (topic, partition)
        current = self.logs.get(tp)
        if current is None:
            self._preferred_dir[tp] = log_dir
            return False
        if self._dir_of[tp] == log_dir:
            self.moves.cancel(tp)
        else:
            self.moves.start(tp, current, log_dir)
        return True

    def future_logs(self) -> Iterator[tuple[TopicPartition, Path, LogDirMove]]:
        """The moves in progress: partition, target directory, move."""
        for move in self.moves:
            yield move.topic_partition, move.target_dir, move

    def _resume_move(self, tp: TopicPartition, future_dir: Path) -> None:
        """Load the future log of a move the last stop interrupted and let the move go on
        (Kafka's ``maybeAddLogDirFetchers``). The future log is recovered in full, as a log
        after a crash: nothing says how much of it was flushed. One that cannot be opened
        (a disk error, another topic id, an unreadable ``partition.metadata``) is deleted,
        and the partition stays where it is. A move whose current log or target directory
        went offline while loading waits for the next start."""
        current = self.logs.get(tp)
        if current is None or future_dir.parent not in self.online_dirs:
            return
        try:
            future = self._open_like(future_dir, current, recover=True)
        except (OSError, KafkaError, InconsistentMetadataError) as exc:
            log.warning("removing %s, a future log that cannot be loaded: %s", future_dir, exc)
            shutil.rmtree(future_dir, ignore_errors=True)
            return
        self.moves.resume(tp, current, future)

    def _open_like(
        self, directory: Path, like: PartitionLog, *, recover: bool = False
    ) -> PartitionLog:
        """Open ``directory`` (or create it, starting at ``like``'s log start offset) with
        ``like``'s config, topic id and offsets: a move's future log, then the moved log;
        with ``recover``, a future log found at start, checked and cut as after a crash."""
        return PartitionLog(
            directory,
            like.config,
            like.topic_id,
            log_start_offset=like.log_start_offset,
            recovery_point=0 if recover else like.log_end_offset,
            high_watermark=like.high_watermark,
            clean_shutdown=not recover,
            time_ms=self._time_ms,
            producer_id_expiration_ms=self._producer_id_expiration_ms,
        )

    def _swapping(self, move: LogDirMove) -> None:
        """A move's future log is complete and about to become the partition's log: the
        cleaner lets go of the old segments, and the partition counts in its new directory,
        whose checkpoints list it from now on (before its directory takes its name)."""
        tp = move.topic_partition
        if self.cleaner is not None:
            self.cleaner.abort(tp)
            self.cleaner.manager.update_checkpoint(self._dir_of[tp], tp, None)
        self._dir_load[self._dir_of[tp]] -= 1
        self._dir_of[tp] = move.target_dir
        self._dir_load[move.target_dir] += 1
        self.checkpoint()

    # -- background work --------------------------------------------------------------

    def periodic(self, now_ms: int | None = None) -> None:
        """All of ``periodic_steps`` at once."""
        for _ in self.periodic_steps(now_ms):
            pass

    def periodic_steps(self, now_ms: int | None = None) -> Iterator[None]:
        """Flush policy, rolled-segment fsync, retention, producer expiry, checkpoints: when due.

        Yields after each slice of logs (``slices``), where the caller lets the event
        loop serve others; a log deleted, moved or gone offline in between is skipped.
        A disk error takes the directory of the log (or checkpoint) it hit offline; the
        work on the other directories goes on.
        """
        now = self._time_ms() if now_ms is None else now_ms
        self._take_checkpoint_failures()
        for logs in current_slices(self.logs):
            for tp, partition_log in logs:
                if partition_log.maintenance_due:  # a cheap property: most logs have no work
                    self._guarded(
                        tp,
                        partition_log,
                        "flushing",
                        functools.partial(partition_log.maintain, now),
                    )
            yield
        for i, (_, task, interval) in enumerate(self._tasks):
            if now < self._next_run[i]:
                continue
            self._next_run[i] = now + interval
            yield from task(now)
        self._deleted = [d for d in self._deleted if d.release_retired(now)]

    def _compacted_logs(self) -> list[tuple[TopicPartition, PartitionLog, Path]]:
        """The cleaner's view: the compacted logs, each with its directory."""
        dir_of = self._dir_of
        return [(tp, plog, dir_of[tp]) for tp, plog in self.logs.items() if plog.config.compact]

    def _guarded(
        self,
        tp: TopicPartition,
        partition_log: PartitionLog,
        what: str,
        work: Callable[[], object],
    ) -> None:
        """``work()`` on one log; a disk error takes its directory offline."""
        try:
            work()
        except OSError as exc:
            if self.logs.get(tp) is partition_log:  # not deleted meanwhile
                self.fail_log(partition_log, f"{what} the log of {tp[0]}-{tp[1]}", exc)

    def _delete_old_segments(self, _now: int) -> Iterator[None]:
        """Retention of the logs the cleaner does not own (Kafka's ``cleanupLogs``): with a
        cleaner, compacted logs are its job; without one they keep all their segments."""
        for logs in current_slices(self.logs):
            for tp, partition_log in logs:
                if partition_log.config.compact:
                    continue
                if self.cleaner is not None and self.cleaner.is_cleaning(tp):
                    continue  # its policy just changed from compact; the round must end first
                self._guarded(
                    tp, partition_log, "deleting old segments of", partition_log.delete_old_segments
                )
            yield

    def _remove_expired_producers(self, now: int) -> Iterator[None]:
        for logs in current_slices(self.logs):
            for _, partition_log in logs:
                partition_log.remove_expired_producers(now)
            yield

    def checkpoint(self) -> None:
        """Write all three offset checkpoints of every log directory now."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()

    def checkpoint_recovery_points(self, in_background: bool = False) -> None:
        self._write_checkpoints(RECOVERY_POINT_CHECKPOINT, _recovery_point, in_background)

    def checkpoint_log_start_offsets(self, in_background: bool = False) -> None:
        self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT, _log_start, in_background)

    async def save_log_start_offsets(self) -> None:
        """The log start offset checkpoint, written by the checkpoint thread; returns once
        it is (DeleteRecords answers after that)."""
        self.checkpoint_log_start_offsets(in_background=True)
        await asyncio.to_thread(self.drain_checkpoints)
        self._take_checkpoint_failures()

    def drain_checkpoints(self) -> None:
        """Return once the checkpoint thread has written what it was handed so far."""
        self._checkpoints.drain()

    def checkpoint_high_watermarks(self, in_background: bool = False) -> None:
        self._write_checkpoints(REPLICATION_OFFSET_CHECKPOINT, _high_watermark, in_background)

    def _write_checkpoints(
        self, file_name: str, value: Callable[[PartitionLog], int | None], in_background: bool
    ) -> None:
        """All steps of ``_checkpoint_steps`` at once."""
        for _ in self._checkpoint_steps(file_name, value, in_background):
            pass

    def _checkpoint_steps(
        self,
        file_name: str,
        value: Callable[[PartitionLog], int | None],
        in_background: bool = True,
    ) -> Iterator[None]:
        """One checkpoint file per online directory: the offsets read a slice of logs at
        a time, then the files written now or handed to the checkpoint thread
        (``in_background``: the periodic writes), so that neither the reading nor the
        writing of many partitions holds up the event loop. As when the thread writes a
        file after a log was deleted, a log deleted after its slice was read is in the
        file until the next one."""
        by_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.online_dirs}
        dir_of = self._dir_of
        for logs in current_slices(self.logs):
            for tp, partition_log in logs:
                offsets = by_dir.get(dir_of[tp])
                if offsets is not None and (offset := value(partition_log)) is not None:
                    offsets[tp] = offset
            yield
        online = self.online_dirs
        for log_dir, offsets in by_dir.items():
            if log_dir not in online:
                continue
            if in_background:
                self._checkpoints.submit(log_dir / file_name, offsets)
                continue
            try:
                self._checkpoints.write_now(log_dir / file_name, offsets)
            except OSError as exc:
                self.failures.fail(log_dir, f"writing {file_name}", exc)

    def _take_checkpoint_failures(self) -> None:
        """Directories where a background checkpoint write failed go offline."""
        for path, exc in self._checkpoints.take_failures():
            self.failures.fail(path.parent, f"writing {path.name}", exc)

    def _close_dir(self, log_dir: Path) -> None:
        """Kafka's ``LogManager.handleLogDirFailure``: forget the logs of a directory gone
        offline and close their files without flushing (the disk failed); halt when no
        directory is left, as Kafka does."""
        gone = sorted(tp for tp, d in self._dir_of.items() if d == log_dir)
        for move in self.moves:  # moves from or to the failed directory stop
            if move.target_dir == log_dir or self._dir_of[move.topic_partition] == log_dir:
                self.moves.cancel(move.topic_partition)
        for tp in gone:
            if self.cleaner is not None:
                self.cleaner.abort(tp)
            del self._dir_of[tp]
            self.logs.pop(tp).close_handles()
        self._dir_load.pop(log_dir, None)
        log.warning(
            "Logs for partitions %s are offline due to failure on log directory %s",
            ", ".join(f"{t}-{p}" for t, p in gone) or "(none)",
            log_dir,
        )
        if not self.online_dirs:
            _halt(
                "Shutdown broker because all log dirs in "
                f"{', '.join(map(str, self.log_dirs))} have failed"
            )

    # -- shutdown ---------------------------------------------------------------------

    def close(self) -> None:
        """Clean shutdown: flush and close every log, write checkpoints, then the marker.

        A directory with a log that failed to close gets no marker, so its logs
        are recovered at the next start.
        """
        self.moves.close()
        if self.cleaner is not None:
            self.cleaner.shutdown()
        threads = self.settings.recovery_threads_per_data_dir * max(len(self.online_dirs), 1)
        with ThreadPoolExecutor(threads, thread_name_prefix="log-close") as pool:
            closed = list(pool.map(_closed_cleanly, self.logs.items()))
        unclean = {self._dir_of[tp] for tp, ok in zip(self.logs, closed, strict=True) if not ok}
        self.checkpoint()  # a directory it fails in goes offline
        self._checkpoints.close()
        self._take_checkpoint_failures()
        for deleted in self._deleted:
            deleted.release_descriptors()
        self._deleted = []
        for log_dir in self.online_dirs:
            if log_dir not in unclean:
                try:
                    write_clean_shutdown(log_dir, self._broker_epoch)
                except OSError:
                    log.exception("writing the clean shutdown marker in %s failed", log_dir)
        self._unlock()
        log.info("log manager closed (%d partition(s))", len(self.logs))


def _halt(message: str) -> NoReturn:
    """No log directory is left to serve from: exit at once with status 1, as Kafka's
    ``Exit.halt(1)`` (nothing more is written anywhere)."""
    log.error(message)
    logging.shutdown()
    os._exit(1)


def _closed_cleanly(item: tuple[TopicPartition, PartitionLog]) -> bool:
    """Close one log at shutdown (in a worker thread: its fsyncs overlap the others')."""
    tp, partition_log = item
    try:
        partition_log.close()
    except OSError:
        log.exception("closing the log of %s-%d failed", *tp)
        return False
    return True


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """A checkpoint's offsets; a corrupt file counts as absent, which recovers from scratch."""
    try:
        return read_offset_checkpoint(path)
    except CorruptCheckpointError as exc:
        log.warning("ignoring %s", exc)
        return {}


def _recovery_point(partition_log: PartitionLog) -> int:
    return partition_log.recovery_point


def _high_watermark(partition_log: PartitionLog) -> int:
    return partition_log.high_watermark


def _log_start(partition_log: PartitionLog) -> int | None:
    """As Kafka: only logs whose start moved past their first segment's base offset."""
    if partition_log.log_start_offset > partition_log.segments[0].base_offset:
        return partition_log.log_start_offset
    return None
