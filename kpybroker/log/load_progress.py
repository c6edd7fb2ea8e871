"""Progress lines while the logs of a log directory load at start, in Kafka's words.

After an unclean shutdown every partition is recovered, which for thousands of partitions
takes minutes; whoever watches the broker's log must see that it is moving and how far it
has got, without a line per partition at INFO. Kafka's ``LogManager.loadLogs`` says, per
directory, whether it recovers or skips recovery, then "Completed load of ... (k/n
completed in dir)" for each log. Here that per-log line is INFO at most once per
``interval_s`` and for the directory's last log, and DEBUG otherwise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

#: How often a long load reports at INFO.
DEFAULT_INTERVAL_S = 10.0


class DirLoadProgress:
    """Counts the logs of one directory as they load, reporting at a time-based cadence."""

    def __init__(
        self,
        log_dir: Path,
        total: int,
        *,
        clean_shutdown: bool,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log_dir = log_dir
        self.total = total
        self.loaded_logs = 0
        self._interval_s = interval_s
        self._clock = clock
        self._last_report = clock()
        if total == 0:
            log.info("No logs found to be loaded in %s", log_dir)
        elif clean_shutdown:
            log.info(
                "Skipping recovery of %d logs from %s since clean shutdown file was found",
                total,
                log_dir,
            )
        else:
            log.info(
                "Recovering %d logs from %s since no clean shutdown file was found",
                total,
                log_dir,
            )

    def loaded(
        self, name: str, segments: int, log_start_offset: int, log_end_offset: int, ms: float
    ) -> None:
        """One more log of the directory is open; report it if a report is due."""
        self.loaded_logs += 1
        now = self._clock()
        due = self.loaded_logs == self.total or now - self._last_report >= self._interval_s
        if due:
            self._last_report = now
        log.log(
            logging.INFO if due else logging.DEBUG,
            "Completed load of %s with %d segments, log-start-offset %d and log-end-offset %d "
            "in %.0f ms (%d/%d completed in %s)",
            name,
            segments,
            log_start_offset,
            log_end_offset,
            ms,
            self.loaded_logs,
            self.total,
            self.log_dir,
        )
