"""A well-behaved client beside the fuzzer: it keeps asking and times every answer, and
samples the broker's resident memory.

If a hostile frame stalls the broker's event loop, every connection waits, and
the canary's latency shows it. Its latencies are figures for a report, never a
pass/fail threshold (a loaded CI machine stalls everyone now and then).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kpybroker.protocol.framing import encode_request
from kpybroker.protocol.messages.api_versions import ApiVersionsRequest
from kpybroker.protocol.messages.metadata import MetadataRequest

#: How long the canary waits for one answer before counting it as lost.
ANSWER_TIMEOUT = 30.0
PAUSE = 0.01
_SIZE = struct.Struct(">i")


def rss_bytes(pid: int) -> int:
    """The process's resident set size (VmRSS), 0 when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


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

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


class Canary(threading.Thread):
    """Runs until :meth:`stop`; its findings are in ``report``."""

    def __init__(self, host: str, port: int, broker_pid: int) -> None:
        super().__init__(name="fuzz-canary", daemon=True)
        self.address = (host, port)
        self.broker_pid = broker_pid
        self.report = CanaryReport()
        self._stopping = threading.Event()

    def stop(self) -> CanaryReport:
        self._stopping.set()
        self.join()
        return self.report

    def run(self) -> None:
        requests = _requests()
        sock = None
        turn = 0
        while not self._stopping.is_set():
            self.report.max_rss = max(self.report.max_rss, rss_bytes(self.broker_pid))
            try:
                if sock is None:
                    sock = socket.create_connection(self.address, timeout=ANSWER_TIMEOUT)
                started = time.perf_counter()
                sock.sendall(requests[turn % len(requests)])
                _receive_frame(sock)
                self.report.latencies.append(time.perf_counter() - started)
                self.report.last_answer = time.monotonic()
            except OSError as exc:
                self.report.lost.append(f"{type(exc).__name__}: {exc}")
                if sock is not None:
                    sock.close()
                sock = None
            turn += 1
            self._stopping.wait(PAUSE)
        if sock is not None:
            sock.close()


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
