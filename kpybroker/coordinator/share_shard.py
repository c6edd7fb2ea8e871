"""A shard's share group events, for the service to feed (the shard's ``share`` attribute).

A group ID names one group of one kind. Kafka does not convert share groups to or
from the other kinds: a share group request for a classic or consumer group's ID
is answered GROUP_ID_NOT_FOUND ("Group X is not a share group."), whatever state
that group is in (even an empty classic group that only holds committed
offsets). The shard answers the other kinds' requests for a share group's ID
(see ``shard``); this class answers the share group requests, each event
returning ``Effects`` as the shard's do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.interface import (
    Caller,
    Effects,
    GroupConfigs,
    Token,
    TopicsImage,
    no_group_configs,
)
from kpybroker.coordinator.share_group_admin import (
    AlterResult,
    DeleteOffsetsPlan,
    ShareGroupAdmin,
    alter_error,
)
from kpybroker.coordinator.share_group_protocol import (
    ShareGroups,
    ShareHeartbeatResult,
    heartbeat_error,
    not_a_share_group,
)
from kpybroker.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequestTopic,
)
from kpybroker.protocol.messages.share_group_describe import DescribedShareGroup
from kpybroker.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest


class ShareEvents:
    """The share groups of one shard and the events that reach them."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        clock: Callable[[], int],
        topics: TopicsImage,
        group_configs: GroupConfigs = no_group_configs,
        other_kind: Callable[[str], bool] = lambda group_id: False,
    ) -> None:
        self.groups = ShareGroups(settings, clock, topics, group_configs)
        self.admin = ShareGroupAdmin(self.groups)
        #: Whether a classic or consumer group holds the ID.
        self.other_kind = other_kind

    def heartbeat(
        self, token: Token, caller: Caller, request: ShareGroupHeartbeatRequest
    ) -> Effects:
        out = Effects()
        if self.other_kind(request.group_id):
            error = not_a_share_group(request.group_id)
            out.reply(token, ShareHeartbeatResult(heartbeat_error(error.code, error.message)))
        else:
            self.groups.heartbeat(out, token, caller, request)
        return out

    def describe(self, group_id: str) -> DescribedShareGroup:
        if self.other_kind(group_id):
            error = not_a_share_group(group_id)
            return DescribedShareGroup(
                group_id=group_id, error_code=error.code, error_message=error.message
            )
        return self.groups.describe(group_id)

    # -- share-state initialization ---------------------------------------------------

    def initialized(
        self, token: Token, group_id: str, partitions: Mapping[bytes, frozenset[int]]
    ) -> Effects:
        out = Effects()
        self.admin.initialized(out, token, group_id, partitions)
        return out

    def uninitialized(
        self, token: Token, group_id: str, partitions: Mapping[bytes, frozenset[int]]
    ) -> Effects:
        out = Effects()
        self.admin.uninitialized(out, token, group_id, partitions)
        return out

    def initialized_partitions(self, group_id: str) -> dict[bytes, frozenset[int]]:
        return self.admin.initialized_partitions(group_id)

    # -- the offset admin APIs and DeleteGroups -------------------------------------------

    def alter_offsets(
        self, token: Token, group_id: str, topics: Iterable[AlterShareGroupOffsetsRequestTopic]
    ) -> Effects:
        out = Effects()
        if self.other_kind(group_id):
            out.reply(token, AlterResult(alter_error(not_a_share_group(group_id))))
        else:
            self.admin.alter_offsets(out, token, group_id, topics)
        return out

    def initiate_delete_offsets(
        self, token: Token, group_id: str, topic_names: Iterable[str]
    ) -> Effects:
        out = Effects()
        if self.other_kind(group_id):
            error = not_a_share_group(group_id)
            out.reply(token, DeleteOffsetsPlan(error.code, error.message))
        else:
            self.admin.initiate_delete_offsets(out, token, group_id, topic_names)
        return out

    def complete_delete_offsets(
        self, token: Token, group_id: str, deleted: Iterable[bytes]
    ) -> Effects:
        out = Effects()
        self.admin.complete_delete_offsets(out, token, group_id, deleted)
        return out

    def delete_groups_plan(self, token: Token, group_ids: Iterable[str]) -> Effects:
        out = Effects()
        self.admin.delete_groups_plan(out, token, group_ids)
        return out
