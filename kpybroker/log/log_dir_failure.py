"""A log directory whose disk fails goes offline (Kafka's ``LogDirFailureChannel``).

A disk that fails once (EIO, a failed fsync, ENOSPC, a file system remounted
read-only) cannot be trusted with the next write either: a retried write may
land after a hole, and a failed fsync leaves it unknown which pages reached the
disk. So, as in Kafka, the first ``OSError`` of any file operation of a log
(append, roll, flush, checkpoint, creation, cleaning, retention) takes the whole
directory offline: its partitions answer KAFKA_STORAGE_ERROR, its files are
closed, its checkpoints are no longer written, and the partitions of the other
directories serve on. The directory is loaded again, with the usual recovery,
by the next start.

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
        if log_dir in self.offline:
            return
        if exc.errno in OUT_OF_DESCRIPTORS:
            log.warning("Error while %s in dir %s: %s; will retry", what, log_dir, exc)
            return
        self.offline.add(log_dir)
        log.error("Error while %s in dir %s: %s; the directory goes offline", what, log_dir, exc)
        for listener in list(self._listeners):
            listener(log_dir)
        self._close_dir(log_dir)
