"""The share coordinator's state machine, driven without I/O.

Each test feeds a ``ShareStateShard`` the requests the runtime would, writes
its records to a list standing for its ``__share_group_state`` partition
(replaying them as the runtime does once the log has them), and checks the
answers and the records against Kafka's ``ShareCoordinatorShard``: the merge
of written batches, fencing by leader and state epoch, the snapshot cadence,
reads recording a new leader epoch, tombstones, and that replaying the
partition rebuilds exactly the same state.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.share_snapshot_key import ShareSnapshotKey
from kpybroker.protocol.messages.share_update_value import ShareUpdateValue
from kpybroker.share_coordinator.effects import Effects
from kpybroker.share_coordinator.persister import PartitionState, ShareKey
from kpybroker.share_coordinator.persister import StateBatch as B
from kpybroker.share_coordinator.shard import (
    READ_UNINITIALIZED,
    WRITE_UNINITIALIZED,
    ShareStateShard,
)
from kpybroker.share_coordinator.share_coordinator_settings import ShareCoordinatorSettings
from kpybroker.share_coordinator.share_state import ShareGroupOffset, StateAnswer
from kpybroker.share_coordinator.share_state_records import (
    RecordType,
    ShareRecord,
    decode_record,
    encode_record,
)
from kpybroker.share_coordinator.state_batches import combine

TOPIC = uuid.UUID("6a1d3c9e-93b4-4c59-8f5e-2f4f3b0a9d11").bytes
OTHER_TOPIC = uuid.UUID("0b7b1c7e-0f4e-4d2a-9a55-5d8f1e3c2b10").bytes
KEY = ShareKey("group1", TOPIC, 0)
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


@dataclass
class Driver:
    """Runs a shard as the runtime does; ``log`` is its partition, ``fail`` fails appends."""

    settings: ShareCoordinatorSettings = field(default_factory=ShareCoordinatorSettings)
    now: int = 1_700_000_000_000
    partitions: dict[bytes, int] = field(default_factory=lambda: {TOPIC: 3, OTHER_TOPIC: 1})
    log: list[ShareRecord] = field(default_factory=list)
    fail: ErrorCode = ErrorCode.NONE
    replies: dict[int, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tokens = itertools.count(1)
        self.shard = self.new_shard()

    def new_shard(self) -> ShareStateShard:
        return ShareStateShard(0, self.settings, lambda: self.now, self.partitions.get)

    def run(self, effects: Effects) -> None:
        pending = [effects]
        while pending:
            out = pending.pop(0)
            for append in out.appends:
                if not self.fail:
                    for record in append.records:
                        self.log.append(record)
                        self.shard.replay(record, len(self.log) - 1)
                follow = Effects()
                append.on_done(follow, self.fail)
                pending.append(follow)
            for token, answer in out.replies:
                assert token not in self.replies
                self.replies[token] = answer

    def ask(self, method: str, *args: Any) -> StateAnswer:
        token = next(self.tokens)
        self.run(getattr(self.shard, method)(token, *args))
        return self.replies.pop(token)

    def initialize(self, state_epoch: int = 0, start: int = 0, key: ShareKey = KEY) -> StateAnswer:
        return self.ask("initialize", key, state_epoch, start)

    def write(self, key: ShareKey = KEY, **fields: Any) -> StateAnswer:
        values = {"state_epoch": 0, "start_offset": -1, "leader_epoch": 0, **fields}
        values["batches"] = tuple(values.get("batches", ()))
        return self.ask("write", key, PartitionState(**values))

    def read(self, leader_epoch: int = 0, key: ShareKey = KEY) -> StateAnswer:
        return self.ask("read", key, leader_epoch)

    def replayed(self) -> ShareStateShard:
        """A new shard loaded from the log, every record through Kafka's format."""
        shard = self.new_shard()
        for offset, record in enumerate(self.log):
            encoded = encode_record(record)
            decoded = decode_record(encoded.key, encoded.value)
            assert decoded is not None
            shard.replay(decoded, offset)
        return shard

    def types(self) -> list[str]:
        return ["S" if r.type == RecordType.SNAPSHOT else "U" for r in self.log]


