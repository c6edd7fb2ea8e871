"""TLS on a listener's connections, with handshake failures logged as Kafka logs them.

asyncio and uvloop run TLS in a protocol of their own (``SSLProtocol``, the
same constructor in both) wrapped around the application's, and say nothing
when a handshake fails. The listener therefore makes that protocol itself,
with a waiter that hears how the handshake ended: a failure is logged once,
with the client's address (Kafka: "Failed authentication with ... (SSL
handshake failed)"); after a success the connection sees only clear text.
Doing it from the first byte (rather than upgrading a plain connection with
``start_tls``) matters: uvloop starts reading a new connection right after
``connection_made``, so a plain protocol would read the ClientHello itself.

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


def _peer(transport: asyncio.BaseTransport) -> str:
    address = transport.get_extra_info("peername")
    return f"{address[0]}:{address[1]}" if address else "?"


def _tls_protocol_class(base: type) -> type:
    class TlsServerProtocol(base):  # type: ignore[misc, valid-type]
        """The loop's TLS protocol, telling the connection its client's address first."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.peer = _peer(transport)
            super().connection_made(transport)

    return TlsServerProtocol


_ASYNCIO_TLS = _tls_protocol_class(asyncio.sslproto.SSLProtocol)
_UVLOOP_TLS = _tls_protocol_class(uvloop.loop.SSLProtocol) if uvloop is not None else None


def tls_server_protocol(connection: Any, context: ssl.SSLContext) -> asyncio.BaseProtocol:
    """The protocol to hand the event loop for a new TLS connection carrying ``connection``."""
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
        log.info("Failed authentication with %s (SSL handshake failed: %s)", peer, done.exception())

    waiter.add_done_callback(handshake_done)
    return protocol
