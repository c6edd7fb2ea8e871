"""Open a server socket for each configured listener."""

from __future__ import annotations

import asyncio
import logging

from kpybroker.apis.support.context import Services
from kpybroker.security.listener_security import ListenerSecurity
from kpybroker.server.connection import KafkaConnection

log = logging.getLogger(__name__)


async def start_listener(
    services: Services,
    open_connections: set[KafkaConnection],
    name: str,
    host: str,
    port: int,
    max_request_size: int,
    security: ListenerSecurity,
) -> asyncio.Server:
    """Listen on ``host:port`` (all interfaces when host is empty; port 0 picks a free one).

    Each accepted connection is kept in ``open_connections`` while it is open, so
    that the broker can close them all when it stops.
    """
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: KafkaConnection(services, open_connections, name, max_request_size, security),
        host or None,
        port,
        reuse_address=True,
        backlog=1024,
    )
    return server  # asyncio and uvloop both set TCP_NODELAY on accepted sockets


def bound_port(server: asyncio.Server) -> int:
    return server.sockets[0].getsockname()[1]
