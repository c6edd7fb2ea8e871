"""Kafka's ``LogManager`` gauges, read at scrape time: how many log directories a disk
error took offline (``kafka_log_logmanager_offlinelogdirectorycount``) and, per
directory, whether it is offline (``kafka_log_logmanager_logdirectoryoffline``,
label ``logDirectory``), so that an alert fires on the disk rather than on the
KAFKA_STORAGE_ERROR answers clients get."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class LogDirStates(Protocol):
    """The broker's log directories (``log.log_manager.LogManager``)."""

    log_dirs: Sequence[Path]

    @property
    def online_dirs(self) -> Sequence[Path]: ...


class LogDirCollector(Collector):
    def __init__(self, dirs: LogDirStates) -> None:
        self.dirs = dirs

    def collect(self) -> Iterator[GaugeMetricFamily]:
        online = set(self.dirs.online_dirs)
        count = GaugeMetricFamily(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "Log directories taken offline by a disk error.",
        )
        offline = GaugeMetricFamily(
            "kafka_log_logmanager_logdirectoryoffline",
            "1 while the log directory is offline after a disk error, else 0.",
            labels=["logDirectory"],
        )
        for log_dir in self.dirs.log_dirs:
            offline.add_metric([str(log_dir)], int(log_dir not in online))
        count.add_metric([], sum(d not in online for d in self.dirs.log_dirs))
        yield from (count, offline)
