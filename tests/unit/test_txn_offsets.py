"""Transactional offsets: TxnOffsetCommit's checks, pending offsets, end markers, reloading.

Kafka's ``OffsetMetadataManager`` (commitTransactionalOffset,
replayEndTransactionMarker, fetchOffsets with requireStable, expiry and
deletion with open transactions) and ``validateTransactionalOffsetCommit``,
driven through the shard; the reload tests write to a real partition log and
read it back with the loader, as a restarted broker or a new coordinator does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from kpybroker.coordinator.group import DEAD
from kpybroker.coordinator.loader import decode_logged_batch
from kpybroker.coordinator.offsets_topic_records import OffsetRecord
from kpybroker.coordinator.partition_runtime import read_partition
from kpybroker.coordinator.runtime import CoordinatorRuntime
from kpybroker.coordinator.service import GroupCoordinator
from kpybroker.coordinator.shard import CoordinatorShard
from kpybroker.log.log_config import LogConfig
from kpybroker.log.partition_log import PartitionLog
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import offset_fetch, txn_offset_commit
from kpybroker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from kpybroker.protocol.messages.offset_fetch import OffsetFetchResponseGroup
from kpybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kpybroker.protocol.records import iter_batches
from kpybroker.security.acls.authorizer import AclAuthorizer
from tests.helpers.coordinator_driver import SETTINGS, Driver, StaticTopics, txn_commit_request
from tests.helpers.fake_services import (
    FakeGroups,
    FakeTopics,
    FakeVerifier,
    call,
    services,
    topic_of,
)
from tests.unit.test_coordinator_offsets import committed, errors, fetch
from tests.unit.test_coordinator_runtime import SETTINGS as RUNTIME_SETTINGS
from tests.unit.test_coordinator_runtime import FakeCluster as RuntimeCluster

PID = 1000
OTHER_PID = 2000
MINUTE = 60_000


def stable_fetch(d: Driver, group: str = "g", topics: dict[str, list[int]] | None = None):
    wanted = None
    if topics is not None:
        wanted = [
            offset_fetch.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
            for t, ps in topics.items()
        ]
    request = offset_fetch.OffsetFetchRequestGroup(group_id=group, topics=wanted)
    return d.shard.fetch_offsets(request, require_stable=True)


def answers(response) -> dict[tuple[str, int], tuple[int, ErrorCode]]:
    return {
        (t.name, p.partition_index): (p.committed_offset, ErrorCode(p.error_code))
        for t in response.topics
        for p in t.partitions
    }


def test_pending_offsets_become_committed_only_when_the_transaction_commits() -> None:
    d = Driver()
    token = d.txn_commit({("t", 0): 42, ("t", 1): 7}, metadata="m")
    assert set(errors(d.replies[token]).values()) == {ErrorCode.NONE}
    assert committed(d) == {}
    assert d.state() == "Empty"  # a simple group, as for an admin's commit
    d.end_transaction(PID, committed=True)
    assert committed(d) == {("t", 0): (42, -1, "m"), ("t", 1): (7, -1, "m")}
    assert answers(stable_fetch(d)) == {
        ("t", 0): (42, ErrorCode.NONE),
        ("t", 1): (7, ErrorCode.NONE),
    }


def test_an_aborted_transaction_leaves_the_committed_offsets() -> None:
    d = Driver()
    d.commit({("t", 0): 5})
    d.txn_commit({("t", 0): 9})
    d.end_transaction(PID, committed=False)
    assert committed(d) == {("t", 0): (5, -1, "")}
    assert not d.shard.offsets.pending.has_open_transactions("g")
    d.end_transaction(PID, committed=True)  # a marker with nothing pending changes nothing
    assert committed(d) == {("t", 0): (5, -1, "")}


def test_require_stable_answers_unstable_for_partitions_with_pending_offsets() -> None:
    d = Driver()
    d.commit({("t", 0): 5, ("t", 1): 6})
    d.txn_commit({("t", 0): 9, ("u", 0): 3})
    # Without require_stable: the last committed offsets.
    assert answers(fetch(d, topics={"t": [0, 1], "u": [0]})) == {
        ("t", 0): (5, ErrorCode.NONE),
        ("t", 1): (6, ErrorCode.NONE),
        ("u", 0): (-1, ErrorCode.NONE),
    }
    asked = stable_fetch(d, topics={"t": [0, 1], "u": [0]})
    assert answers(asked) == {
        ("t", 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        ("t", 1): (6, ErrorCode.NONE),
        ("u", 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
    }
    unstable = asked.topics[0].partitions[0]
    assert (unstable.committed_leader_epoch, unstable.metadata) == (-1, "")
    # "All partitions" are those with a committed offset, as in Kafka.
    assert answers(stable_fetch(d)) == {
        ("t", 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        ("t", 1): (6, ErrorCode.NONE),
    }
    d.end_transaction(PID, committed=True)
    assert answers(stable_fetch(d)) == {
        ("t", 0): (9, ErrorCode.NONE),
        ("t", 1): (6, ErrorCode.NONE),
        ("u", 0): (3, ErrorCode.NONE),
    }


def test_the_later_record_wins_between_a_plain_and_a_transactional_commit() -> None:
    d = Driver()
    d.commit({("t", 0): 1})
    d.txn_commit({("t", 0): 2, ("t", 1): 2})
    d.commit({("t", 1): 3})  # written after the transactional one: it is the newer
    d.end_transaction(PID, committed=True)
    assert {k: v[0] for k, v in committed(d).items()} == {("t", 0): 2, ("t", 1): 3}


def test_producers_transactions_end_independently() -> None:
    d = Driver()
    d.txn_commit({("t", 0): 1}, producer_id=PID)
    d.txn_commit({("t", 1): 2}, producer_id=OTHER_PID)
    d.end_transaction(OTHER_PID, committed=True)
    assert {k: v[0] for k, v in committed(d).items()} == {("t", 1): 2}
    assert answers(stable_fetch(d, topics={"t": [0]})) == {
        ("t", 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    }
    d.end_transaction(PID, committed=True)
    assert {k: v[0] for k, v in committed(d).items()} == {("t", 0): 1, ("t", 1): 2}


def test_kip_447_checks_the_member_and_generation_when_given() -> None:
    d = Driver()
    generation, [member] = d.stable_group(1)
    ok = d.txn_commit({("t", 0): 1}, member_id=member, generation=generation)
    stale = d.txn_commit({("t", 0): 1}, member_id=member, generation=generation - 1)
    unknown = d.txn_commit({("t", 0): 1}, member_id="nobody", generation=generation)
    # Versions 0-2 carry neither: accepted whatever the group's state.
    blind = d.txn_commit({("t", 0): 1})
    assert errors(d.replies[ok]) == {("t", 0): ErrorCode.NONE}
    assert errors(d.replies[stale]) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert errors(d.replies[unknown]) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert errors(d.replies[blind]) == {("t", 0): ErrorCode.NONE}


def test_a_static_member_replaced_by_a_new_instance_is_fenced() -> None:
    d = Driver()
    token = d.join(instance_id="i")
    d.advance(0)
    joined = d.replies[token]
    assert joined.error_code == 0
    generation = joined.generation_id
    fenced = d.txn_commit({("t", 0): 1}, member_id="old", instance_id="i", generation=generation)
    unknown = d.txn_commit(
        {("t", 0): 1}, member_id=joined.member_id, instance_id="j", generation=generation
    )
    assert errors(d.replies[fenced]) == {("t", 0): ErrorCode.FENCED_INSTANCE_ID}
    assert errors(d.replies[unknown]) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}


def test_a_missing_group_is_created_only_without_a_generation() -> None:
    """The coordinator answers as for v6 (GROUP_ID_NOT_FOUND); the handler tells older
    versions ILLEGAL_GENERATION."""
    d = Driver()
    token = d.txn_commit({("t", 0): 1}, group="new", member_id="m", generation=3)
    assert errors(d.replies[token]) == {("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}
    assert d.shard.membership.group("new") is None and d.log == []


def test_a_consumer_groups_members_commit_at_their_member_epoch() -> None:
    """Kafka's ``ConsumerGroup.validateOffsetCommit`` for a transactional commit: the member's
    current epoch (STALE_MEMBER_EPOCH otherwise, as v6 is told), an unknown member refused,
    and a commit naming no member accepted even while the group has members (KAFKA-18060);
    no classic group of the same ID is made."""
    d = Driver(topics=StaticTopics(t=2))
    joined = d.consumer_heartbeat("a", 0, topics=["t"])
    assert (joined.error_code, joined.member_epoch) == (0, 2)
    ok = d.txn_commit({("t", 0): 5}, member_id="a", generation=2)
    stale = d.txn_commit({("t", 0): 6}, member_id="a", generation=1)
    unknown = d.txn_commit({("t", 0): 6}, member_id="b", generation=2)
    anonymous = d.txn_commit({("t", 1): 7})
    assert errors(d.replies[ok]) == {("t", 0): ErrorCode.NONE}
    assert errors(d.replies[stale]) == {("t", 0): ErrorCode.STALE_MEMBER_EPOCH}
    assert errors(d.replies[unknown]) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert errors(d.replies[anonymous]) == {("t", 1): ErrorCode.NONE}
    assert d.shard.membership.group("g") is None
    d.end_transaction(PID, committed=True)
    assert committed(d) == {("t", 0): (5, -1, ""), ("t", 1): (7, -1, "")}


def test_a_rebalancing_group_accepts_its_members_transactional_commits() -> None:
    d = Driver()
    generation, [member] = d.stable_group(1)
    d.join(member)  # the member rejoins: PreparingRebalance, then CompletingRebalance
    d.advance(0)
    assert d.state() == "CompletingRebalance"
    token = d.txn_commit({("t", 0): 1}, member_id=member, generation=generation + 1)
    assert errors(d.replies[token]) == {("t", 0): ErrorCode.NONE}


def test_a_dead_group_is_not_available() -> None:
    d = Driver()
    d.commit({("t", 0): 1})
    d.shard.membership.group("g").transition_to(DEAD)
    token = d.txn_commit({("t", 0): 1})
    assert errors(d.replies[token]) == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}


def test_metadata_longer_than_the_limit_is_refused_per_partition() -> None:
    d = Driver()
    request = txn_commit_request({("t", 0): 1, ("t", 1): 2})
    request.topics[0].partitions[0].committed_metadata = "x" * (
        SETTINGS.offset_metadata_max_bytes + 1
    )
    token = d.send("commit_transactional", request)
    assert errors(d.replies[token]) == {
        ("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE,
        ("t", 1): ErrorCode.NONE,
    }
    d.end_transaction(PID, committed=True)
    assert {k: v[0] for k, v in committed(d).items()} == {("t", 1): 2}


def test_a_failed_append_leaves_nothing_pending() -> None:
    d = Driver()
    d.fail_appends = ErrorCode.NOT_LEADER_OR_FOLLOWER
    token = d.txn_commit({("t", 0): 1})
    assert errors(d.replies[token]) == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert not d.shard.offsets.pending.has_pending("g", "t", 0)


def test_an_offset_with_a_pending_one_does_not_expire_nor_does_its_group() -> None:
    d = Driver()
    d.commit({("t", 0): 1, ("t", 1): 1})
    d.txn_commit({("t", 0): 2})
    d.txn_commit({("u", 0): 2}, group="only-pending", producer_id=OTHER_PID)
    d.advance(SETTINGS.offsets_retention_ms + MINUTE)
    d.apply(d.shard.expire())
    assert set(committed(d)) == {("t", 0)}
    assert d.shard.membership.group("g") is not None
    assert d.shard.membership.group("only-pending") is not None
    d.end_transaction(OTHER_PID, committed=False)
    d.apply(d.shard.expire())
    assert d.shard.membership.group("only-pending") is None


def test_deleting_a_group_deletes_its_pending_offsets() -> None:
    d = Driver()
    d.commit({("t", 0): 1})
    d.txn_commit({("t", 0): 2, ("t", 1): 2})
    token = d.send("delete_groups", ["g"])
    assert [r.error_code for r in d.replies[token]] == [ErrorCode.NONE]
    tombstones = [
        (r.topic, r.partition) for r in d.log if isinstance(r, OffsetRecord) and r.value is None
    ]
    assert tombstones == [("t", 0), ("t", 1)]
    d.end_transaction(PID, committed=True)
    assert committed(d) == {} and d.shard.membership.group("g") is None


def test_offset_delete_writes_a_tombstone_for_a_pending_offset() -> None:
    d = Driver()
    d.txn_commit({("t", 0): 2})
    request = OffsetDeleteRequest(
        group_id="g",
        topics=[
            OffsetDeleteRequestTopic(
                name="t", partitions=[OffsetDeleteRequestPartition(partition_index=0)]
            )
        ],
    )
    token = d.send("delete_offsets", request)
    assert d.replies[token].error_code == ErrorCode.NONE
    assert d.log[-1].value is None
    assert not d.shard.offsets.pending.has_pending("g", "t", 0)


def test_a_deleted_topic_takes_its_pending_offsets() -> None:
    d = Driver()
    d.txn_commit({("gone", 0): 1, ("kept", 0): 1})
    d.apply(d.shard.topic_deleted("gone"))
    assert [(r.topic, r.value) for r in d.log[-1:]] == [("gone", None)]
    d.end_transaction(PID, committed=True)
    assert set(committed(d)) == {("kept", 0)}


# -- the log: transactional batches, markers, reloading ----------------------------


def open_log(tmp_path: Path) -> PartitionLog:
    return PartitionLog(tmp_path / "__consumer_offsets-0", LogConfig())


def reload(plog: PartitionLog) -> CoordinatorShard:
    """A new coordinator of the partition, loaded from its log as the runtime does."""

    async def load() -> CoordinatorShard:
        shard = CoordinatorShard(0, SETTINGS, StaticTopics())
        async for entries in read_partition(plog, 1 << 20, decode_logged_batch):
            shard.replay_logged(entries)
        return shard

    return asyncio.run(load())


def test_the_offsets_are_written_as_the_producers_transactional_batch(tmp_path: Path) -> None:
    d = Driver(plog=open_log(tmp_path))
    d.commit({("t", 0): 1})
    d.txn_commit({("t", 0): 2, ("t", 1): 2}, producer_epoch=3)
    d.txn_commit({("t", 0): 4}, producer_epoch=3)  # no sequence: a second batch is no duplicate
    d.end_transaction(PID, committed=True, producer_epoch=3)
    data = d.plog.read(0, 1 << 20, d.plog.log_end_offset).read_bytes()
    headers = [h for _, h in iter_batches(data)]
    assert [(h.is_transactional, h.is_control, h.producer_id) for h in headers] == [
        (False, False, -1),
        (True, False, PID),
        (True, False, PID),
        (True, True, PID),
    ]
    assert [(h.producer_epoch, h.base_sequence) for h in headers[1:3]] == [(3, -1), (3, -1)]
    assert {k: v[0] for k, v in committed(d).items()} == {("t", 0): 4, ("t", 1): 2}


def test_a_fenced_producers_commit_is_refused_by_the_log(tmp_path: Path) -> None:
    d = Driver(plog=open_log(tmp_path))
    d.txn_commit({("t", 0): 1}, producer_epoch=5)
    token = d.txn_commit({("t", 0): 2}, producer_epoch=4)
    assert errors(d.replies[token]) == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    d.end_transaction(PID, committed=True, producer_epoch=5)
    assert committed(d)[("t", 0)][0] == 1


def test_reloading_keeps_open_transactions_pending_and_ended_ones_ended(tmp_path: Path) -> None:
    d = Driver(plog=open_log(tmp_path))
    d.commit({("t", 0): 1, ("t", 1): 1})
    d.txn_commit({("t", 0): 2}, producer_id=PID)
    d.txn_commit({("t", 1): 3}, producer_id=OTHER_PID)
    d.end_transaction(PID, committed=True)
    d.txn_commit({("t", 2): 5}, producer_id=PID)  # the producer's next transaction: open
    d.commit({("u", 0): 1})
    d.txn_commit({("u", 0): 9}, producer_id=3000)
    d.end_transaction(3000, committed=False)
    shard = reload(d.plog)
    again = Driver()
    again.shard = shard
    assert committed(again) == committed(d)
    assert {k: v[0] for k, v in committed(again).items()} == {
        ("t", 0): 2,
        ("t", 1): 1,
        ("u", 0): 1,
    }
    assert answers(stable_fetch(again, topics={"t": [0, 1, 2]})) == {
        ("t", 0): (2, ErrorCode.NONE),
        ("t", 1): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        ("t", 2): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
    }
    # The open transactions end on the new coordinator, with their markers.
    again.plog = d.plog
    again.end_transaction(OTHER_PID, committed=True)
    again.end_transaction(PID, committed=False)
    assert {k: v[0] for k, v in committed(again).items()} == {
        ("t", 0): 2,
        ("t", 1): 3,
        ("u", 0): 1,
    }
    assert not again.shard.offsets.pending.by_producer


def test_reloading_replays_the_record_order_of_mixed_commits(tmp_path: Path) -> None:
    d = Driver(plog=open_log(tmp_path))
    d.txn_commit({("t", 0): 2})
    d.commit({("t", 0): 3})
    d.end_transaction(PID, committed=True)
    again = Driver()
    again.shard = reload(d.plog)
    assert committed(again)[("t", 0)][0] == committed(d)[("t", 0)][0] == 3


def test_a_marker_replicated_before_the_commits_answer_still_finds_its_offsets() -> None:
    """The offsets are pending from the leader's write, as Kafka replays at write time: a
    transaction that ends while its TxnOffsetCommit waits for the followers (a timeout, a
    fenced producer) ends them too, and none is left for the producer's next transaction."""

    async def scenario() -> None:
        broker = RuntimeCluster()
        runtime = CoordinatorRuntime(RUNTIME_SETTINGS, broker, broker, broker.topics)  # type: ignore[arg-type]
        await runtime.start()
        shard = runtime.shard_for("g")
        request = txn_commit_request({("t", 0): 5})
        commit = asyncio.ensure_future(
            runtime.call(shard, lambda token: shard.commit_transactional(token, request))
        )
        await asyncio.sleep(0.01)
        assert not commit.done()
        [header] = [h for _, h in iter_batches(broker.partition.batches[0])]
        assert (header.is_transactional, header.producer_id) == (True, PID)
        assert runtime.complete_transaction(0, PID, committed=True) == ErrorCode.NONE
        assert shard.offsets.get("g", "t", 0).offset == 5
        broker.partition.replicate()
        response = await asyncio.wait_for(commit, 1)
        assert errors(response) == {("t", 0): ErrorCode.NONE}
        assert not shard.offsets.pending.by_producer
        await runtime.stop()

    asyncio.run(scenario())