def same_state(a: ShareStateShard, b: ShareStateShard) -> None:
    assert a.states == b.states
    assert a.leader_epochs == b.leader_epochs
    assert a.state_epochs == b.state_epochs
    assert a.update_counts == b.update_counts
    assert a.snapshot_offsets == b.snapshot_offsets


# -- initialize and read --------------------------------------------------------------------


def test_initialize_writes_a_snapshot_and_read_answers_it() -> None:
    d = Driver()
    assert d.initialize(state_epoch=5, start=10) == StateAnswer()
    [record] = d.log
    assert (record.type, record.key) == (RecordType.SNAPSHOT, KEY)
    assert record.value == ShareGroupOffset(
        snapshot_epoch=0,
        state_epoch=5,
        leader_epoch=0,
        start_offset=10,
        delivery_complete_count=0,
        create_timestamp=d.now,
        write_timestamp=d.now,
    )
    answer = d.read(leader_epoch=0)
    assert answer.error == ErrorCode.NONE
    assert answer.state == PartitionState(5, 10, 0, (), 0)
    assert len(d.log) == 1  # the recorded leader epoch was already 0: nothing written


def test_reinitialize_starts_a_new_snapshot_without_batches() -> None:
    d = Driver()
    d.initialize(state_epoch=1, start=0)
    d.write(state_epoch=1, batches=[B(0, 9, AVAILABLE, 1)])
    assert d.initialize(state_epoch=2, start=50).error == ErrorCode.NONE
    state = d.shard.states[KEY]
    assert (state.snapshot_epoch, state.state_epoch, state.start_offset, state.batches) == (
        1,
        2,
        50,
        (),
    )


def test_a_key_never_initialized_cannot_be_read_or_written() -> None:
    d = Driver()
    assert d.read() == StateAnswer(ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED)
    assert d.write() == StateAnswer(ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED)
    summary = d.ask("read_summary", KEY)
    assert summary.error == ErrorCode.NONE
    assert summary.state == PartitionState(state_epoch=0, start_offset=-1, leader_epoch=0)
    assert d.log == []


def test_unknown_topics_partitions_and_negative_partitions() -> None:
    d = Driver()
    unknown = ShareKey("group1", uuid.uuid4().bytes, 0)
    past_the_end = ShareKey("group1", TOPIC, 3)
    negative = ShareKey("group1", TOPIC, -1)
    for key in (unknown, past_the_end):
        assert d.initialize(key=key).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert d.ask("read_summary", key).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert d.ask("delete", key).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    answer = d.initialize(key=negative)
    assert answer == StateAnswer(
        ErrorCode.INVALID_REQUEST, "The partition id cannot be a negative number."
    )
    assert d.log == []


# -- write: merging -------------------------------------------------------------------------


def test_writes_merge_over_the_kept_batches() -> None:
    d = Driver()
    d.initialize(start=0)
    assert d.write(batches=[B(0, 10, AVAILABLE, 1)]) == StateAnswer()
    assert d.write(batches=[B(11, 20, AVAILABLE, 1)]) == StateAnswer()
    # Same state and count, contiguous: one batch (Kafka's testSubsequentWriteState...).
    assert d.shard.states[KEY].batches == (B(0, 20, AVAILABLE, 1),)
    # Acknowledging the middle splits it; a later delivery count wins over an earlier one.
    d.write(batches=[B(5, 7, ACKNOWLEDGED, 1), B(15, 16, AVAILABLE, 2)])
    assert d.shard.states[KEY].batches == (
        B(0, 4, AVAILABLE, 1),
        B(5, 7, ACKNOWLEDGED, 1),
        B(8, 14, AVAILABLE, 1),
        B(15, 16, AVAILABLE, 2),
        B(17, 20, AVAILABLE, 1),
    )
    # A stale state of an offset (a lower delivery count) does not undo a newer one.
    d.write(batches=[B(15, 16, AVAILABLE, 1)])
    assert B(15, 16, AVAILABLE, 2) in d.shard.states[KEY].batches
    # Moving the start offset drops the batches below it and cuts the one across it.
    d.write(start_offset=6, batches=[])
    state = d.shard.states[KEY]
    assert state.start_offset == 6
    assert state.batches[0] == B(6, 7, ACKNOWLEDGED, 1)
    assert all(r.type == RecordType.UPDATE for r in d.log[1:])


