"""Idempotent and transactional producer state of one partition (Kafka's
``ProducerStateManager``, ``ProducerStateEntry``, ``ProducerAppendInfo``) and its
``<offset>.snapshot`` files.

For each producer id the partition remembers the producer epoch and the last
five batches (first/last sequence, last offset, offset delta, max timestamp).
That is what lets a retried batch be recognised and answered with its original
offsets instead of being written twice. It also remembers the first offset of
the producer's open transaction (its first transactional batch since its last
marker) and the coordinator epoch of its last marker; the partition's open
transactions are tracked in ``transactions.TxnTracker``.

Client appends are checked exactly where Kafka checks them:

* a batch with the same epoch and sequence range as one of the five retained
  batches is a duplicate (``ProducerStateEntry.findDuplicateBatch``);
* an epoch below the producer's current one is INVALID_PRODUCER_EPOCH
  (``ProducerAppendInfo.checkProducerEpoch``);
* a new epoch must start at sequence 0, and within an epoch each batch must
  start right after the last one, else OUT_OF_ORDER_SEQUENCE_NUMBER
  (``ProducerAppendInfo.checkSequence``);
* a producer id this partition has no state for is accepted at any sequence.
  Kafka stopped answering UNKNOWN_PRODUCER_ID there in 2.5 (KIP-360: "If there
  is no current producer epoch ... accept writes with any sequence number"),
  so this module never returns that error;
* a batch without a sequence (the group coordinator's transactional offset
  commits: clients' are refused before) gets only the epoch check, as Kafka's
  ``AppendOrigin.COORDINATOR``;
* a non-transactional batch from a producer with an open transaction is
  INVALID_TXN_STATE (``ProducerAppendInfo.appendDataBatch``).

A marker (``check_marker``) with an epoch below the producer's is
INVALID_PRODUCER_EPOCH, with a coordinator epoch below the producer's last one
TRANSACTION_COORDINATOR_FENCED (``appendEndTxnMarker``). Replicated batches
are not checked.

Snapshots use Kafka's version-1 binary format, so the files work both ways:
int16 version, uint32 CRC-32C of the rest, int32 count, then per producer
``producer_id int64, epoch int16, last_sequence int32, last_offset int64,
offset_delta int32, timestamp int64, coordinator_epoch int32,
current_txn_first_offset int64``. As in Kafka, a snapshot keeps only the last
batch of each producer, so after a restart a retry of that batch is still
recognised, and older retries are checked against it by sequence.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kpybroker.log.checkpoint import atomic_write
from kpybroker.log.control_batches import EndTxnMarker
from kpybroker.log.log_config import INT_MAX
from kpybroker.log.names import SNAPSHOT_SUFFIX, names_ending, offset_from_filename, segment_file
from kpybroker.log.str_paths import StrPath
from kpybroker.log.transaction_index import AbortedTxn, TransactionIndex
from kpybroker.log.transactions import CompletedTxn, TxnTracker
from kpybroker.protocol.crc import crc32c
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.records import BatchHeader

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000

SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hI")
_SNAPSHOT_COUNT = struct.Struct(">i")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


class CorruptSnapshotError(ValueError):
    """A producer snapshot that fails its version, length or CRC check."""


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence arithmetic, wrapping at int32 max (``DefaultRecordBatch.incrementSequence``)."""
    if sequence > INT_MAX - increment:
        return increment - (INT_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT_MAX - (decrement - sequence) + 1
    return sequence - decrement


def last_sequence(header: BatchHeader) -> int:
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(header.base_sequence, header.last_offset_delta)


class BatchMetadata(NamedTuple):
    """What a producer entry remembers of one appended batch."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        last_seq = last_sequence(header)
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == last_seq:
                return batch
        return None

    def update_epoch(self, epoch: int) -> None:
        """A new epoch forgets the old epoch's batches (their sequences no longer apply)."""
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch


class VerificationGuard:
    """Proof that the transaction coordinator was asked before a producer's first write.

    KIP-890's ``VerificationGuard``: the leader registers one for the producer
    before asking the coordinator, and the write presents it. A marker for
    the producer, or the write that opens its transaction, retires the guard,
    so that a write verified for a transaction that has since ended (and
    delayed until after its marker) cannot open a transaction nobody will
    ever end. Compared by identity; never persisted.
    """

    __slots__ = ()


class ProducerStateManager:
    """Producer entries of one partition, with snapshots in the partition directory."""

    # One per partition: slots, no __dict__ each.
    __slots__ = (
        "_directory",
        "expiration_ms",
        "last_snapshot_offset",
        "producers",
        "txns",
        "verifications",
    )

    directory = StrPath()

    def __init__(
        self, directory: Path, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.txns = TxnTracker()
        self.last_snapshot_offset = -1
        self.verifications: dict[int, VerificationGuard] = {}

    # -- the append path ---------------------------------------------------

    def start_verification(self, producer_id: int, epoch: int) -> tuple[VerificationGuard, bool]:
        """The guard a transactional write of ``producer_id`` will present, and whether the
        coordinator must be asked first: no transaction of ``epoch`` is open here
        (Kafka's ``maybeStartTransactionVerification``). Concurrent requests of one
        producer share a guard."""
        entry = self.producers.get(producer_id)
        open_here = (
            entry is not None
            and entry.current_txn_first_offset >= 0
            and entry.producer_epoch == epoch
        )
        guard = self.verifications.get(producer_id)
        if guard is None:
            guard = self.verifications[producer_id] = VerificationGuard()
        return guard, not open_here

    def check(
        self, header: BatchHeader, verification: VerificationGuard | None = None
    ) -> BatchMetadata | None:
        """Validate a client batch of an idempotent producer before it is written.

        Returns the retained batch it duplicates, or None when it may be
        appended; raises ``KafkaError`` as Kafka would. ``verification`` is the
        guard of a verified transactional write: one that would open a
        transaction needs it still registered (INVALID_TXN_STATE otherwise).
        """
        pid = header.producer_id
        entry = self.producers.get(pid)
        first_seq = header.base_sequence
        if entry is not None and first_seq != NO_SEQUENCE:
            duplicate = entry.find_duplicate(header)
            if duplicate is not None:
                return duplicate
        epoch = header.producer_epoch
        current_epoch = self._check_epoch(pid, entry, epoch)
        if first_seq == NO_SEQUENCE:
            pass
        elif epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {pid}: {epoch} "
                    f"(request epoch), {first_seq} (seq. number), {current_epoch} "
                    "(current producer epoch)",
                )
        elif entry is not None and not _in_sequence(entry.last_seq, first_seq):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {pid}: {first_seq} "
                f"(incoming seq. number), {entry.last_seq} (current end sequence number)",
            )
        in_txn = entry is not None and entry.current_txn_first_offset >= 0
        if in_txn and not header.is_transactional:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"Expected transactional write from producer {pid} at offset "
                f"{entry.current_txn_first_offset}",
            )
        if (
            verification is not None
            and not (in_txn and current_epoch == epoch)
            and self.verifications.get(pid) is not verification
        ):
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"Transactional write of producer {pid} was not verified, or its transaction "
                "ended since",
            )
        return None

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Validate an end-transaction marker the transaction coordinator asks to write."""
        entry = self.producers.get(producer_id)
        self._check_epoch(producer_id, entry, epoch)
        if entry is not None and entry.coordinator_epoch > coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"Invalid coordinator epoch for producerId {producer_id}: {coordinator_epoch} "
                f"(zombie), {entry.coordinator_epoch} (current)",
            )

    @staticmethod
    def _check_epoch(pid: int, entry: ProducerStateEntry | None, epoch: int) -> int:
        """INVALID_PRODUCER_EPOCH below the current epoch, which is returned."""
        current_epoch = entry.producer_epoch if entry is not None else NO_PRODUCER_EPOCH
        if epoch < current_epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {pid} is {epoch}, which is smaller than the last seen "
                f"epoch {current_epoch}",
            )
        return current_epoch

    def update(
        self,
        header: BatchHeader,
        marker: EndTxnMarker | None = None,
        txn_index: TransactionIndex | None = None,
    ) -> None:
        """Record an appended batch (offsets stamped). Also used to replay the log on load.

        A transactional data batch from a producer without an open transaction
        opens one at its base offset. A control batch carries ``marker`` (None
        when compaction emptied it, which only moves the epoch): it closes the
        producer's transaction; an ABORT gets an entry in ``txn_index`` (the
        marker's segment's; None when replaying batches whose index is intact).
        """
        pid = header.producer_id
        if pid < 0:
            return
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        entry.update_epoch(header.producer_epoch)
        entry.last_timestamp = header.max_timestamp
        if header.is_control:
            self.verifications.pop(pid, None)
            if marker is not None:
                self._end_txn(entry, header.base_offset, marker, txn_index)
            return
        entry.batches.append(
            BatchMetadata(
                last_sequence(header),
                header.last_offset,
                header.last_offset_delta,
                header.max_timestamp,
            )
        )
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset
            self.txns.start(pid, header.base_offset)
            self.verifications.pop(pid, None)

    def _end_txn(
        self,
        entry: ProducerStateEntry,
        marker_offset: int,
        marker: EndTxnMarker,
        txn_index: TransactionIndex | None,
    ) -> None:
        """As Kafka: the index entry is written before the transaction counts as completed,
        so a failed write leaves the LSO where it was."""
        first_offset = entry.current_txn_first_offset
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.current_txn_first_offset = -1
        if first_offset < 0:
            return  # a marker without data changes neither the LSO nor the index
        txn = CompletedTxn(entry.producer_id, first_offset, marker_offset, not marker.committed)
        if txn.is_aborted and txn_index is not None:
            lso = self.txns.last_stable_offset_after(txn)
            txn_index.append(AbortedTxn(txn.producer_id, first_offset, marker_offset, lso))
        self.txns.complete(txn)

    def last_records(self) -> dict[int, tuple[int, int]]:
        """Each producer's last data offset (-1 when it has none) and epoch.

        Compaction keeps the batch at that offset, even emptied, so that a
        restarted broker still knows the producer's last sequence (Kafka's
        ``lastRecordsOfActiveProducers``).
        """
        return {
            pid: (entry.batches[-1].last_offset if entry.batches else -1, entry.producer_epoch)
            for pid, entry in self.producers.items()
        }

    def remove_expired(self, now_ms: int) -> None:
        """Forget producers idle for ``producer.id.expiration.ms`` (bounds memory, as Kafka)."""
        expired = [pid for pid, entry in self.producers.items() if self._is_expired(entry, now_ms)]
        for pid in expired:
            del self.producers[pid]
            self.verifications.pop(pid, None)

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= self.expiration_ms
        )

    # -- snapshots -----------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        offsets = map(offset_from_filename, names_ending(self.directory, SNAPSHOT_SUFFIX))
        return sorted(offset for offset in offsets if offset is not None)

    def snapshot_path(self, offset: int) -> Path:
        return segment_file(self.directory, offset, SNAPSHOT_SUFFIX)

    def take_snapshot(self, offset: int, *, sync: bool) -> None:
        """Write the state as of ``offset`` (the log end) to ``<offset>.snapshot``.

        Written when a segment rolls (unsynced: the CRC catches a torn file, and
        the state can be rebuilt from the log) and on clean shutdown (synced).
        """
        if offset in (self.last_snapshot_offset, 0):  # 0: no record ever, no state
            return
        atomic_write(
            self.snapshot_path(offset), encode_snapshot(self.producers.values()), sync=sync
        )
        self.last_snapshot_offset = offset

    def load_latest_snapshot(
        self, max_offset: int, now_ms: int, end_offset: int | None = None
    ) -> int | None:
        """Replace the state with the newest readable snapshot at or below ``max_offset``.

        Snapshots above ``end_offset`` (default ``max_offset``) describe a log
        that no longer exists and are deleted, as are unreadable ones. Returns
        the snapshot's offset, or None (empty state) when there is none.
        """
        end = max_offset if end_offset is None else end_offset
        self.producers.clear()
        self.txns.clear()
        self.last_snapshot_offset = -1
        for offset in reversed(self.snapshot_offsets()):
            path = self.snapshot_path(offset)
            if offset > end:
                path.unlink(missing_ok=True)
                continue
            if offset > max_offset:
                continue
            try:
                entries = decode_snapshot(path.read_bytes())
            except CorruptSnapshotError as exc:
                log.warning("deleting producer snapshot %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            self.producers = {e.producer_id: e for e in entries if not self._is_expired(e, now_ms)}
            self._load_open_txns()
            self.last_snapshot_offset = offset
            return offset
        return None

    def _load_open_txns(self) -> None:
        """The open transactions are the producers' (Kafka's ``loadProducerEntry``)."""
        self.txns.load(
            (pid, entry.current_txn_first_offset)
            for pid, entry in self.producers.items()
            if entry.current_txn_first_offset >= 0
        )

    def truncate_fully(self) -> None:
        """Forget every producer and snapshot (the log was emptied)."""
        self.producers.clear()
        self.txns.clear()
        self.verifications.clear()
        self.delete_snapshots(())

    def delete_snapshots(self, keep: Iterable[int]) -> None:
        """Delete every snapshot except those at the offsets in ``keep``.

        Called with the segment base offsets (and the newest snapshot), like
        Kafka's ``removeStraySnapshots``, and when segments go away.
        """
        kept = set(keep)
        for offset in self.snapshot_offsets():
            if offset not in kept:
                self.snapshot_path(offset).unlink(missing_ok=True)
                if offset == self.last_snapshot_offset:
                    self.last_snapshot_offset = -1


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray(_SNAPSHOT_COUNT.size)
    count = 0
    for entry in entries:
        last = (
            entry.batches[-1]
            if entry.batches
            else BatchMetadata(NO_SEQUENCE, -1, 0, entry.last_timestamp)
        )
        body += _SNAPSHOT_ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            last.last_seq,
            last.last_offset,
            last.offset_delta,
            entry.last_timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
        count += 1
    _SNAPSHOT_COUNT.pack_into(body, 0, count)
    return _SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    head = _SNAPSHOT_HEADER.size
    if len(data) < head + _SNAPSHOT_COUNT.size:
        raise CorruptSnapshotError("snapshot is too short")
    version, crc = _SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if crc32c(memoryview(data)[head:]) != crc:
        raise CorruptSnapshotError("snapshot CRC mismatch")
    (count,) = _SNAPSHOT_COUNT.unpack_from(data, head)
    start = head + _SNAPSHOT_COUNT.size
    if count < 0 or len(data) != start + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"snapshot length does not match {count} entries")
    entries = []
    for (
        pid,
        epoch,
        seq,
        offset,
        delta,
        timestamp,
        coordinator_epoch,
        txn_first,
    ) in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[start:]):
        entry = ProducerStateEntry(
            pid,
            epoch,
            last_timestamp=timestamp,
            coordinator_epoch=coordinator_epoch,
            current_txn_first_offset=txn_first,
        )
        if offset >= 0:
            entry.batches.append(BatchMetadata(seq, offset, delta, timestamp))
        entries.append(entry)
    return entries
