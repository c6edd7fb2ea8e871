"""The acceptor on asyncio's own event loop (the integration tests run uvloop): out of
descriptors, the log's cache of open files gives way; when it cannot, accepting is logged
once, backs off and resumes; waiting connections are kept."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import socket
from collections.abc import Awaitable, Callable

import pytest

from kpybroker.log.open_files import OpenFiles
from kpybroker.server import acceptor
from kpybroker.server.acceptor import Acceptor
from kpybroker.server.listener import bind

WAITING = 5


def lowest_free_descriptor() -> int:
    fd = os.dup(0)
    os.close(fd)
    return fd


class Accepted(asyncio.Protocol):
    def __init__(self, connections: list[asyncio.BaseTransport]) -> None:
        self.connections = connections

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.connections.append(transport)


async def accept_out_of_descriptors(
    while_limited: Callable[[list[asyncio.BaseTransport]], Awaitable[None]],
    make_room: Callable[[], bool] = lambda: False,
) -> int:
    """Serve ``WAITING`` connections with no descriptor free below the soft limit until
    ``while_limited`` returns, then with the limit restored; how many were accepted."""
    connections: list[asyncio.BaseTransport] = []
    server = Acceptor(
        "TEST", await bind("127.0.0.1", 0, 16), lambda: Accepted(connections), make_room
    )
    port = server.sockets[0].getsockname()[1]
    # The kernel completes these handshakes; the event loop has not run to accept them.
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(WAITING)]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Garbage left by earlier tests may hold descriptors (a log's cached files, a socket),
    # which a collection during the test would close, making room for an accept meant to
    # fail: it is collected first, and the collector stays off while the limit holds.
    gc.collect()
    gc.disable()
    try:
        # No new descriptor fits below the soft limit: every accept fails with EMFILE.
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free_descriptor(), hard))
        await server.start_serving()
        await while_limited(connections)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        gc.enable()
    await all_accepted(connections)
    server.close()
    for client in clients:
        client.close()
    for connection in connections:
        connection.close()
    return len(connections)


async def all_accepted(connections: list[asyncio.BaseTransport]) -> None:
    while len(connections) < WAITING:
        await asyncio.sleep(0.01)


async def accept_while_out_of_descriptors(caplog: pytest.LogCaptureFixture) -> int:
    async def backing_off(_connections: list[asyncio.BaseTransport]) -> None:
        while "Cannot accept" not in caplog.text:
            await asyncio.sleep(0.01)
        await asyncio.sleep(10 * acceptor.ACCEPT_BACKOFF_S)  # retried, and failing, meanwhile

    return await accept_out_of_descriptors(backing_off)


def test_out_of_descriptors_is_logged_once_and_the_waiting_connections_are_accepted_after(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(acceptor, "ACCEPT_BACKOFF_S", 0.02)
    caplog.set_level(logging.INFO, logger=acceptor.__name__)
    assert asyncio.run(accept_while_out_of_descriptors(caplog)) == WAITING
    failed = [r for r in caplog.records if r.getMessage().startswith("Cannot accept")]
    assert len(failed) == 1 and "Too many open files" in failed[0].getMessage()
    assert "Accepting connections on listener TEST again" in caplog.text


async def accept_with_the_log_files_cache_full(tmp_path) -> tuple[int, int]:
    """Every descriptor below the soft limit is taken, 32 of them by cached log files."""
    cache = OpenFiles(capacity=64)
    for i in range(32):
        path = tmp_path / f"{i}.log"
        path.write_bytes(b"")
        cache.file(path, os.O_RDONLY).open()
    return await accept_out_of_descriptors(all_accepted, cache.give_way), cache.capacity


def test_out_of_descriptors_the_log_files_cache_gives_way_to_connections(
    tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    accepted, capacity = asyncio.run(accept_with_the_log_files_cache_full(tmp_path))
    assert (accepted, capacity) == (WAITING, 64 - 16)  # one give_way made room for all
    assert "Cannot accept" not in caplog.text
