"""The walk over a compressed batch's records (``record_framing.check_framing``): what it
accepts, what it refuses with Kafka's messages, and that it agrees with the full decoder
(``records.decode_records``) on mutated sections."""

from __future__ import annotations

import random

import pytest

from kpybroker.protocol.errors import KafkaError
from kpybroker.protocol.record_framing import check_framing
from kpybroker.protocol.records import (
    BATCH_HEADER_SIZE,
    InvalidRecordError,
    NewRecord,
    Record,
    build_batch,
    build_retained_batch,
    decode_records,
    parse_header,
)

NO_LIMIT = 2_147_483_639


def section_of(records: list[NewRecord], deltas: list[int] | None = None) -> bytes:
    """The uncompressed records section of ``records``, with ``deltas`` as offset deltas."""
    batch = build_batch(records)
    if deltas is not None:
        moved = [
            Record(d, 0, r.key, r.value, r.headers) for d, r in zip(deltas, records, strict=True)
        ]
        batch = build_retained_batch(parse_header(batch), moved)
    return batch[BATCH_HEADER_SIZE:]


VARIED = [
    NewRecord(b"k", b"v", (), 0),
    NewRecord(None, None, (), 0),
    NewRecord(b"", b"", (), 0),
    NewRecord(b"key" * 30, bytes(10_000), (("h", b"x"), ("empty", b""), ("null", None)), 0),
    *[NewRecord(b"%d" % i, b"v" * (i % 200), (), 0) for i in range(150)],
]


def test_accepts_well_formed_records_of_every_shape() -> None:
    """Null and empty keys and values, headers, lengths of one to three varint bytes, and
    more than 64 records (offset deltas of two bytes)."""
    check_framing(section_of(VARIED), len(VARIED), NO_LIMIT)


@pytest.mark.parametrize("count", [153, 155, 0], ids=["fewer", "more", "none"])
def test_a_record_count_other_than_the_header_is_refused(count: int) -> None:
    with pytest.raises(InvalidRecordError) as raised:
        check_framing(section_of(VARIED), count, NO_LIMIT)
    assert "Incorrect declared batch size" in raised.value.message


@pytest.mark.parametrize("deltas", [[0, 2, 1], [0, 5, 9], [1, 2, 3]])
def test_offset_deltas_other_than_0_1_2_are_refused(deltas: list[int]) -> None:
    records = VARIED[:3]
    with pytest.raises(InvalidRecordError) as raised:
        check_framing(section_of(records, deltas), 3, NO_LIMIT)
    assert "offset delta" in raised.value.message


def test_trailing_bytes_are_refused() -> None:
    with pytest.raises(InvalidRecordError):
        check_framing(section_of(VARIED[:3]) + b"\x00\x01", 3, NO_LIMIT)


def test_a_record_over_max_decompressed_message_bytes_is_refused() -> None:
    section = section_of([NewRecord(b"k", bytes(5000), (), 0)])
    check_framing(section, 1, 5010)
    with pytest.raises(InvalidRecordError) as raised:
        check_framing(section, 1, 1000)
    assert "exceeds the configured maximum record size of 1000" in raised.value.message


@pytest.mark.parametrize(
    "section",
    [
        b"\x01",  # a negative length
        b"\x00",  # a record of 0 bytes (its fields cannot fit)
        b"\x0c\x00\x00\x00\x02\x03\x02v\x00",  # the key's length is -2 (null) but one byte short
        b"\x10\x00\x00\x00\x02k\x02v\x00\x00\x00",  # two bytes more than its fields
        b"\x0e\x00\x00\x00\x02k\x02v\x02",  # one header claimed, none there
        b"\x0e\x00\x00\x00\x02k\x02v\x01",  # a negative header count
        b"\x14\x00\x00\x00\x02k\x02v\x02\x01\x00\x00\x00\x00",  # a negative header key size
        b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # a varint of 12 bytes
        b"\x40\x00\x00",  # a length past the data
        b"\x12\x00\xff\xff\xff",  # a varint cut short by the end of the data
        bytes(1 << 16),  # a decompression bomb's zeros
    ],
)
def test_malformed_records_are_refused(section: bytes) -> None:
    with pytest.raises(InvalidRecordError):
        check_framing(section, 1, NO_LIMIT)


def test_agrees_with_the_full_decoder_on_mutated_sections() -> None:
    """Whatever a mutation does, the walk refuses exactly what decoding every record (and
    asking for offset deltas 0, 1, 2...) refuses."""
    rng = random.Random(1818)
    batch = build_batch(VARIED[:40])
    header = parse_header(batch)
    base = batch[BATCH_HEADER_SIZE:]
    disagreements = []
    for _ in range(3000):
        section = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            position = rng.randrange(len(section))
            if rng.random() < 0.8:
                section[position] = rng.randrange(256)
            else:
                del section[position : position + rng.randint(1, 4)]
        try:
            decoded = list(decode_records(bytes(section), header))
            expected = all(r.offset == i for i, r in enumerate(decoded))
        except KafkaError:
            expected = False
        try:
            check_framing(bytes(section), header.record_count, NO_LIMIT)
            walked = True
        except InvalidRecordError:
            walked = False
        if walked != expected:
            disagreements.append(bytes(section).hex())
    assert disagreements == []
