"""Asking the broker's own Kafka API handlers, in process, as an admin client would.

The console reads and changes the broker only through the handlers that answer
DescribeCluster, Metadata, ListOffsets, DescribeLogDirs, ListGroups, DescribeGroups,
ConsumerGroupDescribe, ShareGroupDescribe, OffsetFetch, DescribeShareGroupOffsets,
CreateTopics, DeleteTopics and DeleteGroups: the same code paths, validation and
authorization, with no second way into the services to keep in step with them.
Requests act as ``User:ANONYMOUS`` from the loopback address until the console
has authentication of its own, on the broker's first listener (whose addresses
DescribeCluster and Metadata give). Each answer goes through its codec and back, so
the console reads exactly what a client would decode (handlers may answer with parts
already encoded, as Metadata does from its cache).
"""

from __future__ import annotations

from typing import Any, Protocol

from kpybroker.apis.support.context import RequestContext, Services
from kpybroker.apis.support.registry import REGISTRY, ApiSpec

CLIENT_ID = "kpybroker-console"


class KafkaCalls(Protocol):
    """Answers one Kafka request at one version, as the broker would on a connection."""

    async def call(self, request: Any, version: int) -> Any: ...


class InProcessKafka:
    """:class:`KafkaCalls` through the registered handlers, with the broker's services."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.listener = services.config().listeners()[0].name
        self.specs: dict[type, ApiSpec] = {spec.request_class: spec for spec in REGISTRY.values()}

    async def call(self, request: Any, version: int) -> Any:
        spec = self.specs[type(request)]
        if not spec.accepts(version):
            raise ValueError(f"{spec.name} v{version} is not served")
        ctx = RequestContext(
            services=self.services,
            api_version=version,
            correlation_id=0,
            client_id=CLIENT_ID,
            client_host="127.0.0.1",
            listener=self.listener,
            api_name=spec.name,
        )
        answer = await spec.handler(ctx, request)
        decoded, _ = spec.response_class.decode(answer.encode_bytes(version), 0, version)
        return decoded
