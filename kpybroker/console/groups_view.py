"""The console's view of groups (classic, consumer and share), as JSON-ready dicts.

Groups are listed with ListGroups, described with DescribeGroups (classic),
ConsumerGroupDescribe (KIP-848) or ShareGroupDescribe (KIP-932) as their type asks, and
their offsets read as ``kafka-consumer-groups --describe`` reads them: committed
offsets from OffsetFetch, lag against the latest offset from ListOffsets; a share
group's start offsets and lag from DescribeShareGroupOffsets. These are the groups
this broker coordinates.
"""

from __future__ import annotations

import struct
from typing import Any

from kpybroker.console.cluster_view import LATEST, error_name, list_offsets
from kpybroker.console.kafka_calls import KafkaCalls
from kpybroker.coordinator.consumer_group_migration import decode_assignment
from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kpybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from kpybroker.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kpybroker.protocol.messages.list_groups import ListGroupsRequest
from kpybroker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from kpybroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest

LIST_GROUPS_VERSION = 5
DESCRIBE_GROUPS_VERSION = 5
CONSUMER_GROUP_DESCRIBE_VERSION = 0
SHARE_GROUP_DESCRIBE_VERSION = 1
OFFSET_FETCH_VERSION = 9
DESCRIBE_SHARE_OFFSETS_VERSION = 1
CONSUMER_PROTOCOL = "consumer"
CLASSIC, CONSUMER, SHARE = "classic", "consumer", "share"


async def list_groups(kafka: KafkaCalls) -> list[dict[str, Any]]:
    """Every group with its type, state, members and total lag."""
    answer = await kafka.call(ListGroupsRequest(), LIST_GROUPS_VERSION)
    groups = []
    for listed in sorted(answer.groups, key=lambda g: g.group_id):
        described = await describe_group(kafka, listed.group_id, listed.group_type)
        groups.append(
            {key: described[key] for key in ("group_id", "type", "state", "error")}
            | {"members": len(described["members"]), "lag": described["lag"]}
        )
    return groups


async def group_type(kafka: KafkaCalls, group_id: str) -> str | None:
    answer = await kafka.call(ListGroupsRequest(), LIST_GROUPS_VERSION)
    return next((g.group_type for g in answer.groups if g.group_id == group_id), None)


async def describe_group(kafka: KafkaCalls, group_id: str, kind: str) -> dict[str, Any]:
    """One group: its state, members with their assignments, offsets and lag."""
    if kind == SHARE:
        group = await _share_group(kafka, group_id)
        offsets = await _share_offsets(kafka, group_id)
    else:
        group = await (_consumer_group if kind == CONSUMER else _classic_group)(kafka, group_id)
        offsets = await _committed_offsets(kafka, group_id)
    lags = [o["lag"] for o in offsets if o["lag"] is not None]
    return {
        "group_id": group_id,
        "type": kind,
        **group,
        "offsets": offsets,
        "lag": sum(lags) if lags else None,
    }


async def _classic_group(kafka: KafkaCalls, group_id: str) -> dict[str, Any]:
    answer = await kafka.call(DescribeGroupsRequest(groups=[group_id]), DESCRIBE_GROUPS_VERSION)
    (group,) = answer.groups
    consumer = group.protocol_type == CONSUMER_PROTOCOL
    return {
        "state": group.group_state,
        "error": error_name(group.error_code),
        "protocol": group.protocol_data,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assignment": _decoded(m.member_assignment) if consumer else {},
            }
            for m in group.members
        ],
    }


def _decoded(assignment: bytes) -> dict[str, list[int]]:
    """A classic consumer's assignment (ConsumerProtocol); a malformed one shows as none."""
    try:
        return decode_assignment(assignment)
    except (DecodeError, struct.error, ValueError, IndexError):
        return {}


def _described_partitions(topic_partitions: list[Any]) -> dict[str, list[int]]:
    return {tp.topic_name: sorted(tp.partitions) for tp in topic_partitions}


async def _consumer_group(kafka: KafkaCalls, group_id: str) -> dict[str, Any]:
    request = ConsumerGroupDescribeRequest(group_ids=[group_id])
    (group,) = (await kafka.call(request, CONSUMER_GROUP_DESCRIBE_VERSION)).groups
    return _described_group(group)


async def _share_group(kafka: KafkaCalls, group_id: str) -> dict[str, Any]:
    request = ShareGroupDescribeRequest(group_ids=[group_id])
    (group,) = (await kafka.call(request, SHARE_GROUP_DESCRIBE_VERSION)).groups
    return _described_group(group)


def _described_group(group: Any) -> dict[str, Any]:
    """A ConsumerGroupDescribe or ShareGroupDescribe group (share members have no
    instance id)."""
    return {
        "state": group.group_state,
        "error": error_name(group.error_code),
        "protocol": group.assignor_name,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": getattr(m, "instance_id", None),
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assignment": _described_partitions(m.assignment.topic_partitions),
            }
            for m in group.members
        ],
    }


async def _committed_offsets(kafka: KafkaCalls, group_id: str) -> list[dict[str, Any]]:
    request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group_id, topics=None)])
    (group,) = (await kafka.call(request, OFFSET_FETCH_VERSION)).groups
    committed = {
        (t.name, p.partition_index): p.committed_offset
        for t in group.topics
        for p in t.partitions
        if p.error_code == 0 and p.committed_offset >= 0
    }
    wanted: dict[str, list[int]] = {}
    for topic, index in committed:
        wanted.setdefault(topic, []).append(index)
    ends = await list_offsets(kafka, wanted, LATEST)
    return [
        {
            "topic": topic,
            "partition": index,
            "committed": offset,
            "end_offset": ends.get((topic, index)),
            "lag": None if (topic, index) not in ends else max(ends[topic, index] - offset, 0),
        }
        for (topic, index), offset in sorted(committed.items())
    ]


async def _share_offsets(kafka: KafkaCalls, group_id: str) -> list[dict[str, Any]]:
    request = DescribeShareGroupOffsetsRequest(
        groups=[DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]
    )
    (group,) = (await kafka.call(request, DESCRIBE_SHARE_OFFSETS_VERSION)).groups
    return [
        {
            "topic": t.topic_name,
            "partition": p.partition_index,
            "committed": p.start_offset,
            "end_offset": None,
            "lag": p.lag if p.lag >= 0 else None,
        }
        for t in sorted(group.topics, key=lambda t: t.topic_name)
        for p in sorted(t.partitions, key=lambda p: p.partition_index)
        if p.error_code == 0
    ]