def test_offsets_written_but_not_replicated_are_not_left_pending() -> None:
    async def scenario() -> None:
        broker = RuntimeCluster()
        runtime = CoordinatorRuntime(RUNTIME_SETTINGS, broker, broker, broker.topics)  # type: ignore[arg-type]
        await runtime.start()
        shard = runtime.shard_for("g")
        request = txn_commit_request({("t", 0): 5})
        commit = asyncio.ensure_future(
            runtime.call(shard, lambda token: shard.commit_transactional(token, request))
        )
        await asyncio.sleep(0.01)
        assert shard.offsets.pending.has_pending("g", "t", 0)
        [(_, ack)] = broker.partition.acks
        ack.set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)  # leadership lost meanwhile
        response = await asyncio.wait_for(commit, 1)
        assert errors(response) == {("t", 0): ErrorCode.NOT_COORDINATOR}
        assert not shard.offsets.pending.has_pending("g", "t", 0)
        await runtime.stop()

    asyncio.run(scenario())


# -- the service and the handler ------------------------------------------------------


def test_the_service_checks_the_group_id_and_routes_markers_to_loaded_shards() -> None:
    broker = RuntimeCluster()
    coordinator = GroupCoordinator(SETTINGS, broker, broker, broker.topics)  # type: ignore[arg-type]

    async def scenario() -> None:
        empty = await coordinator.commit_transactional_offsets(
            txn_commit_request({("t", 0): 1}, group="")
        )
        assert errors(empty) == {("t", 0): ErrorCode.INVALID_GROUP_ID}
        assert (
            await coordinator.complete_transaction(0, PID, 0, True)
            == ErrorCode.COORDINATOR_NOT_AVAILABLE
        )
        coordinator.runtime.active = True
        shard = coordinator.runtime.shards[0] = CoordinatorShard(0, SETTINGS, StaticTopics())
        assert await coordinator.complete_transaction(1, PID, 0, True) == ErrorCode.NOT_COORDINATOR
        assert await coordinator.complete_transaction(0, PID, 0, True) == ErrorCode.NONE
        assert shard.offsets.offsets == {}

    asyncio.run(scenario())


