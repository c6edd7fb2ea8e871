"""Open a server socket for each configured listener."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kpybroker.server.connection import KafkaConnection

log = logging.getLogger(__name__)


async def start_listener(
    broker: Any, name: str, host: str, port: int, max_request_size: int
) -> asyncio.Server:
    """Listen on ``host:port`` (all interfaces when host is empty; port 0 picks a free one)."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: KafkaConnection(broker, name, max_request_size),
        host or None,
        port,
        reuse_address=True,
        backlog=1024,
    )
    return server  # asyncio and uvloop both set TCP_NODELAY on accepted sockets


def bound_port(server: asyncio.Server) -> int:
    return server.sockets[0].getsockname()[1]
