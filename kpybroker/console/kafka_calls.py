"""Asking the broker's own Kafka API handlers, in process, as an admin client would.

The console reads and changes the broker only through the handlers that answer
DescribeCluster, Metadata, ListOffsets, DescribeLogDirs, ListGroups, DescribeGroups,
ConsumerGroupDescribe, ShareGroupDescribe, OffsetFetch, DescribeShareGroupOffsets,
CreateTopics, DeleteTopics and DeleteGroups: the same code paths, validation and
authorization, with no second way into the services to keep in step with them.
Each HTTP request's calls act as its user (``User:<name>`` once the console has
authenticated it, ``User:ANONYMOUS`` otherwise) from the HTTP client's address, so
ACLs decide as for a Kafka client; they arrive on the broker's first listener (whose
addresses DescribeCluster and Metadata give). Each answer goes through its codec and back, so
the console reads exactly what a client would decode (handlers may answer with parts
already encoded, as Metadata does from its cache).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Protocol

from kpybroker.apis import all_apis
from kpybroker.apis.support.context import RequestContext, Services
from kpybroker.apis.support.registry import ApiSpec
from kpybroker.security.principal import ANONYMOUS, KafkaPrincipal

CLIENT_ID = "kpybroker-console"


class KafkaCalls(Protocol):
    """Answers one Kafka request at one version, as the broker would on a connection."""

    async def call(self, request: Any, version: int) -> Any: ...


#: The calls of one principal from one address (``host``): who an HTTP request acts as.
KafkaCallsAs = Callable[[KafkaPrincipal, str], KafkaCalls]


@functools.cache
def _specs() -> dict[type, ApiSpec]:
    return {spec.request_class: spec for spec in all_apis().values()}


class InProcessKafka:
    """:class:`KafkaCalls` through the registered handlers, with the broker's services,
    as ``principal`` from ``client_host``."""

    def __init__(
        self,
        services: Services,
        principal: KafkaPrincipal = ANONYMOUS,
        client_host: str = "127.0.0.1",
    ) -> None:
        self.services = services
        self.principal = principal
        self.client_host = client_host
        self.listener = services.config().listeners()[0].name

    def acting_as(self, principal: KafkaPrincipal, client_host: str) -> InProcessKafka:
        return InProcessKafka(self.services, principal, client_host)

    def without_acls(self) -> InProcessKafka:
        """The broker looking at itself, as its metrics do: no ACL is asked. For the
        throughput sampler only, whose figures are filtered by each viewer's own calls."""
        return InProcessKafka(dataclasses.replace(self.services, authorizer=None))

    async def call(self, request: Any, version: int) -> Any:
        spec = _specs()[type(request)]
        if not spec.accepts(version):
            raise ValueError(f"{spec.name} v{version} is not served")
        ctx = RequestContext(
            services=self.services,
            api_version=version,
            correlation_id=0,
            client_id=CLIENT_ID,
            client_host=self.client_host,
            listener=self.listener,
            principal=self.principal,
            api_name=spec.name,
        )
        answer = await spec.handler(ctx, request)
        decoded, _ = spec.response_class.decode(answer.encode_bytes(version), 0, version)
        return decoded
