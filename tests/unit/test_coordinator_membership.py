"""The classic rebalance protocol, driven through the shard's events without sockets or loops."""

from __future__ import annotations

from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.interface import HEARTBEAT_TIMER, TimerKey
from kpybroker.coordinator.offsets_topic_records import GroupRecord
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.leave_group import MemberIdentity
from tests.helpers.coordinator_driver import (
    RANGE,
    REBALANCE_MS,
    SESSION_MS,
    SETTINGS,
    Driver,
    error_of,
    subscription,
)


def test_member_id_required_round_trip_then_first_generation() -> None:
    d = Driver()
    first = d.replies[d.join(client_id="app")]
    assert error_of(first) == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("app-")
    assert d.state() == "Empty"
    token = d.join(first.member_id)
    assert token not in d.replies  # parked until the (zero) initial delay runs out
    d.advance(0)
    joined = d.replies[token]
    assert (error_of(joined), joined.generation_id, joined.leader) == (0, 1, first.member_id)
    assert joined.protocol_type == "consumer" and joined.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in joined.members] == [(first.member_id, RANGE[0][1])]
    assert d.state() == "CompletingRebalance"


def test_versions_before_4_join_without_the_member_id_step() -> None:
    d = Driver()
    token = d.join(version=3)
    d.advance(0)
    assert error_of(d.replies[token]) == ErrorCode.NONE
    assert d.replies[token].member_id.startswith("client-")


def test_a_pending_member_id_expires_with_its_session() -> None:
    d = Driver()
    member = d.new_member()
    d.advance(SESSION_MS)
    assert error_of(d.replies[d.join(member)]) == ErrorCode.UNKNOWN_MEMBER_ID


def test_protocol_chosen_by_vote_among_protocols_every_member_supports() -> None:
    d = Driver()
    meta = subscription("t")
    prefs = [
        [("range", meta), ("roundrobin", meta), ("sticky", meta)],
        [("roundrobin", meta), ("range", meta)],
        [("roundrobin", meta), ("range", meta), ("sticky", meta)],
    ]
    ids = [d.new_member(protocols=p) for p in prefs]
    tokens = [d.join(m, protocols=p) for m, p in zip(ids, prefs, strict=True)]
    d.advance(0)
    assert {d.replies[t].protocol_name for t in tokens} == {"roundrobin"}
    # A member sharing no protocol with the group, or of another protocol type, is refused.
    refused = d.join(protocols=[("sticky", meta)])
    assert error_of(d.replies[refused]) == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    other_type = d.join(protocols=[("range", meta)], protocol_type="connect")
    assert error_of(d.replies[other_type]) == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    d = Driver(CoordinatorSettings(initial_rebalance_delay_ms=3000))
    a, b = d.new_member(), d.new_member()
    ta = d.join(a)
    d.advance(2000)
    tb = d.join(b)  # a newcomer: when the delay runs out (t=3000), another one starts
    d.advance(3900)
    assert ta not in d.replies and tb not in d.replies
    d.advance(100)
    assert d.replies[ta].generation_id == d.replies[tb].generation_id == 1
    assert len(d.replies[ta].members) + len(d.replies[tb].members) == 2


def test_sync_hands_out_the_leaders_assignment_bytes_untouched_after_the_append() -> None:
    d = Driver()
    leader, follower = d.new_member(), d.new_member()
    tokens = [d.join(leader), d.join(follower)]
    d.advance(0)
    generation = d.replies[tokens[0]].generation_id
    leader = d.replies[tokens[0]].leader
    follower = next(d.replies[t].member_id for t in tokens if d.replies[t].member_id != leader)
    waiting = d.sync(follower, generation)
    assert waiting not in d.replies  # the follower waits for the leader
    odd = b"\x00\xffnot a consumer assignment"
    done = d.sync(leader, generation, {leader: b"L", follower: odd, "stranger": b"?"})
    assert d.replies[waiting].assignment == odd and d.replies[done].assignment == b"L"
    assert d.state() == "Stable"
    [record] = [r for r in d.log if isinstance(r, GroupRecord) and r.value.members]
    assert {m.member_id: m.assignment for m in record.value.members} == {
        leader: b"L",
        follower: odd,
    }
    # A later SyncGroup in Stable returns the stored assignment again.
    assert d.replies[d.sync(follower, generation)].assignment == odd


