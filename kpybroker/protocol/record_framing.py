"""The framing of a v2 records section, checked as Kafka's leader checks a compressed batch.

Kafka's ``LogValidator`` iterates every record of a produced compressed batch (with
``DefaultRecordBatch.skipKeyValueIterator`` when it keeps the batch as it is) and
refuses the batch when a record does not parse: a length that is negative, above
max.decompressed.message.bytes or past the data, fields that do not add up to the
length, fewer or more records than the header's count, offset deltas other than
0, 1, 2... (Kafka fails those with an unknown server error when it rewrites the
batch; here they are INVALID_RECORD). Its consumers would otherwise meet these
records. :func:`check_framing` does the same walk over the decompressed section.

Why a separate walk from ``records.iter_records``: that one builds a ``Record``
with copies of every key, value and header. This runs on every compressed batch
produced, so it reads the fields as integers, steps over the bytes, and keeps
the one- and two-byte varints (most lengths and deltas) inline. It is still
Python work per record, about a microsecond each, so the same walk is also compiled
(``_record_walks.c``): :func:`check_framing` is the compiled one where ``compiled.walks``
has it, and :func:`check_framing_python` otherwise. The compiled walk only gives a
verdict; on a refusal the Python walk runs again to raise Kafka's message, which is
kept here alone. The cost of compressed produce with each is measured in
docs/limits.md.
"""

from __future__ import annotations

from collections.abc import Callable

from .compiled import walks
from .records import Buffer, InvalidRecordError

_STRUCTURE = "Found invalid record structure"


def _uvarint(data: Buffer, pos: int) -> tuple[int, int]:
    """The raw (still zigzag) varint at ``pos``, at most 10 bytes, and the position after
    it; IndexError past the data."""
    value = shift = 0
    while shift < 70:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise InvalidRecordError(_STRUCTURE)


def check_framing_python(section: Buffer, record_count: int, max_record_size: int) -> None:
    """Check that ``section`` holds exactly ``record_count`` well-formed records whose offset
    deltas are 0, 1, 2....

    Raises :class:`InvalidRecordError` (INVALID_RECORD) with Kafka's message otherwise.
    ``max_record_size`` is max.decompressed.message.bytes, which bounds each record's
    length as Kafka's ``DefaultRecord.readFrom`` does.

    Varints are read raw (zigzag: the low bit is the sign), and their one- and
    two-byte forms (every length below 8 KiB) inline; reads are bounded by the
    section only, since a field running past its record leaves the walk off the
    record's end, which is checked after each record.
    """
    data = section
    end = len(data)
    pos = 0
    try:
        for index in range(record_count):
            if pos >= end:
                raise InvalidRecordError("Incorrect declared batch size, premature EOF reached")
            raw = data[pos]
            if raw < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = _uvarint(data, pos)
            length = raw >> 1
            record_end = pos + length
            if raw & 1 or length > max_record_size or record_end > end:
                raise _length_error(raw, length, max_record_size)
            pos += 1  # attributes
            while data[pos] >= 0x80:  # the timestamp delta, whose value does not matter
                pos += 1
            raw, pos = (data[pos + 1], pos + 2) if index < 64 else _uvarint(data, pos + 1)
            if raw != index << 1:
                raise InvalidRecordError(
                    f"Record {index} has the offset delta {(raw >> 1) ^ -(raw & 1)}: a "
                    "produced batch's records must have the offset deltas 0, 1, 2..."
                )
            raw = data[pos]  # the key's length (negative: null), then the key
            if raw < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = _uvarint(data, pos)
            if not raw & 1:
                pos += raw >> 1
            raw = data[pos]  # the value's, as the key's
            if raw < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                raw, pos = _uvarint(data, pos)
            if not raw & 1:
                pos += raw >> 1
            if data[pos] == 0:  # no headers, the usual case
                pos += 1
            else:
                pos = _skip_headers(data, pos, record_end)
            if pos != record_end:
                raise InvalidRecordError(
                    f"Invalid record size: expected to read {length} bytes in record payload, "
                    f"but instead read {length - (record_end - pos)}"
                )
    except IndexError:
        raise InvalidRecordError(_STRUCTURE) from None
    if pos != end:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")


def _length_error(raw: int, length: int, max_record_size: int) -> InvalidRecordError:
    """What is wrong with a record's length, in Kafka's words (``DefaultRecord.readFrom``)."""
    if raw & 1:
        return InvalidRecordError(f"Invalid record size: {-length - 1} is negative.")
    if length > max_record_size:
        return InvalidRecordError(
            f"Invalid record size: {length} exceeds the configured maximum record size "
            f"of {max_record_size}."
        )
    return InvalidRecordError(
        f"Invalid record size: expected {length} bytes in record payload, but the "
        "record payload reached EOF."
    )


def _skip_headers(data: Buffer, pos: int, end: int) -> int:
    """Step over a record's header count and headers, as Kafka's reader checks them."""
    raw, pos = _uvarint(data, pos)
    count = (raw >> 1) ^ -(raw & 1)
    if count < 0:
        raise InvalidRecordError(f"Found invalid number of record headers {count}")
    if count > end - pos:
        raise InvalidRecordError(
            f"Found invalid number of record headers. {count} is larger than the remaining "
            "size of the buffer"
        )
    for _ in range(count):
        raw, pos = _uvarint(data, pos)
        if raw & 1:
            raise InvalidRecordError(f"Invalid negative header key size {-(raw >> 1) - 1}")
        raw, pos = _uvarint(data, pos + (raw >> 1))
        if not raw & 1:
            pos += raw >> 1
    return pos


def check_framing_compiled(section: Buffer, record_count: int, max_record_size: int) -> None:
    """:func:`check_framing_python`'s checks, walked in C; needs ``compiled.walks``.

    A refused section is walked again in Python, whose exception is raised: a refusal
    is rare and pays what it paid before, and the messages stay in one place.
    """
    if not walks.well_framed(section, record_count, max_record_size):
        check_framing_python(section, record_count, max_record_size)
        raise AssertionError("the compiled walk refused a section the Python walk accepts")


#: A walk: ``check_framing_python``, ``check_framing_compiled``, or ``check_framing``.
Walk = Callable[[Buffer, int, int], None]

check_framing: Walk = check_framing_python if walks is None else check_framing_compiled
