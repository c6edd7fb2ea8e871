"""A log directory whose disk fails goes offline (Kafka's ``LogDirFailureChannel``).

A disk that fails once (EIO, a failed fsync, ENOSPC, a file system remounted
read-only) cannot be trusted with the next write either: a retried write may
land after a hole, and a failed fsync leaves it unknown which pages reached the
disk. So, as in Kafka, the first ``OSError`` of any file operation of a log
(append, roll, flush, checkpoint, creation, cleaning, retention) takes the whole
directory offline: its partitions answer KAFKA_STORAGE_ERROR, its files are
closed, its checkpoints are no longer written, and the partitions of the other
directories serve on. The directory is loaded again, with the usual recovery,
by the next start. A directory that cannot be created, locked, validated or
loaded at start-up is offline from the start, the same way.

One kind of ``OSError`` is not the directory's fault: the process running out
of file descriptors (EMFILE, ENFILE; clients' connections can take them). Kafka
takes the directory offline for that too; kpybroker logs it and lets the work
be retried (the descriptor cache closes idle files to make room).

Reports come from the event loop's thread (worker threads hand their errors
back to it first), so listeners run there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from kpybroker.log.open_files import OUT_OF_DESCRIPTORS

log = logging.getLogger(__name__)

DirListener = Callable[[Path], None]


class LogDirFailureChannel:
    """Where file operations report the ``OSError`` that takes their log directory offline.

    ``close_dir`` (the log manager's) runs last, after the listeners, which may
    still look up which partitions the directory held.
    """

    def __init__(self, close_dir: DirListener) -> None:
        self.offline: set[Path] = set()
        self._close_dir = close_dir
        self._listeners: list[DirListener] = []

    def add_listener(self, listener: DirListener) -> None:
        """Call ``listener(log_dir)`` once when ``log_dir`` goes offline."""
        self._listeners.append(listener)

    def fail(self, log_dir: Path, what: str, exc: OSError) -> None:
        """``what`` (e.g. "appending to t-0") failed in ``log_dir`` with ``exc``: take the
        directory offline, once; later reports about it are ignored. One ERROR line
        names the directory and the cause, without a traceback: the cause is the disk."""
        self.take_offline(log_dir, f"Error while {what} in dir {log_dir}", exc)

    def take_offline(self, log_dir: Path, message: str, exc: OSError) -> None:
        """``fail`` with the ERROR line's own ``message`` (Kafka's wording at start-up:
        "Error while loading log dir ...")."""
        if log_dir in self.offline:
            return
        if exc.errno in OUT_OF_DESCRIPTORS:
            log.warning("%s: %s; will retry", message, exc)
            return
        self.offline.add(log_dir)
        log.error("%s: %s; the directory goes offline", message, exc)
        for listener in list(self._listeners):
            listener(log_dir)
        self._close_dir(log_dir)

    def unusable_at_start(self, log_dir: Path, exc: OSError) -> None:
        """``log_dir`` could not be created, locked or validated before anything was
        opened in it or anyone listened: it only joins ``offline`` (Kafka's
        ``createAndValidateLogDirs``), with one ERROR line."""
        self.offline.add(log_dir)
        log.error(
            "Failed to create or validate data directory %s: %s; the directory goes offline",
            log_dir,
            exc,
        )
