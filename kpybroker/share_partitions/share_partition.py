"""One share partition's in-flight records: a state machine without I/O (``SharePartition``).

A share group reads a partition as a queue. The partition's leader keeps,
for each group, the *share-partition start offset* (below it every record
is done with) and the state of each in-flight record past it:

- AVAILABLE: may be handed to the next consumer that fetches;
- ACQUIRED by one member, under an acquisition lock that runs out after the
  group's ``share.record.lock.duration.ms``;
- ACKNOWLEDGED (accepted) or ARCHIVED (rejected, a gap, or delivered
  ``share.delivery.count.limit`` times): never delivered again.

States are kept in runs of consecutive offsets sharing a state, delivery
count, owner and lock (``Run``), not per record: a consumer acquires and
acknowledges whole batches, so a partition's in-flight window is a handful
of runs however many records it holds. A run is split only where an
acknowledgement or an acquisition cuts it, and neighbours merge back.

Acquisition follows the log's batches (Kafka hands out whole batches, so
``max_records`` may be exceeded to keep to a batch's boundary), except for
records delivered many times, which go out a few at a time
(``delivery_throttle``). When the
leading runs are all done with, the start offset moves past them and they
are forgotten. What changes is returned as ``StateBatch``es to persist
(``kpybroker.share_coordinator.persister``); a partition is rebuilt from its
persisted start offset and batches (``from_state``) when a broker loads it,
with every record that was acquired back to available, as in Kafka.

Beside the runs, the partition keeps Kafka's in-flight batches
(``in_flight_batches``): only to word a refused acknowledgement as Kafka does.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import pairwise
from typing import NamedTuple

from kpybroker.protocol.errors import ErrorCode
from kpybroker.share_coordinator.persister import DeliveryState, StateBatch
from kpybroker.share_partitions.delivery_throttle import throttle_deliveries, throttled_ranges
from kpybroker.share_partitions.in_flight_batches import InFlightBatch, InFlightBatches


class AckType(IntEnum):
    """ShareFetch/ShareAcknowledge acknowledgement types."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_ACK_TYPES = frozenset(int(t) for t in AckType)


@dataclass(slots=True)
class Run:
    """Offsets ``first..last`` (inclusive) in one state."""

    first: int
    last: int
    state: DeliveryState
    count: int
    member: str | None = None
    #: The acquisition whose lock covers the run (0: none).
    lock: int = 0

    def same_as(self, other: Run) -> bool:
        return (
            self.state == other.state
            and self.count == other.count
            and self.member == other.member
            and self.lock == other.lock
        )

    def batch(self) -> StateBatch:
        state = DeliveryState.AVAILABLE if self.state == DeliveryState.ACQUIRED else self.state
        return StateBatch(self.first, self.last, int(state), self.count)


#: Kafka's messages for acknowledgements it refuses.
PAST_ACQUIRED = "Batch record not found. The first offset in request is past acquired records."
PAST_ACQUIRED_LAST = "Batch record not found. The last offset in request is past acquired records."
#: For an in-flight batch Kafka tracks whole (``in_flight_batches``), and one record by record.
BATCH_NOT_ACQUIRED = "The batch cannot be acknowledged. The batch is not in the acquired state."
NOT_OWNER = "Member is not the owner of batch record"
OFFSET_NOT_ACQUIRED = "The offset cannot be acknowledged. The offset is not acquired."
OFFSET_NOT_OWNER = "Member is not the owner of offset"


class Refusal(NamedTuple):
    """An acknowledgement refused: the partition's acknowledge error and its message."""

    error: ErrorCode
    message: str | None = None


def valid_batches(batches: Sequence[tuple[int, int, Sequence[int]]], renew: bool) -> bool:
    """Whether a partition's acknowledgement batches are well formed, as Kafka checks them
    before looking at any record (INVALID_REQUEST otherwise): each range in order, starting
    no earlier than the last offset of the one before (two batches may share that offset:
    Kafka's ``validateAcknowledgementBatches`` refuses only a first offset below it), with
    one known type or one per record, and renewals only where the request says it carries
    them."""
    previous_last = -1
    for first, last, types in batches:
        if first > last or first < previous_last:
            return False
        if len(types) != 1 and len(types) != last - first + 1:
            return False
        if any(t not in _ACK_TYPES or (t == AckType.RENEW and not renew) for t in types):
            return False
        previous_last = last
    return True


