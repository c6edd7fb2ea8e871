"""KIP-848 consumer groups compared as whole responses: ConsumerGroupHeartbeat's error paths,
a member's life (join, fenced epoch, leave), ConsumerGroupDescribe, and a classic group's ID.

Topic IDs differ between the two brokers, so the assignment's and description's topic IDs
are the only fields allowed to vary; member IDs are the probe's own (v1: the client's).
"""

from __future__ import annotations

from typing import Any

from kpybroker.protocol.messages import (
    consumer_group_describe,
    consumer_group_heartbeat,
    delete_groups,
    describe_groups,
    list_groups,
)

from .error_paths import Topics, commit_request, ready_coordinator
from .probe import Probe, scenario

TOPIC_IDS = ("*topic_id",)
MEMBER = "diff-cg-member-0000000001"


def heartbeat(
    group: str,
    member_id: str = MEMBER,
    epoch: int = 0,
    *,
    topics: list[str] | None = None,
    regex: str | None = None,
    rebalance_ms: int = 45_000,
    owned: list[Any] | None = None,
    instance_id: str | None = None,
    assignor: str | None = None,
) -> Any:
    return consumer_group_heartbeat.ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rebalance_timeout_ms=rebalance_ms,
        subscribed_topic_names=topics,
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=owned,
    )


@scenario
def consumer_group_heartbeat_error_paths(p: Probe) -> None:
    """Requests Kafka refuses before looking at the group, and those it refuses after."""
    topics = Topics(p)
    topics.create("diff-cg", 2)
    group = "diff-cg-errors"
    ready_coordinator(p, group)
    invalid = {
        "empty group": heartbeat(" ", topics=["diff-cg"], owned=[]),
        "empty member id": heartbeat(group, "", topics=["diff-cg"], owned=[]),
        "no rebalance timeout": heartbeat(group, topics=["diff-cg"], rebalance_ms=-1, owned=[]),
        "no subscription": heartbeat(group, owned=[]),
        "owned when joining": heartbeat(
            group,
            topics=["diff-cg"],
            owned=[consumer_group_heartbeat.TopicPartitions(topic_id=bytes(16), partitions=[0])],
        ),
        "owned null when joining": heartbeat(group, topics=["diff-cg"]),
        "bad epoch": heartbeat(group, epoch=-3, topics=["diff-cg"]),
        "static leave without instance": heartbeat(group, epoch=-2),
        "unknown assignor": heartbeat(group, topics=["diff-cg"], owned=[], assignor="sticky"),
        "bad regex": heartbeat(group, regex="(", owned=[]),
        "unknown member": heartbeat(group, "diff-cg-nobody", epoch=1, topics=["diff-cg"]),
        "unknown group": heartbeat("diff-cg-never", epoch=1, topics=["diff-cg"]),
    }
    for label, request in invalid.items():
        p.answer(f"v1/{label}", request, 1)
    p.answer("v0/empty member id joins", heartbeat(group, "", topics=["diff-cg"], owned=[]), 0,
             varies=("member_id", *TOPIC_IDS))  # fmt: skip


@scenario
def consumer_group_member_life(p: Probe) -> None:
    """One member joins (the whole partition set at epoch 1), heartbeats at a wrong epoch,
    is described, and leaves; the group is then described Empty and listed by type."""
    topics = Topics(p)
    topics.create("diff-cgl", 3)
    group = "diff-cg-life"
    ready_coordinator(p, group)
    joined = p.answer("join", heartbeat(group, topics=["diff-cgl"], owned=[]), 1, varies=TOPIC_IDS)
    epoch = joined.member_epoch if joined is not None else 1
    p.answer("epoch ahead", heartbeat(group, epoch=epoch + 5), 1)
    p.answer("steady", heartbeat(group, epoch=epoch), 1)
    describe = consumer_group_describe.ConsumerGroupDescribeRequest(
        group_ids=[group, "diff-cg-never"], include_authorized_operations=False
    )
    for v in (0, 1):
        p.answer(
            f"describe v{v}",
            describe,
            v,
            varies=(*TOPIC_IDS, "*client_host"),
            unordered=("groups",),  # Kafka answers shard by shard
        )
    p.answer("leave", heartbeat(group, epoch=-1), 1)
    p.answer("describe after leave", describe, 1, unordered=("groups",))
    listed = list_groups.ListGroupsRequest(states_filter=[], types_filter=["consumer"])
    p.answer("list consumer groups", listed, 5, unordered=("groups",))


@scenario
def consumer_group_and_classic_group_ids(p: Probe) -> None:
    """A group with only committed offsets becomes a consumer group on its first member; a
    consumer group is described as such, and a classic one is not a consumer group."""
    topics = Topics(p)
    topics.create("diff-cgc", 1)
    group = "diff-cg-offsets-only"
    ready_coordinator(p, group)
    p.retry(
        lambda: p.call(commit_request(group, [("diff-cgc", 0, 3)]), 2).topics[0],
        lambda t: t.partitions[0].error_code == 0,
        "a commit outside group management",
    )
    describe = consumer_group_describe.ConsumerGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False
    )
    p.answer("describe while classic", describe, 1)
    p.answer("join", heartbeat(group, topics=["diff-cgc"], owned=[]), 1, varies=TOPIC_IDS)
    p.answer("describe", describe, 1, varies=(*TOPIC_IDS, "*client_host"))
    for v in (5, 6):
        classic_describe = describe_groups.DescribeGroupsRequest(
            groups=[group], include_authorized_operations=False
        )
        p.answer(f"DescribeGroups v{v}", classic_describe, v)
    deleted = delete_groups.DeleteGroupsRequest(groups_names=[group])
    p.answer("DeleteGroups v3 while it has a member", deleted, 3)
    p.answer("leave", heartbeat(group, epoch=-1), 1)
