"""Consumers positioned out of range recover (or fail) the way Kafka makes them.

Regression tests for a hang: kpybroker answered a Fetch for a partition it could
not read (OFFSET_OUT_OF_RANGE) with *null* records where Kafka sends empty
ones. librdkafka (confluent-kafka, kcat) cannot parse a null record set, so it
never saw the error, never applied ``auto.offset.reset``, and waited forever.

Every client is placed, with ``assign`` and an explicit offset, past the end of
a partition and before its start (retention has deleted its first segments),
under each ``auto.offset.reset`` policy, and must do what it does against
Apache Kafka: ``earliest`` reads from the log start offset, ``latest`` reads
nothing old but a record produced after the reset, ``none`` (librdkafka's
``error``) reports the client's out-of-range error. Passes against a real
Kafka too (``KPYBROKER_TEST_TARGET=kafka``).

Each test drives one client through a :class:`Session` that turns what the
client does into :class:`Event` s; :func:`observe` waits (bounded) for the
outcome the policy calls for, producing the ``latest`` record once the client
reports that it sits at the end.
"""

from __future__ import annotations

import abc
import asyncio
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as ConfluentTP

from kpybroker.testing.output import OutputDrain
from tests.helpers.brokers import ManagedBroker, launcher
from tests.helpers.java import CONSOLE_CONSUMER, java_command
from tests.helpers.log_life import (
    create_topic,
    produce_each,
    wait_until,
    watermarks,
)

pytestmark = pytest.mark.timeout(120)

HOUR_MS = 3_600_000
#: Records in each of the two old segments retention deletes, and in the kept one.
SEGMENT_RECORDS = 5
KEPT_RECORDS = 10
LOG_START = 2 * SEGMENT_RECORDS
LOG_END = LOG_START + KEPT_RECORDS

#: Where the clients are put: past the log end, and below the log start.
POSITIONS = {"past-end": 100_000, "before-start": 3}
POLICIES = ("earliest", "latest", "none")

#: Seconds a client gets to show its outcome (its startup included); seconds per poll.
OUTCOME_TIMEOUT = 30.0
POLL_SECONDS = 0.5


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedBroker]:
    """The module's broker, checking retention twice a second (Kafka: from the start)."""
    overrides = {"log.retention.check.interval.ms": 500, "log.initial.task.delay.ms": 0}
    with launcher(tmp_path_factory.mktemp("fetch-out-of-range")) as brokers:
        yield brokers(overrides)


def prepare_topic(bootstrap: str, topic: str) -> None:
    """One partition holding offsets LOG_START..LOG_END-1; retention deleted the two
    segments below, whose records are a day and two days old (segment.ms rolls a
    segment at each such jump in record time; retention.ms is one hour)."""
    create_topic(bootstrap, topic, {"segment.ms": HOUR_MS, "retention.ms": HOUR_MS})
    now = int(time.time() * 1000)
    for age_hours, count in ((48, SEGMENT_RECORDS), (24, SEGMENT_RECORDS), (0, KEPT_RECORDS)):
        pairs = [(b"key", f"{age_hours}h-{i}".encode()) for i in range(count)]
        produce_each(bootstrap, topic, pairs, timestamp=now - age_hours * HOUR_MS)
    wait_until(
        lambda: watermarks(bootstrap, topic) == (LOG_START, LOG_END),
        f"retention to move the log start of {topic} to {LOG_START}",
        timeout=30,
    )


@dataclass(frozen=True)
class Case:
    """One client run: where it starts and which ``auto.offset.reset`` it uses."""

    bootstrap: str
    topic: str
    position: int
    policy: str

    @property
    def librdkafka_policy(self) -> str:
        return "error" if self.policy == "none" else self.policy


EventKind = Literal["record", "end", "error", "exit"]


class Event(NamedTuple):
    """Something a client did: read a record, reached the end, failed, or exited."""

    kind: EventKind
    offset: int = -1
    text: str = ""


class Session(abc.ABC):
    """One client consuming partition 0 of ``case.topic`` from ``case.position``."""

    @abc.abstractmethod
    def poll(self) -> list[Event]:
        """What happened since the last call; waits up to about POLL_SECONDS."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the client (kill a tool)."""

    def describe(self) -> str:
        """Anything that helps explain a failure (a tool's command and output)."""
        return ""


# -- the Python clients ------------------------------------------------------------------


