"""Which optional protocols the broker's config turns on, asked by their handlers and by
ApiVersions (which advertises their APIs only while they are on).

Here rather than in the handler modules so that answering ApiVersions, the first
request of every connection, imports none of those handlers.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext

CONSUMER_PROTOCOL = "consumer"
REBALANCE_PROTOCOLS = "group.coordinator.rebalance.protocols"
SHARE_VERSION = "share.version"
SHARE_GROUP_ENABLE = "group.share.enable"
#: The levels of ``share.version`` this broker implements (1: KIP-932's share groups).
SHARE_VERSION_LEVELS = (0, 1)


def consumer_protocol_enabled(ctx: RequestContext) -> bool:
    """KIP-848's consumer group protocol: ``consumer`` is among the rebalance protocols."""
    return CONSUMER_PROTOCOL in ctx.services.config().get(REBALANCE_PROTOCOLS, ())


def share_version(ctx: RequestContext) -> int:
    """The finalized level of the ``share.version`` feature."""
    return int(ctx.services.config().get(SHARE_VERSION) or 0)


def share_groups_enabled(ctx: RequestContext) -> bool:
    """Kafka's ``isShareGroupProtocolEnabled``."""
    return bool(ctx.services.config().get(SHARE_GROUP_ENABLE)) or share_version(ctx) >= 1
