"""KIP-932's share groups on the coordinator side, driven through the shard and the service.

Each scenario follows a rule of Kafka 4.4's coordinator: a partition is assigned
only once its share state is initialized, shared partitions (more members than
partitions), the epochs a member may send, fencing by session, the records that
rebuild the group after a restart, the group ID shared with classic and consumer
groups, and the offset admin APIs between the shard and the persister.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from kpybroker.coordinator import simple_assignor
from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.interface import Caller, GroupOverrides
from kpybroker.coordinator.offsets_topic_records import (
    ShareGroupRecord,
    ShareGroupRecordType,
    decode_batch,
    encode_batch,
)
from kpybroker.coordinator.shard import CoordinatorShard
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kpybroker.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from kpybroker.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kpybroker.share_coordinator.persister import PartitionState, ShareKey
from tests.helpers.coordinator_driver import StaticTopics, error_of
from tests.helpers.share_driver import SHARE_SETTINGS as SETTINGS
from tests.helpers.share_driver import FakePersister, ShareDriver, service

SESSION_MS = SETTINGS.share_session_timeout_ms
T = ShareGroupRecordType


def driver(**topics: int) -> ShareDriver:
    return ShareDriver(topics=StaticTopics(**(topics or {"t": 4})))


def ready(d: ShareDriver, *members: str, topics: list[str] | None = None) -> dict[str, Any]:
    """Join the members, initialize the share state they asked for, then heartbeat each
    once more: every member's last answer."""
    answers = {m: d.share_heartbeat(m, 0, topics=topics) for m in members}
    d.initialize_all()
    for member in members:
        answers[member] = d.share_heartbeat(member, answers[member].member_epoch)
    # Members that heartbeated before the last target see it on their next heartbeat.
    for member in members:
        answer = d.share_heartbeat(member, answers[member].member_epoch)
        if answer.assignment is not None:
            answers[member] = answer
    return answers


def assigned(d: ShareDriver, member: str) -> dict[str, list[int]]:
    names = {t.topic_id: t.name for t in d.topics.topics.values()}
    return {names[t]: sorted(ps) for t, ps in d.members()[member].assigned.items()}


# -- joining, initialization, assignment ---------------------------------------------------


def test_a_member_gets_partitions_once_their_share_state_is_initialized() -> None:
    d = driver()
    first = d.share_heartbeat("a", 0)
    # A new group starts at epoch 1 (KAFKA-20268); the join bumps it to 2. Nothing is
    # assignable yet: the share state of t's partitions is being initialized.
    assert (error_of(first), first.member_id, first.member_epoch) == (0, "a", 2)
    assert first.heartbeat_interval_ms == SETTINGS.share_heartbeat_interval_ms
    assert d.share_assignment(first) == {}
    (plan,) = d.initializations
    assert (plan.group_id, plan.state_epoch) == ("g", 2)
    assert plan.start_offsets == {d.topics.id_of("t"): {0: -1, 1: -1, 2: -1, 3: -1}}
    state = d.shard.share_groups.group("g").state_partitions
    assert set(state.initializing) == {d.topics.id_of("t")} and not state.initialized
    # A heartbeat while it is initializing asks for nothing new.
    again = d.share_heartbeat("a", 2)
    assert (again.member_epoch, again.assignment, d.initializations) == (2, None, [plan])
    d.initialize_all()
    # The next heartbeat finds initialized partitions nobody has: the epoch is bumped.
    now = d.share_heartbeat("a", 2)
    assert (now.member_epoch, d.share_assignment(now)) == (3, {"t": [0, 1, 2, 3]})
    described = d.shard.share.describe("g")
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == (
        "Stable",
        3,
        3,
    )
    assert described.assignor_name == "simple"
    (member,) = described.members
    assert (member.member_id, member.member_epoch, member.client_id) == ("a", 3, "client")
    assert member.subscribed_topic_names == ["t"]
    assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [
        ("t", [0, 1, 2, 3])
    ]
    # Nothing changes: nothing is written, no assignment in the answer.
    written = len(d.log)
    quiet = d.share_heartbeat("a", 3)
    assert (quiet.member_epoch, quiet.assignment, len(d.log)) == (3, None, written)


