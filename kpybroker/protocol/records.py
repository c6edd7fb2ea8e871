"""Record batches, magic v2: the only code that knows the batch layout.

Layout (byte offsets from the batch start)::

    0  baseOffset int64            27 baseTimestamp int64
    8  batchLength int32           35 maxTimestamp int64
    12 partitionLeaderEpoch int32  43 producerId int64
    16 magic int8 (= 2)            51 producerEpoch int16
    17 crc uint32                  53 baseSequence int32
    21 attributes int16            57 recordCount int32
    23 lastOffsetDelta int32       61 records (one compressed blob when compressed)

The CRC is CRC-32C over bytes 21..end, so baseOffset and partitionLeaderEpoch can
be stamped by the broker without recomputing it.

The produce path calls :func:`validate_batch` and :func:`stamp_batch` on every
batch, so both do only fixed, per-batch work: precompiled structs reading and
writing in place, and one hardware CRC-32C over a zero-copy memoryview. Records
are decoded by :func:`iter_records` (compaction, tools, tests) and on produce
only for recompression; ``record_framing`` walks those of a compressed batch.

Errors follow Kafka: :class:`CorruptRecordError` (CORRUPT_MESSAGE) for bytes that
do not form an intact batch (truncated, bad length, bad CRC, unknown magic,
undecodable compressed data); :class:`InvalidRecordError` (INVALID_RECORD) for an
intact batch whose content Kafka refuses (legacy magic on produce, inconsistent
counts, control batches from clients, malformed records).
"""

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, TypeAlias

from .compiled import walks
from .compression import CompressionError, DecompressedTooLarge, decompress
from .compression import compress as compress_records
from .crc import crc32c
from .errors import ErrorCode, KafkaError

Buffer: TypeAlias = bytes | bytearray | memoryview
WritableBuffer: TypeAlias = bytearray | memoryview
RecordHeader: TypeAlias = tuple[str, bytes | None]

BATCH_HEADER_SIZE = 61
BATCH_OVERHEAD = 12
MAGIC = 2
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - BATCH_OVERHEAD

LEADER_EPOCH_OFFSET = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
# Attribute bits a compacted copy of a batch keeps from the original (the codec included).
_KEPT_ATTRIBUTES = COMPRESSION_MASK | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK
MAX_CODEC = 4

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_PRODUCER_ID = -1
NO_PARTITION_LEADER_EPOCH = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiib")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")


class CorruptRecordError(KafkaError):
    """The bytes are not an intact v2 batch (CORRUPT_MESSAGE)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.CORRUPT_MESSAGE, message)


class InvalidRecordError(KafkaError):
    """An intact batch whose content Kafka rejects (INVALID_RECORD)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_RECORD, message)


class BatchHeader(NamedTuple):
    """The 61-byte v2 batch header, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, including baseOffset and batchLength."""
        return self.batch_length + BATCH_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 create time, 1 log-append time."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When compaction may drop this batch's tombstones (KIP-534), else None.

        The log cleaner sets attribute bit 6 and stores the horizon as baseTimestamp
        the first time it keeps a tombstone; record timestamps stay exact because
        their deltas are relative to that base.
        """
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None


class Record(NamedTuple):
    """One decoded record; ``timestamp`` is the batch's maxTimestamp under log-append time."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...]


class NewRecord(NamedTuple):
    """A record to encode with :func:`build_batch`; ``timestamp=None`` takes the batch default."""

    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[RecordHeader] = ()
    timestamp: int | None = None


def _magic_error(magic: int) -> KafkaError:
    # Kafka 4 rejects v0/v1 message sets on produce v3+ with INVALID_RECORD
    # (ProduceRequest.validateRecords); any other magic is CORRUPT_MESSAGE
    # (ByteBufferLogInputStream.nextBatchSize, "Invalid magic found in record").
    if magic in (0, 1):
        return InvalidRecordError(f"magic v{magic} message sets are not supported, only v2")
    return CorruptRecordError(f"invalid magic {magic}")


#: Kafka's smallest record (``LegacyRecord.RECORD_OVERHEAD_V0``): a batch length below it
#: stops Kafka's batch iterator, and with it the whole Produce request.
MIN_RECORD_OVERHEAD = 14
_MAGIC_AT = 16
_HEADER_UP_TO_MAGIC = _MAGIC_AT + 1
_INT8 = struct.Struct(">b")


