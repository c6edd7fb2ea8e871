"""What Produce and Fetch tell a client that asked the wrong broker (KIP-951).

Besides NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH), newer clients read
the current leader and its epoch from the partition's answer
(``ReplicaManager.leader_hint``), and the leader's address from the
response's node endpoints, and go there without waiting for a Metadata refresh.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from kpybroker.apis.support.context import RequestContext
from kpybroker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kpybroker.cluster.view import BrokerAddress

#: The errors whose answers carry the current leader.
HINTED_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def leader_endpoints(ctx: RequestContext, leaders: Collection[int]) -> list[BrokerAddress]:
    """The addresses of ``leaders`` on the listener the request came in on."""
    return [a for a in ctx.services.cluster.live_brokers(ctx.listener) if a.broker_id in leaders]