def test_non_sequential_batch_updates_keep_the_middle_batch() -> None:
    """Kafka's testNonSequentialBatchUpdates: snapshots on every write, and batch 2 survives
    a start offset moving past batch 1 while batch 3 is acknowledged."""
    d = Driver(ShareCoordinatorSettings(updates_per_snapshot=0))
    d.initialize(start=0)
    d.read(leader_epoch=0)
    d.write(
        start_offset=100,
        batches=[B(100, 109, 1, 1), B(110, 119, 1, 2), B(120, 129, 1, 0)],
    )
    d.write(batches=[B(100, 109, ACKNOWLEDGED, 1)], delivery_complete_count=10)
    d.write(start_offset=110, batches=[B(120, 129, ACKNOWLEDGED, 1)], delivery_complete_count=10)
    assert d.types() == ["S", "S", "S", "S"]
    final = d.log[-1].value
    assert final is not None
    assert (final.snapshot_epoch, final.start_offset, final.delivery_complete_count) == (3, 110, 10)
    assert final.batches == (B(110, 119, 1, 2), B(120, 129, ACKNOWLEDGED, 1))


def test_combine_matches_kafkas_combiner() -> None:
    # Overlapping batches: the higher delivery count wins, then the later state.
    assert combine([B(100, 110, AVAILABLE, 1)], [B(105, 115, AVAILABLE, 2)], -1) == (
        B(100, 104, AVAILABLE, 1),
        B(105, 115, AVAILABLE, 2),
    )
    assert combine([B(100, 110, ACKNOWLEDGED, 1)], [B(100, 110, AVAILABLE, 1)], -1) == (
        B(100, 110, ACKNOWLEDGED, 1),
    )
    assert combine([B(100, 110, AVAILABLE, 1)], [B(102, 104, ARCHIVED, 1)], 101) == (
        B(101, 101, AVAILABLE, 1),
        B(102, 104, ARCHIVED, 1),
        B(105, 110, AVAILABLE, 1),
    )
    assert combine([B(0, 5, AVAILABLE, 1)], [B(7, 9, AVAILABLE, 1)], -1) == (
        B(0, 5, AVAILABLE, 1),
        B(7, 9, AVAILABLE, 1),
    )
    assert combine([B(0, 5, AVAILABLE, 1)], [], 6) == ()
    # Wide batches cost no more than narrow ones.
    wide = combine([B(0, 10**12, AVAILABLE, 1)], [B(10**11, 10**11, ACKNOWLEDGED, 1)], -1)
    assert len(wide) == 3


# -- fencing --------------------------------------------------------------------------------


def test_a_read_at_a_new_leader_epoch_records_it_and_fences_the_old_leader() -> None:
    d = Driver()
    d.initialize(start=0)
    d.write(leader_epoch=0, batches=[B(0, 4, AVAILABLE, 1)])
    answer = d.read(leader_epoch=3)
    assert answer.error == ErrorCode.NONE
    assert answer.state == PartitionState(0, 0, 3, (B(0, 4, AVAILABLE, 1),), 0)
    assert d.log[-1].type == RecordType.UPDATE and d.log[-1].value.leader_epoch == 3
    assert d.shard.leader_epochs[KEY] == 3
    # The old leader can no longer write nor read; the new one can.
    assert d.write(leader_epoch=2) == StateAnswer(
        ErrorCode.FENCED_LEADER_EPOCH,
        "The leader epoch in the request is older than the epoch on the broker.",
    )
    assert d.read(leader_epoch=2).error == ErrorCode.FENCED_LEADER_EPOCH
    assert d.write(leader_epoch=3).error == ErrorCode.NONE
    # A write at a higher leader epoch does not raise the recorded one (only reads do).
    assert d.write(leader_epoch=7).error == ErrorCode.NONE
    assert d.shard.leader_epochs[KEY] == 3
    # A read at the recorded epoch writes nothing.
    written = len(d.log)
    d.read(leader_epoch=3)
    assert len(d.log) == written