class ConfluentSession(Session):
    """confluent-kafka: a partition EOF event marks the end, errors come as messages."""

    def __init__(self, case: Case) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": case.bootstrap,
                "group.id": f"group-{case.topic}",  # required; assign() does not use it
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": case.librdkafka_policy,
            }
        )
        self.consumer.assign([ConfluentTP(case.topic, 0, case.position)])

    def poll(self) -> list[Event]:
        events = []
        for msg in self.consumer.consume(num_messages=100, timeout=POLL_SECONDS):
            err = msg.error()
            if err is None:
                events.append(Event("record", msg.offset()))
            elif err.code() == KafkaError._PARTITION_EOF:
                events.append(Event("end", msg.offset()))
            else:
                events.append(Event("error", text=f"{err.name()}: {err.str()}"))
        return events

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonSession(Session):
    """kafka-python: the end is a position at the high watermark; errors are raised."""

    def __init__(self, case: Case) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(
            bootstrap_servers=case.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset=case.policy,
        )
        self.tp = TopicPartition(case.topic, 0)
        self.consumer.assign([self.tp])
        self.consumer.seek(self.tp, case.position)

    def poll(self) -> list[Event]:
        from kafka.errors import KafkaError as KafkaPythonError

        try:
            batches = self.consumer.poll(timeout_ms=int(POLL_SECONDS * 1000))
        except KafkaPythonError as exc:
            return [error_event(exc)]
        events = [Event("record", r.offset) for rs in batches.values() for r in rs]
        # None while a reset is still in flight after the timeout.
        position = self.consumer.position(self.tp, timeout_ms=int(POLL_SECONDS * 1000))
        return [*events, *at_end(position)]

    def close(self) -> None:
        self.consumer.close()


class AiokafkaSession(Session):
    """aiokafka, driven from a private event loop so that it fits :func:`observe`."""

    def __init__(self, case: Case) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self.loop = asyncio.new_event_loop()
        self.tp = TopicPartition(case.topic, 0)

        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=case.bootstrap,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset=case.policy,
            )
            await consumer.start()
            consumer.assign([self.tp])
            consumer.seek(self.tp, case.position)
            return consumer

        self.consumer = self.loop.run_until_complete(start())

    def poll(self) -> list[Event]:
        from aiokafka.errors import KafkaError as AiokafkaError

        async def poll() -> list[Event]:
            try:
                batches = await self.consumer.getmany(timeout_ms=int(POLL_SECONDS * 1000))
            except AiokafkaError as exc:
                return [error_event(exc)]
            events = [Event("record", r.offset) for rs in batches.values() for r in rs]
            try:
                position = await asyncio.wait_for(self.consumer.position(self.tp), POLL_SECONDS)
            except TimeoutError:  # a reset still in flight
                return events
            return [*events, *at_end(position)]

        return self.loop.run_until_complete(poll())

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.consumer.stop())
        finally:
            self.loop.close()


def error_event(exc: Exception) -> Event:
    """An ``error`` event naming the exception's class, as the clients' patterns expect."""
    return Event("error", text=f"{type(exc).__name__}: {exc}")


def at_end(position: int | None) -> list[Event]:
    """An ``end`` event when a client's position is the partition's high watermark."""
    return [Event("end", position)] if position == LOG_END else []


# -- the command-line tools --------------------------------------------------------------


class ToolSession(Session):
    """A tool run in the background; its output lines become events.

    ``record`` matches a consumed record on stdout (group 1: its offset), ``end``
    a stderr line saying the tool sits at the end, ``error`` a stderr line
    reporting an error. The process exiting is an ``exit`` event.
    """

    def __init__(self, argv: list[str], record: str, end: str, error: str) -> None:
        self.argv = argv
        self.patterns: list[tuple[EventKind, re.Pattern[str]]] = [
            ("end", re.compile(end)),
            ("error", re.compile(error)),
        ]
        self.record = re.compile(record)
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.stdout = OutputDrain(self.proc.stdout, name="tool-stdout")
        self.stderr = OutputDrain(self.proc.stderr, name="tool-stderr")
        self.lines_seen = {"stdout": 0, "stderr": 0}

    def new_lines(self, name: str, drain: OutputDrain) -> list[str]:
        lines = drain.text().splitlines()
        fresh, self.lines_seen[name] = lines[self.lines_seen[name] :], len(lines)
        return fresh

    def poll(self) -> list[Event]:
        exited = self.proc.poll() is not None
        if exited:  # everything it wrote is read once both pipes reach their end
            self.stdout.join()
            self.stderr.join()
        else:
            time.sleep(POLL_SECONDS / 2)
        events = []
        for line in self.new_lines("stdout", self.stdout):
            if match := self.record.search(line):
                events.append(Event("record", int(match.group(1))))
        for line in self.new_lines("stderr", self.stderr):
            events += [Event(kind, text=line) for kind, p in self.patterns if p.search(line)]
        if exited:
            events.append(Event("exit", text=f"exit status {self.proc.returncode}"))
        return events

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.stdout.join()
        self.stderr.join()

    def describe(self) -> str:
        return (
            f"$ {' '.join(self.argv)}\n--- stdout ---\n{self.stdout.text()[-4000:]}\n"
            f"--- stderr ---\n{self.stderr.text()[-6000:]}"
        )


