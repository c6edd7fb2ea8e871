"""KIP-848's consumer group protocol, driven through the shard's events without sockets or loops.

Each scenario follows a rule of Kafka's coordinator: the group epoch and the
target assignment, revocation before reassignment, epochs a member may send,
fencing by session and rebalance timeouts, static members, the records that
rebuild the group after a restart, and offsets committed with member epochs.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kpybroker.coordinator.assignors import (
    MemberSpec,
    RangeAssignor,
    TopicSpec,
    UniformAssignor,
    configured_assignors,
)
from kpybroker.coordinator.consumer_group import MemberState
from kpybroker.coordinator.consumer_group_migration import decode_assignment
from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.offsets_topic_records import (
    ConsumerGroupRecord,
    ConsumerGroupRecordType,
    decode_batch,
    encode_batch,
)
from kpybroker.coordinator.shard import CoordinatorShard
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
)
from kpybroker.protocol.messages.consumer_protocol_assignment import (
    TopicPartition as AssignedTopicPartition,
)
from kpybroker.protocol.messages.offset_fetch import OffsetFetchRequestGroup
from tests.helpers.coordinator_driver import (
    SETTINGS,
    Driver,
    StaticTopics,
    error_of,
)

SESSION_MS = SETTINGS.consumer_session_timeout_ms


def driver(**topics: int) -> Driver:
    return Driver(topics=StaticTopics(**(topics or {"t": 4})))


def join(d: Driver, member: str, topics: list[str] | None = None, **kw: Any) -> Any:
    response = d.consumer_heartbeat(member, 0, topics=topics or ["t"], **kw)
    assert error_of(response) == ErrorCode.NONE, response
    return response


def owned(d: Driver, member: str) -> dict[str, list[int]]:
    group = d.shard.consumer_groups.group("g")
    assert group is not None
    names = {t.topic_id: t.name for t in d.topics.topics.values()}
    return {names[t]: sorted(ps) for t, ps in group.members[member].assigned.items()}


def test_a_first_member_gets_every_partition_at_epoch_2() -> None:
    """A new group starts at epoch 1 with an empty target; the first assignment is epoch 2."""
    d = driver()
    response = join(d, "a")
    assert (response.member_id, response.member_epoch) == ("a", 2)
    assert response.heartbeat_interval_ms == SETTINGS.consumer_heartbeat_interval_ms
    assert d.assignment_of(response) == {"t": [0, 1, 2, 3]}
    assert d.shard.describe_consumer_group("g").group_state == "Stable"
    # A heartbeat that changes nothing writes nothing and carries no assignment.
    written = len(d.log)
    again = d.consumer_heartbeat("a", 2)
    assert (error_of(again), again.member_epoch, again.assignment) == (0, 2, None)
    assert len(d.log) == written


def test_a_second_member_waits_for_the_first_to_revoke() -> None:
    d = driver()
    join(d, "a")
    b = join(d, "b")
    # b's target is half the partitions, but a still owns them: b gets nothing yet.
    assert (b.member_epoch, d.assignment_of(b)) == (3, {})
    assert d.shard.describe_consumer_group("g").group_state == "Reconciling"
    # a is told to keep two partitions (its epoch stays 2 until it has revoked).
    a = d.consumer_heartbeat("a", 2)
    assert a.member_epoch == 2
    kept = d.assignment_of(a)["t"]
    assert len(kept) == 2
    assert d.shard.consumer_groups.group("g").members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # Still owning the revoked ones, a stays where it is.
    assert d.consumer_heartbeat("a", 2, owned={"t": [0, 1, 2, 3]}).member_epoch == 2
    # Once a reports only what it keeps, it moves to epoch 3, and b gets the rest.
    done = d.consumer_heartbeat("a", 2, owned={"t": kept})
    assert (done.member_epoch, done.assignment) == (3, None)
    b = d.consumer_heartbeat("b", 3, owned={})
    rest = d.assignment_of(b)["t"]
    assert sorted(kept + rest) == [0, 1, 2, 3]
    assert d.shard.describe_consumer_group("g").group_state == "Stable"


def test_a_leaving_member_hands_its_partitions_over() -> None:
    d = driver()
    join(d, "a")
    join(d, "b")
    a = d.consumer_heartbeat("a", 2)
    d.consumer_heartbeat("a", 2, owned={"t": d.assignment_of(a)["t"]})
    d.consumer_heartbeat("b", 3, owned={})
    left = d.consumer_heartbeat("b", -1)
    assert (error_of(left), left.member_id, left.member_epoch) == (0, "b", -1)
    a = d.consumer_heartbeat("a", 3)
    assert (a.member_epoch, d.assignment_of(a)) == (4, {"t": [0, 1, 2, 3]})


def test_epochs_a_member_may_send() -> None:
    d = driver()
    join(d, "a")
    ahead = d.consumer_heartbeat("a", 5)
    assert error_of(ahead) == ErrorCode.FENCED_MEMBER_EPOCH
    unknown = d.consumer_heartbeat("nobody", 2)
    assert error_of(unknown) == ErrorCode.UNKNOWN_MEMBER_ID
    assert error_of(d.consumer_heartbeat("a", 2, group="other")) == ErrorCode.GROUP_ID_NOT_FOUND
    # The previous epoch is accepted from a member that owns nothing it should not
    # (its answer was lost), and refused otherwise.
    d.topics.create("t", 6)
    moved = d.consumer_heartbeat("a", 2)
    assert moved.member_epoch == 3
    assert d.consumer_heartbeat("a", 2, owned={"t": [0]}).member_epoch == 3
    behind = d.consumer_heartbeat("a", 2, owned={"t": [0, 7]})
    assert error_of(behind) == ErrorCode.FENCED_MEMBER_EPOCH


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"group": " "}, "GroupId can't be empty."),
        ({"member_id": ""}, "MemberId can't be empty."),
        ({"rebalance_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ({"owned": {"t": [0]}}, "TopicPartitions must be empty when (re-)joining."),
        ({"epoch": -3}, "MemberEpoch is invalid."),
        ({"epoch": -2}, "InstanceId can't be null."),
    ],
)
def test_invalid_heartbeats(change: dict, message: str) -> None:
    d = driver()
    epoch = change.pop("epoch", 0)
    member_id = change.pop("member_id", "m")
    response = d.consumer_heartbeat(member_id, epoch, topics=["t"], **change)
    assert (error_of(response), response.error_message) == (ErrorCode.INVALID_REQUEST, message)


def test_unknown_assignor_and_bad_regex() -> None:
    d = driver()
    wrong = d.consumer_heartbeat("m", 0, topics=["t"], assignor="sticky")
    assert error_of(wrong) == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert wrong.error_message == (
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    )
    bad = d.consumer_heartbeat("m", 0, regex="(")
    assert error_of(bad) == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_a_regex_subscription_follows_topics_as_they_come() -> None:
    d = driver(**{"orders-eu": 2, "payments": 2, "__internal": 1})
    first = d.consumer_heartbeat("m", 0, regex="orders-.*")
    assert d.assignment_of(first) == {"orders-eu": [0, 1]}
    d.topics.create("orders-us", 1)
    later = d.consumer_heartbeat("m", first.member_epoch)
    assert d.assignment_of(later) == {"orders-eu": [0, 1], "orders-us": [0]}
    assert later.member_epoch == first.member_epoch + 1


def test_new_partitions_bump_the_epoch_and_are_assigned() -> None:
    d = driver()
    join(d, "a")
    d.topics.create("t", 6)
    grown = d.consumer_heartbeat("a", 2)
    assert (grown.member_epoch, d.assignment_of(grown)) == (3, {"t": [0, 1, 2, 3, 4, 5]})
    d.topics.delete("t")
    # The partitions of a deleted topic are revoked like any other...
    gone = d.consumer_heartbeat("a", 3)
    assert (gone.member_epoch, d.assignment_of(gone)) == (3, {})
    # ...and once the member owns none, it moves on.
    assert d.consumer_heartbeat("a", 3, owned={}).member_epoch == 4


def test_a_silent_member_is_fenced_by_its_session() -> None:
    d = driver()
    join(d, "a")
    join(d, "b")
    epoch, mine = 2, None
    for _ in range(3):  # a heartbeats, revoking what it is told to; b never does
        d.advance(SESSION_MS // 2)
        response = d.consumer_heartbeat("a", epoch, owned=mine)
        epoch, mine = response.member_epoch, d.assignment_of(response) or mine
    assert list(d.shard.consumer_groups.group("g").members) == ["a"]
    assert d.consumer_heartbeat("a", epoch, owned=mine).member_epoch == 4


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    d = driver()
    join(d, "a", rebalance_ms=5000)
    join(d, "b")
    d.consumer_heartbeat("a", 2)  # told to revoke
    d.advance(5000)
    assert "a" not in d.shard.consumer_groups.group("g").members
    b = d.consumer_heartbeat("b", 3, owned={})
    assert d.assignment_of(b) == {"t": [0, 1, 2, 3]}


def test_a_static_member_comes_back_with_its_partitions() -> None:
    d = driver()
    join(d, "a1", instance_id="host-a")
    join(d, "b", instance_id="host-b")
    a = d.consumer_heartbeat("a1", 2)
    d.consumer_heartbeat("a1", 2, owned={"t": d.assignment_of(a)["t"]})
    d.consumer_heartbeat("b", 3, owned={})
    before = owned(d, "b")
    away = d.consumer_heartbeat("b", -2, instance_id="host-b")
    assert (error_of(away), away.member_epoch) == (0, -2)
    # Another process may not take the instance while it is owned...
    taken = d.consumer_heartbeat("a2", 0, topics=["t"], instance_id="host-a")
    assert error_of(taken) == ErrorCode.UNRELEASED_INSTANCE_ID
    # ...but the one that left temporarily comes back under a new ID, with no rebalance.
    back = join(d, "b2", instance_id="host-b")
    assert d.assignment_of(back) == before
    assert "b" not in d.shard.consumer_groups.group("g").members


def test_records_rebuild_the_group_after_a_restart() -> None:
    d = driver()
    join(d, "a", rack_id="r1")
    join(d, "b", instance_id="i-b", assignor="range")
    d.consumer_heartbeat("a", 2)
    again = CoordinatorShard(0, SETTINGS, d.topics)
    for record in decode_batch(bytes(encode_batch(d.log))):
        again.replay(record)
    again.loaded()
    original = d.shard.consumer_groups.group("g")
    rebuilt = again.consumer_groups.group("g")
    assert rebuilt.members == original.members
    assert rebuilt.target == original.target
    assert (rebuilt.group_epoch, rebuilt.assignment_epoch, rebuilt.metadata_hash) == (
        original.group_epoch,
        original.assignment_epoch,
        original.metadata_hash,
    )
    assert rebuilt.partition_epochs == original.partition_epochs
    kinds = {r.record_type for r in d.log if isinstance(r, ConsumerGroupRecord)}
    assert kinds == set(ConsumerGroupRecordType)


def test_a_failed_write_leaves_the_group_as_it_was() -> None:
    d = driver()
    join(d, "a")
    d.fail_appends = ErrorCode.NOT_LEADER_OR_FOLLOWER
    failed = d.consumer_heartbeat("b", 0, topics=["t"])
    assert error_of(failed) == ErrorCode.NOT_COORDINATOR
    assert list(d.shard.consumer_groups.group("g").members) == ["a"]


def test_offsets_are_committed_and_fetched_at_the_member_epoch() -> None:
    d = driver()
    join(d, "a")
    commit = d.replies[d.commit({("t", 0): 5}, version=9, member_id="a", generation=2)]
    assert [p.error_code for t in commit.topics for p in t.partitions] == [0]
    stale = d.replies[d.commit({("t", 0): 6}, version=9, member_id="a", generation=1)]
    assert [p.error_code for t in stale.topics for p in t.partitions] == [
        ErrorCode.STALE_MEMBER_EPOCH
    ]
    old = d.replies[d.commit({("t", 0): 6}, version=8, member_id="a", generation=2)]
    assert [p.error_code for t in old.topics for p in t.partitions] == [
        ErrorCode.UNSUPPORTED_VERSION
    ]
    fetched = d.shard.fetch_offsets(OffsetFetchRequestGroup(group_id="g", topics=None))
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [5]
    wrong = d.shard.fetch_offsets(
        OffsetFetchRequestGroup(group_id="g", member_id="a", member_epoch=7, topics=None)
    )
    assert wrong.error_code == ErrorCode.STALE_MEMBER_EPOCH


def test_group_types_and_the_migration_policy() -> None:
    d = Driver(
        CoordinatorSettings(
            initial_rebalance_delay_ms=0,
            min_session_timeout_ms=1000,
            consumer_migration_policy="disabled",
        ),
        topics=StaticTopics(t=4),
    )
    d.stable_group(group="classic")
    refused = d.consumer_heartbeat("m", 0, topics=["t"], group="classic")
    assert error_of(refused) == ErrorCode.GROUP_ID_NOT_FOUND
    assert refused.error_message == "Group classic is not a consumer group."
    # An empty classic group (offsets only) becomes a consumer group, whatever the policy.
    d.commit({("t", 0): 1}, group="offsets-only")
    assert error_of(join(d, "m", group="offsets-only")) == ErrorCode.NONE
    join(d, "a")
    listed = {g.group_id: g.group_type for g in d.shard.list_groups([], [])}
    assert listed == {"g": "consumer", "classic": "classic", "offsets-only": "consumer"}
    assert [g.group_id for g in d.shard.list_groups([], ["Consumer"])] == ["offsets-only", "g"]


def classic_assignment(*partitions: int, topic: str = "t") -> bytes:
    """ConsumerProtocolAssignment v0 bytes, as a classic leader sends in SyncGroup."""
    value = ConsumerProtocolAssignment(
        assigned_partitions=[AssignedTopicPartition(topic=topic, partitions=list(partitions))]
    )
    return struct.pack(">h", 0) + value.encode_bytes(0)


def classic_group(d: Driver) -> tuple[str, str]:
    """Two classic members sharing t (0-1 and 2-3) in generation 1."""
    a, b = d.new_member(), d.new_member()
    ta, tb = d.join(a), d.join(b)
    d.advance(0)
    leader = d.replies[ta].leader
    assignments = {a: classic_assignment(0, 1), b: classic_assignment(2, 3)}
    for m in (a, b):
        d.sync(m, 1, assignments if m == leader else None)
    assert d.state() == "Stable" and {d.replies[t].generation_id for t in (ta, tb)} == {1}
    return a, b


def test_a_classic_group_is_upgraded_member_by_member_and_back() -> None:
    d = driver()
    a, b = classic_group(d)
    # A member of the new protocol joins: the group becomes a consumer group at epoch 1,
    # the classic members keep their partitions until they rejoin.
    c = join(d, "c")
    assert d.shard.membership.group("g") is None
    group = d.shard.consumer_groups.group("g")
    assert set(group.members) == {a, b, "c"}
    assert owned(d, a) == {"t": [0, 1]} and owned(d, b) == {"t": [2, 3]}
    assert d.assignment_of(c) == {}  # what it is to get is still owned by a and b
    # The classic members learn of the rebalance from their heartbeats and join again.
    for m in (a, b):
        assert error_of(d.replies[d.heartbeat(m, 1)]) == ErrorCode.REBALANCE_IN_PROGRESS
        rejoined = d.replies[d.join(m)]
        assert (error_of(rejoined), rejoined.protocol_name) == (0, "range")
        synced = d.replies[d.sync(m, rejoined.generation_id)]
        assert error_of(synced) == ErrorCode.NONE
        assert len(decode_assignment(synced.assignment)["t"]) <= 2
    c_again = d.consumer_heartbeat("c", c.member_epoch, owned={})
    epochs = {m.member_id: m.member_epoch for m in group.members.values()}
    assert d.shard.describe_consumer_group("g").group_state in ("Stable", "Reconciling"), epochs
    assert sum(len(ps) for m in (a, b, "c") for ps in owned(d, m).values()) <= 4
    # Classic members commit at their generation, which is their member epoch.
    epoch_a = group.members[a].member_epoch
    committed = d.replies[d.commit({("t", 0): 7}, member_id=a, generation=epoch_a)]
    assert [p.error_code for t in committed.topics for p in t.partitions] == [0]
    # The last member of the new protocol leaves: the group is classic again, rebalancing.
    d.consumer_heartbeat("c", c_again.member_epoch, owned=None)
    d.consumer_heartbeat("c", -1)
    classic = d.shard.membership.group("g")
    assert classic is not None and d.shard.consumer_groups.group("g") is None
    assert set(classic.members) == {a, b} and d.state() == "PreparingRebalance"
    assert error_of(d.replies[d.heartbeat(a, classic.generation)]) == (
        ErrorCode.REBALANCE_IN_PROGRESS
    )


def test_a_restart_after_an_upgrade_rebuilds_the_consumer_group() -> None:
    d = driver()
    a, _ = classic_group(d)
    join(d, "c")
    again = CoordinatorShard(0, SETTINGS, d.topics)
    for record in decode_batch(bytes(encode_batch(d.log))):
        again.replay(record)
    again.loaded()
    assert again.membership.group("g") is None
    rebuilt = again.consumer_groups.group("g")
    assert rebuilt.members == d.shard.consumer_groups.group("g").members
    assert rebuilt.members[a].classic is not None


def test_an_empty_consumer_group_can_be_deleted() -> None:
    d = driver()
    join(d, "a")
    busy = d.replies[d.send("delete_groups", ["g"])]
    assert [r.error_code for r in busy] == [ErrorCode.NON_EMPTY_GROUP]
    d.consumer_heartbeat("a", -1)
    deleted = d.replies[d.send("delete_groups", ["g"])]
    assert [r.error_code for r in deleted] == [0]
    assert d.shard.describe_consumer_group("g").error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_uniform_is_balanced_and_sticky() -> None:
    topics = {b"a" * 16: TopicSpec(b"a" * 16, 10), b"b" * 16: TopicSpec(b"b" * 16, 3)}
    members = [MemberSpec(f"m{i}", frozenset(topics)) for i in range(4)]
    first = UniformAssignor().assign(members, topics)
    sizes = sorted(sum(len(p) for p in a.values()) for a in first.values())
    assert sizes == [3, 3, 3, 4]
    # One member leaves: the others keep all they had and share its partitions.
    rest = [MemberSpec(m.member_id, m.topics, previous=first[m.member_id]) for m in members[:3]]
    second = UniformAssignor().assign(rest, topics)
    for m in rest:
        for topic_id, partitions in first[m.member_id].items():
            assert partitions <= second[m.member_id][topic_id]
    assert sorted(sum(len(p) for p in a.values()) for a in second.values()) == [4, 4, 5]


def test_uniform_prefers_partitions_on_the_member_rack() -> None:
    racks = tuple(frozenset({"r1" if p % 2 else "r0"}) for p in range(4))
    topics = {b"t" * 16: TopicSpec(b"t" * 16, 4, racks)}
    members = [MemberSpec("a", frozenset(topics), "r0"), MemberSpec("b", frozenset(topics), "r1")]
    targets = UniformAssignor().assign(members, topics)
    assert targets["a"][b"t" * 16] == {0, 2} and targets["b"][b"t" * 16] == {1, 3}


def test_range_gives_contiguous_ranges_per_topic() -> None:
    topics = {b"a" * 16: TopicSpec(b"a" * 16, 5), b"b" * 16: TopicSpec(b"b" * 16, 5)}
    members = [MemberSpec("m2", frozenset(topics)), MemberSpec("m1", frozenset(topics))]
    targets = RangeAssignor().assign(members, topics)
    assert targets["m1"] == {b"a" * 16: {0, 1, 2}, b"b" * 16: {0, 1, 2}}
    assert targets["m2"] == {b"a" * 16: {3, 4}, b"b" * 16: {3, 4}}


def test_the_assignor_config_takes_kafka_class_names() -> None:
    assignors = configured_assignors(
        ["org.apache.kafka.coordinator.group.assignor.RangeAssignor", "uniform"]
    )
    assert list(assignors) == ["range", "uniform"]
    d = Driver(CoordinatorSettings(consumer_assignors=("range",)), topics=StaticTopics(t=2))
    join(d, "a")
    assert d.shard.describe_consumer_group("g").assignor_name == "range"