def test_a_lower_state_epoch_is_fenced() -> None:
    d = Driver()
    d.initialize(state_epoch=1, start=0)
    d.initialize(state_epoch=4, start=0)
    assert d.write(state_epoch=3).error == ErrorCode.FENCED_STATE_EPOCH
    assert d.initialize(state_epoch=2).error == ErrorCode.FENCED_STATE_EPOCH
    assert d.write(state_epoch=4).error == ErrorCode.NONE
    # -1 is "not given": never fenced.
    assert d.write(state_epoch=-1).error == ErrorCode.NONE
    assert d.shard.state_epochs[KEY] == 4


# -- the snapshot cadence -------------------------------------------------------------------


def test_a_snapshot_follows_the_configured_number_of_updates() -> None:
    d = Driver(ShareCoordinatorSettings(updates_per_snapshot=3))
    d.initialize(start=0)
    for i in range(9):
        d.write(batches=[B(i, i, ACKNOWLEDGED, 1)])
    # Kafka counts from the first update after a snapshot at 0: four updates follow the
    # initial snapshot, then three follow each written snapshot.
    assert "".join(d.types()) == "SUUUUSUUUS"
    epochs = [r.value.snapshot_epoch for r in d.log if r.value is not None]
    assert epochs == [0, 0, 0, 0, 0, 1, 1, 1, 1, 2]
    snapshot = d.log[-1].value
    assert snapshot is not None and snapshot.batches == (B(0, 8, ACKNOWLEDGED, 1),)
    assert snapshot.create_timestamp == snapshot.write_timestamp == d.now


def test_updates_carry_only_what_changed() -> None:
    d = Driver()
    d.initialize(start=0)
    d.write(batches=[B(0, 99, AVAILABLE, 1)])
    d.write(batches=[B(3, 3, ACKNOWLEDGED, 1)], delivery_complete_count=1)
    update = d.log[-1].value
    assert update is not None
    assert (update.start_offset, update.batches, update.delivery_complete_count) == (
        -1,
        (B(3, 3, ACKNOWLEDGED, 1),),
        1,
    )
    assert d.shard.states[KEY].delivery_complete_count == 1


# -- replay ---------------------------------------------------------------------------------


def test_replaying_the_partition_rebuilds_the_same_state() -> None:
    d = Driver(ShareCoordinatorSettings(updates_per_snapshot=2))
    other = ShareKey("group2", OTHER_TOPIC, 0)
    d.initialize(state_epoch=1, start=0)
    d.initialize(state_epoch=1, start=5, key=other)
    d.read(leader_epoch=2)
    for i in range(7):
        d.write(
            leader_epoch=2,
            state_epoch=1,
            start_offset=i if i % 3 == 0 else -1,
            batches=[B(10 + i, 12 + i, AVAILABLE, i % 3 + 1)],
            delivery_complete_count=i,
        )
        d.write(key=other, state_epoch=1, batches=[B(5 + i, 5 + i, ARCHIVED, 1)])
    d.ask("delete", other)
    d.initialize(state_epoch=2, start=7, key=other)
    d.read(leader_epoch=4)
    same_state(d.shard, d.replayed())
    assert set(d.shard.states) == {KEY, other}


def test_replay_skips_records_of_other_kinds() -> None:
    assert decode_record(b"\x00\x0a" + b"\x00" * 8, b"\x00\x00") is None
    assert decode_record(None, None) is None


# -- tombstones -----------------------------------------------------------------------------


def test_delete_writes_a_tombstone_and_forgets_the_key() -> None:
    d = Driver()
    d.initialize(state_epoch=3, start=0)
    d.read(leader_epoch=2)
    d.write(leader_epoch=2, state_epoch=3, batches=[B(0, 1, AVAILABLE, 1)])
    assert d.ask("delete", KEY) == StateAnswer()
    tomb = d.log[-1]
    assert (tomb.type, tomb.key, tomb.value) == (RecordType.SNAPSHOT, KEY, None)
    encoded = encode_record(tomb)
    assert encoded.value is None
    assert encoded.key[:2] == b"\x00\x00"
    for kept in (d.shard.states, d.shard.leader_epochs, d.shard.state_epochs):
        assert KEY not in kept
    assert d.read().error == ErrorCode.INVALID_REQUEST
    # A deleted key starts afresh: no fencing by its old epochs.
    assert d.initialize(state_epoch=0, start=9).error == ErrorCode.NONE
    same_state(d.shard, d.replayed())
    # Deleting a key without state writes nothing.
    written = len(d.log)
    assert d.ask("delete", ShareKey("nobody", TOPIC, 1)) == StateAnswer()
    assert len(d.log) == written


