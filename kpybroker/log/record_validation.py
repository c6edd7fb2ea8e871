"""Checks on an appended batch that need its records decoded (Kafka's ``LogValidator``).

Only one such check applies to kpybroker's logs: a compacted topic refuses
records without a key, since compaction could never tell which of them is the
latest. Kafka reports each offending record by its index in the batch, and
Produce v8+ carries these as ``record_errors``.
"""

from __future__ import annotations

from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.records import Buffer, iter_record_keys


class RecordValidationError(KafkaError):
    """Some records of a batch refused (Kafka's ``RecordValidationException``):
    INVALID_RECORD, or INVALID_TIMESTAMP for timestamps out of bounds.

    ``record_errors`` lists ``(index in the batch, message)``; the message of the
    error itself is Kafka's summary of the first three. ``log_start_offset`` is
    answered with the error, as Kafka does. These are the only produce errors
    whose message Kafka sends to the client.
    """

    def __init__(
        self,
        record_errors: list[tuple[int, str]],
        log_start_offset: int,
        code: ErrorCode = ErrorCode.INVALID_RECORD,
    ) -> None:
        shown = ", ".join(
            f"RecordError(batchIndex={index}, message='{message}')"
            for index, message in record_errors[:3]
        )
        super().__init__(
            code,
            f"One or more records have been rejected due to {len(record_errors)} record errors "
            f"in total, and only showing the first three errors at most: [{shown}]",
        )
        self.record_errors = record_errors
        self.log_start_offset = log_start_offset


def check_keys_for_compaction(batch: Buffer, topic_partition: str, log_start_offset: int) -> None:
    """Raise ``RecordValidationError`` naming every record of ``batch`` that has no key."""
    message = (
        f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    )
    keyless = [i for i, record in enumerate(iter_record_keys(batch)) if record.key is None]
    if keyless:
        raise RecordValidationError([(i, message) for i in keyless], log_start_offset)
