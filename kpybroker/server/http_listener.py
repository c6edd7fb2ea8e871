"""The broker's HTTP listeners (the metrics endpoint, the web console), on its event loop.

Each is an aiohttp application bound to one ``http://host:port`` address, or
``https://host:port`` when its caller gives it a TLS context. They share the
event loop with the Kafka listeners, so what protects those from a slow or hostile HTTP
client is here: aiohttp parses requests without blocking, request lines and headers are
bounded, a connection that sends nothing is closed after ``IDLE_TIMEOUT_S``, and a request
whose handler takes longer than ``HANDLER_TIMEOUT_S`` is answered 503 instead of holding
its connection for ever.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

log = logging.getLogger(__name__)

#: Seconds a kept-alive connection may stay silent before it is closed.
IDLE_TIMEOUT_S = 15.0
#: Seconds a request handler may take; HTTP handlers here only read the broker's state.
HANDLER_TIMEOUT_S = 10.0
#: Bounds of a request line and of one header, in bytes (aiohttp's defaults are 8190).
MAX_LINE_BYTES = 8190
#: Bound of a request body; the HTTP surfaces take small forms at most.
MAX_BODY_BYTES = 64 * 1024


class HttpAddressError(ValueError):
    """An HTTP listener address that is not ``http://host:port`` (or ``https://``)."""


def parse_http_address(
    config_name: str, url: str, schemes: tuple[str, ...] = ("http",)
) -> tuple[str, int]:
    """``http://host:port`` -> (host, port). An empty host means every interface; port 0
    picks a free one (as for ``listeners``)."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError as exc:
        raise HttpAddressError(f"{config_name}: invalid port in {url!r}") from exc
    if parts.scheme.lower() not in schemes or port is None or parts.path not in ("", "/"):
        expected = " or ".join(f"{scheme}://host:port" for scheme in schemes)
        raise HttpAddressError(f"{config_name}: expected {expected}, got {url!r}")
    return parts.hostname or "", port


def is_https(url: str) -> bool:
    return urlsplit(url.strip()).scheme.lower() == "https"


@web.middleware
async def _bounded_handler(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await asyncio.wait_for(handler(request), HANDLER_TIMEOUT_S)
    except TimeoutError:
        log.warning("HTTP %s %s took over %.0f s; answered 503", request.method,
                    request.path, HANDLER_TIMEOUT_S)  # fmt: skip
        return web.Response(status=503, text="timed out\n")


def bounded_application() -> web.Application:
    """An aiohttp application with the bounds every broker HTTP surface keeps."""
    return web.Application(middlewares=[_bounded_handler], client_max_size=MAX_BODY_BYTES)


@dataclass
class HttpListener:
    """One started HTTP listener: where it is bound, and how to stop it."""

    name: str
    host: str
    port: int
    runner: web.AppRunner
    scheme: str = "http"

    @property
    def url(self) -> str:
        host = self.host or "0.0.0.0"
        return f"{self.scheme}://{f'[{host}]' if ':' in host else host}:{self.port}"

    async def close(self) -> None:
        await self.runner.cleanup()


async def start_http_listener(
    name: str, app: web.Application, url: str, tls: ssl.SSLContext | None = None
) -> HttpListener:
    """Serve ``app`` at ``url`` until the listener is closed: ``http://host:port``, or
    ``https://host:port`` with ``tls``.

    ``name`` is the config key that asked for it, for messages and the log.
    """
    host, port = parse_http_address(name, url, ("https",) if tls is not None else ("http",))
    runner = web.AppRunner(
        app,
        access_log=None,  # a scrape every few seconds is not worth a log line
        keepalive_timeout=IDLE_TIMEOUT_S,
        handle_signals=False,
        shutdown_timeout=1.0,
        max_line_size=MAX_LINE_BYTES,
        max_field_size=MAX_LINE_BYTES,
    )
    await runner.setup()
    site = web.TCPSite(runner, host or None, port, reuse_address=True, ssl_context=tls)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    bound = port
    server = site._server  # aiohttp keeps the asyncio server; its socket has the real port
    if server is not None and getattr(server, "sockets", None):
        bound = server.sockets[0].getsockname()[1]
    listener = HttpListener(name, host, bound, runner, "http" if tls is None else "https")
    log.info("%s: serving HTTP on %s", name, listener.url)
    return listener
