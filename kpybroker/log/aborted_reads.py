"""What a read_committed fetch needs besides the records: the aborted transactions
overlapping them (Kafka's ``LocalLog.addAbortedTransactions`` and
``collectAbortedTransactions``).

The consumer drops the batches of each listed producer from the listed first
offset up to that producer's ABORT marker. The search reads transaction index
entries only, never the log: from the segment read, through later segments,
until an entry's last stable offset reaches the upper bound (no later abort can
then start below it). The upper bound is the offset after the last batch
returned, one header read past the slice, or the next segment's base (Kafka
takes the next offset index entry, a little further; either covers the data).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kpybroker.protocol.records import BATCH_HEADER_SIZE

if TYPE_CHECKING:
    from kpybroker.log.open_files import CachedFile
    from kpybroker.log.segment import Segment
    from kpybroker.log.transaction_index import AbortedTxn


def collect_aborted(
    segments: Sequence[Segment], first: int, start_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """Every aborted transaction with a marker at or after ``start_offset`` and a first offset
    below ``upper_bound_offset``, searching from segment ``first`` (the one holding
    ``start_offset``)."""
    found: list[AbortedTxn] = []
    for segment in segments[first:]:
        result = segment.txn_index.collect(start_offset, upper_bound_offset)
        found += result.aborted
        if result.complete:
            break
    return found


def aborted_in_read(
    segments: Sequence[Segment],
    first: int,
    log_end_offset: int,
    fetch_offset: int,
    log_file: CachedFile,
    end: int,
) -> list[AbortedTxn]:
    """The aborted transactions a consumer needs to filter a read from ``fetch_offset``
    (in segment ``first``) that returned segment file ``log_file`` up to position ``end``.

    Without an abort marker at or after the fetch offset (a topic without aborted
    transactions) the answer is empty and nothing is read.
    """
    if not any(
        txn.last_offset >= fetch_offset
        for segment in segments[first:]
        for txn in segment.txn_index.entries[-1:]  # ordered by marker offset
    ):
        return []
    # The read starts in the segment holding the fetch offset, or a later one after a gap.
    index = next((i for i in range(first, len(segments)) if segments[i].log_file is log_file), None)
    if index is None:  # not a slice of this log's segments: search up to the log end
        return collect_aborted(segments, first, fetch_offset, log_end_offset)
    segment = segments[index]
    if segment.size - end >= BATCH_HEADER_SIZE:
        upper = segment.read_header(end).base_offset
    elif index + 1 < len(segments):
        upper = segments[index + 1].base_offset
    else:
        upper = log_end_offset
    return collect_aborted(segments, index, fetch_offset, upper)
