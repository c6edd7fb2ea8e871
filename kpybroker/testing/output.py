"""A child process's output, read as it comes: the pipe never fills, the text stays."""

from __future__ import annotations

import re
import threading
import time
from typing import IO


class OutputDrain:
    """Reads a child's pipe in a daemon thread into an in-memory buffer.

    The pipe never fills (a child blocked on a full stderr pipe would look hung),
    and the text stays available to the test. ``wait_for`` blocks until a line
    matches a pattern.
    """

    def __init__(self, stream: IO[bytes], name: str = "output") -> None:
        self._stream = stream
        self._lines: list[str] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"drain-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for raw in iter(self._stream.readline, b""):
                line = raw.decode("utf-8", errors="replace")
                with self._cond:
                    self._lines.append(line)
                    self._cond.notify_all()
        except (OSError, ValueError):
            pass  # the pipe was closed under us
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    @property
    def closed(self) -> bool:
        """True once the child closed its end (normally: it exited)."""
        return self._closed

    def text(self) -> str:
        """Everything read so far."""
        with self._cond:
            return "".join(self._lines)

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str] | None:
        """Return the first line matching ``pattern``, waiting up to ``timeout`` seconds.

        Returns None on timeout or when the stream ends without a match.
        """
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for line in self._lines[seen:]:
                    match = pattern.search(line)
                    if match:
                        return match
                seen = len(self._lines)
                remaining = deadline - time.monotonic()
                if self._closed or remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def join(self, timeout: float = 5.0) -> None:
        """Wait for the reader thread to reach the end of the stream."""
        self._thread.join(timeout)
