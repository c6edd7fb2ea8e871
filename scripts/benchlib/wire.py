"""A tiny blocking Kafka client for what the stock clients cannot time precisely.

The startup probe, the idle connections and the Metadata round trips use
it. Requests are encoded with kpybroker's generated codecs (they follow
Kafka's schemas; both brokers get the same bytes), responses are read
whole but not decoded: only their arrival is measured.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kpybroker.protocol.framing import encode_request
from kpybroker.protocol.messages.api_versions import ApiVersionsRequest
from kpybroker.protocol.messages.metadata import MetadataRequest

CLIENT_ID = "kpybroker-bench"
_SIZE = struct.Struct(">i")

#: The newest Metadata version both brokers implement (kpybroker 0-12, Kafka 4.1 0-13).
METADATA_VERSION = 12

#: ApiVersions v0: every broker answers it, whatever it supports.
API_VERSIONS_V0 = encode_request(ApiVersionsRequest(), 0, 1, CLIENT_ID)


def connect(host: str, port: int, timeout: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_frame(sock: socket.socket) -> bytes:
    """One response frame without its size prefix; ConnectionError on EOF."""
    (size,) = _SIZE.unpack(_recv_exact(sock, 4))
    return _recv_exact(sock, size)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    return bytes(buf)


def round_trip(sock: socket.socket, frame: bytes) -> float:
    """Send one request frame, read its response; return the seconds it took."""
    started = time.perf_counter()
    sock.sendall(frame)
    recv_frame(sock)
    return time.perf_counter() - started


def answers_api_versions(host: str, port: int, timeout: float) -> bool:
    """True when the broker accepts a connection and answers ApiVersions on it."""
    try:
        with connect(host, port, timeout) as sock:
            round_trip(sock, API_VERSIONS_V0)
            return True
    except OSError:
        return False


def metadata_all_topics(correlation_id: int) -> bytes:
    """A Metadata request for every topic (null topic list), as clients send to discover all."""
    request: Any = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    return encode_request(request, METADATA_VERSION, correlation_id, CLIENT_ID)