def batch_iteration_error(buf: Buffer | None) -> str | None:
    """What Kafka's batch iterator (``ByteBufferLogInputStream.nextBatchSize``) throws
    walking ``buf``, or None.

    Kafka walks every batch of a Produce request before anything else (to see
    whether one is transactional), so such an error fails the whole request.
    A truncated last batch ends the walk quietly, as there.
    """
    if buf is None:
        return None
    pos, end = 0, len(buf)
    while end - pos >= BATCH_OVERHEAD:
        length = _INT32.unpack_from(buf, pos + 8)[0]
        if length < MIN_RECORD_OVERHEAD:
            return (
                f"Record size {length} is less than the minimum record overhead "
                f"({MIN_RECORD_OVERHEAD})"
            )
        if end - pos < _HEADER_UP_TO_MAGIC:
            return None
        (magic,) = _INT8.unpack_from(buf, pos + _MAGIC_AT)
        if not 0 <= magic <= MAGIC:
            return f"Invalid magic found in record: {magic}"
        pos += length + BATCH_OVERHEAD
    return None


def batch_size(buf: Buffer, pos: int = 0) -> int:
    """The whole size of the batch at ``pos`` (batchLength + 12), from its length field only.

    Callers use it to tell a truncated batch or trailing bytes from a complete
    one before checking anything else; -1 when not even the length is there.
    """
    if len(buf) - pos < BATCH_OVERHEAD:
        return -1
    return _INT32.unpack_from(buf, pos + 8)[0] + BATCH_OVERHEAD


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Read the batch header at ``pos`` without checking the CRC.

    Raises :class:`CorruptRecordError` when fewer than 61 bytes are there, the magic
    is not 2, or batchLength is below the v2 minimum (49). Whether the whole batch
    is present is left to the caller (``header.size``).
    """
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"batch header truncated: {len(buf) - pos} of 61 bytes")
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordError(f"invalid magic {header.magic}")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batchLength {header.batch_length} is below the minimum 49")
    return header


def validate_batch(buf: Buffer, pos: int = 0, *, from_client: bool = True) -> BatchHeader:
    """Check the batch at ``pos`` as Kafka checks produce input, without decoding records.

    Always checked (CorruptRecordError unless noted): at least 17 bytes to reach the
    magic; magic 2 (magic 0/1 is InvalidRecordError, as Kafka 4 answers produce v3+;
    any other value is CorruptRecordError); batchLength at least 49 and no more than
    the bytes present; the CRC-32C; codec id 0-4 and recordCount >= 0
    (InvalidRecordError).

    With ``from_client`` (the produce path; Kafka's ``AppendOrigin.CLIENT``) the
    header checks Kafka makes before touching records also apply, all
    InvalidRecordError: baseOffset 0 (``UnifiedLog.analyzeAndValidateRecords``);
    recordCount > 0 and lastOffsetDelta == recordCount - 1; no control bit; a
    producer id implies baseSequence >= 0 (``LogValidator.validateBatch``). Kafka
    checks the record count against the records actually present only while
    decompressing/iterating; that per-record check is not done here, by design.

    With ``from_client=False`` (replication, recovery, batches the broker wrote) a
    compacted batch is legal, so only recordCount <= lastOffsetDelta + 1 is required.

    Trailing bytes after the batch are the caller's concern (produce v3+ allows
    exactly one batch per partition: compare ``header.size`` with the data length).
    """
    avail = len(buf) - pos
    if avail < BATCH_HEADER_SIZE:
        # Legacy messages are smaller than a v2 header; report their magic first.
        if avail >= _PREFIX.size and (magic := _PREFIX.unpack_from(buf, pos)[3]) != MAGIC:
            raise _magic_error(magic)
        raise CorruptRecordError(f"batch truncated: {avail} bytes, a v2 header needs 61")
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise _magic_error(header.magic)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batchLength {header.batch_length} is below the minimum 49")
    end = pos + BATCH_OVERHEAD + header.batch_length
    if end > len(buf):
        raise CorruptRecordError(
            f"batchLength {header.batch_length} claims {header.size} bytes, only {avail} present"
        )
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end])
    if crc != header.crc:
        raise CorruptRecordError(f"record batch CRC mismatch: stored {header.crc}, computed {crc}")
    if header.attributes & COMPRESSION_MASK > MAX_CODEC:
        raise InvalidRecordError(
            f"unknown compression codec {header.attributes & COMPRESSION_MASK}"
        )
    count = header.record_count
    if count < 0:
        raise InvalidRecordError(f"invalid record count {count}")
    if from_client:
        if header.base_offset != 0:
            raise InvalidRecordError(
                f"baseOffset of a produced batch must be 0, not {header.base_offset}"
            )
        if count == 0:
            raise InvalidRecordError("produced batch has no records")
        if header.last_offset_delta != count - 1:
            raise InvalidRecordError(
                f"lastOffsetDelta {header.last_offset_delta} does not match record count {count}"
            )
        if header.attributes & CONTROL_MASK:
            raise InvalidRecordError("clients may not write control batches")
        if header.producer_id > NO_PRODUCER_ID and header.base_sequence < 0:
            raise InvalidRecordError(
                f"invalid sequence {header.base_sequence} for producer id {header.producer_id}"
            )
    elif count > header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record count {count} exceeds the offset range of lastOffsetDelta "
            f"{header.last_offset_delta}"
        )
    return header


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch in ``buf`` (no CRC check).

    A partial batch at the end (a fetch cut at max_bytes, a torn write) ends the
    iteration; a length or magic that cannot be a v2 batch raises CorruptRecordError,
    since nothing after it can be located.
    """
    end = len(buf)
    pos = 0
    while end - pos >= BATCH_OVERHEAD:
        (batch_length,) = _INT32.unpack_from(buf, pos + 8)
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batchLength {batch_length} at position {pos} is below 49")
        size = batch_length + BATCH_OVERHEAD
        if size > end - pos:
            return
        yield pos, parse_header(buf, pos)
        pos += size


