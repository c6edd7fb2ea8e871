"""The walk over a compressed batch's records (``record_framing.check_framing``): what it
accepts, what it refuses with Kafka's messages, and that it agrees with the full decoder
(``records.decode_records``) on mutated sections. Each test runs against both walks, the
Python one and the compiled one (skipped where the extension was not built); a
differential test checks that they give the same verdict and message on any section."""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kpybroker.protocol import compiled, record_framing
from kpybroker.protocol.errors import KafkaError
from kpybroker.protocol.record_framing import Walk
from kpybroker.protocol.records import (
    BATCH_HEADER_SIZE,
    InvalidRecordError,
    NewRecord,
    build_batch,
    decode_records,
    parse_header,
)
from tests.helpers.record_sections import mutated_sections, section_of

NO_LIMIT = 2_147_483_639
NOT_BUILT = "the extension was not built, or KPYBROKER_PURE_PYTHON=1"

COMPILED = pytest.param(
    record_framing.check_framing_compiled,
    id="compiled",
    marks=pytest.mark.skipif(compiled.walks is None, reason=NOT_BUILT),
)


@pytest.fixture(params=[pytest.param(record_framing.check_framing_python, id="python"), COMPILED])
def check_framing(request: pytest.FixtureRequest) -> Walk:
    """Each walk in turn."""
    return request.param


VARIED = [
    NewRecord(b"k", b"v", (), 0),
    NewRecord(None, None, (), 0),
    NewRecord(b"", b"", (), 0),
    NewRecord(b"key" * 30, bytes(10_000), (("h", b"x"), ("empty", b""), ("null", None)), 0),
    *[NewRecord(b"%d" % i, b"v" * (i % 200), (), 0) for i in range(150)],
]


def test_accepts_well_formed_records_of_every_shape(check_framing: Walk) -> None:
    """Null and empty keys and values, headers, lengths of one to three varint bytes, and
    more than 64 records (offset deltas of two bytes)."""
    check_framing(section_of(VARIED), len(VARIED), NO_LIMIT)


@pytest.mark.parametrize("count", [153, 155, 0], ids=["fewer", "more", "none"])
def test_a_record_count_other_than_the_header_is_refused(count: int, check_framing: Walk) -> None:
    with pytest.raises(InvalidRecordError) as raised:
        check_framing(section_of(VARIED), count, NO_LIMIT)
    assert "Incorrect declared batch size" in raised.value.message


@pytest.mark.parametrize("deltas", [[0, 2, 1], [0, 5, 9], [1, 2, 3]])
def test_offset_deltas_other_than_0_1_2_are_refused(deltas: list[int], check_framing: Walk) -> None:
    records = VARIED[:3]
    with pytest.raises(InvalidRecordError) as raised:
        check_framing(section_of(records, deltas), 3, NO_LIMIT)
    assert "offset delta" in raised.value.message


def test_trailing_bytes_are_refused(check_framing: Walk) -> None:
    with pytest.raises(InvalidRecordError):
        check_framing(section_of(VARIED[:3]) + b"\x00\x01", 3, NO_LIMIT)


def test_a_record_over_max_decompressed_message_bytes_is_refused(check_framing: Walk) -> None:
    section = section_of([NewRecord(b"k", bytes(5000), (), 0)])
    check_framing(section, 1, 5010)
    with pytest.raises(InvalidRecordError) as raised:
        check_framing(section, 1, 1000)
    assert "exceeds the configured maximum record size of 1000" in raised.value.message


#: An offset delta of 0 written in two bytes: the walk reads the first 64 as one byte.
QUIRKY_DELTA = b"\x0e\x00\x00\x80\x00\x01\x01\x00"
#: The last record's header value runs past the data by one byte: the walk's position
#: then lies past the record's end, not at it.
HEADER_PAST_THE_END = b"\x10\x00\x00\x00\x01\x01\x02\x00\x04"
#: A length of 2**63 + 6 in a 10-byte varint: past 64 bits zigzag-encoded, and 6 (the
#: record's true length) if those bits were dropped.
HUGE_LENGTH = b"\x8c" + b"\x80" * 8 + b"\x02\x00\x00\x00\x01\x01\x00"


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
        QUIRKY_DELTA,
        HEADER_PAST_THE_END,
        HUGE_LENGTH,
    ],
)
def test_malformed_records_are_refused(section: bytes, check_framing: Walk) -> None:
    with pytest.raises(InvalidRecordError):
        check_framing(section, 1, NO_LIMIT)


def test_agrees_with_the_full_decoder_on_mutated_sections(check_framing: Walk) -> None:
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


def outcome(walk: Walk, section: bytes, record_count: int, max_record_size: int) -> str | None:
    """None when ``walk`` accepts the section, else its refusal's message."""
    try:
        walk(section, record_count, max_record_size)
    except InvalidRecordError as error:
        return error.message
    return None


@st.composite
def framed_sections(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """A valid or mutated section, with the header's record count, one off or beyond 64
    bits, and a maximum record size that may bite (beyond 64 bits either way: the
    compiled walk clamps what Python keeps whole)."""
    section, records = draw(mutated_sections())
    count = records + draw(st.sampled_from([0, 0, -1, 1, 2**70]))
    max_record_size = draw(st.sampled_from([NO_LIMIT, 100, 0, 2**70, -(2**70)]))
    return section, count, max_record_size


@pytest.mark.skipif(compiled.walks is None, reason=NOT_BUILT)
@settings(max_examples=1500, derandomize=True, deadline=None)
@example((QUIRKY_DELTA, 1, NO_LIMIT))
@example((HEADER_PAST_THE_END, 1, NO_LIMIT))
@example((HUGE_LENGTH, 1, NO_LIMIT))
@given(framed_sections() | st.tuples(st.binary(max_size=64), st.integers(-1, 3), st.just(NO_LIMIT)))
def test_the_compiled_walk_agrees_with_the_python_walk(case: tuple[bytes, int, int]) -> None:
    """Same verdict and same message on valid, mutated and random sections."""
    section, count, max_record_size = case
    python = outcome(record_framing.check_framing_python, section, count, max_record_size)
    in_c = outcome(record_framing.check_framing_compiled, section, count, max_record_size)
    for buffer in (bytearray(section), memoryview(section)):
        assert (
            outcome(record_framing.check_framing_compiled, buffer, count, max_record_size) == python
        )
    assert in_c == python
