"""Authorization questions that several request handlers ask alike, each in one place.

Kafka's request handlers ask the authorizer directly (``AuthHelper``); the
checks here are the ones repeated across APIs, named for what they grant.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.security.acls.model import AclOperation, ResourceType


def may_write_transaction(ctx: RequestContext, transactional_id: str) -> bool:
    """WRITE on the transactional id: what every request of a transactional producer needs
    (InitProducerId, AddPartitionsToTxn v0-3, AddOffsetsToTxn, TxnOffsetCommit, EndTxn)."""
    return ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def may_read_group(ctx: RequestContext, group_id: str) -> bool:
    """READ on the group: what a member needs to join, stay in and leave a group and to
    commit its offsets, alone or in a transaction."""
    return ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id)
