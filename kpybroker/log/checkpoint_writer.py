"""Offset checkpoints written by a thread of their own, not by the event loop.

A broker's offset checkpoints list every partition of a log directory. At 100,000
partitions one file is 3 MB: sorting, formatting and fsyncing it took 0.6 to 0.7 s on
a loaded 2-core machine, and the high-watermark checkpoint is due every 5 s
(``replica.high.watermark.checkpoint.interval.ms``). On the event loop that was a
pause of every client's requests; Kafka writes its checkpoints from its scheduler
thread, not from its request handlers, and so does this writer.

The owner takes a snapshot of the offsets (a new dict per file, on its own thread)
and hands it over. The writer's one thread writes the files in turn; a snapshot equal
to what the file already holds is not written again, and a snapshot handed in while an
earlier one of the same file waits replaces it. A write that fails is handed back:
the owner takes the failures on its own thread (``take_failures``), where it takes the
directory offline; meanwhile the writer writes nothing more in that directory.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Empty, SimpleQueue

from kpybroker.log.checkpoint import write_offset_checkpoint

Offsets = Mapping[tuple[str, int], int]


class CheckpointWriter:
    """Writes offset checkpoint files in a background thread (see the module's doc)."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="checkpoints")
        self._lock = threading.Lock()
        #: The latest snapshot of each file whose write has not started (under the lock).
        self._waiting: dict[Path, Offsets] = {}
        #: What each file holds, as this writer last wrote it (the writer's thread only,
        #: or the owner's while the writer is idle: ``write_now``).
        self._written: dict[Path, Offsets] = {}
        self._failures: SimpleQueue[tuple[Path, OSError]] = SimpleQueue()
        #: Directories where a background write failed (the writer's thread only).
        self._failed_dirs: set[Path] = set()

    def submit(self, path: Path, offsets: Offsets) -> None:
        """Write ``offsets`` to ``path`` soon; ``offsets`` must not change afterwards."""
        with self._lock:
            queued = path in self._waiting
            self._waiting[path] = offsets
        if not queued:
            self._executor.submit(self._write_waiting, path)

    def write_now(self, path: Path, offsets: Offsets) -> None:
        """Write ``offsets`` to ``path`` on the calling thread, after every write handed in
        before; an OSError is raised to the caller."""
        self.drain()
        self._written.pop(path, None)
        write_offset_checkpoint(path, offsets)
        self._written[path] = offsets

    def drain(self) -> None:
        """Return once every write handed in so far is done (the thread runs in order)."""
        self._executor.submit(lambda: None).result()

    def take_failures(self) -> list[tuple[Path, OSError]]:
        """The writes that failed since the last call: (file, error)."""
        failures = []
        while True:
            try:
                failures.append(self._failures.get_nowait())
            except Empty:
                return failures

    def close(self) -> None:
        """Finish the writes handed in, then stop the thread."""
        self._executor.shutdown(wait=True)

    def _write_waiting(self, path: Path) -> None:
        with self._lock:
            offsets = self._waiting.pop(path)
        if path.parent in self._failed_dirs or self._written.get(path) == offsets:
            return
        self._written.pop(path, None)
        try:
            write_offset_checkpoint(path, offsets)
        except OSError as exc:
            self._failed_dirs.add(path.parent)
            self._failures.put((path, exc))
        else:
            self._written[path] = offsets
