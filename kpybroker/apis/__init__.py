"""One module per API family; importing this package registers every handler.

API key -> module: 0 produce, 1 fetch, 2 list_offsets, 3 metadata,
18 api_versions, 19/20 topics, 22 init_producer_id, 23 offset_for_leader_epoch.
"""

from kpybroker.apis import (  # noqa: F401
    api_versions,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
    topics,
)
from kpybroker.apis.registry import REGISTRY

__all__ = ["REGISTRY"]
