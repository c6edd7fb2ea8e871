"""What the log cleaner knows of the transactions in the batches it reads (Kafka's
``CleanedTransactionMetadata``, ``LogCleaner.scala``).

Batches are fed in offset order, every one of them: data batches to
``on_batch_read``, control batches (transaction markers) to
``on_control_batch_read``. The aborted transactions come from the transaction
indexes, collected on the event loop before the pass; a transaction is active
from its first offset until its producer's ABORT marker.

- Data of an aborted transaction is discarded. It must never enter the offset
  map either: a committed record would then be removed for a later aborted
  one of its key, which read_committed consumers skip, and the key would be
  lost.
- A marker may be discarded once no batch of its transaction was read in this
  pass (the pass starts at the beginning of the log, so none is left): a
  COMMIT marker when its producer wrote no transactional batch since its last
  marker, an ABORT marker when no batch of the aborted transaction remains.
  Until ``delete.retention.ms`` has passed the filter keeps it anyway, with a
  delete horizon (``batch_filter``). An emptied control batch may always go.
- An aborted transaction stays in the cleaned segment's ``.txnindex`` only
  while some of its batches remain: its ABORT marker then queues it in
  ``retained`` for the caller to write. Once its data is gone, a
  read_committed consumer has nothing to skip and the entry is dropped, as
  Kafka does, even while the marker itself is still kept.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable

from kpybroker.log.control_batches import ABORT, COMMIT
from kpybroker.log.transaction_index import AbortedTxn
from kpybroker.protocol.records import BatchHeader

_CONTROL_KEY = struct.Struct(">hh")


def control_type(key: bytes | None) -> int | None:
    """The type of a control record (0 ABORT, 1 COMMIT, others Kafka's further types);
    None for a key that is not one (Kafka's ``ControlRecordType.parse`` would throw)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return None
    version, kind = _CONTROL_KEY.unpack_from(key)
    return None if version < 0 else kind


class _AbortedInProgress:
    """An aborted transaction the pass is inside (Kafka's ``AbortedTransactionMetadata``)."""

    __slots__ = ("observed", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.observed = False  # a batch of it was read in this pass


class CleanedTransactions:
    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda txn: txn.first_offset))
        self._ongoing_aborted: dict[int, _AbortedInProgress] = {}
        self._ongoing_committed: set[int] = set()
        #: aborted transactions to keep in the cleaned segments' indexes, in marker order;
        #: the caller takes them with ``take_retained`` after each group of segments
        self.retained: list[AbortedTxn] = []

    def _consume_aborted_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            if txn.producer_id not in self._ongoing_aborted:
                self._ongoing_aborted[txn.producer_id] = _AbortedInProgress(txn)

    def on_batch_read(self, header: BatchHeader) -> bool:
        """Track a data batch; True when it belongs to an aborted transaction (discard it)."""
        if self._pending and self._pending[0].first_offset <= header.last_offset:
            self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        pid = header.producer_id
        aborted = self._ongoing_aborted.get(pid)
        if aborted is not None:
            aborted.observed = True
            return True
        self._ongoing_committed.add(pid)
        return False

    def on_control_batch_read(self, header: BatchHeader, key: bytes | None) -> bool:
        """Track a control batch whose first record has ``key`` (ignored for a batch without
        records); True when no data of its transaction is left, so it may be discarded."""
        self._consume_aborted_up_to(header.last_offset)
        if header.record_count == 0:
            return True  # emptied by an earlier pass
        pid = header.producer_id
        kind = control_type(key)
        if kind == ABORT:
            aborted = self._ongoing_aborted.pop(pid, None)
            if aborted is not None and aborted.observed:
                self.retained.append(aborted.txn)
                return False
            return True
        if kind == COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def take_retained(self) -> list[AbortedTxn]:
        """The index entries kept since the last call."""
        retained, self.retained = self.retained, []
        return retained
