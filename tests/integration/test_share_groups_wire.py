"""KIP-932 share groups against a real kpybroker over a socket (kpybroker's generated codecs).

Four members join a share group on a one-partition topic together: the coordinator has the
partition's share state initialized through the share coordinator, then assigns
partition 0 to all four. ShareGroupDescribe, ListGroups and DescribeGroups see
the group as Kafka shows it, DescribeShareGroupOffsets its start offset, the
group survives a restart of the broker (its records in ``__consumer_offsets``),
and once its members have left its offsets can be altered and the group deleted.
"""

from __future__ import annotations

from typing import Any

import pytest

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kpybroker.protocol.messages.delete_groups import DeleteGroupsRequest
from kpybroker.protocol.messages.describe_groups import DescribeGroupsRequest
from kpybroker.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kpybroker.protocol.messages.list_groups import ListGroupsRequest
from kpybroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from kpybroker.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.clients import ConfluentClient
from tests.helpers.groups_wire import BROKER_OVERRIDES, Wire, find_coordinator
from tests.helpers.process import wait_until

pytestmark = pytest.mark.timeout(180)

GROUP, TOPIC = "queue", "jobs"
MEMBERS = [f"member-{i:02d}-aaaaaaaaaaaaaaaaaaaaaaaa" for i in range(4)]


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> ManagedBroker:
    return broker_factory(BROKER_OVERRIDES)


def heartbeat(wire: Wire, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    request = ShareGroupHeartbeatRequest(
        group_id=GROUP, member_id=member, member_epoch=epoch, subscribed_topic_names=topics
    )
    answer = wire.call(request, 1)
    assert answer.error_code == ErrorCode.NONE, answer
    return answer


def describe_share(wire: Wire) -> Any:
    [described] = wire.call(ShareGroupDescribeRequest(group_ids=[GROUP]), 1).groups
    return described


def assignments(described: Any) -> dict[str, list[int]]:
    return {
        m.member_id: sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
        for m in described.members
    }


def test_a_share_group_over_the_wire(broker: ManagedBroker) -> None:
    bootstrap = broker.bootstrap
    ConfluentClient().create_topic(bootstrap, TOPIC, 1)
    find_coordinator(bootstrap, GROUP)
    with Wire(bootstrap) as wire:
        epochs = {m: heartbeat(wire, m, 0, [TOPIC]).member_epoch for m in MEMBERS}
        # A new group starts at epoch 1 (KAFKA-20268) and each join bumps it, but only the
        # first join's target is computed at once: the next waits for the assignment
        # interval (1 s, KIP-1263), so the others join at the target's epoch, 2.
        assert [epochs[m] for m in MEMBERS] == [2, 2, 2, 2]
        assert (describe_share(wire).group_epoch, describe_share(wire).assignment_epoch) == (5, 2)

        def all_share_partition_0() -> bool:
            for member in MEMBERS:
                epochs[member] = heartbeat(wire, member, epochs[member]).member_epoch
            return assignments(describe_share(wire)) == {m: [0] for m in MEMBERS}

        # The share state is initialized in the background; heartbeats pick it up.
        wait_until(all_share_partition_0, 30, interval=0.2, message="partition 0 shared by all")
        described = describe_share(wire)
        assert (described.error_code, described.group_state, described.assignor_name) == (
            0,
            "Stable",
            "simple",
        )
        assert described.group_epoch == described.assignment_epoch
        assert {m.subscribed_topic_names[0] for m in described.members} == {TOPIC}

        listed = wire.call(ListGroupsRequest(states_filter=[], types_filter=["share"]), 5)
        assert [
            (g.group_id, g.protocol_type, g.group_type, g.group_state) for g in listed.groups
        ] == [(GROUP, "share", "share", "Stable")]
        [classic] = wire.call(DescribeGroupsRequest(groups=[GROUP]), 6).groups
        assert (classic.error_code, classic.group_state, classic.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            "Dead",
            f"Group {GROUP} is not a classic group.",
        )
        offsets = wire.call(
            DescribeShareGroupOffsetsRequest(
                groups=[DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=None)]
            ),
            1,
        )
        [group_offsets] = offsets.groups
        assert group_offsets.error_code == 0
        assert [
            (t.topic_name, [p.partition_index for p in t.partitions]) for t in group_offsets.topics
        ] == [(TOPIC, [0])]
        busy = wire.call(alter_request(5), 0)
        assert busy.error_code == ErrorCode.NON_EMPTY_GROUP
        before = describe_share(wire)

    # The group comes back from __consumer_offsets as it was.
    broker.restart()
    find_coordinator(bootstrap, GROUP)
    with Wire(bootstrap) as wire:
        after = describe_share(wire)
        assert (after.group_epoch, after.assignment_epoch) == (
            before.group_epoch,
            before.assignment_epoch,
        )
        assert assignments(after) == assignments(before)
        for member in MEMBERS:
            left = heartbeat(wire, member, -1)
            assert (left.member_id, left.member_epoch) == (member, -1)
        assert describe_share(wire).group_state == "Empty"

        altered = wire.call(alter_request(5), 0)
        assert altered.error_code == 0
        assert [(t.topic_name, t.partitions[0].error_code) for t in altered.responses] == [
            (TOPIC, 0)
        ]
        [group_offsets] = wire.call(
            DescribeShareGroupOffsetsRequest(
                groups=[DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=None)]
            ),
            1,
        ).groups
        assert [p.start_offset for t in group_offsets.topics for p in t.partitions] == [5]

        [deleted] = wire.call(DeleteGroupsRequest(groups_names=[GROUP]), 2).results
        assert deleted.error_code == ErrorCode.NONE
        gone = describe_share(wire)
        assert (gone.error_code, gone.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Group {GROUP} not found.",
        )


def alter_request(start_offset: int) -> AlterShareGroupOffsetsRequest:
    return AlterShareGroupOffsetsRequest(
        group_id=GROUP,
        topics=[
            AlterShareGroupOffsetsRequestTopic(
                topic_name=TOPIC,
                partitions=[
                    AlterShareGroupOffsetsRequestPartition(
                        partition_index=0, start_offset=start_offset
                    )
                ],
            )
        ],
    )
