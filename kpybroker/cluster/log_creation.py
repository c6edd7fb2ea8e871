"""Creating partition logs in a worker thread, a slice at a time, while the broker serves.

A new partition's log costs a directory, a few files and two fsyncs (its
``partition.metadata`` and its first leader epoch): a millisecond or more. Done
on the event loop for each partition of a topic of 50,000 partitions, that stalled
every other client for a minute. So a broker that learns of partitions it must host
queues them here, and one drain task creates their logs in slices of
``SLICE`` partitions in ``WORKERS`` threads (the fsyncs of several logs
overlap), handing each slice back to the event loop to be hosted. Until its log
exists a partition is not served here (clients get NOT_LEADER_OR_FOLLOWER and
retry), as a Kafka broker that has not yet applied a partition's metadata.

What a partition's log is made with (its topic id, config, first leader epoch) is
asked for when its slice is taken, from the metadata as it is then; a partition
whose topic was deleted or moved away meanwhile is skipped. A slice whose files
cannot be made (a disk error, which takes its directory offline; no file
descriptors left) is logged and retried after ``RETRY_S`` in a directory still
online: partitions in the metadata always get their log eventually, which is also
what happens after a restart (the broker queues every missing log).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kpybroker.log.log_config import LogConfig
from kpybroker.log.log_manager import LogManager
from kpybroker.log.partition_log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: Partitions per worker-thread round trip: large enough that the thread hand-off is
#: cheap, small enough that each slice is hosted on the event loop in a few ms.
SLICE = 64
#: Logs made at once: each waits mostly on its fsyncs, which run in parallel.
WORKERS = 8
#: Pause before retrying logs that could not be created.
RETRY_S = 1.0


@dataclass(frozen=True, slots=True)
class NewLog:
    """What a partition's log is created with."""

    topic: str
    partition: int
    topic_id: bytes
    config: LogConfig
    first_epoch: int | None
    """The leader epoch it starts with when this broker leads it, else None."""


class LogCreator:
    """The queue of logs to create, and the task that creates them.

    ``spec(tp)`` gives a queued partition's ``NewLog`` when its slice is taken (None
    when it is no longer wanted); ``hosted(made)`` is called on the event loop with the
    logs of each slice, once they are managed by the log manager.
    """

    def __init__(
        self,
        logs: LogManager,
        spec: Callable[[TopicPartition], NewLog | None],
        hosted: Callable[[list[tuple[NewLog, PartitionLog]]], None],
    ) -> None:
        self._logs = logs
        self._spec = spec
        self._hosted = hosted
        self._queued: dict[TopicPartition, None] = {}  # insertion-ordered set
        self._in_flight: set[TopicPartition] = set()
        self._drain: asyncio.Task[None] | None = None
        self._workers = ThreadPoolExecutor(WORKERS, thread_name_prefix="log-creation")
        self._progress = asyncio.Condition()

    def want(self, tp: TopicPartition) -> None:
        """Queue a partition whose log is missing (nothing if it is queued already)."""
        if tp in self._in_flight:
            return
        self._queued[tp] = None
        if self._drain is None:
            self._drain = asyncio.create_task(self._run(), name="log-creation")

    def pending(self, tp: TopicPartition) -> bool:
        return tp in self._queued or tp in self._in_flight

    def forget(self, tp: TopicPartition) -> None:
        """No longer create this one (it moved away)."""
        self._queued.pop(tp, None)

    def forget_topic(self, topic: str) -> None:
        """No longer create any of the topic's (it is gone)."""
        for tp in [tp for tp in self._queued if tp[0] == topic]:
            del self._queued[tp]

    async def wait(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Until ``done()`` after a slice is hosted; False after ``timeout_s``."""
        async with self._progress:
            try:
                await asyncio.wait_for(self._progress.wait_for(done), timeout_s)
            except TimeoutError:
                return False
        return True

    async def close(self) -> None:
        if self._drain is not None:
            self._drain.cancel()
            await asyncio.gather(self._drain, return_exceptions=True)
        self._workers.shutdown(wait=True)

    async def _run(self) -> None:
        try:
            while self._queued:
                batch = list(itertools.islice(self._queued, SLICE))
                for tp in batch:
                    del self._queued[tp]
                wanted = [spec for tp in batch if (spec := self._spec(tp)) is not None]
                self._in_flight.update((s.topic, s.partition) for s in wanted)
                try:
                    await self._create(wanted)
                finally:
                    self._in_flight.clear()
                async with self._progress:
                    self._progress.notify_all()
        finally:
            self._drain = None

    async def _create(self, wanted: list[NewLog]) -> None:
        loop = asyncio.get_running_loop()
        places = [self._logs.place_new((spec.topic, spec.partition)) for spec in wanted]
        made = await asyncio.gather(
            *(
                loop.run_in_executor(self._workers, self._open, place, spec)
                for place, spec in zip(places, wanted, strict=True)
            )
        )
        failed = [
            (place, spec, outcome)
            for place, spec, outcome in zip(places, wanted, made, strict=True)
            if isinstance(outcome, OSError)
        ]
        for place, spec, exc in failed:
            self._logs.unplace(place)
            self._logs.failures.fail(
                place, f"creating the log of {spec.topic}-{spec.partition}", exc
            )
        retry = [spec for _, spec, _ in failed]
        adopted = []
        for place, spec, outcome in zip(places, wanted, made, strict=True):
            if isinstance(outcome, OSError):
                continue
            if place in self._logs.failures.offline:  # made just before its directory failed
                self._logs.unplace(place)
                outcome.close_handles()
                retry.append(spec)
                continue
            self._logs.adopt(place, spec.topic, spec.partition, outcome)
            adopted.append((spec, outcome))
        self._hosted(adopted)
        if retry:
            log.warning(
                "%d partition logs not made (%s-%d first); retrying in %.0f s",
                len(retry),
                retry[0].topic,
                retry[0].partition,
                RETRY_S,
            )
            await asyncio.sleep(RETRY_S)
            for spec in retry:
                self._queued[(spec.topic, spec.partition)] = None

    def _open(self, place: Path, spec: NewLog) -> PartitionLog | OSError:
        """In a worker thread: the files of one log, or why not."""
        try:
            return self._logs.open_new(
                place, spec.topic, spec.partition, spec.topic_id, spec.config, spec.first_epoch
            )
        except OSError as exc:
            return exc
