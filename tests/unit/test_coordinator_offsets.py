"""Committed offsets: Kafka's commit rules, fetch, delete, expiry, and rebuilding from the log."""

from __future__ import annotations

from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.interface import Caller
from kpybroker.coordinator.offsets_topic_records import (
    GroupRecord,
    OffsetRecord,
    decode_batch,
    encode_batch,
)
from kpybroker.coordinator.shard import CoordinatorShard
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kpybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from tests.helpers.coordinator_driver import (
    SETTINGS,
    Driver,
    commit_request,
    error_of,
    subscription,
)

MINUTE = 60_000


def errors(response) -> dict[tuple[str, int], ErrorCode]:
    return {
        (t.name, p.partition_index): ErrorCode(p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def fetch(d: Driver, group: str = "g", topics: dict[str, list[int]] | None = None):
    wanted = None
    if topics is not None:
        wanted = [
            OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics.items()
        ]
    return d.shard.fetch_offsets(OffsetFetchRequestGroup(group_id=group, topics=wanted))


def committed(d: Driver, group: str = "g") -> dict[tuple[str, int], tuple[int, int, str]]:
    return {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
        for t in fetch(d, group).topics
        for p in t.partitions
    }


def test_admin_commit_creates_a_simple_group_and_round_trips_epoch_and_metadata() -> None:
    d = Driver()
    token = d.commit({("t", 0): 42, ("t", 1): 7}, leader_epoch=5, metadata="ünïcode ✓")
    assert set(errors(d.replies[token]).values()) == {ErrorCode.NONE}
    assert committed(d) == {("t", 0): (42, 5, "ünïcode ✓"), ("t", 1): (7, 5, "ünïcode ✓")}
    assert d.state() == "Empty" and d.shard.describe("g").protocol_type == ""
    none = fetch(d, topics={"t": [0, 9], "u": [0]})
    assert [
        (p.partition_index, p.committed_offset, p.metadata)
        for t in none.topics
        for p in t.partitions
    ] == [
        (0, 42, "ünïcode ✓"),
        (9, -1, ""),
        (0, -1, ""),
    ]
    assert fetch(d, "unknown").topics == []


def test_a_commit_answers_each_topic_with_the_id_it_was_given() -> None:
    # OffsetCommit v10 names topics by ID: the handler names them, and the
    # coordinator's answer carries each topic's ID back, as Kafka's does.
    d = Driver()
    request = commit_request({("t", 0): 1, ("u", 0): 2})
    ids = {"t": bytes(range(16)), "u": bytes(range(1, 17))}
    for topic in request.topics:
        topic.topic_id = ids[topic.name]
    token = d.send("commit", Caller("admin", "/127.0.0.1", 10), request)
    assert [(t.name, t.topic_id, t.partitions[0].error_code) for t in d.replies[token].topics] == [
        ("t", ids["t"], 0),
        ("u", ids["u"], 0),
    ]


def test_a_null_metadata_is_stored_as_empty() -> None:
    d = Driver()
    d.commit({("t", 0): 1}, metadata=None)
    assert committed(d)[("t", 0)] == (1, -1, "")


def test_commit_is_acknowledged_only_after_the_append() -> None:
    d = Driver()
    d.fail_appends = ErrorCode.NOT_ENOUGH_REPLICAS
    token = d.commit({("t", 0): 1})
    assert errors(d.replies[token]) == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert committed(d) == {}
    d.fail_appends = None
    d.commit({("t", 0): 1})
    assert [type(r) for r in d.log] == [OffsetRecord]


def test_admin_commits_only_while_the_group_is_empty() -> None:
    d = Driver()
    generation, [member] = d.stable_group(1)
    assert errors(d.replies[d.commit({("t", 0): 1})]) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    ok = d.commit({("t", 0): 1}, member_id=member, generation=generation)
    assert errors(d.replies[ok]) == {("t", 0): ErrorCode.NONE}
    stale = d.commit({("t", 0): 2}, member_id=member, generation=generation - 1)
    assert errors(d.replies[stale]) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    stranger = d.commit({("t", 0): 2}, member_id="x", generation=generation)
    assert errors(d.replies[stranger]) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    d.join(member, protocols=[("range", subscription("t", "u"))])
    assert d.state() == "CompletingRebalance"
    during = d.commit({("t", 0): 3}, member_id=member, generation=generation + 1)
    assert errors(d.replies[during]) == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}
    assert committed(d)[("t", 0)][0] == 1


def test_member_commit_to_a_missing_group_depends_on_the_version() -> None:
    d = Driver()
    old = d.commit({("t", 0): 1}, member_id="m", generation=3, version=8)
    new = d.commit({("t", 0): 1}, member_id="m", generation=3, version=9)
    assert errors(d.replies[old]) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert errors(d.replies[new]) == {("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}


def test_metadata_longer_than_the_limit_is_refused_per_partition() -> None:
    d = Driver(CoordinatorSettings(offset_metadata_max_bytes=4))
    token = d.commit({("t", 0): 1}, metadata="12345")
    assert errors(d.replies[token]) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert d.log == []


def test_commit_keeps_the_members_session_alive() -> None:
    d = Driver()
    generation, [member] = d.stable_group(1)
    for _ in range(5):
        d.advance(6_000)
        d.commit({("t", 0): 1}, member_id=member, generation=generation)
    assert d.state() == "Stable"


def test_fetch_all_offsets_of_a_group() -> None:
    d = Driver()
    d.commit({("a", 0): 1, ("a", 1): 2, ("b", 0): 3})
    all_of_them = fetch(d)
    assert {t.name: [p.partition_index for p in t.partitions] for t in all_of_them.topics} == {
        "a": [0, 1],
        "b": [0],
    }


def test_delete_groups_only_when_empty_with_tombstones_for_its_offsets() -> None:
    d = Driver()
    d.stable_group(1, group="busy")
    d.commit({("t", 0): 1, ("t", 1): 2}, group="idle")
    token = d.send("delete_groups", ["busy", "idle", "nope"])
    assert [(r.group_id, error_of(r)) for r in d.replies[token]] == [
        ("busy", ErrorCode.NON_EMPTY_GROUP),
        ("idle", ErrorCode.NONE),
        ("nope", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
    tombstones = [r for r in d.log if r.value is None]
    assert {(type(r), getattr(r, "partition", None)) for r in tombstones} == {
        (OffsetRecord, 0),
        (OffsetRecord, 1),
        (GroupRecord, None),
    }
    assert d.shard.describe("idle").group_state == "Dead" and committed(d, "idle") == {}


def offset_delete(group: str, topics: dict[str, list[int]]) -> OffsetDeleteRequest:
    return OffsetDeleteRequest(
        group_id=group,
        topics=[
            OffsetDeleteRequestTopic(
                name=t, partitions=[OffsetDeleteRequestPartition(partition_index=p) for p in ps]
            )
            for t, ps in topics.items()
        ],
    )


def test_offset_delete_refuses_topics_the_group_consumes() -> None:
    d = Driver()
    generation, [member] = d.stable_group(1)  # subscribes to topic "t"
    d.commit({("t", 0): 1, ("old", 0): 2}, member_id=member, generation=generation)
    token = d.send("delete_offsets", offset_delete("g", {"t": [0], "old": [0]}))
    assert errors(d.replies[token]) == {
        ("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ("old", 0): ErrorCode.NONE,
    }
    assert set(committed(d)) == {("t", 0)}
    missing = d.send("delete_offsets", offset_delete("nope", {"t": [0]}))
    assert error_of(d.replies[missing]) == ErrorCode.GROUP_ID_NOT_FOUND


def test_offsets_of_an_empty_group_expire_then_the_group_goes() -> None:
    d = Driver(CoordinatorSettings(initial_rebalance_delay_ms=0, offsets_retention_ms=10 * MINUTE))
    d.commit({("t", 0): 1})
    d.advance(9 * MINUTE)
    d.apply(d.shard.expire())
    assert ("t", 0) in committed(d)
    d.advance(MINUTE)
    d.apply(d.shard.expire())
    assert committed(d) == {} and d.state() == "Dead"
    assert [(type(r), r.value) for r in d.log[-2:]] == [(OffsetRecord, None), (GroupRecord, None)]


def test_a_stable_group_keeps_offsets_of_topics_it_consumes() -> None:
    d = Driver(CoordinatorSettings(initial_rebalance_delay_ms=0, offsets_retention_ms=MINUTE))
    generation, [member] = d.stable_group(1)
    d.commit({("t", 0): 1, ("gone", 0): 1}, member_id=member, generation=generation)
    for _ in range(13):
        d.advance(5_000)
        d.heartbeat(member, generation)
    d.apply(d.shard.expire())
    assert set(committed(d)) == {("t", 0)} and d.state() == "Stable"


def test_an_explicit_retention_sets_an_expire_timestamp() -> None:
    d = Driver()
    d.commit({("t", 0): 1}, retention_ms=MINUTE, version=2)
    [record] = d.log
    assert record.value.expire_timestamp == d.now + MINUTE
    d.advance(MINUTE)
    d.apply(d.shard.expire())
    assert committed(d) == {}


def test_state_is_rebuilt_from_the_log_bytes() -> None:
    d = Driver()
    generation, [member] = d.stable_group(1)
    d.commit({("t", 0): 10, ("t", 1): 20}, member_id=member, generation=generation, leader_epoch=3)
    d.commit({("u", 0): 5}, group="simple", metadata="m")
    d.commit({("u", 0): 6}, group="simple", metadata="m2")
    d.send("delete_groups", ["never"])
    batch = encode_batch(d.log)
    again = Driver()
    replayed = again.shard = CoordinatorShard(0, SETTINGS, again.topics, clock=lambda: again.now)
    for record in decode_batch(bytes(batch)):
        replayed.replay(record)
    again.apply(replayed.loaded())
    assert committed(again) == committed(d)
    assert committed(again, "simple") == {("u", 0): (6, -1, "m2")}
    described = replayed.describe("g")
    assert (described.group_state, [m.member_id for m in described.members]) == ("Stable", [member])
    assert described.members[0].member_assignment == f"assignment-{member}".encode()
    # The loaded member resumes with its generation; its session timer runs again.
    assert again.replies[again.heartbeat(member, generation)].error_code == 0
    again.advance(60_000)  # ...and without heartbeats it ends, emptying the group
    assert replayed.describe("g").group_state == "Empty"


def test_a_deleted_topics_offsets_go_from_every_group() -> None:
    d = Driver()
    d.commit({("gone", 0): 1, ("kept", 0): 2}, group="a")
    d.commit({("gone", 3): 4}, group="b")
    d.apply(d.shard.topic_deleted("gone"))
    assert set(committed(d, "a")) == {("kept", 0)} and committed(d, "b") == {}
    assert {(r.group, r.partition) for r in d.log if r.value is None} == {("a", 0), ("b", 3)}
