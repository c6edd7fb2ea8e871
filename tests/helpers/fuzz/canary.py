"""A well-behaved client beside the fuzzer: it keeps asking and times every answer, and
samples the broker's resident memory.

If a hostile frame stalls the broker's event loop, every connection waits, and
the canary's latency shows it. Its latencies are figures for a report, never a
pass/fail threshold (a loaded CI machine stalls everyone now and then).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import struct
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event

from kpybroker.protocol.framing import encode_request
from kpybroker.protocol.messages.api_versions import ApiVersionsRequest
from kpybroker.protocol.messages.metadata import MetadataRequest
from tests.helpers.process import rss_bytes

#: How long the canary waits for one answer before counting it as lost.
ANSWER_TIMEOUT = 30.0
PAUSE = 0.01
_SIZE = struct.Struct(">i")


def _requests() -> list[bytes]:
    return [
        encode_request(ApiVersionsRequest(), 3, 1, "canary"),
        encode_request(MetadataRequest(topics=None), 12, 2, "canary"),
    ]


@dataclass
class CanaryReport:
    latencies: list[float] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    max_rss: int = 0
    #: time.monotonic() of the last answer.
    last_answer: float = 0.0
    #: Whether it was answered after the fuzzing ended (set by whoever ran the fuzzing).
    answered_after_fuzzing: bool = False

    def summary(self) -> str:
        if not self.latencies:
            return "canary: no answers"
        return (
            f"canary: {len(self.latencies)} answers, {len(self.lost)} lost, latency max"
            f" {max(self.latencies) * 1000:.1f} ms, p99 {self.percentile(0.99) * 1000:.1f} ms,"
            f" median {self.percentile(0.5) * 1000:.1f} ms; broker RSS max {self.max_rss >> 20} MiB"
        )

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


class Canary:
    """Asks from a process of its own, until :meth:`stop`: in the fuzzer's process it would
    wait for the interpreter lock behind the drawing of cases, and time that too."""

    def __init__(self, host: str, port: int, broker_pid: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._stopping = context.Event()
        self._reports, sender = context.Pipe(duplex=False)
        self._last_answer = context.Value("d", 0.0)
        self._process = context.Process(
            target=_ask,
            args=((host, port), broker_pid, self._stopping, sender, self._last_answer),
            name="fuzz-canary",
            daemon=True,
        )

    def start(self) -> None:
        self._process.start()

    @property
    def last_answer(self) -> float:
        """time.monotonic() of the last answer (the clock is the same in every process)."""
        return self._last_answer.value

    def stop(self) -> CanaryReport:
        self._stopping.set()
        report = self._reports.recv()
        self._process.join()
        return report


def _ask(
    address: tuple[str, int],
    broker_pid: int,
    stopping: Event,
    reports: Connection,
    last_answer: Synchronized,
) -> None:
    """The canary's loop: alternate ApiVersions and Metadata on one connection, timing
    each answer and sampling the broker's RSS; send the report when told to stop."""
    requests = _requests()
    report = CanaryReport()
    sock = None
    turn = 0
    while not stopping.is_set():
        with contextlib.suppress(FileNotFoundError):  # the broker is gone: nothing to add
            report.max_rss = max(report.max_rss, rss_bytes(broker_pid))
        try:
            if sock is None:
                sock = socket.create_connection(address, timeout=ANSWER_TIMEOUT)
            started = time.perf_counter()
            sock.sendall(requests[turn % len(requests)])
            _receive_frame(sock)
            report.latencies.append(time.perf_counter() - started)
            report.last_answer = last_answer.value = time.monotonic()
        except OSError as exc:
            report.lost.append(f"{type(exc).__name__}: {exc}")
            if sock is not None:
                sock.close()
            sock = None
        turn += 1
        stopping.wait(PAUSE)
    if sock is not None:
        sock.close()
    reports.send(report)


def _receive_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the canary's connection")
        data += chunk
    return bytes(data)


def _receive_frame(sock: socket.socket) -> bytes:
    (size,) = _SIZE.unpack(_receive_exactly(sock, 4))
    return _receive_exactly(sock, size)
