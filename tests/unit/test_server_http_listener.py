"""The HTTP listener seam: addresses, bounds, and a real socket."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import ClientSession, web

from kpybroker.server import http_listener
from kpybroker.server.http_listener import (
    HttpAddressError,
    bounded_application,
    is_https,
    parse_http_address,
    start_http_listener,
)


def test_addresses_are_http_host_port() -> None:
    assert parse_http_address("metrics.listeners", "http://127.0.0.1:9404") == ("127.0.0.1", 9404)
    assert parse_http_address("metrics.listeners", "http://:0") == ("", 0)
    assert parse_http_address("x", "HTTP://[::1]:80/") == ("::1", 80)
    for bad in ("127.0.0.1:9404", "https://h:1", "http://h", "http://h:1/metrics", "http://h:x"):
        with pytest.raises(HttpAddressError, match=r"^x: "):
            parse_http_address("x", bad)
    assert parse_http_address("x", "https://h:1", ("https",)) == ("h", 1)
    with pytest.raises(HttpAddressError, match="expected https://host:port"):
        parse_http_address("x", "http://h:1", ("https",))
    assert is_https(" HTTPS://h:1") and not is_https("http://h:1")


def test_a_listener_serves_on_a_free_port_and_a_slow_handler_gets_503(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_listener, "HANDLER_TIMEOUT_S", 0.2)

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    async def stuck(request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.Response(text="never")

    async def scenario() -> None:
        app = bounded_application()
        app.router.add_get("/", hello)
        app.router.add_get("/stuck", stuck)
        listener = await start_http_listener("test.listeners", app, "http://127.0.0.1:0")
        try:
            assert listener.port > 0
            async with ClientSession() as session:
                async with session.get(f"{listener.url}/") as response:
                    assert (response.status, await response.text()) == (200, "hello")
                async with session.get(f"{listener.url}/stuck") as response:
                    assert response.status == 503
        finally:
            await listener.close()

    asyncio.run(scenario())
