"""``metrics.listeners``: Prometheus scrapes the broker's metrics at ``/metrics``.

prometheus_client writes the exposition (OpenMetrics when the scraper's Accept header
asks for it, else the text format); the HTTP listener seam bounds what a slow or
hostile client can hold on the event loop.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from kpybroker.server.http_listener import HttpListener, bounded_application, start_http_listener

CONFIG = "metrics.listeners"
PATH = "/metrics"


async def start_metrics_listener(registry: CollectorRegistry, url: str) -> HttpListener:
    """Serve ``registry`` at ``url`` (``http://host:port``) + ``/metrics``."""
    app = bounded_application()
    app.router.add_get(PATH, make_aiohttp_handler(registry))
    return await start_http_listener(CONFIG, app, url)