def stamp_batch(buf: WritableBuffer, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Write baseOffset and partitionLeaderEpoch in place; neither is under the CRC."""
    _INT64.pack_into(buf, pos, base_offset)
    _INT32.pack_into(buf, pos + LEADER_EPOCH_OFFSET, leader_epoch)


def set_log_append_time(buf: WritableBuffer, pos: int, timestamp: int) -> None:
    """Mark the batch at ``pos`` as log-append time with maxTimestamp ``timestamp``.

    Both fields are under the CRC, which is recomputed. Readers then report
    ``timestamp`` for every record of the batch (Kafka's LogAppendTime semantics).
    """
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    (batch_length,) = _INT32.unpack_from(buf, pos + 8)
    end = pos + BATCH_OVERHEAD + batch_length
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]))


def _read_varint(data: Buffer, pos: int, end: int) -> tuple[int, int]:
    """Decode a zigzag varint/varlong at ``pos``; returns (value, next position).

    At most 10 bytes, as for a varlong; int32 fields are bounded by the checks
    that use them, so one decoder serves both.
    """
    if pos >= end:
        raise InvalidRecordError("record truncated inside a varint")
    byte = data[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    value = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise InvalidRecordError("record truncated inside a varint")
        if shift > 63:
            raise InvalidRecordError("varint longer than 10 bytes")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def _read_bytes(data: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    """Decode varint length + bytes; a negative length is null, as in Kafka's reader."""
    length, pos = _read_varint(data, pos, end)
    if length < 0:
        return None, pos
    if length > end - pos:
        raise InvalidRecordError(f"field length {length} runs past the record")
    return bytes(data[pos : pos + length]), pos + length


def decode_records(data: Buffer, header: BatchHeader) -> Iterator[Record]:
    """Decode the records of ``header``'s batch from ``data``, its records section, already
    decompressed; raises as :func:`iter_records` does."""
    end = len(data)
    pos = 0
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    for _ in range(header.record_count):
        length, pos = _read_varint(data, pos, end)
        if length < 1 or length > end - pos:
            raise InvalidRecordError(f"record length {length} does not fit the batch")
        record_end = pos + length
        pos += 1  # record attributes: unused in v2
        timestamp_delta, pos = _read_varint(data, pos, record_end)
        offset_delta, pos = _read_varint(data, pos, record_end)
        key, pos = _read_bytes(data, pos, record_end)
        value, pos = _read_bytes(data, pos, record_end)
        header_count, pos = _read_varint(data, pos, record_end)
        if header_count < 0 or header_count > record_end - pos:
            raise InvalidRecordError(f"invalid record header count {header_count}")
        headers: list[RecordHeader] = []
        for _ in range(header_count):
            name, pos = _read_bytes(data, pos, record_end)
            if name is None:
                raise InvalidRecordError("record header key is null")
            header_value, pos = _read_bytes(data, pos, record_end)
            # surrogateescape keeps non-UTF-8 keys from other clients lossless on rewrite.
            headers.append((name.decode("utf-8", "surrogateescape"), header_value))
        if pos != record_end:
            raise InvalidRecordError(
                f"record declares {length} bytes but {record_end - pos} are unused"
            )
        timestamp = base_timestamp + timestamp_delta if log_append_time is None else log_append_time
        yield Record(base_offset + offset_delta, timestamp, key, value, tuple(headers))
    if pos != end:
        raise InvalidRecordError(
            f"{end - pos} bytes left after the declared {header.record_count} records"
        )


def iter_records(batch_bytes: Buffer) -> Iterator[Record]:
    """Decode the records of the batch starting at ``batch_bytes[0]``, decompressing if needed.

    Bytes after the batch are ignored, so a memoryview into a larger buffer works.
    The CRC is not checked (call :func:`validate_batch` first where it matters).
    Raises CorruptRecordError for a truncated batch or undecodable compressed data
    and InvalidRecordError for malformed records or a record count that does not
    match the records present, as Kafka's DefaultRecordBatch iterator does.
    """
    header, data = _records_section(batch_bytes)
    yield from decode_records(data, header)


class RecordKey(NamedTuple):
    """What log compaction needs of a record: its offset, its key, whether it has a value."""

    offset: int
    key: bytes | None
    has_value: bool


class BatchKeys(NamedTuple):
    """:class:`RecordKey` of every record of a batch, one list per field (see
    :func:`scan_record_keys`)."""

    offsets: list[int]
    keys: list[bytes | None]
    #: how many of ``keys`` are None
    null_keys: int
    #: the indexes of the records whose value is null (tombstones)
    null_values: list[int]


def iter_record_keys(batch_bytes: Buffer) -> Iterator[RecordKey]:
    """The offset, key and value presence of each record (:func:`scan_record_keys`)."""
    offsets, keys, _, null_values = scan_record_keys(batch_bytes)
    nulls = set(null_values)
    for i, (offset, key) in enumerate(zip(offsets, keys, strict=True)):
        yield RecordKey(offset, key, i not in nulls)


def scan_record_keys(batch_bytes: Buffer) -> BatchKeys:
    """The offset, key and value presence of each record, without decoding values or headers.

    Compaction and the compacted-topic key check look at every record but need
    no more than this, and skipping the rest (each record's length says where it
    ends) makes them several times cheaper than :func:`iter_records`. It is the
    cleaner's per-record hot loop, so the one- and two-byte varints that almost
    every length, offset delta and key length is are decoded inline, and the
    bounds are checked once per record: every field read must end before the
    record does, and reading past the data is a truncation. Raises as
    :func:`iter_records` does for what it reads.

    The walk is compiled where ``compiled.walks`` is there; it leaves what it is unsure
    of (errors, values past 64 bits) to :func:`scan_section_keys_python`.
    """
    header, section = _records_section(batch_bytes)
    data = bytes(section)  # slices of bytes are the keys, without a copy of a view first
    if walks is not None:
        scanned = walks.scan_keys(data, header.record_count, header.base_offset)
        if scanned is not None:
            return BatchKeys(*scanned)
    return scan_section_keys_python(data, header.record_count, header.base_offset)


def scan_section_keys_python(data: bytes, record_count: int, base_offset: int) -> BatchKeys:
    """:func:`scan_record_keys` over a decompressed records section, in Python: the
    reference of the compiled walk, and its fallback."""
    end = len(data)
    offsets: list[int] = []
    keys: list[bytes | None] = []
    null_values: list[int] = []
    null_keys = 0
    pos = 0
    try:
        for i in range(record_count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                v = (b & 0x7F) | (c << 7)
                length = (v >> 1) ^ -(v & 1)
                pos += 2
            else:
                length, pos = _read_varint(data, pos, end)
            record_end = pos + length
            if length < 1 or record_end > end:
                raise InvalidRecordError(f"record length {length} does not fit the batch")
            pos += 1  # record attributes: unused in v2; then the timestamp delta, skipped
            while data[pos] >= 0x80:
                pos += 1
            pos += 1
            b = data[pos]
            if b < 0x80:
                offsets.append(base_offset + ((b >> 1) ^ -(b & 1)))
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                v = (b & 0x7F) | (c << 7)
                offsets.append(base_offset + ((v >> 1) ^ -(v & 1)))
                pos += 2
            else:
                delta, pos = _read_varint(data, pos, record_end)
                offsets.append(base_offset + delta)
            b = data[pos]
            if b >= 0x80:
                key, pos = _read_bytes(data, pos, record_end)
                keys.append(key)
                null_keys += key is None
            elif b & 1:  # a negative length: null
                keys.append(None)
                null_keys += 1
                pos += 1
            else:
                pos += 1
                keys.append(data[pos : pos + (b >> 1)])
                pos += b >> 1
            if pos >= record_end:
                raise InvalidRecordError("record truncated before its value")
            b = data[pos]
            if b & 1:
                null_values.append(i)
            if b >= 0x80 and (pos + 1 >= record_end or data[pos + 1] >= 0x80):
                _read_varint(data, pos, record_end)  # raises if it runs past the record
            pos = record_end
    except IndexError:
        raise InvalidRecordError("record truncated inside a varint") from None
    if pos != end:
        raise InvalidRecordError(
            f"{end - pos} bytes left after the declared {record_count} records"
        )
    return BatchKeys(offsets, keys, null_keys, null_values)


def _records_section(batch_bytes: Buffer) -> tuple[BatchHeader, Buffer]:
    """The batch's header and its records section, decompressed."""
    header = parse_header(batch_bytes)
    end = header.size
    if end > len(batch_bytes):
        raise CorruptRecordError(f"batch claims {end} bytes, only {len(batch_bytes)} present")
    if header.record_count < 0:
        raise InvalidRecordError(f"invalid record count {header.record_count}")
    codec = header.compression
    payload = memoryview(batch_bytes)[BATCH_HEADER_SIZE:end]
    if codec == 0:
        return header, payload
    if codec > MAX_CODEC:
        raise InvalidRecordError(f"unknown compression codec {codec}")
    try:
        return header, decompress(codec, payload)
    except CompressionError as exc:
        raise CorruptRecordError(str(exc)) from exc
    except DecompressedTooLarge as exc:
        raise InvalidRecordError(str(exc)) from exc
    finally:
        payload.release()


_SMALL_VARINTS = [bytes([((n << 1) ^ (n >> 63)) & 0xFF]) for n in range(-64, 64)]


def _varint(value: int) -> bytes:
    """Zigzag varint/varlong encoding (the same bytes for int32 and int64 values)."""
    if -64 <= value < 64:
        return _SMALL_VARINTS[value + 64]
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


_NULL = _varint(-1)


def _encode_record(
    out: bytearray, offset_delta: int, timestamp_delta: int, record: NewRecord | Record
) -> None:
    body = bytearray(b"\x00")  # record attributes, always 0 in v2
    body += _varint(timestamp_delta)
    body += _varint(offset_delta)
    for field in (record.key, record.value):
        if field is None:
            body += _NULL
        else:
            body += _varint(len(field))
            body += field
    body += _varint(len(record.headers))
    for name, header_value in record.headers:
        encoded = name.encode("utf-8", "surrogateescape")
        body += _varint(len(encoded))
        body += encoded
        if header_value is None:
            body += _NULL
        else:
            body += _varint(len(header_value))
            body += header_value
    out += _varint(len(body))
    out += body


def build_batch(
    records: Iterable[NewRecord | tuple],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
    log_append_time: int | None = None,
) -> bytes:
    """Encode ``records`` as one v2 batch with offset deltas 0..n-1.

    ``records`` holds :class:`NewRecord` values or plain tuples in the same field
    order (``(key, value)`` is enough). ``timestamp`` is the create time of records
    whose own timestamp is None (default: now, in ms); baseTimestamp is the first
    record's and maxTimestamp the largest. ``log_append_time`` marks the batch as
    log-append time with that maxTimestamp, as the broker would. ``compression`` is a
    codec id (0-4) applied to the records section. Raises ValueError for no records:
    Kafka rejects empty produced batches.
    """
    default_timestamp = int(time.time() * 1000) if timestamp is None else timestamp
    body = bytearray()
    count = 0
    base_timestamp = max_timestamp = default_timestamp
    for item in records:
        record = item if type(item) is NewRecord else NewRecord(*item)
        record_timestamp = default_timestamp if record.timestamp is None else record.timestamp
        if count == 0:
            base_timestamp = max_timestamp = record_timestamp
        elif record_timestamp > max_timestamp:
            max_timestamp = record_timestamp
        _encode_record(body, count, record_timestamp - base_timestamp, record)
        count += 1
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    attributes = compression
    if log_append_time is not None:
        attributes |= TIMESTAMP_TYPE_MASK
        max_timestamp = log_append_time
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    return _assemble(
        compress_records(compression, body) if compression else body,
        BatchHeader(
            base_offset=base_offset,
            batch_length=0,
            partition_leader_epoch=partition_leader_epoch,
            magic=MAGIC,
            crc=0,
            attributes=attributes,
            last_offset_delta=count - 1,
            base_timestamp=base_timestamp,
            max_timestamp=max_timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            record_count=count,
        ),
    )


def build_retained_batch(
    original: BatchHeader, records: Sequence[Record], delete_horizon_ms: int | None = None
) -> bytes:
    """The batch ``original`` with only ``records`` left in it, as log compaction writes it.

    Kafka's ``MemoryRecords.buildRetainedRecordsInto``: the base offset and
    lastOffsetDelta stay (so the producer's last sequence survives), each record
    keeps its offset (the deltas now have holes) and timestamp, and the codec,
    timestamp type, producer fields, leader epoch and flags are the original's.
    ``delete_horizon_ms`` sets the delete-horizon bit and becomes baseTimestamp.
    Raises ValueError for no records (see :func:`build_empty_batch`).
    """
    if not records:
        raise ValueError("a retained batch needs at least one record")
    base_timestamp = records[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    body = bytearray()
    for record in records:
        _encode_record(
            body, record.offset - original.base_offset, record.timestamp - base_timestamp, record
        )
    if original.timestamp_type == LOG_APPEND_TIME:
        max_timestamp = original.max_timestamp
    else:
        max_timestamp = max(record.timestamp for record in records)
    attributes = original.attributes & _KEPT_ATTRIBUTES
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    codec = original.compression
    return _assemble(
        compress_records(codec, body) if codec else body,
        original._replace(
            attributes=attributes,
            base_timestamp=base_timestamp,
            max_timestamp=max_timestamp,
            record_count=len(records),
        ),
    )


def build_empty_batch(original: BatchHeader) -> bytes:
    """A record-less copy of ``original``'s header (Kafka's ``writeEmptyHeader``).

    Compaction keeps it where every record went but the batch still matters: the
    last batch of an active idempotent producer (its sequence) and the last batch
    of a cleaning round (the offset it ends at).
    """
    return _assemble(
        b"",
        original._replace(
            attributes=original.attributes & _KEPT_ATTRIBUTES & ~COMPRESSION_MASK,
            base_timestamp=-1,
            record_count=0,
        ),
    )


def _assemble(payload: Buffer, header: BatchHeader) -> bytes:
    """``header`` + ``payload`` (the records section, compressed or not) as a batch; the
    header's length, magic and CRC are computed, whatever ``header`` says."""
    batch = bytearray(BATCH_HEADER_SIZE)
    batch += payload
    _HEADER.pack_into(
        batch, 0, *header._replace(batch_length=len(batch) - BATCH_OVERHEAD, magic=MAGIC, crc=0)
    )
    _UINT32.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)