def kcat_session(case: Case, request: pytest.FixtureRequest) -> Session:
    """kcat -C from an absolute offset; it reports the end (partition EOF) on stderr."""
    kcat_path: str = request.getfixturevalue("kcat_path")
    argv = [
        kcat_path, "-b", case.bootstrap, "-C", "-t", case.topic, "-p", "0",
        "-o", str(case.position), "-u", "-f", "offset %o\n",
        "-X", f"auto.offset.reset={case.librdkafka_policy}",
    ]  # fmt: skip
    return ToolSession(
        argv, record=r"^offset (\d+)$", end=r"Reached end of topic .* at offset", error=r"ERROR"
    )


def java_session(case: Case, request: pytest.FixtureRequest) -> Session:
    """Kafka's console consumer (``--partition --offset``: assign and seek).

    At INFO the consumer logs "Resetting offset for partition ... to position
    FetchPosition{offset=...": once it names the log end, a ``latest`` reset is
    done and the record to read can be produced.
    """
    kafka_lib: Path = request.getfixturevalue("kafka_lib")
    args = [
        "--bootstrap-server", case.bootstrap, "--topic", case.topic, "--partition", "0",
        "--offset", str(case.position), "--consumer-property",
        f"auto.offset.reset={case.policy}", "--formatter-property", "print.offset=true",
        "--timeout-ms", str(int(OUTCOME_TIMEOUT * 1000)),
    ]  # fmt: skip
    return ToolSession(
        java_command(kafka_lib, CONSOLE_CONSUMER, args, log_level="INFO"),
        record=r"^Offset:(\d+)",
        end=rf"Resetting offset for partition {re.escape(case.topic)}-0 to position "
        rf"FetchPosition\{{offset={LOG_END},",
        error=r"^\S+(Exception|Error)\b",
    )


# -- the clients, and what each reports for ``none`` ---------------------------------------


@dataclass(frozen=True)
class Client:
    name: str
    start: Callable[[Case, pytest.FixtureRequest], Session]
    #: What the client's out-of-range error looks like (an error event's text).
    out_of_range: str

    def __str__(self) -> str:
        return self.name


CLIENTS = (
    Client("confluent", lambda case, _: ConfluentSession(case), r"^_AUTO_OFFSET_RESET: "),
    Client("kafka-python", lambda case, _: KafkaPythonSession(case), r"^OffsetOutOfRangeError: "),
    Client("aiokafka", lambda case, _: AiokafkaSession(case), r"^OffsetOutOfRangeError: "),
    Client("java", java_session, r"^org\.apache\.kafka\.clients\.consumer\.OffsetOutOfRange"),
    Client("kcat", kcat_session, r"Offset out of range"),
)


# -- running a case ----------------------------------------------------------------------


@dataclass
class Observation:
    """What a client did, up to the outcome its policy calls for (or a timeout)."""

    offsets: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    exit: str | None = None
    produced: int | None = None
    timed_out: bool = False

    def complete(self, policy: str) -> bool:
        wanted = KEPT_RECORDS if policy == "earliest" else 1
        return bool(self.errors) or self.exit is not None or len(self.offsets) >= wanted


def produce_one(bootstrap: str, topic: str) -> int:
    """Append one record now; its offset."""
    [offset] = produce_each(bootstrap, topic, [(b"key", b"after the reset")])
    return offset


def observe(session: Session, case: Case) -> Observation:
    """Poll ``session`` until its outcome shows (or OUTCOME_TIMEOUT), then close it."""
    obs = Observation()
    deadline = time.monotonic() + OUTCOME_TIMEOUT
    try:
        while not obs.complete(case.policy):
            if time.monotonic() > deadline:
                obs.timed_out = True
                break
            for event in session.poll():
                if event.kind == "record":
                    obs.offsets.append(event.offset)
                elif event.kind == "error":
                    obs.errors.append(event.text)
                elif event.kind == "exit":
                    obs.exit = event.text
                elif case.policy == "latest" and obs.produced is None:  # at the end
                    obs.produced = produce_one(case.bootstrap, case.topic)
    finally:
        session.close()
    return obs


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("client", CLIENTS, ids=str)
def test_out_of_range_position_follows_the_reset_policy(
    module_broker: ManagedBroker,
    request: pytest.FixtureRequest,
    client: Client,
    position: str,
    policy: str,
) -> None:
    """The client's outcome is the one its ``auto.offset.reset`` gives against Kafka."""
    bootstrap = module_broker.bootstrap
    case = Case(bootstrap, f"oor-{client}-{position}-{policy}", POSITIONS[position], policy)
    prepare_topic(bootstrap, case.topic)
    session = client.start(case, request)
    obs = observe(session, case)
    context = f"{case}\n{obs}\n{session.describe()}"

    if policy == "earliest":  # from the log start, not from 0
        assert obs.offsets == list(range(LOG_START, LOG_END)), context
    elif policy == "latest":  # nothing old; the record appended after the reset
        assert obs.produced == LOG_END, f"the client never reported the end\n{context}"
        assert obs.offsets == [LOG_END], context
    else:
        assert obs.offsets == [], context
        assert any(re.search(client.out_of_range, e) for e in obs.errors), context
    if policy != "none":
        assert obs.errors == [], context
