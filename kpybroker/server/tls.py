"""TLS on a listener's connections, with handshake failures logged as Kafka logs them.

asyncio and uvloop run TLS in a protocol of their own (``SSLProtocol``, the
same constructor in both) wrapped around the application's, and say nothing
when a handshake fails. The listener therefore makes that protocol itself,
with a waiter that hears how the handshake ended: a failure is logged once,
with the client's address (Kafka: "Failed authentication with ... (SSL
handshake failed)"), unless the peer just closed or reset the connection, which
Kafka counts as a disconnection; after a success the connection sees only clear text.
Doing it from the first byte (rather than upgrading a plain connection with
``start_tls``) matters: uvloop starts reading a new connection right after
``connection_made``, so a plain protocol would read the ClientHello itself.

A failed handshake also owes the client OpenSSL's alert (say, "certificate
required"), which tells it why; both loops drop the connection without sending
it. So the TLS protocol is given the socket's transport behind a thin wrapper
whose forced close first sends what OpenSSL left to send, then closes.

Kernel TLS is out of reach here: Python 3.11's ``ssl`` cannot hand a session
to the kernel (``OP_ENABLE_KTLS`` arrives in 3.12), both event loops encrypt
in memory (``MemoryBIO``), and this machine's kernel has no ``tls`` module.
So responses are encrypted in the process and file ranges are copied, never
sent with sendfile.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import logging
import ssl
from typing import Any, Protocol

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
    uvloop = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

#: How long a client may take over its handshake (asyncio's default).
TLS_HANDSHAKE_TIMEOUT_S = 60.0


class TlsClientConnection(Protocol):
    """What the TLS layer tells the connection it carries: the client's address, known
    before the handshake ends (``connection_made`` comes only after it)."""

    peer: str


class AlertKeepingSSLObject(ssl.SSLObject):
    """An ``SSLObject`` that keeps its outgoing buffer, where a failed handshake's alert
    waits. ``created`` is the last one made: the event loop makes one per connection, in
    the TLS protocol's ``connection_made``, which reads it at once."""

    created: AlertKeepingSSLObject | None = None
    outgoing: ssl.MemoryBIO

    @classmethod
    def _create(
        cls, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, *args: Any, **kwargs: Any
    ) -> AlertKeepingSSLObject:
        made = super()._create(incoming, outgoing, *args, **kwargs)  # type: ignore[misc]
        made.outgoing = outgoing
        AlertKeepingSSLObject.created = made
        return made


class _AlertFlushingTransport:
    """The socket's transport, as the TLS protocol sees it: a forced close (a failed
    handshake) sends what the TLS layer has not sent yet, the alert, then closes."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self.tls_object: AlertKeepingSSLObject | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def write(self, data: Any) -> None:
        self._transport.write(data)

    def _force_close(self, exc: BaseException | None) -> None:
        unsent = self.tls_object.outgoing.read() if self.tls_object is not None else b""
        if unsent and not self._transport.is_closing():
            self._transport.write(unsent)
            self._transport.close()  # after the alert is written
        else:
            self._transport.abort()


def _peer(transport: asyncio.BaseTransport) -> str:
    address = transport.get_extra_info("peername")
    return f"{address[0]}:{address[1]}" if address else "?"


def _tls_protocol_class(base: type) -> type:
    class TlsServerProtocol(base):  # type: ignore[misc, valid-type]
        """The loop's TLS protocol, telling the connection its client's address first."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.peer = _peer(transport)
            wrapped = _AlertFlushingTransport(transport)  # type: ignore[arg-type]
            super().connection_made(wrapped)
            wrapped.tls_object = AlertKeepingSSLObject.created

    return TlsServerProtocol


_ASYNCIO_TLS = _tls_protocol_class(asyncio.sslproto.SSLProtocol)
_UVLOOP_TLS = _tls_protocol_class(uvloop.loop.SSLProtocol) if uvloop is not None else None


def tls_server_protocol(connection: Any, context: ssl.SSLContext) -> asyncio.BaseProtocol:
    """The protocol to hand the event loop for a new TLS connection carrying ``connection``."""
    context.sslobject_class = AlertKeepingSSLObject
    loop = asyncio.get_running_loop()
    is_uvloop = uvloop is not None and isinstance(loop, uvloop.Loop)
    tls_class = _UVLOOP_TLS if is_uvloop else _ASYNCIO_TLS
    waiter = loop.create_future()
    protocol = tls_class(
        loop,
        connection,
        context,
        waiter,
        True,
        None,
        ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S,
    )

    def handshake_done(done: asyncio.Future[None]) -> None:
        if done.cancelled() or done.exception() is None:
            return
        peer = getattr(protocol, "peer", "?")
        exc = done.exception()
        if isinstance(exc, ConnectionError):
            # Closed or reset by the peer mid-handshake (a client or broker that went away):
            # Kafka's EOFException, a disconnection logged at DEBUG, not a failed login.
            log.debug("Connection with %s disconnected during the TLS handshake (%r)", peer, exc)
            return
        log.info("Failed authentication with %s (SSL handshake failed: %s)", peer, exc)

    waiter.add_done_callback(handshake_done)
    return protocol
