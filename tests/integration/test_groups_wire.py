"""Group requests built by hand (generated codecs over a socket): odd, stale, hostile, exact.

Each hostile request must get Kafka's error code and leave a live group
(a real confluent-kafka member) undisturbed: no rebalance, consumption goes on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.delete_groups import DeleteGroupsRequest
from kpybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kpybroker.protocol.messages.heartbeat import HeartbeatRequest
from kpybroker.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from kpybroker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kpybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from kpybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.clients import ConfluentClient
from tests.helpers.coordinator_driver import commit_request, join_request, subscription
from tests.helpers.groups_wire import (
    BROKER_OVERRIDES,
    Wire,
    describe,
    find_coordinator,
    produce,
)
from tests.helpers.process import wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> ManagedBroker:
    return broker_factory(BROKER_OVERRIDES)


# Subscriptions to topic "live" with odd bytes after the struct: Kafka reads only the
# struct (a subscription it cannot parse at all wedges Kafka's own join phase).
META_A = subscription("live") + b"\x00A\xff"
META_B = subscription("live") + b"\xffB"


def join(group: str, member_id: str = "", metadata: bytes = META_A, **kw: Any) -> Any:
    """A JoinGroup request with one protocol, "range", carrying ``metadata`` as it is."""
    return join_request(member_id, group=group, protocols=[("range", metadata)], **kw)


def partition_errors(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def test_find_coordinator_forms(broker: ManagedBroker) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    find_coordinator(broker.bootstrap, "any")
    with Wire(broker.bootstrap) as wire:
        for version in (0, 1, 2, 3):
            found = wire.call(FindCoordinatorRequest(key="any", key_type=0), version)
            assert (found.error_code, found.host, found.port) == (0, host, int(port))
        # A transactional id's coordinator: Kafka answers COORDINATOR_NOT_AVAILABLE while its
        # first lookup creates __transaction_state, kpybroker at once; both then name it.
        deadline = time.monotonic() + 30
        while True:
            txn = wire.call(FindCoordinatorRequest(key="tx", key_type=1), 3)
            if txn.error_code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                break
            assert time.monotonic() < deadline, "no transaction coordinator"
            time.sleep(0.2)
        assert (txn.error_code, txn.error_message, txn.host, txn.port) == (
            0,
            "NONE",
            host,
            int(port),
        )
        batch = wire.call(FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 4)
        assert [(c.key, c.error_code, c.port) for c in batch.coordinators] == [
            ("a", 0, int(port)),
            ("b", 0, int(port)),
        ]
        odd = wire.call(FindCoordinatorRequest(key_type=7, coordinator_keys=["x"]), 4)
        assert odd.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


@pytest.fixture
def live_member(broker: ManagedBroker) -> Iterator[tuple[Consumer, list[Any]]]:
    """A confluent-kafka member of group "live" on topic "live" (2 partitions), and its events."""
    ConfluentClient().create_topic(broker.bootstrap, "live", 2)
    events: list[Any] = []
    member = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "live",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "client.id": "live-member",
            "heartbeat.interval.ms": 500,
        }
    )
    member.subscribe(
        ["live"],
        on_assign=lambda _c, ps: events.append(("assigned", len(ps))),
        on_revoke=lambda _c, ps: events.append(("revoked", len(ps))),
    )
    wait_until(
        lambda: member.poll(0.1) is not None or len(member.assignment()) == 2,
        30,
        interval=0,
        message="the live member's assignment",
    )
    yield member, events
    member.close()


def consume_all(member: Consumer, values: set[str], timeout: float = 30) -> None:
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while not values <= seen and time.monotonic() < deadline:
        seen |= {m.value().decode() for m in member.consume(100, 0.1) if not m.error()}
    assert values <= seen, f"missing {sorted(values - seen)[:5]}"


def test_hostile_requests_get_kafkas_errors_and_leave_the_group_alone(
    broker: ManagedBroker, live_member: tuple[Consumer, list[Any]]
) -> None:
    member, events = live_member
    before = describe(broker.bootstrap, "live")
    [real] = before.members
    settled = list(events)
    with Wire(broker.bootstrap) as wire:

        def heartbeat(member_id: str, generation: int) -> int:
            return wire.call(HeartbeatRequest("live", generation, member_id), 4).error_code

        def sync(group: str, member_id: str, generation: int, version: int = 4) -> int:
            request = SyncGroupRequest(
                group_id=group,
                generation_id=generation,
                member_id=member_id,
                assignments=[SyncGroupRequestAssignment(member_id=member_id, assignment=b"\xff")],
            )
            return wire.call(request, version).error_code

        assert heartbeat("nobody", 1) == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(real.member_id, 999) == ErrorCode.ILLEGAL_GENERATION
        assert sync("live", "nobody", 1) == ErrorCode.UNKNOWN_MEMBER_ID
        # v5 must name the protocol type and name.
        assert sync("live", real.member_id, 999, 5) == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert sync("live", real.member_id, 999) == ErrorCode.ILLEGAL_GENERATION
        assert sync("fresh", "before-join", 0, version=0) == ErrorCode.UNKNOWN_MEMBER_ID
        stale = commit_request({("live", 0): 5}, group="live", generation=999, member_id="nobody")
        assert set(partition_errors(wire.call(stale, 8)).values()) == {ErrorCode.UNKNOWN_MEMBER_ID}
        admin = commit_request({("live", 0): 5}, group="live")
        assert set(partition_errors(wire.call(admin, 8)).values()) == {ErrorCode.UNKNOWN_MEMBER_ID}
        leave = wire.call(LeaveGroupRequest("live", members=[MemberIdentity("nobody")]), 4)
        assert [m.error_code for m in leave.members] == [ErrorCode.UNKNOWN_MEMBER_ID]
        assert wire.call(LeaveGroupRequest("live", "nobody"), 0).error_code == 25
        short = join("live", real.member_id, session_ms=10)
        assert wire.call(short, 7).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        other = join("live", protocol_type="connect")
        assert wire.call(other, 7).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert wire.call(join(""), 7).error_code == ErrorCode.INVALID_GROUP_ID
        [deleted] = wire.call(DeleteGroupsRequest(groups_names=["live"]), 2).results
        assert deleted.error_code == ErrorCode.NON_EMPTY_GROUP

    produce(broker.bootstrap, "live", {0: ["after-0"], 1: ["after-1"]})
    consume_all(member, {"after-0", "after-1"})
    after = describe(broker.bootstrap, "live")
    assert after.group_state == "Stable"
    assert [m.member_id for m in after.members] == [real.member_id]
    assert events == settled, "the hostile requests caused a rebalance"


def test_a_join_whose_client_vanishes_does_not_wedge_the_group(
    broker: ManagedBroker, live_member: tuple[Consumer, list[Any]]
) -> None:
    member, events = live_member
    settled = len(events)
    # Joins (v3: no member-ID step), is parked while the real member rejoins, then vanishes.
    ghost = Wire(broker.bootstrap, client_id="ghost")
    ghost.send_request(join("live", session_ms=2000, rebalance_ms=2000), 3)
    ghost.close()
    produce(broker.bootstrap, "live", {0: ["a"], 1: ["b"]})
    consume_all(member, {"a", "b"}, timeout=40)

    def alone() -> bool:
        member.poll(0.1)
        described = describe(broker.bootstrap, "live")
        clients = [m.client_id for m in described.members]
        return described.group_state == "Stable" and clients == ["live-member"]

    wait_until(alone, 30, interval=0, message="the ghost dropped, the real member alone")
    assert ("revoked", 2) in events[settled:], "the ghost's join caused no rebalance"


def test_assignment_and_metadata_bytes_pass_through_untouched(broker: ManagedBroker) -> None:
    find_coordinator(broker.bootstrap, "raw")
    a, b = Wire(broker.bootstrap, "raw-a"), Wire(broker.bootstrap, "raw-b")
    with a, b:
        first = a.call(join("raw"), 5)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        a_id = first.member_id
        gen1 = a.call(join("raw", a_id, META_A), 5)
        assert (gen1.error_code, gen1.generation_id, gen1.leader) == (0, 1, a_id)
        b_id = b.call(join("raw"), 5).member_id
        b.send_request(join("raw", b_id, META_B), 5)  # parked: a must rejoin
        wait_until(  # once b's join (another connection) has arrived
            lambda: a.call(HeartbeatRequest("raw", 1, a_id), 3).error_code == 27,
            10,
            message="a told of the rebalance",
        )
        gen2 = a.call(join("raw", a_id, META_A), 5)
        b_joined = b.receive(join("raw"), 5)
        assert gen2.generation_id == b_joined.generation_id == 2
        assert {m.member_id: m.metadata for m in gen2.members} == {
            a_id: META_A,
            b_id: META_B,
        }
        assert b_joined.members == []
        garbage = {a_id: b"\x00\x00\xde\xad", b_id: b"not a consumer assignment \xff"}
        b.send_request(SyncGroupRequest("raw", 2, b_id, None, "consumer", "range"), 5)
        request = SyncGroupRequest(
            group_id="raw",
            generation_id=2,
            member_id=a_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[SyncGroupRequestAssignment(m, x) for m, x in garbage.items()],
        )
        assert a.call(request, 5).assignment == garbage[a_id]
        b_synced = b.receive(SyncGroupRequest(), 5)
        assert (b_synced.assignment, b_synced.protocol_name) == (garbage[b_id], "range")
        described = describe(broker.bootstrap, "raw")
        assert {m.member_id: m.member_assignment for m in described.members} == garbage
        assert {m.member_id: m.member_metadata for m in described.members} == {
            a_id: META_A,
            b_id: META_B,
        }
        wrong = SyncGroupRequest("raw", 2, a_id, protocol_type="consumer", protocol_name="rr")
        assert a.call(wrong, 5).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_committed_metadata_and_epochs_round_trip_exactly_across_a_restart(
    broker: ManagedBroker,
) -> None:
    ConfluentClient().create_topic(broker.bootstrap, "exact", 2)
    find_coordinator(broker.bootstrap, "exact-group")
    metadata = "ü\x00 meta ✓ " + "x" * 100
    offsets = {("exact", 0): 11, ("exact", 1): 22, ("nope", 0): 1, ("exact", 9): 1}
    commit = commit_request(offsets, group="exact-group", leader_epoch=7, metadata=metadata)
    with Wire(broker.bootstrap) as wire:
        assert partition_errors(wire.call(commit, 9)) == {
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("exact", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("exact", 0): 0,
            ("exact", 1): 0,
        }
    broker.restart()
    find_coordinator(broker.bootstrap, "exact-group")
    with Wire(broker.bootstrap) as wire:
        grouped = wire.call(
            OffsetFetchRequest(groups=[OffsetFetchRequestGroup("exact-group", topics=None)]), 9
        )
        [group] = grouped.groups
        assert {
            (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
            for t in group.topics
            for p in t.partitions
        } == {("exact", 0): (11, 7, metadata), ("exact", 1): (22, 7, metadata)}
        one = OffsetFetchRequest("exact-group", [OffsetFetchRequestTopic("exact", [1, 5])])
        old = wire.call(one, 1)
        assert [
            (p.partition_index, p.committed_offset, p.metadata) for p in old.topics[0].partitions
        ] == [
            (1, 22, metadata),
            (5, -1, ""),
        ]
        assert wire.call(one, 5).topics[0].partitions[0].committed_leader_epoch == 7
        # While the group is Empty its offsets can be deleted.
        delete = OffsetDeleteRequest(
            "exact-group", [OffsetDeleteRequestTopic("exact", [OffsetDeleteRequestPartition(0)])]
        )
        assert wire.call(delete, 0).topics[0].partitions[0].error_code == 0
        again = OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    "exact-group",
                    topics=[OffsetFetchRequestTopics(name="exact", partition_indexes=[0])],
                )
            ]
        )
        assert wire.call(again, 8).groups[0].topics[0].partitions[0].committed_offset == -1
        # Deleting the topic deletes the offsets committed for it.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["exact"])["exact"].result(30)
        everything = OffsetFetchRequest(groups=[OffsetFetchRequestGroup("exact-group", None)])
        wait_until(
            lambda: wire.call(everything, 9).groups[0].topics == [],
            10,
            message="the deleted topic's offsets gone",
        )
