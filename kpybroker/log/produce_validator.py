"""Every check of a produced batch, in one place: Kafka's ``LogValidator`` and the checks
around it (``ProduceRequest.validateRecords``, ``UnifiedLog.append``).

Why one place: what a leader accepts into its log is one set of rules, and their
order decides which error a bad batch gets. Spread over the Produce handler, a
recompression module beside it and the log's append, the batch header was parsed
three times and max.message.bytes and the batch count were checked twice, with
different messages. Here :func:`validate_produced` parses the header once and
hands it down in a :class:`CheckedBatch`, through ``Partition.append_as_leader``,
to ``PartitionLog.append``; only a batch rebuilt by recompression, or built by
the broker itself (the group coordinator's), has its header read again.

The checks run in this order, each raising ``KafkaError`` (the code in capitals).
Called by the Produce handler, before anything is appended:

1. Batch count (Produce v3+, ``ProduceRequest.validateRecords``): no whole batch
   (none, or one cut short) is INVALID_RECORD; a whole batch shorter than the
   61-byte v2 header is CORRUPT_MESSAGE; bytes after the batch are INVALID_RECORD.
2. Size: above max.message.bytes is MESSAGE_TOO_LARGE
   (``UnifiedLog.analyzeAndValidateRecords``).
3. Magic, CRC and header fields (``records.validate_batch``): magic 0 or 1 is
   INVALID_RECORD, any other magic but 2, a bad length or a bad CRC
   CORRUPT_MESSAGE; an unknown codec, a baseOffset other than 0, wrong record
   counts, a control batch, a producer id without a sequence are INVALID_RECORD
   (``analyzeAndValidateRecords``, ``LogValidator.validateBatch``).
4. Compression: zstd needs Produce v7 (UNSUPPORTED_COMPRESSION_TYPE).

   The handler then refuses transactional batches (a request-level concern) and
   hands the batch to :func:`validate_records`:

5. The records of a compressed batch, on every topic
   (``LogValidator.validateMessagesAndAssignOffsetsCompressed``): decompressed,
   to at most ``compression.decompression_limit`` bytes, and walked
   (``record_framing.check_framing``); a batch over the bound, a record count
   other than the header's, offset deltas other than 0, 1, 2..., a record larger
   than max.decompressed.message.bytes or records whose lengths do not add up are
   INVALID_RECORD, data the codec cannot decode CORRUPT_MESSAGE. Then
   recompression into the topic's compression.type, when its codec is another;
   it decodes every record.

   ``Partition.append_as_leader`` then checks min.insync.replicas for acks=all
   (NOT_ENOUGH_REPLICAS), and ``PartitionLog.append``, for every append as leader
   (the coordinator's too), calls :func:`validate_append`:

6. Size again, for bytes not checked yet (rebuilt in 5, or built by the broker):
   MESSAGE_TOO_LARGE (``UnifiedLog.append``, after recompression).
7. segment.bytes: a larger batch is RECORD_LIST_TOO_LARGE.
8. Keys on compacted topics: each keyless record is a record error,
   INVALID_RECORD (``LogValidator.validateKey``). Only here, and only for
   compacted topics, are the keys of an uncompressed batch decoded.

   The producer state then answers a retried duplicate with its first offsets;
   the log stamps LogAppendTime (it writes into the batch, as the offsets do), or
   else calls :func:`validate_timestamps`:

9. Timestamps: outside message.timestamp.before/after.max.ms is
   INVALID_TIMESTAMP with a record error (``LogValidator.validateTimestamp``).
   Only the header's first and largest timestamps are read, never each record's.

An uncompressed batch's records are not walked: only its header is read, which keeps
the uncompressed produce path free of per-record work. Kafka walks them too, so an
uncompressed batch whose record count or lengths disagree is INVALID_RECORD there and
stored here.

This is Kafka's order, except where kpybroker's answers already differed and are
kept: Kafka checks the magic and zstd (3, 4) together with the batch count (1),
and baseOffset 0 (3) before the size (2); it checks min.insync.replicas before
2, 3 and 5, which run inside its ``UnifiedLog.append``; and its ``LogValidator``
checks keys (8) and timestamps (9) record by record while it validates and
recompresses (5), so before 6, 7 and the duplicate check.

Only :class:`RecordValidationError` carries its message to the client (Produce
v8+'s ``error_message`` and ``record_errors``), as in Kafka.
"""

from __future__ import annotations

from typing import NamedTuple

from kpybroker.log.log_config import LogConfig
from kpybroker.protocol import compression
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.record_framing import check_framing
from kpybroker.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Buffer,
    NewRecord,
    batch_size,
    build_batch,
    decode_records,
    iter_record_keys,
    parse_header,
    validate_batch,
)

#: Produce v7 allowed zstd (KIP-110).
ZSTD_MIN_PRODUCE_VERSION = 7
ONE_BATCH = "Produce requests with version 3 or later must contain exactly one record batch"
#: compression.type values and their codec ids (``producer`` keeps the producer's).
TOPIC_CODECS = {
    "uncompressed": compression.NONE,
    "gzip": compression.GZIP,
    "snappy": compression.SNAPPY,
    "lz4": compression.LZ4,
    "zstd": compression.ZSTD,
}


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


class CheckedBatch(NamedTuple):
    """One batch on its way into a leader's log, with its header, parsed once.

    ``size_checked`` says whether these very bytes were checked against
    max.message.bytes (step 2); bytes rebuilt by recompression, or built by the
    broker, are checked in step 6 instead.
    """

    data: memoryview | bytearray
    header: BatchHeader
    size_checked: bool


