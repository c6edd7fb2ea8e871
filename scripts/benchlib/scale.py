"""Workload 5's load: many idle client connections, and Metadata for many partitions.

Each idle connection is a real client connection: it has sent ApiVersions and
read the answer, as every client does first, and then stays open and silent.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

from benchlib import wire


@contextlib.contextmanager
def idle_connections(host: str, port: int, count: int) -> Iterator[list[socket.socket]]:
    """Open ``count`` connections that each got an ApiVersions answer; close them on exit."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = wire.connect(host, port, timeout=30.0)
            sockets.append(sock)
            wire.round_trip(sock, wire.API_VERSIONS_V0)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def metadata_latencies(host: str, port: int, requests: int) -> list[float]:
    """Seconds per all-topics Metadata round trip, ``requests`` times on one connection.

    The first answer is not counted: it also pays for the connection's first
    request (Kafka's per-connection setup, kpybroker's first encode of this shape).
    """
    with wire.connect(host, port, timeout=60.0) as sock:
        wire.round_trip(sock, wire.API_VERSIONS_V0)
        wire.round_trip(sock, wire.metadata_all_topics(1))
        return [wire.round_trip(sock, wire.metadata_all_topics(i + 2)) for i in range(requests)]
