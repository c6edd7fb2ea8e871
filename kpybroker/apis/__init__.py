"""One module per API family; importing this package registers every handler.

API key -> module: 0 produce, 1 fetch, 2 list_offsets, 3 metadata,
18 api_versions, 19/20 topics, 22 init_producer_id, 23 offset_for_leader_epoch,
32/33/44 configs, 74 list_config_resources, 35 log_dirs, 37 partitions,
43 elect_leaders, 45/46 reassignments, 60/75 cluster_info,
61 producers, 8/9/47 offsets, 10 find_coordinator, 11/12/13/14 groups,
15/16/42 group_admin, 21 delete_records. docs/apis.md lists them all with their versions.
"""

from kpybroker.apis import (  # noqa: F401
    api_versions,
    cluster_info,
    configs,
    delete_records,
    elect_leaders,
    fetch,
    find_coordinator,
    group_admin,
    groups,
    init_producer_id,
    list_config_resources,
    list_offsets,
    log_dirs,
    metadata,
    offset_for_leader_epoch,
    offsets,
    partitions,
    produce,
    producers,
    reassignments,
    topics,
)
from kpybroker.apis.registry import REGISTRY

__all__ = ["REGISTRY"]