def validate_produced(
    data: memoryview | None, config: LogConfig, produce_version: int
) -> CheckedBatch:
    """Steps 1-4: check a partition's records as Kafka does; the single batch and its header.

    A truncated batch counts as no batch, as in Kafka, whose batch iterator stops
    at an incomplete one. Only the header and the CRC are read.
    """
    size = -1 if data is None else batch_size(data)
    if size < 0 or size > len(data):
        # No whole batch: Kafka's iterator stops at an incomplete one and finds none.
        raise KafkaError(ErrorCode.INVALID_RECORD, ONE_BATCH)
    if size < BATCH_HEADER_SIZE:
        # A whole batch shorter than a header: DefaultRecordBatch.ensureValid refuses it.
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Record batch size {size} is too small")
    if size != len(data):
        raise KafkaError(ErrorCode.INVALID_RECORD, ONE_BATCH)
    _check_max_message_bytes(size, config)
    header = validate_batch(data)
    if header.compression == compression.ZSTD and produce_version < ZSTD_MIN_PRODUCE_VERSION:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "Produce requests with zstd need version 7+"
        )
    return CheckedBatch(data, header, True)


def validate_records(
    batch: CheckedBatch, config: LogConfig, decompressed_limit: int | None = None
) -> CheckedBatch:
    """Step 5: check the records of a compressed batch; ``batch``, recompressed into the
    topic's codec when it is in another one.

    ``decompressed_limit`` lowers the bound on the decompressed records
    (``compression.DecompressedTooLarge`` past it), so that a caller can try a batch
    where a large one would be in the way (the event loop) and give it more elsewhere.

    The new batch keeps every record's key, value, headers and timestamp and the
    batch's producer id, epoch, sequence, leader epoch and transactional flag, as
    Kafka's rewrite does. A batch already in the topic's codec (or any batch,
    under ``producer``) is returned as it is.
    """
    header = batch.header
    payload = memoryview(batch.data)[BATCH_HEADER_SIZE : header.size]
    section: Buffer = payload
    if header.compression != compression.NONE:
        section = compression.decompress(header.compression, payload, decompressed_limit)
        check_framing(section, header.record_count, config.max_decompressed_message_bytes)
    codec = TOPIC_CODECS.get(config.compression_type)
    if codec is None or codec == header.compression:
        return batch
    records = [
        NewRecord(r.key, r.value, r.headers, r.timestamp) for r in decode_records(section, header)
    ]
    rebuilt = bytearray(
        build_batch(
            records,
            compression=codec,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch,
            transactional=header.is_transactional,
        )
    )
    return CheckedBatch(rebuilt, parse_header(rebuilt), False)


def broker_batch(data: bytearray | memoryview) -> CheckedBatch:
    """A batch the broker built itself (the coordinator's, tools', tests'), for
    ``PartitionLog.append``: its header, and exactly one batch (INVALID_RECORD, since
    bytes after it would be stored without offsets). Its CRC is not checked."""
    header = parse_header(data)
    if header.size != len(data):
        raise KafkaError(ErrorCode.INVALID_RECORD, ONE_BATCH)
    return CheckedBatch(data, header, False)


def validate_append(
    batch: CheckedBatch, config: LogConfig, topic_partition: str, log_start_offset: int
) -> None:
    """Steps 6-8, in the log before the producer state: max.message.bytes for bytes not
    checked yet, segment.bytes, and keys on compacted topics."""
    size = batch.header.size
    if not batch.size_checked:
        _check_max_message_bytes(size, config)
    if size > config.segment_bytes:
        raise KafkaError(
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"The record batch is {size} bytes, larger than segment.bytes {config.segment_bytes}",
        )
    if config.compact:
        _check_keys_for_compaction(batch.data, topic_partition, log_start_offset)


def _check_max_message_bytes(size: int, config: LogConfig) -> None:
    if size > config.max_message_bytes:
        raise KafkaError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch is {size} bytes, larger than max.message.bytes "
            f"{config.max_message_bytes}",
        )


def _check_keys_for_compaction(batch: Buffer, topic_partition: str, log_start_offset: int) -> None:
    """Step 8: raise ``RecordValidationError`` naming every record of ``batch`` that has no
    key, since compaction could never tell which of them is the latest."""
    message = (
        f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    )
    keyless = [i for i, record in enumerate(iter_record_keys(batch)) if record.key is None]
    if keyless:
        raise RecordValidationError([(i, message) for i in keyless], log_start_offset)


def validate_timestamps(
    header: BatchHeader, config: LogConfig, now: int, log_start_offset: int
) -> None:
    """Step 9: message.timestamp.before/after.max.ms on the batch's first and max timestamps.

    Kafka checks every record; without decoding records the batch header gives
    the first record's timestamp and the largest one, which catches clocks that
    are off (the usual cause) but not one early record inside a batch.
    """
    low = now - config.message_timestamp_before_max_ms
    high = now + config.message_timestamp_after_max_ms
    if header.base_timestamp < low:
        timestamp = header.base_timestamp
    elif header.max_timestamp > high:
        timestamp = header.max_timestamp
    else:
        return
    message = (
        f"Timestamp {timestamp} of message with offset {header.base_offset} is out of "
        f"range. The timestamp should be within [{low}, {high}]"
    )
    raise RecordValidationError([(0, message)], log_start_offset, code=ErrorCode.INVALID_TIMESTAMP)
