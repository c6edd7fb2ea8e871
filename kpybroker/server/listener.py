"""Open a server socket for each configured listener."""

from __future__ import annotations

import asyncio
import logging

from kpybroker.apis.support.context import Services
from kpybroker.server.connection import KafkaConnection, ListenerSettings
from kpybroker.server.tls import tls_server_protocol

log = logging.getLogger(__name__)


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
    that the broker can close them all when it stops.
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
        backlog=backlog,
    )
    return server  # asyncio and uvloop both set TCP_NODELAY on accepted sockets


def bound_port(server: asyncio.Server) -> int:
    return server.sockets[0].getsockname()[1]
