"""How fast the console producer and consumer are going, on stderr.

Without ``--progress`` a terminal gets one line rewritten in place (records so far and
their rate), and pipes and files get nothing, so that redirected output stays clean. With
``--progress`` a line every second, terminal or not, gives what the last second did and
what the run has done, and a summary ends the run: the figures Kafka's perf tools print,
from a tool that really sends or prints the records.

A record costs two additions; a timer thread reads the counters and writes the lines, so
the record loop never looks at the clock.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

MB = 1024 * 1024  # as Kafka's perf tools count


class Progress:
    """Record and byte counters of a run, and the lines that report them."""

    #: Seconds between lines: with --progress, and on a terminal without it.
    REPORT_INTERVAL_S = 1.0
    LIVE_INTERVAL_S = 0.5

    def __init__(
        self,
        verb: str,
        *,
        report: bool = False,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.verb = verb
        self.records = 0
        self.bytes = 0
        self.report = report
        self.stream = stream or sys.stderr
        self._live = not report and self.stream.isatty()
        self._clock = clock
        self.started = clock()
        self._window = (self.started, 0, 0)  # when the last line was written, and the counts
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, size: int) -> None:
        """Count one record of ``size`` bytes (its key and value)."""
        self.records += 1
        self.bytes += size

    def start(self) -> None:
        """Start writing lines, if this run writes any."""
        if self.report or self._live:
            interval = self.REPORT_INTERVAL_S if self.report else self.LIVE_INTERVAL_S
            self._thread = threading.Thread(
                target=self._run, args=(interval,), name="progress", daemon=True
            )
            self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.tick()

    def tick(self) -> None:
        """Write the line for the time since the last one."""
        now = self._clock()
        if self.report:
            self._write(self.window_line(now) + "\n")
        else:
            self._write("\r" + self.live_line(now))

    def done(self) -> None:
        """Stop the lines; end with the summary (--progress) or the final live line."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        now = self._clock()
        if self.report:
            self._write(self.summary_line(now) + "\n")
        elif self._live and self.records:
            self._write("\r" + self.live_line(now) + "\n")

    def window_line(self, now: float) -> str:
        since, records, size = self._window
        self._window = (now, self.records, self.bytes)
        seconds = max(now - since, 1e-9)
        return (
            f"{self.records - records:,} records {self.verb}, "
            f"{(self.records - records) / seconds:,.1f} records/sec "
            f"({(self.bytes - size) / MB / seconds:,.2f} MB/sec); "
            f"{self.records:,} records ({self.bytes / MB:,.2f} MB) in total"
        )

    def summary_line(self, now: float) -> str:
        seconds = max(now - self.started, 1e-9)
        return (
            f"Total: {self.records:,} records ({self.bytes / MB:,.2f} MB) {self.verb} "
            f"in {seconds:,.1f} s, {self.records / seconds:,.1f} records/sec "
            f"({self.bytes / MB / seconds:,.2f} MB/sec)"
        )

    def live_line(self, now: float) -> str:
        rate = self.records / max(now - self.started, 1e-9)
        return f"{self.records:,} records {self.verb}, {rate:,.0f} records/s"

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