class Acquired(NamedTuple):
    """A range handed to a consumer: ShareFetch's AcquiredRecords."""

    first_offset: int
    last_offset: int
    delivery_count: int


class LogBatch(NamedTuple):
    """A batch of the partition's log as read: its offsets (and where its bytes are)."""

    base_offset: int
    last_offset: int
    position: int
    size: int
    #: Never for consumers: a control batch (transaction marker), or, for a read_committed
    #: group, a batch of an aborted transaction. Its records are archived, not acquired.
    skipped: bool = False


class SharePartition:
    def __init__(
        self,
        start_offset: int,
        *,
        delivery_count_limit: int,
        max_in_flight: int,
        runs: Iterable[Run] = (),
    ) -> None:
        self.start_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self.runs: list[Run] = list(runs)
        #: Kafka's in-flight batches, which word refused acknowledgements (nothing else).
        self.inflight = InFlightBatches()
        for run in self.runs:
            self.inflight.add(run.first, run.last)
        self._locks = 0

    @classmethod
    def from_state(
        cls,
        start_offset: int,
        batches: Sequence[StateBatch],
        *,
        delivery_count_limit: int,
        max_in_flight: int,
    ) -> SharePartition:
        """Rebuild from the persisted state: gaps between batches are records never
        delivered; the runs that are done with at the start are dropped at once. Each
        persisted batch (and gap) is one in-flight batch, as Kafka loads them."""
        runs: list[Run] = []
        nxt = start_offset
        for b in sorted(batches):
            first = max(b.first_offset, nxt)
            if first > b.last_offset:
                continue
            if first > nxt:
                runs.append(Run(nxt, first - 1, DeliveryState.AVAILABLE, 0))
            state = DeliveryState(b.delivery_state)
            if state == DeliveryState.ACQUIRED:
                state = DeliveryState.AVAILABLE
            runs.append(Run(first, b.last_offset, state, b.delivery_count))
            nxt = b.last_offset + 1
        partition = cls(
            start_offset,
            delivery_count_limit=delivery_count_limit,
            max_in_flight=max_in_flight,
            runs=runs,
        )
        partition._merge(0, len(runs))
        partition._advance_start()
        return partition

    # -- reading the state ----------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """The offset after the last in-flight record (Kafka's endOffset + 1)."""
        return self.runs[-1].last + 1 if self.runs else self.start_offset

    def next_fetch_offset(self) -> int:
        """Where a fetch reads from: the first available in-flight record, else the end."""
        for run in self.runs:
            if run.state == DeliveryState.AVAILABLE:
                return run.first
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether a fetch could acquire anything: an in-flight record is available, or
        the window has room for new records."""
        if self.next_fetch_offset() != self.end_offset:
            return True
        return self.end_offset - self.start_offset < self.max_in_flight

    def delivery_complete_count(self) -> int:
        """Records past the start offset already done with (acknowledged or archived): what
        the lag reported by DescribeShareGroupOffsets leaves out."""
        return sum(
            run.last - run.first + 1
            for run in self.runs
            if run.state in (DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED)
        )

    # -- acquiring ----------------------------------------------------------------------------

    def acquire(
        self,
        member: str,
        batches: Sequence[LogBatch],
        max_records: int,
        *,
        record_limit: bool = False,
        batch_size: int | None = None,
    ) -> tuple[int, list[Acquired], list[LogBatch]]:
        """Acquire available records of ``batches`` (read from ``next_fetch_offset()``)
        for ``member``: the acquisition's lock id, the acquired ranges, and the batches
        holding them (what the answer carries).

        Whole batches are acquired until ``max_records`` is reached (Kafka's
        batch-optimized mode), or, with ``record_limit`` (ShareFetch v2's record-limit
        mode), never more than ``max_records``: a batch may then be acquired in part, and
        its rest is in flight, available (as Kafka caches it), for the next fetches.

        ``batch_size`` (ShareFetch's, ``max_records`` if None) cuts the new records into
        in-flight batches, as Kafka does (``in_flight_batches``). Records delivered many
        times are throttled (``delivery_throttle``): the acquisition stops before their
        in-flight batch, or takes only some of them when it reaches that batch first."""
        self._locks += 1
        lock = self._locks
        end = self.end_offset
        stop = batches[-1].last_offset + 1 if batches else end  # acquire up to it
        throttled = self._throttled_batch(batches)
        if throttled is not None:
            if not self._available_between(batches[0].base_offset, throttled.first - 1):
                limit = max_records if record_limit else None
                return lock, *self._acquire_throttled(member, lock, throttled, batches, limit)
            stop = throttled.first  # what comes before it, and nothing from it on
        acquired: list[Acquired] = []
        carried: list[LogBatch] = []
        total = 0
        for batch in batches:
            if total >= max_records:
                break
            first = max(batch.base_offset, self.start_offset)
            last = min(batch.last_offset, stop - 1)
            if first > last:
                continue
            if batch.skipped:
                self._archive_range(first, last)
                continue
            cap = max_records - total if record_limit else last - first + 1
            got = self._acquire_range(member, lock, first, last, cap, acquired)
            if got:
                total += got
                carried.append(batch)
            elif self.end_offset - self.start_offset >= self.max_in_flight:
                break
        # Kafka's record-limit mode caches its new records as one batch, the batch-optimized
        # mode cuts them by ``batch_size``.
        cut = self.end_offset - end if record_limit else batch_size or max_records
        self._cache_acquisition(lock, end, acquired, batches, cut)
        if self._available_between(end, self.end_offset - 1):
            # The rest of a batch the record limit cut: Kafka tracks it record by record.
            self.inflight.track_per_offset(end, self.end_offset - 1)
        return lock, _coalesced(acquired), carried

    def _throttled_batch(self, batches: Sequence[LogBatch]) -> InFlightBatch | None:
        """The first in-flight batch of the records ``batches`` hold with an available record
        delivered often enough to be throttled (Kafka's shouldThrottleRecordsDelivery)."""
        if not batches:
            return None
        lo = max(batches[0].base_offset, self.start_offset)
        hi = min(batches[-1].last_offset, self.end_offset - 1)
        threshold = throttle_deliveries(self.delivery_count_limit)
        for batch in self.inflight.overlapping(lo, hi):
            runs = self._runs_within(max(lo, batch.first), min(hi, batch.last))
            if any(r.state == DeliveryState.AVAILABLE and r.count >= threshold for r in runs):
                return batch
        return None

    def _available_between(self, first: int, last: int) -> bool:
        """Whether a record of ``first..last`` is available (an acquisition would take it)."""
        runs = self._runs_within(first, last) if first <= last else []
        return any(r.state == DeliveryState.AVAILABLE for r in runs)

    def _acquire_throttled(
        self,
        member: str,
        lock: int,
        throttled: InFlightBatch,
        batches: Sequence[LogBatch],
        record_limit: int | None,
    ) -> tuple[list[Acquired], list[LogBatch]]:
        """Acquire what ``delivery_throttle`` allows of ``throttled``, which Kafka tracks
        record by record from now on, and nothing else: the ranges, and the batches of
        ``batches`` that hold them."""
        throttled.per_offset = True
        lo = max(batches[0].base_offset, throttled.first)
        hi = min(batches[-1].last_offset, throttled.last)
        segments = [
            (max(r.first, lo), min(r.last, hi), r.state == DeliveryState.AVAILABLE, r.count)
            for r in self._runs_within(lo, hi)
        ]
        size = throttled.last - throttled.first + 1
        acquired: list[Acquired] = []
        limit = self.delivery_count_limit
        for first, last in throttled_ranges(segments, size, limit, record_limit):
            self._acquire_range(member, lock, first, last, last - first + 1, acquired)
        carried = [
            b
            for b in batches
            if any(b.base_offset <= a.last_offset and a.first_offset <= b.last_offset
                   for a in acquired)
        ]  # fmt: skip
        return _coalesced(acquired), carried

    def _cache_acquisition(
        self,
        lock: int,
        end: int,
        acquired: list[Acquired],
        batches: Sequence[LogBatch],
        batch_size: int,
    ) -> None:
        """Kafka's in-flight batches after an acquisition that found the end at ``end``: a
        cached batch of which this acquisition took only part is tracked record by record;
        the new records past ``end`` are cached as new batches."""
        for a in acquired:
            if a.first_offset < end:
                self.inflight.track_per_offset(
                    a.first_offset,
                    min(a.last_offset, end - 1),
                    when=lambda batch: not self._held_whole(batch, lock),
                )
        if self.end_offset > end:
            bases = (b.base_offset for b in batches)
            self.inflight.add(end, self.end_offset - 1, bases, batch_size)
        self.inflight.drop_below(self.start_offset)

    def _held_whole(self, batch: InFlightBatch, lock: int) -> bool:
        """Whether every record of ``batch`` past the start offset is under ``lock``."""
        return all(run.lock == lock for run in self._runs_within(batch.first, batch.last))

    def _acquire_range(
        self, member: str, lock: int, first: int, last: int, cap: int, acquired: list[Acquired]
    ) -> int:
        """Acquire up to ``cap`` available records in ``first..last``; new records past the
        end become in flight (while the window has room). The number acquired."""
        got = 0
        end = self.end_offset
        touched = len(self.runs)  # runs before this one are left as they are
        if first < end:
            upto = min(last, end - 1)
            self._split(first)
            self._split(upto + 1)
            i = touched = self._index(first)
            while i < len(self.runs) and self.runs[i].first <= upto and got < cap:
                run = self.runs[i]
                if run.state == DeliveryState.AVAILABLE:
                    self._split(min(run.last, run.first + cap - got - 1) + 1)
                    run.state = DeliveryState.ACQUIRED
                    run.count += 1
                    run.member = member
                    run.lock = lock
                    acquired.append(Acquired(run.first, run.last, run.count))
                    got += run.last - run.first + 1
                i += 1
        if last >= end and got < cap and end - self.start_offset < self.max_in_flight:
            new_first = max(first, end)
            if new_first > end:  # offsets the log no longer has (compacted away)
                self.runs.append(Run(end, new_first - 1, DeliveryState.ARCHIVED, 0))
            new_last = min(last, new_first + cap - got - 1)
            self.runs.append(Run(new_first, new_last, DeliveryState.ACQUIRED, 1, member, lock))
            acquired.append(Acquired(new_first, new_last, 1))
            got += new_last - new_first + 1
            if new_last < last:  # the record limit cut the batch: Kafka caches its rest
                self.runs.append(Run(new_last + 1, last, DeliveryState.AVAILABLE, 0))
        self._merge(touched, len(self.runs))
        return got

    def _archive_range(self, first: int, last: int) -> None:
        """Records no consumer gets: those available in ``first..last`` are archived, and
        so are those past the end (the window moves on, whatever its bound)."""
        end = self.end_offset
        touched = len(self.runs)
        if first < end:
            upto = min(last, end - 1)
            self.inflight.track_per_offset(first, upto, when=_sticks_out(first, last))
            self._split(first)
            self._split(upto + 1)
            i = touched = self._index(first)
            while i < len(self.runs) and self.runs[i].first <= upto:
                if self.runs[i].state == DeliveryState.AVAILABLE:
                    self.runs[i].state = DeliveryState.ARCHIVED
                i += 1
        if last >= end:
            self.runs.append(Run(max(first, end), last, DeliveryState.ARCHIVED, 0))
        self._merge(touched, len(self.runs))
        self._advance_start()

    # -- acknowledging and releasing ------------------------------------------------------------

    def check_acquired(self, member: str, first: int, last: int) -> Refusal | None:
        """Why ``first..last`` may not be acknowledged by ``member`` (None: it may): every
        record of it past the start offset must be acquired by the member (Kafka refuses
        the whole batch). Records below the start offset are done with and ignored.

        Kafka words the refusal after the in-flight batch that holds the first record at
        fault: a batch tracked whole is checked as one (its owner, then its state), one
        tracked record by record offset by offset (its state, then its owner)."""
        lo = max(first, self.start_offset)
        if lo > last:
            return None
        if lo >= self.end_offset:
            return Refusal(ErrorCode.INVALID_REQUEST, PAST_ACQUIRED)
        if last >= self.end_offset:
            return Refusal(ErrorCode.INVALID_REQUEST, PAST_ACQUIRED_LAST)
        for batch in self.inflight.overlapping(lo, last):
            whole = self._runs_within(batch.first, batch.last)
            if whole and not batch.per_offset and _alike(whole):
                run = whole[0]
                if run.state != DeliveryState.ACQUIRED:
                    return Refusal(ErrorCode.INVALID_RECORD_STATE, BATCH_NOT_ACQUIRED)
                if run.member != member:
                    return Refusal(ErrorCode.INVALID_RECORD_STATE, NOT_OWNER)
                continue
            for run in self._runs_within(max(lo, batch.first), min(last, batch.last)):
                if run.state != DeliveryState.ACQUIRED:
                    return Refusal(ErrorCode.INVALID_RECORD_STATE, OFFSET_NOT_ACQUIRED)
                if run.member != member:
                    return Refusal(ErrorCode.INVALID_RECORD_STATE, OFFSET_NOT_OWNER)
        return None

    def shared_offset_refusal(
        self, batches: Sequence[tuple[int, int, Sequence[int]]]
    ) -> Refusal | None:
        """Kafka applies a partition's batches one after the other, all or none: a batch that
        starts on the last offset of the one before (``valid_batches`` allows it) finds that
        record no longer acquired, unless the first renewed it or, for a record tracked by
        itself, the second marks it a gap (a gap is archived whatever its state). Records
        below the start offset are ignored."""
        for (before_first, last, types), (first, _, next_types) in pairwise(batches):
            if first != last or first < self.start_offset:
                continue
            # One type for the whole batch, or one per record: the last is the last record's.
            if types[-1] == AckType.RENEW:
                continue
            batch = next(self.inflight.overlapping(first, first), None)
            if batch is not None and not self._tracks_per_offset_after(
                batch, before_first, last, types
            ):
                return Refusal(ErrorCode.INVALID_RECORD_STATE, BATCH_NOT_ACQUIRED)
            if next_types[0] == AckType.GAP:
                continue
            return Refusal(ErrorCode.INVALID_RECORD_STATE, OFFSET_NOT_ACQUIRED)
        return None

    def _tracks_per_offset_after(
        self, batch: InFlightBatch, first: int, last: int, types: Sequence[int]
    ) -> bool:
        """Whether Kafka tracks ``batch`` record by record once an acknowledgement of
        ``first..last`` with ``types`` has touched it: it did already, or the acknowledgement
        covers part of it, has a type per record, or finds the start offset inside it."""
        return (
            batch.per_offset
            or not (first <= batch.first and batch.last <= last)
            or len(types) > 1
            or batch.first < self.start_offset <= batch.last
        )

    def _runs_within(self, first: int, last: int) -> list[Run]:
        """The runs holding ``first..last``, past the start offset."""
        i = self._index(max(first, self.start_offset))
        runs = []
        while i < len(self.runs) and self.runs[i].first <= last:
            runs.append(self.runs[i])
            i += 1
        return runs

    def acknowledge(
        self, member: str, first: int, last: int, types: Sequence[int]
    ) -> tuple[list[StateBatch], list[int]]:
        """Apply one acknowledgement batch (checked: ``valid_batches``, ``check_acquired``):
        one type for the whole range, or one per record. The changed batches to persist,
        and the new locks of renewed records."""
        self.inflight.track_per_offset(
            max(first, self.start_offset),
            last,
            when=lambda batch: self._tracks_per_offset_after(batch, first, last, types),
        )
        spans = [(first, last, types[0])] if len(types) == 1 else _spans(first, types)
        changed: list[StateBatch] = []
        renewed: list[int] = []
        for lo, hi, ack in spans:
            lo = max(lo, self.start_offset)
            if lo > hi:
                continue
            if ack == AckType.RENEW:
                renewed.append(self.renew(member, lo, hi))
            else:
                changed.extend(self._settle(lo, hi, _state_after(ack)))
        self._advance_start()
        return changed, renewed

    def renew(self, member: str, first: int, last: int) -> int:
        """Give ``first..last`` (acquired by ``member``) a new lock: its id."""
        self._locks += 1
        self._split(first)
        self._split(last + 1)
        i = start = self._index(first)
        while i < len(self.runs) and self.runs[i].first <= last:
            if self.runs[i].member == member:
                self.runs[i].lock = self._locks
            i += 1
        self._merge(start, i)
        return self._locks

    def release_lock(self, lock: int) -> list[StateBatch]:
        """An acquisition lock ran out: its records still acquired become available again
        (archived once delivered the limit)."""
        return self._release(lambda run: run.lock == lock)

    def release_member(self, member: str) -> list[StateBatch]:
        """A member's share session closed or it left: what it holds is released."""
        return self._release(lambda run: run.member == member)

    def _release(self, matches: Callable[[Run], bool]) -> list[StateBatch]:
        targets = [
            (r.first, r.last) for r in self.runs if r.state == DeliveryState.ACQUIRED and matches(r)
        ]
        changed: list[StateBatch] = []
        start = self.start_offset
        for lo, hi in targets:
            # Kafka releases a batch it tracks whole as one, unless the start is inside it.
            self.inflight.track_per_offset(lo, hi, when=lambda b: b.first < start <= b.last)
            changed.extend(self._settle(lo, hi, DeliveryState.AVAILABLE))
        self._advance_start()
        return changed

    def _settle(self, first: int, last: int, state: DeliveryState) -> list[StateBatch]:
        """Move acquired ``first..last`` to ``state``; a release of a record delivered the
        limit archives it."""
        self._split(first)
        self._split(last + 1)
        i = self._index(first)
        start = i
        changed: list[StateBatch] = []
        while i < len(self.runs) and self.runs[i].first <= last:
            run = self.runs[i]
            run.member = None
            run.lock = 0
            if state == DeliveryState.AVAILABLE and run.count >= self.delivery_count_limit:
                run.state = DeliveryState.ARCHIVED
            else:
                run.state = state
            changed.append(run.batch())
            i += 1
        self._merge(start, i)
        return changed

    def move_start(self, offset: int) -> None:
        """The log start moved past ``offset`` (retention, DeleteRecords): what is below is gone."""
        if offset <= self.start_offset:
            return
        self._split(offset)
        self.runs = [r for r in self.runs if r.first >= offset]
        self.start_offset = offset
        # Kafka archives the records below the start, which splits a batch it falls inside.
        self.inflight.track_per_offset(offset, offset, when=lambda b: b.first < offset)
        self.inflight.drop_below(offset)

    # -- the runs ------------------------------------------------------------------------------

    def _index(self, offset: int) -> int:
        """Index of the run holding ``offset`` (the runs are contiguous)."""
        return max(0, bisect_right(self.runs, offset, key=_first_offset) - 1)

    def _split(self, offset: int) -> None:
        """Make ``offset`` the first of a run, if it falls inside one."""
        if not self.runs or offset <= self.runs[0].first or offset > self.runs[-1].last:
            return
        i = self._index(offset)
        run = self.runs[i]
        if run.first == offset:
            return
        tail = Run(offset, run.last, run.state, run.count, run.member, run.lock)
        run.last = offset - 1
        self.runs.insert(i + 1, tail)

    def _merge(self, lo: int, hi: int) -> None:
        """Merge neighbours alike around ``runs[lo:hi]``."""
        i = max(0, lo - 1)
        end = min(len(self.runs), hi + 1)
        while i < end - 1 and i < len(self.runs) - 1:
            a, b = self.runs[i], self.runs[i + 1]
            if a.same_as(b) and a.last + 1 == b.first:
                a.last = b.last
                del self.runs[i + 1]
                end -= 1
            else:
                i += 1

    def _advance_start(self) -> None:
        done = 0
        for run in self.runs:
            if run.state not in (DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED):
                break
            done += 1
        if done:
            self.start_offset = self.runs[done - 1].last + 1
            del self.runs[:done]
            self.inflight.drop_below(self.start_offset)


def _first_offset(run: Run) -> int:
    return run.first


def _alike(runs: Sequence[Run]) -> bool:
    """Whether ``runs`` are one state and one owner (a batch Kafka tracks whole always is)."""
    return all(r.state == runs[0].state and r.member == runs[0].member for r in runs[1:])


def _sticks_out(first: int, last: int) -> Callable[[InFlightBatch], bool]:
    """Whether a batch reaches outside ``first..last`` (Kafka's ``checkForFullMatch`` fails)."""
    return lambda batch: not (first <= batch.first and batch.last <= last)


def _state_after(ack: int) -> DeliveryState:
    if ack == AckType.ACCEPT:
        return DeliveryState.ACKNOWLEDGED
    if ack == AckType.RELEASE:
        return DeliveryState.AVAILABLE
    return DeliveryState.ARCHIVED  # reject, gap


def _spans(first: int, types: Sequence[int]) -> list[tuple[int, int, int]]:
    """Per-record types as runs of one type."""
    spans: list[tuple[int, int, int]] = []
    lo = first
    for i in range(1, len(types) + 1):
        if i == len(types) or types[i] != types[i - 1]:
            spans.append((lo, first + i - 1, types[i - 1]))
            lo = first + i
    return spans


def _coalesced(acquired: list[Acquired]) -> list[Acquired]:
    """Neighbouring ranges with the same delivery count as one."""
    out: list[Acquired] = []
    for a in acquired:
        last = out[-1] if out else None
        if (
            last
            and last.last_offset + 1 == a.first_offset
            and last.delivery_count == a.delivery_count
        ):
            out[-1] = Acquired(out[-1].first_offset, a.last_offset, a.delivery_count)
        else:
            out.append(a)
    return out