def test_an_update_tombstone_deletes_too() -> None:
    d = Driver()
    d.initialize(start=0)
    d.shard.replay(ShareRecord(RecordType.UPDATE, KEY, None))
    assert KEY not in d.shard.states


def test_deleted_topics_lose_their_state() -> None:
    d = Driver()
    other = ShareKey("group1", OTHER_TOPIC, 0)
    d.initialize(key=KEY)
    d.initialize(key=other)
    d.run(d.shard.forget_topics({OTHER_TOPIC}))
    assert set(d.shard.states) == {KEY}
    assert d.log[-1].value is None and d.log[-1].key == other


# -- the records -----------------------------------------------------------------------------


def test_records_are_in_kafkas_format() -> None:
    d = Driver()
    d.initialize(state_epoch=1, start=0)
    d.write(state_epoch=1, batches=[B(0, 4, ACKNOWLEDGED, 2)], delivery_complete_count=5)
    snapshot, update = (encode_record(r) for r in d.log)
    # Key: int16 record type, then the key struct (version 0); value: int16 version 0, struct.
    key, _ = ShareSnapshotKey.decode(snapshot.key, 2, 0)
    assert snapshot.key[:2] == b"\x00\x00" and snapshot.value[:2] == b"\x00\x00"
    assert (key.group_id, bytes(key.topic_id), key.partition) == KEY
    assert update.key[:2] == b"\x00\x01" and update.value[:2] == b"\x00\x00"
    value, _ = ShareUpdateValue.decode(update.value, 2, 0)
    assert (value.snapshot_epoch, value.start_offset, value.delivery_complete_count) == (0, -1, 5)
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in value.state_batches
    ] == [(0, 4, ACKNOWLEDGED, 2)]


# -- failures and periodic passes -------------------------------------------------------------


def test_a_failed_write_changes_nothing_and_answers_a_retriable_error() -> None:
    d = Driver()
    d.initialize(start=0)
    d.fail = ErrorCode.NOT_LEADER_OR_FOLLOWER
    answer = d.write(batches=[B(0, 1, AVAILABLE, 1)])
    assert answer.error == ErrorCode.NOT_COORDINATOR
    d.fail = ErrorCode.NOT_ENOUGH_REPLICAS
    assert d.write(batches=[B(0, 1, AVAILABLE, 1)]).error == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert d.shard.states[KEY].batches == ()


def test_cold_partitions_are_snapshotted_once() -> None:
    d = Driver()
    d.initialize(start=0)
    d.write(batches=[B(0, 0, ACKNOWLEDGED, 1)])
    d.run(d.shard.snapshot_cold())
    assert len(d.log) == 2  # not cold yet
    d.now += d.settings.cold_snapshot_interval_ms
    d.run(d.shard.snapshot_cold())
    cold = d.log[-1]
    assert cold.type == RecordType.SNAPSHOT and cold.value is not None
    assert cold.value.snapshot_epoch == 1
    assert cold.value.write_timestamp == d.now != cold.value.create_timestamp
    assert cold.value.batches == (B(0, 0, ACKNOWLEDGED, 1),)
    d.now += d.settings.cold_snapshot_interval_ms
    d.run(d.shard.snapshot_cold())
    assert d.log[-1] is cold  # everything is a cold snapshot already: nothing more


def test_the_redundant_offset_is_the_oldest_latest_snapshot() -> None:
    d = Driver(ShareCoordinatorSettings(updates_per_snapshot=0))
    other = ShareKey("group2", TOPIC, 1)
    d.initialize(key=KEY)  # offset 0
    d.initialize(key=other)  # 1
    d.write(batches=[B(0, 0, ACKNOWLEDGED, 1)])  # 2: a snapshot of KEY
    assert d.shard.redundant_offset(high_watermark=3) == 1
    assert d.shard.redundant_offset(high_watermark=2) is None  # 2 not yet replicated
    d.write(key=other, batches=[])  # 3
    assert d.shard.redundant_offset(high_watermark=4) == 2
    d.ask("delete", KEY)  # 4: only other's state is left
    assert d.shard.redundant_offset(high_watermark=5) == 3
