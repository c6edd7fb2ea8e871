"""The table of implemented APIs, filled in by the handler modules as they are imported.

Each handler module declares, beside its handler, the versions it implements
with ``@api(...)``. A handler module is imported at the first request of its
API, so that a start loads none it does not need; ApiVersions answers from
``api_index.API_INDEX`` instead, an :class:`IndexedApi` per API that
``scripts/gen_docs.py`` writes from this table (and checks, with every handler
imported), so what is advertised cannot drift from what is implemented.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

from kpybroker.apis.support.context import RequestContext

Handler = Callable[[RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    advertised_min: int
    request_class: type
    response_class: type
    handler: Handler

    def accepts(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class IndexedApi(NamedTuple):
    """What ApiVersions advertises of an API and where its handler is, known without
    importing the handler."""

    name: str
    module: str
    min_version: int
    max_version: int
    advertised_min: int


#: The APIs whose handler module has been imported, by key.
REGISTRY: dict[int, ApiSpec] = {}


class CloseConnection(Exception):
    """The request is one Kafka answers by closing the connection."""


def api(
    schema: ModuleType, min_version: int, max_version: int, *, advertised_min: int | None = None
) -> Callable[[Handler], Handler]:
    """Register ``handler`` for the API described by the generated ``schema`` module.

    ``advertised_min`` lets ApiVersions report a lower minimum than is handled,
    as Kafka 4 does for Produce (it advertises 0 but rejects 0-2) so that old
    librdkafka builds still compress.
    """
    low, high = schema.VERSIONS
    if not low <= min_version <= max_version <= high:
        raise ValueError(f"{schema.NAME} {min_version}-{max_version} outside schema {low}-{high}")

    def register(handler: Handler) -> Handler:
        if schema.API_KEY in REGISTRY:
            raise ValueError(f"{schema.NAME} registered twice")
        REGISTRY[schema.API_KEY] = ApiSpec(
            key=schema.API_KEY,
            name=schema.NAME,
            min_version=min_version,
            max_version=max_version,
            advertised_min=min_version if advertised_min is None else advertised_min,
            request_class=getattr(schema, schema.NAME + "Request"),
            response_class=getattr(schema, schema.NAME + "Response"),
            handler=handler,
        )
        return handler

    return register
