"""Which batches the log cleaner reads belong to aborted transactions (the part of Kafka's
``CleanedTransactionMetadata`` that tells aborted data apart).

Aborted data must never enter the offset map: a committed record would then be
removed for a later aborted one of its key, which read_committed consumers
skip, and the key would be lost. The filter drops it outright, as Kafka's
cleaner does. The aborted transactions come from the transaction indexes,
collected on the event loop before a round; batches are then fed in offset
order: a transaction is active from its first offset until its ABORT marker
(the batch at its index entry's last offset).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from kpybroker.log.transaction_index import AbortedTxn
from kpybroker.protocol.records import BatchHeader


class AbortedBatches:
    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda txn: txn.first_offset))
        self._active: dict[int, AbortedTxn] = {}

    def is_aborted(self, header: BatchHeader) -> bool:
        """Whether ``header``'s batch is data of an aborted transaction; feed every batch."""
        pending = self._pending
        while pending and pending[0].first_offset <= header.last_offset:
            txn = pending.popleft()
            self._active.setdefault(txn.producer_id, txn)
        pid = header.producer_id
        if header.is_control:
            txn = self._active.get(pid)
            if txn is not None and txn.last_offset == header.base_offset:
                del self._active[pid]
            return False
        return header.is_transactional and pid in self._active