def test_txn_offset_commit_answers_unknown_partitions_without_the_coordinator() -> None:
    async def commit(request: txn_offset_commit.TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
        return TxnOffsetCommitResponse(
            topics=[
                TxnOffsetCommitResponseTopic(
                    name="t",
                    partitions=[
                        TxnOffsetCommitResponsePartition(
                            partition_index=0, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                        )
                    ],
                )
            ]
        )

    groups = FakeGroups(commit_transactional_offsets=commit)
    topics = FakeTopics(topic_of("t", 1))
    for version, loading in ((1, ErrorCode.COORDINATOR_NOT_AVAILABLE), (3, None), (4, None)):
        request = txn_commit_request({("t", 0): 5, ("t", 3): 5, ("nope", 0): 5})
        response = call(services(topics=topics, groups=groups), request, version)
        assert errors(response) == {
            ("t", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("t", 0): loading or ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        }
    sent = [args[0] for method, args in groups.calls if method == "commit_transactional_offsets"]
    assert [
        [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] for r in sent
    ] == [[("t", [0])]] * 3


def test_txn_offset_commit_adds_or_verifies_the_offsets_partition_first() -> None:
    """v5 (transaction version 2) adds the group's offsets partition to the transaction;
    earlier versions verify it (``transaction.partition.verification.enable``)."""

    async def commit(request: txn_offset_commit.TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
        return TxnOffsetCommitResponse(topics=[])

    groups = FakeGroups(partition_for=lambda group: 7, commit_transactional_offsets=commit)
    topics = FakeTopics(topic_of("t", 1))
    for version, add in ((4, False), (5, True)):
        verifier = FakeVerifier()
        request = txn_commit_request({("t", 0): 5})
        call(services(topics=topics, groups=groups, txn_verifier=verifier), request, version)
        assert verifier.asked == [(request.transactional_id, [("__consumer_offsets", 7)], add)]
    off = services(
        topics=topics,
        groups=groups,
        txn_verifier=(verifier := FakeVerifier()),
        config={"transaction.partition.verification.enable": "false"},
    )
    call(off, txn_commit_request({("t", 0): 5}), 4)
    assert verifier.asked == []
    # A failed add answers every partition: retriable failures as COORDINATOR_NOT_AVAILABLE.
    for failure, answered in (
        (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_EPOCH),
    ):
        failing = services(topics=topics, groups=groups, txn_verifier=FakeVerifier(failure))
        response = call(failing, txn_commit_request({("t", 0): 5, ("nope", 0): 1}), 5)
        assert errors(response) == {
            ("t", 0): answered,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }


def test_txn_offset_commit_with_only_unknown_partitions_does_not_ask_the_coordinator() -> None:
    groups = FakeGroups()
    request = txn_commit_request({("nope", 0): 5}, group="")
    response = call(services(groups=groups), request, 3)
    assert errors(response) == {("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert groups.calls == []


def test_offset_fetch_v7_with_require_stable_asks_for_stable_offsets() -> None:
    def group(_request: object) -> OffsetFetchResponseGroup:
        return OffsetFetchResponseGroup(group_id="g")

    groups = FakeGroups(fetch_offsets=group, fetch_stable_offsets=group)
    topics = [offset_fetch.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
    for stable in (False, True):
        request = offset_fetch.OffsetFetchRequest(
            group_id="g", topics=topics, require_stable=stable
        )
        call(services(groups=groups), request, 7)
    assert [method for method, _ in groups.calls] == ["fetch_offsets", "fetch_stable_offsets"]


def by_topic_id(response: TxnOffsetCommitResponse) -> dict[tuple[bytes, int], ErrorCode]:
    return {
        (t.topic_id, p.partition_index): ErrorCode(p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def v6_request(offsets: dict[tuple[bytes, int], int], **kw: object):
    """A v6 TxnOffsetCommit: topics named by ID only (their names are not on the wire)."""
    request = txn_commit_request({(str(i), p): o for i, ((_, p), o) in enumerate(offsets.items())})
    request.topics = [
        txn_offset_commit.TxnOffsetCommitRequestTopic(
            topic_id=topic_id,
            partitions=[
                txn_offset_commit.TxnOffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_metadata=""
                )
                for (i, p), o in offsets.items()
                if i == topic_id
            ],
        )
        for topic_id in dict.fromkeys(i for i, _ in offsets)
    ]
    for key, value in kw.items():
        setattr(request, key, value)
    return request


def echo(error: ErrorCode = ErrorCode.NONE):
    """A coordinator answering every partition it is asked for with ``error``."""

    async def commit(request: txn_offset_commit.TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
        return TxnOffsetCommitResponse(
            topics=[
                TxnOffsetCommitResponseTopic(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=[
                        TxnOffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=error
                        )
                        for p in t.partitions
                    ],
                )
                for t in request.topics
            ]
        )

    return commit


def test_txn_offset_commit_v6_names_topics_by_id() -> None:
    """KIP-1319: topics by ID, in the request and the answer; an unknown ID is
    UNKNOWN_TOPIC_ID, and the coordinator gets the topics' names."""
    t = topic_of("t", 2)
    unknown = b"\x07" * 16
    groups = FakeGroups(commit_transactional_offsets=echo())
    request = v6_request({(t.topic_id, 0): 5, (t.topic_id, 5): 5, (unknown, 0): 5})
    response = call(services(topics=FakeTopics(t), groups=groups), request, 6)
    assert by_topic_id(response) == {
        (t.topic_id, 0): ErrorCode.NONE,
        (t.topic_id, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (unknown, 0): ErrorCode.UNKNOWN_TOPIC_ID,
    }
    [sent] = [args[0] for method, args in groups.calls if method == "commit_transactional_offsets"]
    asked = [(x.name, x.topic_id, [p.partition_index for p in x.partitions]) for x in sent.topics]
    assert asked == [("t", t.topic_id, [0])]


def test_txn_offset_commit_v6_refusals_keep_each_topics_id() -> None:
    """A refused transactional ID: every partition, each topic under its own ID (none is
    named yet: the ACLs are asked before the IDs are looked up, as in Kafka)."""
    one, two = topic_of("one"), topic_of("two")
    request = v6_request({(one.topic_id, 0): 5, (two.topic_id, 0): 5})
    nobody = AclAuthorizer(allow_if_no_acls=False)
    denied = services(topics=FakeTopics(one, two), groups=FakeGroups(), authorizer=nobody)
    assert by_topic_id(call(denied, request, 6)) == {
        (one.topic_id, 0): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        (two.topic_id, 0): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }


def test_txn_offset_commit_tells_versions_before_6_illegal_generation() -> None:
    """GROUP_ID_NOT_FOUND (a member's commit to a group the coordinator does not have) and
    STALE_MEMBER_EPOCH reach v6 as they are; older versions get ILLEGAL_GENERATION, as
    Kafka's ``validateTransactionalOffsetCommit`` answers them. Without a member
    (generation -1) a group the coordinator cannot use stays GROUP_ID_NOT_FOUND."""
    t = topic_of("t", 1)
    cases = [
        (ErrorCode.GROUP_ID_NOT_FOUND, 3, ErrorCode.ILLEGAL_GENERATION),
        (ErrorCode.GROUP_ID_NOT_FOUND, -1, ErrorCode.GROUP_ID_NOT_FOUND),
        (ErrorCode.STALE_MEMBER_EPOCH, 3, ErrorCode.ILLEGAL_GENERATION),
        (ErrorCode.ILLEGAL_GENERATION, 3, ErrorCode.ILLEGAL_GENERATION),
    ]
    for error, generation, older in cases:
        groups = FakeGroups(commit_transactional_offsets=echo(error))
        answering = services(topics=FakeTopics(t), groups=groups)
        for version in (3, 5):
            request = txn_commit_request({("t", 0): 5}, member_id="m", generation=generation)
            assert errors(call(answering, request, version)) == {("t", 0): older}
        request = v6_request({(t.topic_id, 0): 5}, member_id="m")
        request.generation_id_or_member_epoch = generation
        assert by_topic_id(call(answering, request, 6)) == {(t.topic_id, 0): error}