def test_members_missing_from_the_assignment_get_an_empty_one() -> None:
    d = Driver()
    a, b = d.new_member(), d.new_member()
    tokens = [d.join(a), d.join(b)]
    d.advance(0)
    leader = d.replies[tokens[0]].leader
    other = b if leader == a else a
    waiting = d.sync(other, 1)
    d.sync(leader, 1, {leader: b"all of it"})
    assert d.replies[waiting].assignment == b"" and error_of(d.replies[waiting]) == 0


def test_heartbeat_answers_by_state_and_generation() -> None:
    d = Driver()
    generation, [member] = d.stable_group(1)
    assert error_of(d.replies[d.heartbeat(member, generation)]) == ErrorCode.NONE
    assert error_of(d.replies[d.heartbeat(member, generation + 1)]) == ErrorCode.ILLEGAL_GENERATION
    assert error_of(d.replies[d.heartbeat("nobody", generation)]) == ErrorCode.UNKNOWN_MEMBER_ID
    assert error_of(d.replies[d.heartbeat(member, 1, group="other")]) == ErrorCode.UNKNOWN_MEMBER_ID
    d.join(member)  # the leader rejoining starts a rebalance
    assert d.state() == "CompletingRebalance"  # it was the only member: the phase ended at once


def test_heartbeat_tells_members_of_a_rebalance() -> None:
    d = Driver()
    generation, [a, b] = d.stable_group(2)
    d.join(b, protocols=[("range", subscription("t", "u"))])  # new metadata: rebalance
    assert d.state() == "PreparingRebalance"
    assert error_of(d.replies[d.heartbeat(a, generation)]) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = d.join(a)
    assert d.replies[rejoin].generation_id == generation + 1


def test_unchanged_follower_rejoining_a_stable_group_causes_no_rebalance() -> None:
    d = Driver()
    generation, [leader, follower] = d.stable_group(2)
    response = d.replies[d.join(follower)]
    assert (response.generation_id, response.leader, response.members) == (generation, leader, [])
    assert d.state() == "Stable"


