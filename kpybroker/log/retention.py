"""Which segments retention deletes: Kafka's ``UnifiedLog.deleteOldSegments`` rules.

``PartitionLog.delete_old_segments`` applies three rules in Kafka's order: the
log start offset (always: segments wholly below it after DeleteRecords), then
``retention.bytes`` and ``retention.ms`` (only when ``cleanup.policy`` contains
``delete``). Each rule is a predicate over ``(segment, next segment)``;
:func:`deletable_segments` takes segments from the oldest on while it holds.
Deletion is by whole segments only, and never of a segment that reaches past
the high watermark, so the log start offset cannot pass it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kpybroker.log.log_config import LogConfig
from kpybroker.log.segment import Segment

#: ``(segment, the segment after it or None for the active one) -> deletable``
SegmentPredicate = Callable[[Segment, Segment | None], bool]


def log_start_breached(log_start_offset: int) -> SegmentPredicate:
    """Segments whose successor starts at or below the log start offset hold nothing readable."""
    return lambda _segment, following: (
        following is not None and following.base_offset <= log_start_offset
    )


def retention_size_breached(config: LogConfig, log_size: int) -> SegmentPredicate | None:
    """The oldest segments whose removal keeps the log at or above ``retention.bytes``.

    As in Kafka, a segment goes only if the log is still at least
    ``retention.bytes`` without it, so the log never shrinks below the limit.
    """
    if config.retention_bytes < 0 or log_size < config.retention_bytes:
        return None
    excess = log_size - config.retention_bytes

    def breached(segment: Segment, _following: Segment | None) -> bool:
        nonlocal excess
        if excess < segment.size:
            return False
        excess -= segment.size
        return True

    return breached


def retention_ms_breached(config: LogConfig, now_ms: int) -> SegmentPredicate | None:
    """Segments whose newest record (by timestamp, else file mtime) is older than retention.ms."""
    if config.retention_ms < 0:
        return None
    return lambda segment, _following: now_ms - segment.largest_timestamp > config.retention_ms


def deletable_segments(
    segments: Sequence[Segment],
    predicate: SegmentPredicate,
    high_watermark: int,
    log_end_offset: int,
) -> list[Segment]:
    """The oldest segments for which ``predicate`` holds (Kafka's ``deletableSegments``).

    Stops at the first segment that reaches past the high watermark or fails the
    predicate (which is then not asked about later segments: the size rule
    counts down as it goes). An empty active segment is never returned. The
    caller rolls the log when every segment is returned.
    """
    deletable = []
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper_bound = following.base_offset if following is not None else log_end_offset
        if high_watermark < upper_bound or not predicate(segment, following):
            break
        if following is None and segment.size == 0:
            break
        deletable.append(segment)
    return deletable