def test_four_members_share_a_single_partition() -> None:
    d = driver(t=1)
    answers = ready(d, "a", "b", "c", "d")
    for member in "abcd":
        assert assigned(d, member) == {"t": [0]}, member
        assert d.share_assignment(answers[member]) == {"t": [0]}


def test_two_members_split_three_partitions() -> None:
    d = driver(t=3)
    ready(d, "a", "b")
    sizes = sorted(len(assigned(d, m)["t"]) for m in "ab")
    assert sizes == [1, 2]
    assert sorted(assigned(d, "a")["t"] + assigned(d, "b")["t"]) == [0, 1, 2]


def test_a_failed_initialization_is_asked_again() -> None:
    d = driver()
    d.share_heartbeat("a", 0)
    d.initialize_all(ok=False)
    assert not d.shard.share_groups.group("g").state_partitions.initializing
    d.share_heartbeat("a", 2)
    assert len(d.initializations) == 1  # a later heartbeat asks again


def test_an_initialization_whose_outcome_was_lost_is_retried_later() -> None:
    d = driver()
    d.share_heartbeat("a", 0)
    d.initializations.clear()  # the coordinator moved before the outcome came back
    d.advance(SETTINGS.share_initialize_retry_interval_ms - 1)
    d.share_heartbeat("a", 2)
    assert d.initializations == []
    d.advance(1)
    d.share_heartbeat("a", 2)
    assert len(d.initializations) == 1


def test_new_partitions_of_a_known_topic_start_at_offset_zero() -> None:
    """KAFKA-20742: records produced before their initialization must not be skipped."""
    d = driver(t=2)
    ready(d, "a")
    d.topics.create("t", 3)
    grown = d.share_heartbeat("a", 3)
    assert grown.member_epoch == 4  # the topic's metadata changed
    (plan,) = d.initializations
    assert plan.start_offsets == {d.topics.id_of("t"): {2: 0}}
    d.initialize_all()
    assert d.share_assignment(d.share_heartbeat("a", 4)) == {"t": [0, 1, 2]}


def test_assignment_is_sticky_and_balanced() -> None:
    t = b"t" * 16
    first = simple_assignor.assign(
        {"a": frozenset({t}), "b": frozenset({t})}, {}, {t: frozenset(range(6))}
    )
    assert sorted(len(first[m][t]) for m in "ab") == [3, 3]
    # A third member takes two partitions; each of the others keeps two of its own.
    second = simple_assignor.assign(
        {m: frozenset({t}) for m in "abc"}, first, {t: frozenset(range(6))}
    )
    for member in "ab":
        assert len(second[member][t]) == 2 and second[member][t] <= first[member][t]
    assert set().union(*(second[m][t] for m in "abc")) == set(range(6))


def test_members_subscribed_to_different_topics_are_balanced_per_topic() -> None:
    t, u = b"t" * 16, b"u" * 16
    targets = simple_assignor.assign(
        {"a": frozenset({t}), "b": frozenset({t, u}), "c": frozenset({u})},
        {},
        {t: frozenset({0, 1}), u: frozenset({0, 1, 2, 3})},
    )
    assert targets["a"].keys() == {t} and targets["c"].keys() == {u}
    assert len(targets["a"][t]) + len(targets["b"][t]) == 2
    assert len(targets["b"][u]) + len(targets["c"][u]) == 4


# -- epochs, leaving, fencing ----------------------------------------------------------------