def test_session_timeout_removes_a_silent_member_and_rebalances() -> None:
    d = Driver()
    generation, [a, b] = d.stable_group(2)
    for _ in range(4):
        d.advance(SESSION_MS // 2)
        d.heartbeat(a, generation)  # only a keeps its session
    assert d.state() == "PreparingRebalance"
    rejoin = d.join(a)
    response = d.replies[rejoin]
    assert response.generation_id == generation + 1
    assert [m.member_id for m in response.members] == [a]
    assert b not in {m.member_id for m in d.shard.describe("g").members}


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    d = Driver()
    generation, [a, b] = d.stable_group(2)
    parked = d.join(a, protocols=[("range", subscription("x"))])
    d.advance(SESSION_MS // 2)
    d.heartbeat(b, generation)  # alive, but never rejoins
    assert parked not in d.replies
    d.advance(REBALANCE_MS)
    assert d.replies[parked].generation_id == generation + 1
    assert [m.member_id for m in d.replies[parked].members] == [a]


def test_members_that_never_sync_are_dropped_after_the_rebalance_timeout() -> None:
    d = Driver()
    a, b = d.new_member(rebalance_ms=5000), d.new_member(rebalance_ms=5000)
    tokens = [d.join(a, rebalance_ms=5000), d.join(b, rebalance_ms=5000)]
    d.advance(0)
    leader = d.replies[tokens[0]].leader
    generation = d.replies[tokens[0]].generation_id
    other = b if leader == a else a
    d.sync(leader, generation, {leader: b"x", other: b"y"})
    assert d.state() == "Stable"  # the leader's assignment is stored; the other never syncs
    d.advance(5000)
    assert d.state() == "PreparingRebalance"
    assert [m.member_id for m in d.shard.describe("g").members] == [leader]


def test_leave_group_rebalances_and_removes_static_members_by_instance_id() -> None:
    d = Driver()
    generation, [a, b] = d.stable_group(2)
    leave = d.send("leave", "g", [MemberIdentity(member_id=b), MemberIdentity(member_id="nope")])
    assert [error_of(m) for m in d.replies[leave].members] == [0, ErrorCode.UNKNOWN_MEMBER_ID]
    assert d.state() == "PreparingRebalance"
    assert d.replies[d.join(a)].generation_id == generation + 1  # a was the last to rejoin

    s = Driver()
    join = s.join(instance_id="i-1")
    s.advance(0)
    member = s.replies[join].member_id
    by_instance = s.send("leave", "g", [MemberIdentity(member_id="", group_instance_id="i-1")])
    assert error_of(s.replies[by_instance].members[0]) == ErrorCode.NONE
    assert s.shard.describe("g").members == [] and member


def test_leave_from_an_unknown_group_answers_each_member() -> None:
    d = Driver()
    leave = d.send("leave", "nope", [MemberIdentity(member_id="m")])
    assert error_of(d.replies[leave]) == ErrorCode.NONE
    assert error_of(d.replies[leave].members[0]) == ErrorCode.UNKNOWN_MEMBER_ID


def test_static_member_rejoins_without_rebalance_and_fences_its_old_id() -> None:
    d = Driver()
    joins = [d.join(instance_id=f"i-{n}", version=7) for n in range(2)]
    d.advance(0)
    generation = d.replies[joins[0]].generation_id
    leader = d.replies[joins[0]].leader
    old = {d.replies[t].member_id: n for n, t in enumerate(joins)}
    for member in old:
        d.sync(member, generation, {m: b"a" for m in old} if member == leader else None)
    assert d.state() == "Stable"
    follower = next(m for m in old if m != leader)
    instance = f"i-{old[follower]}"
    rejoin = d.replies[d.join(instance_id=instance, version=7)]
    assert error_of(rejoin) == ErrorCode.NONE
    assert rejoin.generation_id == generation and d.state() == "Stable"
    assert rejoin.member_id != follower and rejoin.members == []
    fenced = d.heartbeat(follower, generation, instance_id=instance)
    assert error_of(d.replies[fenced]) == ErrorCode.FENCED_INSTANCE_ID
    assert d.replies[d.sync(rejoin.member_id, generation, instance_id=instance)].assignment == b"a"
    assert (
        d.replies[d.heartbeat(rejoin.member_id, generation, instance_id=instance)].error_code == 0
    )


def test_static_leader_rejoining_with_v9_skips_the_assignment() -> None:
    d = Driver()
    join = d.join(instance_id="solo")
    d.advance(0)
    d.sync(d.replies[join].member_id, 1, {d.replies[join].member_id: b"a"})
    again = d.replies[d.join(instance_id="solo")]
    assert again.skip_assignment and again.leader == again.member_id and len(again.members) == 1
    older = d.replies[d.join(instance_id="solo", version=8)]
    assert not older.skip_assignment and older.leader == again.member_id != older.member_id


def test_static_member_is_kept_through_a_rebalance_it_misses() -> None:
    d = Driver()
    # A short rebalance timeout: the phase must end before the static member's session does.
    joins = [d.join(instance_id="s", rebalance_ms=5000), d.join(version=3, rebalance_ms=5000)]
    d.advance(0)
    gen = d.replies[joins[0]].generation_id
    ids = [d.replies[t].member_id for t in joins]
    leader = d.replies[joins[0]].leader
    for m in ids:
        d.sync(m, gen, {i: b"" for i in ids} if m == leader else None)
    dynamic = ids[1]
    rejoin = d.join(dynamic, protocols=[("range", subscription("z"))], rebalance_ms=5000)
    d.advance(5000)
    assert d.replies[rejoin].generation_id == gen + 1
    assert {m.member_id for m in d.shard.describe("g").members} == set(ids)


def test_sync_errors_for_out_of_order_and_stale_requests() -> None:
    d = Driver()
    before = d.sync("ghost", 0)
    assert error_of(d.replies[before]) == ErrorCode.UNKNOWN_MEMBER_ID
    generation, [member] = d.stable_group(1)
    stale = d.sync(member, generation - 1)
    assert error_of(d.replies[stale]) == ErrorCode.ILLEGAL_GENERATION
    assert error_of(d.replies[d.sync("ghost", generation)]) == ErrorCode.UNKNOWN_MEMBER_ID
    assert d.state() == "Stable"
    d.join(member, protocols=[("range", subscription("q"))])  # rebalance, then SyncGroup early
    d.heartbeat(member, generation)
    assert d.state() == "CompletingRebalance"


def test_failed_assignment_append_answers_the_members_and_rebalances() -> None:
    d = Driver()
    member = d.new_member()
    join = d.join(member)
    d.advance(0)
    d.fail_appends = ErrorCode.NOT_LEADER_OR_FOLLOWER
    sync = d.sync(member, d.replies[join].generation_id, {member: b"x"})
    assert error_of(d.replies[sync]) == ErrorCode.NOT_COORDINATOR
    assert d.state() == "PreparingRebalance"


def test_group_max_size() -> None:
    d = Driver(CoordinatorSettings(initial_rebalance_delay_ms=0, max_group_size=1))
    d.stable_group(1)
    assert error_of(d.replies[d.join(version=3)]) == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_describe_and_list() -> None:
    d = Driver()
    generation, [member] = d.stable_group(1)
    described = d.shard.describe("g")
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    [m] = described.members
    assert (m.member_id, m.client_host, m.member_metadata) == (member, "/127.0.0.1", RANGE[0][1])
    assert d.shard.describe("missing").group_state == "Dead"
    assert [g.group_id for g in d.shard.list_groups(["stable"])] == ["g"]
    assert d.shard.list_groups(["Empty"]) == [] and generation == 1


def test_timers_cost_nothing_once_a_group_is_empty() -> None:
    d = Driver()
    generation, [member] = d.stable_group(1)
    assert TimerKey(HEARTBEAT_TIMER, "g", member) in d.timers
    d.send("leave", "g", [MemberIdentity(member_id=member)])
    assert d.state() == "Empty" and d.timers == {} and generation


def test_unload_answers_parked_requests_with_not_coordinator() -> None:
    d = Driver(CoordinatorSettings(initial_rebalance_delay_ms=3000))
    member = d.new_member()
    parked = d.join(member)
    d.apply(d.shard.unload())
    assert error_of(d.replies[parked]) == ErrorCode.NOT_COORDINATOR
    assert SETTINGS.initial_rebalance_delay_ms == 0


def test_a_static_rejoin_that_cannot_be_stored_keeps_the_old_member_id() -> None:
    d = Driver()
    join = d.join(instance_id="s")
    d.advance(0)
    old = d.replies[join].member_id
    d.sync(old, 1, {old: b"a"})
    d.fail_appends = ErrorCode.KAFKA_STORAGE_ERROR
    refused = d.replies[d.join(instance_id="s")]
    assert (error_of(refused), refused.member_id) == (ErrorCode.NOT_COORDINATOR, "")
    d.fail_appends = None
    assert error_of(d.replies[d.heartbeat(old, 1, instance_id="s")]) == ErrorCode.NONE


def test_unparseable_consumer_subscriptions_do_not_stop_the_group() -> None:
    """The subscribed topics are then unknown (Kafka's own join phase fails on some of these)."""
    d = Driver()
    garbage = [("range", b"\x00\x00\x6d\x65\x6d\x62\x65\x72")]
    member = d.new_member(protocols=garbage)
    token = d.join(member, protocols=garbage)
    d.advance(0)
    assert d.replies[token].members[0].metadata == garbage[0][1]
    assert d.shard.membership.group("g").subscribed_topics is None
