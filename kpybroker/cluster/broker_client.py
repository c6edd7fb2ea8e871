"""A minimal Kafka client connection, for the requests one broker sends another.

One request at a time, as the replica fetcher needs: it sends a Fetch,
waits for the answer, appends, and sends the next. Frames are built and read
with ``kpybroker.protocol.framing``, the same code the server uses, so the
inter-broker traffic is ordinary Kafka protocol that any broker understands.

The connection speaks the inter-broker listener's security protocol
(``security.client_security``): TLS, then SASL (handshake v1 and
SaslAuthenticate v1, as a client of a Kafka 2.x or later broker). When the
peer gives the session a lifetime (KIP-368), the connection is made again
before the lifetime is over rather than re-authenticated in place: a broker's
peer connections carry one request at a time, so that costs a handshake and
nothing else.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any, NamedTuple

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.framing import decode_response, encode_request
from kpybroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kpybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kpybroker.security.client_security import PLAINTEXT_CLIENT, ClientSecurity
from kpybroker.security.sasl.mechanism import SaslAuthenticationError

_SIZE = struct.Struct(">i")
#: A session is renewed once this share of its lifetime is gone (Kafka's clients: 85-95%).
_SESSION_RENEWAL_SHARE = 0.85


class PeerAddress(NamedTuple):
    """Where and how this broker reaches a peer: its inter-broker endpoint and security."""

    host: str
    port: int
    security: ClientSecurity = PLAINTEXT_CLIENT


Locator = Callable[[int], PeerAddress | None]
"""Where to reach a broker by id (None: not registered); ``ReplicaManager.inter_broker_address``."""


class BrokerConnectionError(ConnectionError):
    """The connection failed or answered out of turn; the caller reconnects."""


class BrokerConnection:
    """A connection to one broker; ``await request(...)`` sends and returns the answer."""

    def __init__(self, address: PeerAddress, client_id: str, timeout_s: float) -> None:
        self.host = address.host
        self.port = address.port
        self.security = address.security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)
        #: ``time.monotonic()`` after which the SASL session should be renewed.
        self.renew_at: float | None = None

    async def connect(self) -> None:
        async with asyncio.timeout(self.timeout_s):
            self._reader, self._writer = await asyncio.open_connection(
                self.host,
                self.port,
                ssl=self.security.tls,
                server_hostname=self.host if self.security.tls is not None else None,
            )
            if self.security.new_sasl_client is not None:
                await self._authenticate()

    @property
    def stale(self) -> bool:
        """The SASL session is near the end of its lifetime: connect again."""
        return self.renew_at is not None and time.monotonic() >= self.renew_at

    async def _authenticate(self) -> None:
        """SaslHandshake v1, then SaslAuthenticate v1 until the mechanism is done."""
        assert self.security.new_sasl_client is not None
        client = self.security.new_sasl_client()
        handshake = await self.request(SaslHandshakeRequest(mechanism=client.mechanism), 1)
        if handshake.error_code != ErrorCode.NONE:
            raise BrokerConnectionError(
                f"{self.host}:{self.port} refused SASL mechanism {client.mechanism}: "
                f"{ErrorCode(handshake.error_code).name}, it offers {handshake.mechanisms}"
            )
        token = client.initial_response()
        started = time.monotonic()
        while True:
            answer = await self.request(SaslAuthenticateRequest(auth_bytes=token), 1)
            if answer.error_code != ErrorCode.NONE:
                raise BrokerConnectionError(
                    f"authentication with {self.host}:{self.port} failed: {answer.error_message}"
                )
            try:
                token = client.evaluate(answer.auth_bytes) if not client.is_complete else b""
            except SaslAuthenticationError as exc:
                raise BrokerConnectionError(f"{self.host}:{self.port}: {exc}") from exc
            if client.is_complete:
                if answer.session_lifetime_ms > 0:
                    lifetime = answer.session_lifetime_ms / 1000 * _SESSION_RENEWAL_SHARE
                    self.renew_at = started + lifetime
                return

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
        locate: Locator,
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
            connection = self._connections.get(broker)
            if connection is not None and connection.stale:
                self._drop(broker)
                connection = None
            try:
                if connection is None:
                    address = self.locate(broker)
                    if address is None:
                        raise BrokerConnectionError(f"broker {broker} is not registered")
                    connection = BrokerConnection(address, self.client_id, self.timeout_s)
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
