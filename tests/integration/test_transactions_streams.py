"""Kafka Streams with ``processing.guarantee=exactly_once_v2``, killed mid-run, counts exactly once.

``java/WordCountEos.java`` (compiled here against Kafka's jars) counts words:
it reads lines, repartitions by word through an internal topic, keeps the
counts in a state store backed by a changelog topic, and writes each new count
to the output topic, with the cache off so that every input word yields one
output record. Exactly-once makes the consumed offsets, the repartition and
changelog writes and the output one transaction.

The test produces a known text, kills the application with SIGKILL while it
works, restarts it, then kills the broker and restarts it too. In the output,
read with read_committed, each word's counts must be exactly 1, 2, ..., n: a
lost, repeated or aborted-but-visible update would break the sequence. Passes
against Apache Kafka too (``KPYBROKER_TEST_TARGET=kafka``).
"""

from __future__ import annotations

import random
import subprocess
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.java import java_command
from tests.helpers.reading import read_to_end

pytestmark = pytest.mark.timeout(420)

SOURCE = Path(__file__).parent / "java" / "WordCountEos.java"
WORDS = [f"w{i}" for i in range(40)]
LINES = 3000
WORDS_PER_LINE = 5
PARTITIONS = 3


@pytest.fixture(scope="module")
def app_classes(tmp_path_factory: pytest.TempPathFactory, kafka_lib: Path) -> Path:
    out = tmp_path_factory.mktemp("streams-classes")
    subprocess.run(
        ["javac", "-cp", f"{kafka_lib}/*", "-d", str(out), str(SOURCE)], check=True, timeout=180
    )
    return out


class StreamsApp:
    """The word count as a process, started and killed by the test."""

    def __init__(self, kafka_lib: Path, classes: Path, bootstrap: str, root: Path) -> None:
        self.command = java_command(
            kafka_lib,
            "WordCountEos",
            [bootstrap, f"wc-{root.name}", "lines", "counts", str(root / "state")],
            heap="384m",
            classes=[classes],
        )
        self.log = root / "streams.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def check_running(self) -> None:
        assert self.process is not None and self.process.poll() is None, (
            f"the Streams application exited:\n{self.log.read_text()[-6000:]}"
        )


@pytest.fixture
def streams_broker(broker_factory: BrokerFactory) -> ManagedBroker:
    return broker_factory({"transaction.state.log.num.partitions": 5})


@pytest.fixture
def app(
    streams_broker: ManagedBroker, kafka_lib: Path, app_classes: Path, tmp_path: Path
) -> Iterator[StreamsApp]:
    admin = AdminClient({"bootstrap.servers": streams_broker.bootstrap})
    for name in ("lines", "counts"):
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    root = tmp_path / f"app-{uuid.uuid4().hex[:6]}"
    root.mkdir()
    streams = StreamsApp(kafka_lib, app_classes, streams_broker.bootstrap, root)
    try:
        yield streams
    finally:
        streams.stop()


def produce_text(bootstrap: str, lines: int, seed: int) -> Counter[str]:
    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    totals: Counter[str] = Counter()
    for i in range(lines):
        words = [rng.choice(WORDS) for _ in range(WORDS_PER_LINE)]
        totals.update(words)
        producer.produce("lines", value=" ".join(words), key=str(i))
        producer.poll(0)
    assert producer.flush(60) == 0
    return totals


def read_counts(bootstrap: str) -> dict[str, list[int]]:
    """Every committed output record, per word, in offset order."""
    counts: dict[str, list[int]] = defaultdict(list)
    for record in read_to_end(bootstrap, "counts", PARTITIONS, "read_committed"):
        assert record.key is not None
        counts[record.key].append(int(record.value))
    return counts


def wait_for_output(bootstrap: str, app: StreamsApp, done: object, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    counts: dict[str, list[int]] = {}
    while time.monotonic() < deadline:
        app.check_running()
        counts = read_counts(bootstrap)
        if done(counts):  # type: ignore[operator]
            return counts
        time.sleep(2)
    raise AssertionError(f"output incomplete after {timeout} s: {sum(map(len, counts.values()))}")


def test_word_count_is_exactly_once_across_crashes(
    streams_broker: ManagedBroker, app: StreamsApp
) -> None:
    bootstrap = streams_broker.bootstrap
    totals = produce_text(bootstrap, LINES, seed=1)
    app.start()
    wait_for_output(bootstrap, app, lambda c: sum(map(len, c.values())) > 500, 180)
    app.kill()  # mid-run: its open transaction must be aborted, its work redone once
    more = produce_text(bootstrap, LINES // 2, seed=2)
    app.start()
    wait_for_output(bootstrap, app, lambda c: sum(map(len, c.values())) > 8000, 180)
    streams_broker.kill()
    streams_broker.restart()
    totals += more
    expected = sum(totals.values())
    counts = wait_for_output(bootstrap, app, lambda c: sum(map(len, c.values())) >= expected, 240)
    wrong = {
        word: [*seen[:5], "...", *seen[-5:]]
        for word, seen in counts.items()
        if seen != list(range(1, totals[word] + 1))
    }
    assert wrong == {}, "counts not exactly 1..n"
    assert set(counts) == set(totals)
