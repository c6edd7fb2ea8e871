"""Open a server socket for each configured listener (``acceptor`` accepts on them)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

from kpybroker.apis.support.context import Services
from kpybroker.server.acceptor import Acceptor
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
    make_room: Callable[[], bool],
) -> Acceptor:
    """Listen on ``host:port`` (all interfaces when host is empty; port 0 picks a free one).

    Each accepted connection is kept in ``open_connections`` while it is open, so
    that the broker can close them all when it stops. The kernel queues at least
    ``MIN_ACCEPT_QUEUE`` connections for the event loop to accept (see there).
    Connections are accepted once the returned acceptor's ``start_serving`` is called;
    ``make_room`` frees descriptors for them when the process is out of them.
    """
    tls = settings.security.tls

    def new_connection() -> asyncio.BaseProtocol:
        connection = KafkaConnection(services, open_connections, settings)
        return connection if tls is None else tls_server_protocol(connection, tls)

    sockets = await bind(host, port, accept_queue(backlog))
    return Acceptor(settings.name, sockets, new_connection, make_room)


class BindError(OSError):
    """A listener's address could not be bound: the broker cannot start (Kafka's message)."""

    def __init__(self, errno: int | None, host: str, port: int, reason: str | None) -> None:
        super().__init__(errno, f"Socket server failed to bind to {host}:{port}: {reason}.")


async def bind(host: str, port: int, backlog: int) -> list[socket.socket]:
    """A listening socket for each address of ``host`` (every interface when empty), as
    ``loop.create_server`` binds them: ``SO_REUSEADDR``, IPv6 sockets IPv6 only."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise BindError(exc.errno, address[0], address[1], exc.strerror) from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def accept_queue(backlog: int) -> int:
    """The length of the kernel's queue of connections not yet accepted, for
    ``socket.listen.backlog.size`` = ``backlog`` (Linux caps it at ``net.core.somaxconn``)."""
    return max(backlog, MIN_ACCEPT_QUEUE)


def bound_port(server: Acceptor) -> int:
    return server.sockets[0].getsockname()[1]