def test_epochs_a_member_may_send() -> None:
    d = driver()
    ready(d, "a")  # epoch 3, previous 2
    ahead = d.share_heartbeat("a", 5)
    assert (error_of(ahead), ahead.error_message) == (
        ErrorCode.FENCED_MEMBER_EPOCH,
        "The share group member has a greater member epoch (5) than the one known by the "
        "group coordinator (3). The member must abandon all its partitions and rejoin.",
    )
    behind = d.share_heartbeat("a", 1)
    assert error_of(behind) == ErrorCode.FENCED_MEMBER_EPOCH
    assert "does not match the previous member epoch (2)" in behind.error_message
    # The previous epoch is accepted: the answer that moved the member may have been lost.
    assert error_of(d.share_heartbeat("a", 2)) == ErrorCode.NONE
    unknown = d.share_heartbeat("nobody", 3)
    assert (error_of(unknown), unknown.error_message) == (
        ErrorCode.UNKNOWN_MEMBER_ID,
        "Member nobody is not a member of group g.",
    )
    missing = d.share_heartbeat("a", 3, group="other")
    assert (error_of(missing), missing.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Share group other not found.",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"member_id": " "}, "MemberId can't be empty."),  # "" is the handler's
        ({"group": " "}, "GroupId can't be empty."),
        ({"rack_id": ""}, "RackId can't be empty."),
        ({"topics": []}, "SubscribedTopicNames must be set in first request."),
        ({"epoch": -2}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_heartbeats(change: dict, message: str) -> None:
    d = driver()
    member_id = change.pop("member_id", "m")
    epoch = change.pop("epoch", 0)
    response = d.share_heartbeat(member_id, epoch, **change)
    assert (error_of(response), response.error_message) == (ErrorCode.INVALID_REQUEST, message)


def test_a_leaving_member_hands_its_partitions_over() -> None:
    d = driver(t=2)
    ready(d, "a", "b")
    epoch = d.members()["a"].member_epoch
    left = d.share_heartbeat("b", -1)
    assert (error_of(left), left.member_id, left.member_epoch) == (0, "b", -1)
    assert set(d.members()) == {"a"}
    after = d.share_heartbeat("a", epoch)
    assert (after.member_epoch, d.share_assignment(after)) == (epoch + 1, {"t": [0, 1]})
    # The last member leaving empties the group; its target epoch catches up (KAFKA-20442).
    d.share_heartbeat("a", -1)
    group = d.shard.share_groups.group("g")
    assert (group.state.value, group.assignment_epoch) == ("Empty", group.group_epoch)
    unknown = d.share_heartbeat("a", -1)
    assert error_of(unknown) == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_silent_member_is_fenced_by_its_session() -> None:
    d = driver()
    ready(d, "a", "b")
    epoch = d.members()["a"].member_epoch
    for _ in range(3):  # a heartbeats, b never does
        d.advance(SESSION_MS // 2)
        epoch = d.share_heartbeat("a", epoch).member_epoch
    assert set(d.members()) == {"a"}
    assert d.share_assignment(d.share_heartbeat("a", epoch)) in (None, {"t": [0, 1, 2, 3]})
    assert assigned(d, "a") == {"t": [0, 1, 2, 3]}
    d.advance(SESSION_MS)
    assert d.shard.share.describe("g").group_state == "Empty"


def test_a_group_config_overrides_the_session_and_heartbeat_interval() -> None:
    d = driver()
    d.group_overrides["g"] = GroupOverrides(
        share_session_timeout_ms=50_000, share_heartbeat_interval_ms=7000
    )
    answer = d.share_heartbeat("a", 0)
    assert answer.heartbeat_interval_ms == 7000
    d.advance(SESSION_MS)
    assert "a" in d.members()
    d.advance(50_000 - SESSION_MS)
    assert "a" not in d.members()


def test_a_full_group_refuses_new_members() -> None:
    settings = dataclasses.replace(SETTINGS, share_max_size=2)
    d = ShareDriver(topics=StaticTopics(t=1), settings=settings)
    d.share_heartbeat("a", 0)
    d.share_heartbeat("b", 0)
    full = d.share_heartbeat("c", 0)
    assert (error_of(full), full.error_message) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        "The share group has reached its maximum capacity of 2 members.",
    )
    assert error_of(d.share_heartbeat("a", 2)) == ErrorCode.NONE


# -- assignment batching (KIP-1263) -----------------------------------------------------------
# What a Kafka 4.4 broker answered raw heartbeats with its default
# group.share.assignment.interval.ms (1 s).


def batching_driver(**topics: int) -> ShareDriver:
    settings = dataclasses.replace(SETTINGS, share_assignment_interval_ms=1000)
    return ShareDriver(topics=StaticTopics(**(topics or {"t": 1})), settings=settings)


def test_members_joining_together_are_assigned_together() -> None:
    d = batching_driver()
    # A new group's first target is computed at once (epoch 2, nothing initialized yet) ...
    a = d.share_heartbeat("a", 0)
    assert (a.member_epoch, d.share_assignment(a)) == (2, {})
    d.initialize_all()
    # ... the next ones wait a second: b and c join at the last target's epoch, with nothing.
    d.advance(300)
    b = d.share_heartbeat("b", 0)
    d.advance(100)
    c = d.share_heartbeat("c", 0)
    assert [(x.member_epoch, d.share_assignment(x)) for x in (b, c)] == [(2, {}), (2, {})]
    group = d.shard.share_groups.group("g")
    assert (group.group_epoch, group.assignment_epoch) == (4, 2)
    assert d.share_heartbeat("a", 2).member_epoch == 2
    # A second after the last computation, the next heartbeat computes the target for all.
    d.advance(600)
    answers = {m: d.share_heartbeat(m, 2) for m in "abc"}
    assert {m: (x.member_epoch, d.share_assignment(x)) for m, x in answers.items()} == {
        m: (4, {"t": [0]}) for m in "abc"
    }
    assert (group.group_epoch, group.assignment_epoch) == (4, 4)
    # A member joining long after is assigned at once; one joining just after it waits.
    d.advance(5000)
    assert d.share_assignment(d.share_heartbeat("d", 0)) == {"t": [0]}
    d.advance(10)
    late = d.share_heartbeat("e", 0)
    assert (late.member_epoch, d.share_assignment(late)) == (5, {})
    assert d.share_heartbeat("a", 4).member_epoch == 5  # the older members catch up to 5
    d.advance(1000)
    assert d.share_assignment(d.share_heartbeat("e", 5)) == {"t": [0]}


def test_initialized_partitions_bump_the_epoch_once_while_the_target_waits() -> None:
    d = batching_driver(t=3)
    d.share_heartbeat("a", 0)
    d.initialize_all()
    d.advance(200)
    assert d.share_heartbeat("a", 2).member_epoch == 2
    group = d.shard.share_groups.group("g")
    assert (group.group_epoch, group.assignment_epoch) == (3, 2)
    written = len(d.log)
    d.advance(200)
    d.share_heartbeat("a", 2)  # no second bump for the same partitions (KAFKA-20291)
    assert (group.group_epoch, len(d.log)) == (3, written)
    d.advance(600)
    now = d.share_heartbeat("a", 2)
    assert (now.member_epoch, d.share_assignment(now)) == (3, {"t": [0, 1, 2]})


def test_an_emptied_group_assigns_its_next_member_at_once() -> None:
    d = batching_driver()
    ready(d, "a")
    d.advance(2000)
    d.share_heartbeat("a", -1)
    # The target epoch caught up (KAFKA-20442) without counting as a computation.
    joined = d.share_heartbeat("b", 0)
    assert d.share_assignment(joined) == {"t": [0]}


def test_a_group_config_sets_the_assignment_interval_within_the_brokers_bounds() -> None:
    d = batching_driver()
    d.group_overrides["g"] = GroupOverrides(share_assignment_interval_ms=0)
    ready(d, "a")
    assert d.share_assignment(d.share_heartbeat("b", 0)) == {"t": [0]}
    d.group_overrides["g"] = GroupOverrides(share_assignment_interval_ms=60_000)
    d.advance(10)
    assert d.share_assignment(d.share_heartbeat("x", 0)) == {}
    d.advance(SETTINGS.share_max_assignment_interval_ms)  # 60 s is held to the 15 s bound
    assert d.share_assignment(d.share_heartbeat("x", d.members()["x"].member_epoch)) == {"t": [0]}


# -- one group ID, one kind --------------------------------------------------------------------


def test_a_classic_or_consumer_group_id_is_not_a_share_group() -> None:
    d = driver()
    d.commit({("t", 0): 5}, group="classic")  # a classic group holding only offsets
    d.consumer_heartbeat("c", 0, group="consumer", topics=["t"])
    for group in ("classic", "consumer"):
        refused = d.share_heartbeat("m", 0, group=group)
        assert (error_of(refused), refused.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Group {group} is not a share group.",
        )
        described = d.shard.share.describe(group)
        assert described.error_message == f"Group {group} is not a share group."


def test_a_share_group_id_is_refused_by_the_other_protocols() -> None:
    d = driver()
    d.share_heartbeat("m", 0)
    join = d.replies[d.join()]
    assert (join.error_code, join.member_id) == (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
    consumer = d.consumer_heartbeat("c", 0, topics=["t"])
    assert (error_of(consumer), consumer.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group g is not a consumer group.",
    )
    assert d.shard.describe_consumer_group("g").error_message == "Group g is not a consumer group."
    classic = d.shard.describe("g")
    assert (classic.group_state, classic.error_message) == (
        "Dead",
        "Group g is not a classic group.",
    )
    assert d.replies[d.heartbeat("m", 1)].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    committed = d.replies[d.commit({("t", 0): 1})]
    assert committed.topics[0].partitions[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert d.shard.membership.group("g") is None


# -- records -----------------------------------------------------------------------------------


def test_replaying_the_records_rebuilds_the_same_groups() -> None:
    d = driver(t=3, u=1)
    ready(d, "a", "b", topics=["t", "u"])
    d.share_heartbeat("c", 0, topics=["u"], rack_id="r1")
    d.share_heartbeat("b", -1)
    # Kafka's format: every record through its key and value bytes.
    records = list(decode_batch(encode_batch(d.log)))
    assert {type(r) for r in records} == {ShareGroupRecord}
    assert {r.record_type for r in records} == set(T)
    loaded = CoordinatorShard(0, SETTINGS, d.topics, clock=lambda: d.now)
    for record in records:
        loaded.replay(record)
    original, rebuilt = d.shard.share_groups.group("g"), loaded.share_groups.group("g")
    attributes = ("group_epoch", "metadata_hash", "assignment_epoch", "assignment_timestamp")
    for attribute in (*attributes, "members", "target"):
        assert getattr(rebuilt, attribute) == getattr(original, attribute), attribute
    assert rebuilt.state_partitions == original.state_partitions
    assert loaded.share.describe("g") == d.shard.share.describe("g")
    # The loaded members must heartbeat within a session.
    assert {k.member_id for k in (s.key for s in loaded.loaded().timers)} == {"a", "c"}


def test_a_failed_write_leaves_the_group_as_it_was() -> None:
    d = driver()
    ready(d, "a")
    before = d.shard.share.describe("g")
    d.fail_appends = ErrorCode.NOT_LEADER_OR_FOLLOWER
    answer = d.share_heartbeat("b", 0)
    assert error_of(answer) == ErrorCode.NOT_COORDINATOR
    assert d.shard.share.describe("g") == before


# -- ListGroups, DescribeGroups, DeleteGroups ----------------------------------------------------


def test_listed_as_share_groups() -> None:
    d = driver()
    d.share_heartbeat("m", 0)
    d.share_heartbeat("n", 0, group="idle")
    d.share_heartbeat("n", -1, group="idle")
    listed = {
        (g.group_id, g.protocol_type, g.group_type, g.group_state)
        for g in d.shard.list_groups([], ["Share"])
    }
    assert listed == {("g", "share", "share", "Stable"), ("idle", "share", "share", "Empty")}
    assert [g.group_id for g in d.shard.list_groups(["empty"], [])] == ["idle"]
    assert d.shard.list_groups([], ["consumer"]) == []


def test_delete_groups_deletes_an_empty_share_group_and_its_share_state() -> None:
    d = driver(t=2)
    ready(d, "a")
    shares, _, _ = service(d, persister := FakePersister())
    persister.states = {
        ShareKey("g", d.topics.id_of("t"), p): PartitionState(2, -1) for p in range(2)
    }
    token = d.send("delete_groups", ["g"])
    assert d.replies[token][0].error_code == ErrorCode.NON_EMPTY_GROUP
    d.share_heartbeat("a", -1)

    async def delete() -> Any:
        failed = await shares.delete_state_of_groups(d.shard, ["g", "nope"])
        assert failed == {}
        return d.replies[d.send("delete_groups", ["g", "nope"])]

    results = asyncio.run(delete())
    assert [(r.group_id, r.error_code) for r in results] == [
        ("g", 0),
        ("nope", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
    assert persister.states == {}
    assert d.shard.share_groups.group("g") is None
    assert d.log[-1] == ShareGroupRecord(T.GROUP_METADATA, "g", "", None)


# -- the service: initialization and the offset admin APIs -----------------------------------


def test_the_service_initializes_share_state_through_the_persister() -> None:
    d = driver(t=2)
    shares, runtime, _ = service(d, persister := FakePersister())
    t = d.topics.id_of("t")

    async def scenario() -> None:
        request = ShareGroupHeartbeatRequest(
            group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=["t"]
        )
        answer = await shares.heartbeat(_caller(), request)
        assert (answer.member_epoch, answer.assignment.topic_partitions) == (2, [])
        await runtime.settle()
        assert persister.calls == [
            ("initialize", (ShareKey("g", t, 0), 2, -1)),
            ("initialize", (ShareKey("g", t, 1), 2, -1)),
        ]
        assert set(d.shard.share_groups.group("g").initialized_partitions()[t]) == {0, 1}
        request.member_epoch, request.subscribed_topic_names = 2, None
        answer = await shares.heartbeat(_caller(), request)
        assert answer.member_epoch == 3
        assert [tp.partitions for tp in answer.assignment.topic_partitions] == [[0, 1]]

    asyncio.run(scenario())


def test_the_service_forgets_partitions_the_persister_failed_to_initialize() -> None:
    d = driver(t=2)
    shares, runtime, _ = service(d, persister := FakePersister())
    persister.failing[(d.topics.id_of("t"), 1)] = ErrorCode.COORDINATOR_NOT_AVAILABLE

    async def scenario() -> None:
        request = ShareGroupHeartbeatRequest(
            group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=["t"]
        )
        await shares.heartbeat(_caller(), request)
        await runtime.settle()

    asyncio.run(scenario())
    state = d.shard.share_groups.group("g").state_partitions
    assert (state.initializing, state.initialized) == ({}, {})


def test_describe_share_group_offsets() -> None:
    d = driver(t=2)
    shares, _, replicas = service(d, persister := FakePersister())
    t = d.topics.id_of("t")
    persister.states[ShareKey("g", t, 0)] = PartitionState(3, 10, 4, delivery_complete_count=2)
    persister.states[ShareKey("g", t, 1)] = PartitionState(3, 5, 4)
    replicas.high_watermarks[("t", 0)] = 20
    request = DescribeShareGroupOffsetsRequestGroup(
        group_id="g",
        topics=[
            DescribeShareGroupOffsetsRequestTopic(topic_name="t", partitions=[0, 1]),
            DescribeShareGroupOffsetsRequestTopic(topic_name="gone", partitions=[0]),
        ],
    )
    answer = asyncio.run(shares.describe_offsets(request))
    rows = [
        (topic.topic_name, p.partition_index, p.start_offset, p.leader_epoch, p.lag, p.error_code)
        for topic in answer.topics
        for p in topic.partitions
    ]
    assert rows == [
        ("t", 0, 10, 4, 20 - 10 - 2, 0),
        ("t", 1, 5, 4, -1, 0),  # the delivered count is not known yet
        ("gone", 0, -1, 0, -1, 0),
    ]
    # topics null: the partitions with share state, which this group has none of.
    everything = asyncio.run(shares.describe_offsets(DescribeShareGroupOffsetsRequestGroup("g")))
    assert (everything.error_code, everything.topics) == (0, [])


def test_alter_share_group_offsets() -> None:
    d = driver(t=2)
    shares, _, _ = service(d, persister := FakePersister())
    t = d.topics.id_of("t")
    topics = [
        AlterShareGroupOffsetsRequestTopic(
            topic_name="t",
            partitions=[
                AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=7),
                AlterShareGroupOffsetsRequestPartition(partition_index=9, start_offset=1),
            ],
        )
    ]
    # The group does not exist yet: altering creates it, at a bumped epoch (KAFKA-20910).
    answer = asyncio.run(shares.alter_offsets("g", topics))
    assert answer.error_code == 0
    (topic,) = answer.responses
    assert (topic.topic_name, topic.topic_id) == ("t", t)
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [
        (0, 0),
        (9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert persister.calls == [("initialize", (ShareKey("g", t, 0), 2, 7))]
    group = d.shard.share_groups.group("g")
    assert (group.group_epoch, group.initialized_partitions()) == (2, {t: frozenset({0})})
    # A group with members cannot be altered.
    d.share_heartbeat("m", 0)
    busy = asyncio.run(shares.alter_offsets("g", topics))
    assert (busy.error_code, busy.error_message, busy.responses) == (
        ErrorCode.NON_EMPTY_GROUP,
        "The group is not empty.",
        [],
    )


def test_delete_share_group_offsets() -> None:
    d = driver(t=2, u=1)
    shares, _, _ = service(d, persister := FakePersister())
    ready(d, "m")
    persister.states[ShareKey("g", d.topics.id_of("t"), 0)] = PartitionState(2, -1)
    busy = asyncio.run(shares.delete_offsets("g", ["t"]))
    assert busy.error_code == ErrorCode.NON_EMPTY_GROUP
    d.share_heartbeat("m", -1)
    answer = asyncio.run(shares.delete_offsets("g", ["t", "u", "gone"]))
    rows = [(r.topic_name, r.error_code, r.error_message) for r in answer.responses]
    assert rows == [
        ("t", 0, None),
        ("u", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."),
        (
            "gone",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        ),
    ]
    assert [c for c in persister.calls if c[0] == "delete"] == [
        ("delete", ShareKey("g", d.topics.id_of("t"), p)) for p in (0, 1)
    ]
    state = d.shard.share_groups.group("g").state_partitions
    assert (state.initialized, state.deleting) == ({}, {})
    missing = asyncio.run(shares.delete_offsets("other", ["t"]))
    assert (missing.error_code, missing.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group other not found.",
    )


def _caller() -> Caller:
    return Caller("client", "/127.0.0.1", 1)


def test_settings_default_to_kafkas() -> None:
    s = CoordinatorSettings()
    assert (s.share_session_timeout_ms, s.share_heartbeat_interval_ms, s.share_max_size) == (
        45_000,
        5000,
        200,
    )
    assert s.share_initialize_retry_interval_ms == 30_000
    assert (
        s.share_assignment_interval_ms,
        s.share_min_assignment_interval_ms,
        s.share_max_assignment_interval_ms,
    ) == (1000, 0, 15_000)


def test_a_join_writes_kafkas_records_in_kafkas_order() -> None:
    d = driver(t=1)
    d.share_heartbeat("a", 0)
    assert [(r.record_type, r.member_id) for r in d.log] == [
        (T.MEMBER_METADATA, "a"),
        (T.GROUP_METADATA, ""),
        (T.TARGET_ASSIGNMENT_MEMBER, "a"),
        (T.TARGET_ASSIGNMENT_METADATA, ""),
        (T.CURRENT_MEMBER_ASSIGNMENT, "a"),
        (T.STATE_PARTITION_METADATA, ""),
    ]
    current = d.log[4].value
    assert (current.member_epoch, current.previous_member_epoch, current.state) == (2, 0, 0)


def test_a_deleted_topic_leaves_the_share_state_metadata() -> None:
    d = driver(t=1, u=1)
    ready(d, "a", topics=["t", "u"])
    d.topics.delete("t")
    d.apply(d.shard.topic_deleted("t"))
    state = d.shard.share_groups.group("g").state_partitions
    assert [v.name for v in state.initialized.values()] == ["u"]
