"""A listener's kernel queue holds a burst of connections while the event loop is busy."""

from __future__ import annotations

import asyncio
import select
import socket
import time
from typing import cast

from kpybroker.apis.support.context import Services
from kpybroker.server.connection import ListenerSettings
from kpybroker.server.listener import MIN_ACCEPT_QUEUE, accept_queue, bound_port, start_listener

#: More connections than Kafka's default socket.listen.backlog.size (50), all at once.
BURST = 200


def test_the_accept_queue_is_at_least_the_minimum() -> None:
    assert accept_queue(50) == MIN_ACCEPT_QUEUE
    assert accept_queue(MIN_ACCEPT_QUEUE + 1) == MIN_ACCEPT_QUEUE + 1


def test_a_burst_of_connections_waits_in_the_kernel_while_the_loop_is_busy() -> None:
    """50 consumers joining a group open about 100 connections at once; with a kernel queue of
    socket.listen.backlog.size (50) the kernel dropped those beyond it while the loop was busy,
    and their clients retried a second later. Every one of them connects at once now."""

    async def main() -> None:
        settings = ListenerSettings("PLAINTEXT", 1 << 20)
        server = await start_listener(cast(Services, None), set(), settings, "127.0.0.1", 0, 50)
        port = bound_port(server)
        clients = []
        try:
            # The loop does not run until the end: nothing is accepted meanwhile.
            for _ in range(BURST):
                client = socket.socket()
                client.setblocking(False)
                client.connect_ex(("127.0.0.1", port))
                clients.append(client)
            pending = set(clients)
            deadline = time.monotonic() + 0.5  # well before a dropped SYN's retry (1 s)
            while pending and time.monotonic() < deadline:
                _, writable, _ = select.select([], list(pending), [], 0.05)
                pending -= set(writable)
            connected = [
                c
                for c in clients
                if c not in pending and not c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            ]
            assert len(connected) == BURST
        finally:
            server.close()  # before the loop runs: the queued connections are never served
            for client in clients:
                client.close()
            await server.wait_closed()

    asyncio.run(main())
