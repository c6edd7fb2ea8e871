"""Open a server socket for each configured listener."""

from __future__ import annotations

import asyncio
import logging

from kpybroker.apis.support.context import Services
from kpybroker.server.connection import KafkaConnection, ListenerSettings
from kpybroker.server.tls import tls_server_protocol

log = logging.getLogger(__name__)

#: The least length of the kernel's queue of connections not yet accepted. Kafka's acceptor
#: thread takes each connection off that queue as it arrives, so ``socket.listen.backlog.size``
#: (50) is plenty there; asyncio accepts only when the event loop is free, and a burst of new
#: connections while it is busy (50 consumers joining a group: 100 connections within 100 ms)
#: overflowed a queue of 50: the kernel dropped their SYNs and the clients retried a second
#: later. Connections waiting on connection limits are still held to the configured size, in
#: ``ConnectionGate``.
MIN_ACCEPT_QUEUE = 1024


async def start_listener(
    services: Services,
    open_connections: set[KafkaConnection],
    settings: ListenerSettings,
    host: str,
    port: int,
    backlog: int,
) -> asyncio.Server:
    """Listen on ``host:port`` (all interfaces when host is empty; port 0 picks a free one).

    Each accepted connection is kept in ``open_connections`` while it is open, so
    that the broker can close them all when it stops. The kernel queues at least
    ``MIN_ACCEPT_QUEUE`` connections for the event loop to accept (see there).
    """
    loop = asyncio.get_running_loop()
    tls = settings.security.tls

    def new_connection() -> asyncio.BaseProtocol:
        connection = KafkaConnection(services, open_connections, settings)
        return connection if tls is None else tls_server_protocol(connection, tls)

    server = await loop.create_server(
        new_connection,
        host or None,
        port,
        reuse_address=True,
        backlog=accept_queue(backlog),
    )
    return server  # asyncio and uvloop both set TCP_NODELAY on accepted sockets


def accept_queue(backlog: int) -> int:
    """The length of the kernel's queue of connections not yet accepted, for
    ``socket.listen.backlog.size`` = ``backlog`` (Linux caps it at ``net.core.somaxconn``)."""
    return max(backlog, MIN_ACCEPT_QUEUE)


def bound_port(server: asyncio.Server) -> int:
    return server.sockets[0].getsockname()[1]
