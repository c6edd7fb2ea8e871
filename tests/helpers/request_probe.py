"""Other clients' requests while the broker is busy: how many were answered, how fast.

``RequestProbe`` runs two real clients in threads against a topic of their own,
each sending one request at a time for as long as the probe runs: a Metadata
request (kpybroker's codecs over a socket, as ``Wire``) and a Produce
(confluent-kafka, acks=1, one record flushed at a time). Each answer is kept
with the moment it came, so that a test can count the answers that came *during*
some other work (creating a topic of thousands of partitions, say) and report
their latency percentiles, without asserting any timing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Producer

from kpybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.helpers.groups_wire import Wire

#: The Metadata version the probe sends (Kafka 4 clients' newest common one).
METADATA_VERSION = 12


@dataclass
class Answers:
    """One kind of request: (answered at, seconds it took) of each answer, and failures."""

    kind: str
    answers: list[tuple[float, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def during(self, start: float, end: float) -> list[float]:
        """The latencies of the answers that came between ``start`` and ``end``
        (``time.monotonic()``)."""
        return [took for at, took in self.answers if start <= at <= end]

    def summary(self, start: float, end: float) -> str:
        """A line for the test output: the count and the percentiles in the window."""
        took = sorted(self.during(start, end))
        if not took:
            return f"{self.kind}: no answer in {end - start:.1f} s"
        return (
            f"{self.kind}: {len(took)} answers in {end - start:.1f} s, "
            f"p50 {percentile(took, 50) * 1000:.1f} ms, p99 {percentile(took, 99) * 1000:.1f} ms, "
            f"max {took[-1] * 1000:.1f} ms"
        )


def percentile(ordered: list[float], pct: float) -> float:
    """The nearest-rank percentile of a sorted, non-empty list."""
    rank = max(1, -(-len(ordered) * pct // 100))
    return ordered[int(rank) - 1]


class RequestProbe:
    """Metadata and Produce requests on ``topic``, one at a time each, in two threads."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.metadata = Answers("Metadata")
        self.produce = Answers("Produce")
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._guard, args=(self.metadata, self._metadata), daemon=True),
            threading.Thread(target=self._guard, args=(self.produce, self._produce), daemon=True),
        ]

    def __enter__(self) -> RequestProbe:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def wait_for_answers(self, count: int, timeout: float = 60.0) -> None:
        """Until each kind has ``count`` answers: the clients are connected and warm."""
        deadline = time.monotonic() + timeout
        while min(len(self.metadata.answers), len(self.produce.answers)) < count:
            if time.monotonic() > deadline:
                failures = self.metadata.failures[-3:] + self.produce.failures[-3:]
                raise AssertionError(f"probe not answered: {failures}")
            time.sleep(0.05)

    def _guard(self, answers: Answers, run: Callable[[Answers], None]) -> None:
        try:
            run(answers)
        except Exception as exc:  # reported by the test through ``failures``
            answers.failures.append(repr(exc))

    def _metadata(self, answers: Answers) -> None:
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name=self.topic)], allow_auto_topic_creation=False
        )
        with Wire(self.bootstrap, client_id="request-probe") as wire:
            while not self._stop.is_set():
                started = time.monotonic()
                wire.call(request, METADATA_VERSION)
                done = time.monotonic()
                answers.answers.append((done, done - started))

    def _produce(self, answers: Answers) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "acks": 1, "linger.ms": 0, "client.id": "probe"}
        )
        sent = 0
        while not self._stop.is_set():
            outcome: list[object] = []
            started = time.monotonic()
            producer.produce(
                self.topic,
                str(sent).encode(),
                partition=0,
                on_delivery=lambda error, _message, outcome=outcome: outcome.append(error),
            )
            producer.flush(60)
            done = time.monotonic()
            if outcome and outcome[0] is None:
                answers.answers.append((done, done - started))
            else:
                answers.failures.append(str(outcome[0] if outcome else "not delivered in 60 s"))
            sent += 1
        del producer  # closes its connections now, while the broker is still there
