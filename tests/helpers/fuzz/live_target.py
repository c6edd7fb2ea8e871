"""A live broker over sockets: fuzz frames on fresh connections, a canary beside them.

Each frame goes on its own connection, followed by an ApiVersions probe, so that
every frame ends in a known way: answered (the probe's answer came back, after
the frame's own if it has one: a Produce with acks=0 has none), closed (the
broker hung up, as Kafka does on a frame it cannot parse) or parked (no end
within ``PATIENCE``: a request the broker holds, which a hang would also look
like; they are listed by API in the report). An answer must decode as the
response of the frame's API and version and carry its correlation id.

Pass criteria, checked by the callers: no findings, the canary answered
throughout, the broker's log without tracebacks or errors, the broker still
serving real clients, its memory bounded.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import socket
import struct
import time
from collections import Counter
from dataclasses import dataclass, field

from kpybroker.apis import all_apis
from kpybroker.protocol._codec import read_uvarint, skip_tagged_field
from kpybroker.protocol.framing import (
    API_VERSIONS_KEY,
    encode_request,
    peek_api,
    request_is_flexible,
)
from kpybroker.protocol.messages import SCHEMAS
from kpybroker.protocol.messages.api_versions import ApiVersionsRequest
from tests.helpers.clients import KafkaPythonClient
from tests.helpers.fuzz.canary import Canary, CanaryReport
from tests.helpers.fuzz.cases import Finding, FuzzCase, draw_cases
from tests.helpers.fuzz.values import LIVE
from tests.helpers.records import make_record

#: The topics the LIVE profile's names point at: one that keeps the producer's codec, one
#: that recompresses (decompressing every batch in another codec) and a compacted one
#: (decompressing every batch to check its keys).
TOPICS = {
    "fuzz": {},
    "fuzz-uncompressed": {"compression.type": "uncompressed"},
    "fuzz-compact": {"cleanup.policy": "compact"},
}
#: A JoinGroup would otherwise wait 3 s for more members.
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": 0}
PATIENCE = 10.0
#: How long to wait for the canary's first answer after the fuzzing (a safety net only).
CANARY_WAIT = 30.0
CONCURRENCY = 8
#: Frames per valid request, about: itself and a mutant of each kind.
CASES_PER_GROUP = 9
#: Frames sent at a time (drawing them all first would hold every bomb at once).
CHUNK = 1000
PROBE_CORRELATION_ID = -2
_LOG_LINE_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_PROBLEM_MARKERS = ("Traceback", "unexpected error", " ERROR ")
#: ERROR lines Kafka logs too, word for word, for an error it answers a client with (its
#: GroupCoordinatorService, when DeleteGroups finds a share group's state undeletable).
_KAFKAS_OWN_ERRORS = ("Error deleting share group",)
_SIZE = struct.Struct(">i")
_PROBE = encode_request(ApiVersionsRequest(), 0, PROBE_CORRELATION_ID, "probe")


def live_pairs() -> list[tuple[int, int]]:
    """Every (API key, version) the broker serves."""
    return [
        (key, version)
        for key, spec in sorted(all_apis().items())
        for version in range(spec.min_version, spec.max_version + 1)
    ]


@dataclass
class LiveReport:
    #: Frames sent, by mutation.
    frames: Counter[str] = field(default_factory=Counter)
    #: answered / closed / parked.
    outcomes: Counter[str] = field(default_factory=Counter)
    #: Parked frames, by API and version.
    parked: Counter[str] = field(default_factory=Counter)
    #: Valid frames the broker closed the connection on, by API.
    valid_closed: Counter[str] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.frames.values())

    def summary(self) -> str:
        return (
            f"{self.total} frames {dict(self.frames)}\n"
            f"outcomes {dict(self.outcomes)}; parked {dict(self.parked)};"
            f" valid frames closed {dict(self.valid_closed)}; findings {len(self.findings)}"
        )


def check_answer(case: FuzzCase, answer: bytes) -> str | None:
    """Why ``answer`` is not a response to the frame ``case`` sent, or None."""
    api_key, version, correlation_id = peek_api(case.frame)
    (answered_id,) = _SIZE.unpack_from(answer, 0)
    if answered_id != correlation_id:
        return f"answer for correlation id {answered_id}, expected {correlation_id}"
    spec = all_apis()[api_key]
    if api_key == API_VERSIONS_KEY and version > spec.max_version:
        version = 0  # answered with v0, UNSUPPORTED_VERSION
    pos = 4
    try:
        if api_key != API_VERSIONS_KEY and request_is_flexible(api_key, version):
            count, pos = read_uvarint(answer, pos)
            for _ in range(count):
                _, pos = read_uvarint(answer, pos)
                pos = skip_tagged_field(answer, pos)
        codec = SCHEMAS[api_key]
        getattr(codec, codec.NAME + "Response").decode(answer, pos, version)
    except Exception as exc:  # any failure to decode is the finding
        return f"undecodable answer ({type(exc).__name__}: {exc}): {answer.hex()}"
    return None


async def exchange(host: str, port: int, case: FuzzCase) -> tuple[str, list[bytes]]:
    """Send the case's frame and the probe; ("answered" | "closed", the frame's answers)."""
    reader, writer = await asyncio.open_connection(host, port)
    answers: list[bytes] = []
    try:
        writer.write(_SIZE.pack(len(case.frame)) + case.frame + _PROBE)
        await writer.drain()
        while True:
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            answer = await reader.readexactly(size)
            if _SIZE.unpack_from(answer, 0)[0] == PROBE_CORRELATION_ID:
                return "answered", answers
            answers.append(answer)
    except (asyncio.IncompleteReadError, ConnectionError):
        return "closed", answers
    finally:
        sock = writer.get_extra_info("socket")
        if sock is not None:  # reset rather than linger: thousands of connections
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.close()


async def _send(host: str, port: int, cases: list[FuzzCase], report: LiveReport) -> None:
    queue = iter(cases)

    async def worker() -> None:
        for case in queue:
            name = f"{SCHEMAS[case.api_key].NAME} v{case.version}"
            report.frames[case.mutation] += 1
            try:
                outcome, answers = await asyncio.wait_for(exchange(host, port, case), PATIENCE)
            except TimeoutError:
                report.outcomes["parked"] += 1
                report.parked[name] += 1
                continue
            except ConnectionError as exc:
                report.findings.append(Finding(case, f"connection refused: {exc}"))
                continue
            report.outcomes[outcome] += 1
            if outcome == "closed" and case.expected is not None:
                report.valid_closed[name] += 1
            for answer in answers:
                problem = check_answer(case, answer)
                if problem is not None:
                    report.findings.append(Finding(case, problem))

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


def send(host: str, port: int, frames: int, seed: int) -> LiveReport:
    """Send ``frames`` frames, ``CONCURRENCY`` connections and ``CHUNK`` frames at a time.

    The frames are spread evenly over the served versions: every pair's groups are
    drawn, and a random share of each group is sent.
    """
    report = LiveReport()
    pairs = live_pairs()
    rng = random.Random(seed)
    rng.shuffle(pairs)
    rounds = max(1, math.ceil(frames / (CASES_PER_GROUP * len(pairs))))
    share = frames / ((rounds + 1) * CASES_PER_GROUP * len(pairs))
    pending: list[FuzzCase] = []

    def send_some(group: list[FuzzCase]) -> None:
        wanted = min(len(group), max(1, round(share * len(group))))
        pending.extend(rng.sample(group, wanted)[: frames - report.total - len(pending)])
        if len(pending) >= CHUNK or report.total + len(pending) == frames:
            asyncio.run(_send(host, port, pending, report))
            pending.clear()

    while report.total < frames:
        draw_cases(pairs, rounds, seed, send_some, profile=LIVE)
        seed += 1
    return report


def prepare_topics(bootstrap: str) -> None:
    for topic, config in TOPICS.items():
        KafkaPythonClient().create_topic(bootstrap, topic, 1, config)


def fuzz_with_canary(
    host: str, port: int, broker_pid: int, frames: int, seed: int
) -> tuple[LiveReport, CanaryReport]:
    """:func:`send` with a canary running from before the first frame until it has been
    answered once after the last (or ``CANARY_WAIT`` has passed: a safety net only)."""
    canary = Canary(host, port, broker_pid)
    canary.start()
    try:
        report = send(host, port, frames, seed)
        finished = time.monotonic()
        deadline = finished + CANARY_WAIT
        while canary.last_answer <= finished and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        answers = canary.stop()
    answers.answered_after_fuzzing = answers.last_answer > finished
    return report, answers


def assert_serves_kafka_python(bootstrap: str) -> None:
    """kafka-python creates a topic, produces ten records and consumes them back."""
    client = KafkaPythonClient()
    client.create_topic(bootstrap, "after-fuzz", 1)
    records = [make_record(i, 1) for i in range(10)]
    client.produce(bootstrap, "after-fuzz", records).raise_for_errors(len(records))
    consumed = client.consume(bootstrap, "after-fuzz", {0: len(records)})
    assert [r.value for r in consumed[0]] == [r.value for r in records]


def log_problems(log: str) -> list[str]:
    """The broker's log entries (a line and its traceback, if any) that say something went
    wrong inside it."""
    entries: list[list[str]] = []
    for line in log.splitlines():
        if _LOG_LINE_START.match(line) or not entries:
            entries.append([line])
        else:
            entries[-1].append(line)
    texts = ["\n".join(e) for e in entries]
    return [
        text
        for text in texts
        if any(m in text for m in _PROBLEM_MARKERS)
        and not any(known in text for known in _KAFKAS_OWN_ERRORS)
    ]
