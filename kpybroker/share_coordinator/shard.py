"""The share coordinator of one ``__share_group_state`` partition, as a state machine without I/O.

Kafka's ``ShareCoordinatorShard``. It holds the state of every share
partition (group, topic ID, partition) whose key hashes to its partition,
fed requests and answering with ``Effects`` the runtime carries out; its
state changes only by ``replay``, of the records it wrote or of its log when
it loads, so that a failover rebuilds exactly what the old coordinator had.

- ``initialize`` writes a ShareSnapshot at a new state epoch and start
  offset, without batches (FENCED_STATE_EPOCH below the recorded epoch).
- ``write`` merges the leader's changed batches into the kept ones
  (``state_batches.combine``), as a ShareUpdate, or as a ShareSnapshot of the
  merged whole once ``share.coordinator.snapshot.update.records.per.snapshot``
  updates followed the last snapshot. A leader epoch or state epoch below the
  recorded one is FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH; a key never
  initialized is INVALID_REQUEST. A write never raises the epochs: only a
  read raises the leader epoch and only an initialize the state epoch.
- ``read`` answers the whole state; a leader epoch above the recorded one is
  written first (a record like a write's), fencing the previous leader.
- ``read_summary`` answers the state without its batches (a key without
  state: start offset -1); ``delete`` writes the key's tombstone.
- ``snapshot_cold`` rewrites as a snapshot every state not written for
  ``share.coordinator.cold.partition.snapshot.interval.ms`` (so that the log
  can be pruned below it), ``forget_topics`` tombstones the keys of deleted
  topics, and ``redundant_offset`` says below which offset the log is no
  longer needed.

Every check answers Kafka's error and message; a topic or partition the
cluster does not have is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence

from kpybroker.coordinator.interface import coordinator_error
from kpybroker.protocol.errors import ErrorCode, default_message
from kpybroker.share_coordinator.effects import Effects, Token
from kpybroker.share_coordinator.persister import (
    UNINITIALIZED_START_OFFSET,
    PartitionState,
    ShareKey,
    StateBatch,
)
from kpybroker.share_coordinator.share_coordinator_settings import ShareCoordinatorSettings
from kpybroker.share_coordinator.share_state import (
    DEFAULT_EPOCH,
    UNCHANGED,
    ShareGroupOffset,
    StateAnswer,
)
from kpybroker.share_coordinator.share_state_records import (
    RecordType,
    ShareRecord,
    snapshot,
    tombstone,
    update,
)
from kpybroker.share_coordinator.state_batches import combine

log = logging.getLogger(__name__)

NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
#: A read summary of a key without state (Kafka's ``PartitionFactory`` defaults).
NO_STATE = PartitionState(
    state_epoch=DEFAULT_EPOCH, start_offset=UNINITIALIZED_START_OFFSET, leader_epoch=DEFAULT_EPOCH
)

PartitionCount = Callable[[bytes], "int | None"]
"""The partition count of a topic by ID, None for a topic the cluster does not have."""


def refused(error: ErrorCode, message: str | None = None) -> StateAnswer:
    return StateAnswer(error, default_message(error) if message is None else message)


def merge(kept: ShareGroupOffset, change: ShareGroupOffset) -> ShareGroupOffset:
    """A ShareUpdate applied to the state it follows (-1 fields leave the kept value)."""
    start = kept.start_offset if change.start_offset == UNCHANGED else change.start_offset
    return kept.replace(
        start_offset=start,
        leader_epoch=kept.leader_epoch if change.leader_epoch == UNCHANGED else change.leader_epoch,
        batches=combine(kept.batches, change.batches, start),
        delivery_complete_count=kept.delivery_complete_count
        if change.delivery_complete_count == UNCHANGED
        else change.delivery_complete_count,
    )


class ShareStateShard:
    def __init__(
        self,
        partition: int,
        settings: ShareCoordinatorSettings,
        clock: Callable[[], int],
        partition_count: PartitionCount,
    ) -> None:
        self.partition = partition
        self.settings = settings
        self.clock = clock
        self.partition_count = partition_count
        self.states: dict[ShareKey, ShareGroupOffset] = {}
        #: The highest leader and state epochs recorded per key (what fences requests).
        self.leader_epochs: dict[ShareKey, int] = {}
        self.state_epochs: dict[ShareKey, int] = {}
        #: ShareUpdates replayed since the key's last snapshot (Kafka's counting).
        self.update_counts: dict[ShareKey, int] = {}
        #: The log offset of each key's latest snapshot: nothing before it is needed.
        self.snapshot_offsets: dict[ShareKey, int] = {}

    def __repr__(self) -> str:
        return f"ShareStateShard({self.partition}, keys={len(self.states)})"

    # -- replay -----------------------------------------------------------------------------

    def replay(self, record: ShareRecord, offset: int = -1) -> None:
        """Apply one record of the partition, in log order (``offset``: where it is)."""
        key, value = record.key, record.value
        if value is None:
            for kept in (
                self.states,
                self.leader_epochs,
                self.state_epochs,
                self.update_counts,
                self.snapshot_offsets,
            ):
                kept.pop(key, None)
            return
        _raise(self.leader_epochs, key, value.leader_epoch)
        if record.type == RecordType.SNAPSHOT:
            _raise(self.state_epochs, key, value.state_epoch)
            self.states[key] = value
            if self.update_counts.get(key, -1) >= self.settings.updates_per_snapshot:
                self.update_counts[key] = 0
            if offset >= 0:
                self.snapshot_offsets[key] = offset
        else:
            kept = self.states.get(key)
            self.states[key] = value if kept is None else merge(kept, value)
            count = self.update_counts.get(key)
            self.update_counts[key] = 0 if count is None else count + 1

    # -- the requests ---------------------------------------------------------------------------

    def initialize(
        self, token: Token, key: ShareKey, state_epoch: int, start_offset: int
    ) -> Effects:
        out = Effects()
        if key.partition < 0:
            out.reply(token, refused(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID))
        elif state_epoch != UNCHANGED and self.state_epochs.get(key, state_epoch) > state_epoch:
            log.info(
                "initialize of %s at state epoch %d, below the recorded %d",
                key.coordinator_key(),
                state_epoch,
                self.state_epochs[key],
            )
            out.reply(token, refused(ErrorCode.FENCED_STATE_EPOCH))
        elif not self._known(key):
            out.reply(token, refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            kept = self.states.get(key)
            now = self.clock()
            fresh = ShareGroupOffset(
                snapshot_epoch=DEFAULT_EPOCH if kept is None else kept.snapshot_epoch + 1,
                state_epoch=state_epoch,
                leader_epoch=DEFAULT_EPOCH,
                start_offset=start_offset,
                # Nothing is delivered past a new start yet: the lag is known at once
                # (DescribeShareGroupOffsets right after AlterShareGroupOffsets).
                delivery_complete_count=0,
                create_timestamp=now,
                write_timestamp=now,
            )
            self._write(out, token, [snapshot(key, fresh)], StateAnswer())
        return out

    def write(self, token: Token, key: ShareKey, state: PartitionState) -> Effects:
        out = Effects()
        recorded_leader = self.leader_epochs.get(key, state.leader_epoch)
        recorded_state = self.state_epochs.get(key, state.state_epoch)
        if key.partition < 0:
            out.reply(token, refused(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID))
        elif key not in self.states:
            out.reply(token, refused(ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED))
        elif state.leader_epoch != UNCHANGED and recorded_leader > state.leader_epoch:
            log.warning(
                "write to %s at leader epoch %d, below the recorded %d",
                key.coordinator_key(),
                state.leader_epoch,
                recorded_leader,
            )
            out.reply(token, refused(ErrorCode.FENCED_LEADER_EPOCH))
        elif state.state_epoch != UNCHANGED and recorded_state > state.state_epoch:
            log.info(
                "write to %s at state epoch %d, below the recorded %d",
                key.coordinator_key(),
                state.state_epoch,
                recorded_state,
            )
            out.reply(token, refused(ErrorCode.FENCED_STATE_EPOCH))
        elif not self._known(key):
            out.reply(token, refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            record = self._state_record(
                key,
                state.start_offset,
                state.batches,
                state.delivery_complete_count,
                new_leader_epoch=None,
            )
            self._write(out, token, [record], StateAnswer())
        return out

    def read(self, token: Token, key: ShareKey, leader_epoch: int) -> Effects:
        out = Effects()
        recorded = self.leader_epochs.get(key)
        if key.partition < 0:
            out.reply(token, refused(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID))
        elif key not in self.states:
            out.reply(token, refused(ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED))
        elif recorded is not None and recorded > leader_epoch:
            log.warning(
                "read of %s at leader epoch %d, below the recorded %d",
                key.coordinator_key(),
                leader_epoch,
                recorded,
            )
            out.reply(token, refused(ErrorCode.FENCED_LEADER_EPOCH))
        elif not self._known(key):
            out.reply(token, refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        elif leader_epoch == UNCHANGED or recorded == leader_epoch:
            out.reply(token, StateAnswer(state=self.states[key].partition_state()))
        else:
            # A new leader: its epoch is recorded (fencing the old leader's writes) before
            # it gets the state, as Kafka's readStateAndMaybeUpdateLeaderEpoch does.
            log.info("recording leader epoch %d of %s", leader_epoch, key.coordinator_key())
            current = self.states[key]
            state = current.partition_state()._replace(leader_epoch=leader_epoch)
            answer = StateAnswer(state=state)
            record = self._state_record(
                key, current.start_offset, (), UNCHANGED, new_leader_epoch=leader_epoch
            )
            self._write(out, token, [record], answer)
        return out

    def read_summary(self, token: Token, key: ShareKey) -> Effects:
        out = Effects()
        if key.partition < 0:
            out.reply(token, refused(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID))
        elif not self._known(key):
            out.reply(token, refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            current = self.states.get(key)
            state = NO_STATE if current is None else current.partition_state(with_batches=False)
            out.reply(token, StateAnswer(state=state))
        return out

    def delete(self, token: Token, key: ShareKey) -> Effects:
        out = Effects()
        if key.partition < 0:
            out.reply(token, refused(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID))
        elif not self._known(key):
            out.reply(token, refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        elif key not in self.states:
            log.info("deleting the share state of %s, which has none", key.coordinator_key())
            out.reply(token, StateAnswer())
        else:
            self._write(out, token, [tombstone(key)], StateAnswer())
        return out

    # -- periodic passes -------------------------------------------------------------------------

    def snapshot_cold(self) -> Effects:
        """A fresh snapshot of every state last written a cold-snapshot interval ago; none
        when every state is such a rewrite already (all quiet: rewriting helps nothing)."""
        out = Effects()
        if all(s.create_timestamp != s.write_timestamp for s in self.states.values()):
            return out
        now = self.clock()
        interval = self.settings.cold_snapshot_interval_ms
        records = [
            snapshot(key, s.replace(snapshot_epoch=s.snapshot_epoch + 1, write_timestamp=now))
            for key, s in self.states.items()
            if now - s.write_timestamp >= interval
        ]
        if records:
            self._write(out, None, records, None)
        return out

    def forget_topics(self, topic_ids: Collection[bytes]) -> Effects:
        """Tombstones for the state of every key of the deleted topics."""
        out = Effects()
        records = [tombstone(key) for key in self.states if key.topic_id in topic_ids]
        if records:
            self._write(out, None, records, None)
        return out

    def redundant_offset(self, high_watermark: int) -> int | None:
        """The offset below which the partition holds nothing needed: the oldest of the keys'
        latest snapshots. None while a latest snapshot is not yet replicated (the one
        before it may still be needed) or there is no state at all."""
        if not self.snapshot_offsets or len(self.snapshot_offsets) < len(self.states):
            return None
        if max(self.snapshot_offsets.values()) >= high_watermark:
            return None
        return min(self.snapshot_offsets.values())

    # -- helpers -------------------------------------------------------------------------------

    def _known(self, key: ShareKey) -> bool:
        count = self.partition_count(key.topic_id)
        return count is not None and key.partition < count

    def _state_record(
        self,
        key: ShareKey,
        start_offset: int,
        batches: Sequence[StateBatch],
        delivery_complete_count: int,
        *,
        new_leader_epoch: int | None,
    ) -> ShareRecord:
        """A write's record: a ShareUpdate, or a ShareSnapshot of the merged whole once the
        key has had its share of updates (Kafka's ``generateShareStateRecord``)."""
        current = self.states[key]
        leader_epoch = current.leader_epoch
        if new_leader_epoch is not None and new_leader_epoch != UNCHANGED:
            leader_epoch = new_leader_epoch
        if self.update_counts.get(key, 0) >= self.settings.updates_per_snapshot:
            start = current.start_offset if start_offset == UNCHANGED else start_offset
            now = self.clock()
            return snapshot(
                key,
                current.replace(
                    snapshot_epoch=current.snapshot_epoch + 1,
                    leader_epoch=leader_epoch,
                    start_offset=start,
                    batches=combine(current.batches, batches, start),
                    delivery_complete_count=current.delivery_complete_count
                    if delivery_complete_count == UNCHANGED
                    else delivery_complete_count,
                    create_timestamp=now,
                    write_timestamp=now,
                ),
            )
        return update(
            key,
            ShareGroupOffset(
                snapshot_epoch=current.snapshot_epoch,
                state_epoch=DEFAULT_EPOCH,
                leader_epoch=leader_epoch,
                start_offset=start_offset,
                batches=combine((), batches, start_offset),
                delivery_complete_count=delivery_complete_count,
            ),
        )

    @staticmethod
    def _write(
        out: Effects,
        token: Token | None,
        records: list[ShareRecord],
        answer: StateAnswer | None,
    ) -> None:
        """Append ``records``; answer ``answer`` once they are replicated, else the error a
        coordinator client knows how to retry (Kafka's ``CoordinatorOperationExceptionHelper``)."""

        def done(follow: Effects, error: ErrorCode) -> None:
            if error:
                log.warning("writing %d share state record(s) failed: %s", len(records), error.name)
                follow.reply(token, refused(coordinator_error(error)))
            else:
                follow.reply(token, answer)

        out.append(records, done)


def _raise(epochs: dict[ShareKey, int], key: ShareKey, epoch: int) -> None:
    """Record ``epoch`` for ``key`` unless a higher one is recorded."""
    if epochs.get(key, epoch) <= epoch:
        epochs[key] = epoch
