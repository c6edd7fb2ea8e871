"""A minimal Kafka client connection, for the requests one broker sends another.

One request at a time, as the replica fetcher needs: it sends a Fetch,
waits for the answer, appends, and sends the next. Frames are built and read
with ``kpybroker.protocol.framing``, the same code the server uses, so the
inter-broker traffic is ordinary Kafka protocol that any broker understands.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kpybroker.protocol.framing import decode_response, encode_request

_SIZE = struct.Struct(">i")


class BrokerConnectionError(ConnectionError):
    """The connection failed or answered out of turn; the caller reconnects."""


class BrokerConnection:
    """A connection to one broker; ``await request(...)`` sends and returns the answer."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)

    async def connect(self) -> None:
        async with asyncio.timeout(self.timeout_s):
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    async def request(self, request: Any, api_version: int, timeout_s: float | None = None) -> Any:
        """Send ``request`` and return the decoded response.

        ``timeout_s`` bounds the whole exchange (default: the connection's
        timeout); a timeout raises ``TimeoutError`` and leaves the connection
        unusable, since its answer may still arrive.
        """
        if self._reader is None or self._writer is None:
            raise BrokerConnectionError(f"not connected to {self.host}:{self.port}")
        correlation_id = next(self._correlation)
        frame = encode_request(request, api_version, correlation_id, self.client_id)
        try:
            async with asyncio.timeout(self.timeout_s if timeout_s is None else timeout_s):
                self._writer.write(frame)
                await self._writer.drain()
                (size,) = _SIZE.unpack(await self._reader.readexactly(_SIZE.size))
                body = await self._reader.readexactly(size)
        except asyncio.IncompleteReadError as exc:
            raise BrokerConnectionError(f"{self.host}:{self.port} closed the connection") from exc
        answered, response = decode_response(body, request, api_version)
        if answered != correlation_id:
            raise BrokerConnectionError(
                f"{self.host}:{self.port} answered correlation id {answered}, not {correlation_id}"
            )
        return response

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


class BrokerConnections:
    """One connection per peer broker, each carrying one request at a time.

    For the request-and-answer traffic a broker sends its peers now and then
    (transaction markers, partition verification): ``request`` connects on
    first use; a failed exchange drops the connection, and the next request
    reconnects.
    """

    def __init__(
        self,
        locate: Callable[[int], tuple[str, int] | None],
        client_id: str,
        timeout_s: float,
    ) -> None:
        self.locate = locate
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._connections: dict[int, BrokerConnection] = {}
        self._in_use: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def request(self, broker: int, request: Any, api_version: int) -> Any:
        """Send ``request`` to ``broker``; raises what ``BrokerConnection`` raises."""
        async with self._in_use[broker]:
            try:
                connection = self._connections.get(broker)
                if connection is None:
                    address = self.locate(broker)
                    if address is None:
                        raise BrokerConnectionError(f"broker {broker} is not registered")
                    connection = BrokerConnection(*address, self.client_id, self.timeout_s)
                    await connection.connect()
                    self._connections[broker] = connection
                return await connection.request(request, api_version)
            except BaseException:
                self._drop(broker)
                raise

    def _drop(self, broker: int) -> None:
        connection = self._connections.pop(broker, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
