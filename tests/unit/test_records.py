"""Record batches v2: a hand-computed vector, kafka-python cross-checks, error paths, fuzz.

kafka-python 3.x (kafka/record/default_records.py) is an independent encoder and
decoder of the v2 batch format: batches it builds must validate and decode
identically here, and batches we build must be readable there, for every codec.
Its snappy, lz4 and zstd support needs python-snappy, lz4 and zstandard; codecs
whose library is missing are skipped.
"""

import random
import struct

import pytest
from crc32c import crc32c

from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.records import (
    BATCH_HEADER_SIZE,
    BATCH_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    NewRecord,
    Record,
    build_batch,
    iter_batches,
    iter_records,
    parse_header,
    scan_record_keys,
    set_log_append_time,
    stamp_batch,
    validate_batch,
)

CODECS = [0, 1, 2, 3, 4]


# helpers


def _kafka_python_codec_available(codec: int) -> bool:
    from kafka import codec as kcodec

    return {0: True, 1: True, 2: kcodec.has_snappy(), 3: kcodec.has_lz4(), 4: kcodec.has_zstd()}[
        codec
    ]


def _require_codec(codec: int) -> None:
    if not _kafka_python_codec_available(codec):
        pytest.skip(f"kafka-python has no library for codec {codec}")


def _crc32c_bitwise(data: bytes) -> int:
    """Reference CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _patch(batch: bytes, fmt: str, offset: int, value: int, fix_crc: bool = True) -> bytes:
    """Overwrite one header field; recompute the CRC so that only the field is wrong."""
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def _sample_records(count: int = 50) -> list[NewRecord]:
    """Null keys and values, headers (one with a null value), varied and decreasing times."""
    records = []
    for i in range(count):
        key = None if i % 7 == 0 else b"key-%d" % i
        value = None if i % 11 == 5 else b"value-%d-" % i + b"abcdefgh" * (i % 13)
        headers = [("trace", b"t%d" % i), ("empty", b""), ("nil", None)] if i % 3 == 0 else []
        timestamp = 1_700_000_000_000 + (i * 37 % 101) - 50  # not monotonic: negative deltas
        records.append(NewRecord(key, value, headers, timestamp))
    return records


def _kafka_python_build(
    records: list[NewRecord],
    codec: int,
    producer: tuple[int, int, int] = (-1, -1, -1),
    transactional: bool = False,
) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        batch_size=1 << 24,
    )
    for offset, record in enumerate(records):
        assert builder.append(
            offset, record.timestamp, record.key, record.value, list(record.headers)
        )
    return bytes(builder.build())


def _kafka_python_read(batch: bytes) -> list[tuple]:
    from kafka.record.default_records import DefaultRecordBatch

    reader = DefaultRecordBatch(batch)
    assert reader.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in reader]


def _expected(records: list[NewRecord], base_offset: int = 0) -> list[Record]:
    return [
        Record(base_offset + i, r.timestamp, r.key, r.value, tuple(r.headers))
        for i, r in enumerate(records)
    ]


# the hand-computed vector

# One record: key b"k", null value, one header ("h", b"1"), timestamp 1000;
# no producer id, partition leader epoch -1, CreateTime, uncompressed.
HAND_RECORD = bytes.fromhex(
    "16"  # record length 11, zigzag varint
    "00"  # record attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "02"
    + b"k".hex()  # key length 1, key
    + "01"  # value length -1: null
    "02"  # 1 header
    "02"
    + b"h".hex()  # header key length 1, key
    + "02"
    + b"1".hex()  # header value length 1, value
)
HAND_BATCH = (
    bytes.fromhex(
        "0000000000000000"  # baseOffset 0
        "0000003d"  # batchLength 61 = 49 + 12 record bytes
        "ffffffff"  # partitionLeaderEpoch -1
        "02"  # magic
        "7b95d1ed"  # CRC-32C of bytes 21.. (checked below against a bitwise CRC)
        "0000"  # attributes
        "00000000"  # lastOffsetDelta 0
        "00000000000003e8"  # baseTimestamp 1000
        "00000000000003e8"  # maxTimestamp 1000
        "ffffffffffffffff"  # producerId -1
        "ffff"  # producerEpoch -1
        "ffffffff"  # baseSequence -1
        "00000001"  # recordCount 1
    )
    + HAND_RECORD
)


def test_hand_computed_vector() -> None:
    assert len(HAND_RECORD) == 12
    assert _crc32c_bitwise(HAND_BATCH[21:]) == 0x7B95D1ED
    built = build_batch([NewRecord(b"k", None, [("h", b"1")], 1000)])
    assert built == HAND_BATCH
    header = validate_batch(HAND_BATCH)
    assert header == BatchHeader(0, 61, -1, 2, 0x7B95D1ED, 0, 0, 1000, 1000, -1, -1, -1, 1)
    assert header.size == len(HAND_BATCH) == 73
    assert list(iter_records(HAND_BATCH)) == [Record(0, 1000, b"k", None, (("h", b"1"),))]


def test_header_properties() -> None:
    batch = build_batch(
        [(b"a", b"b")] * 3,
        base_offset=100,
        compression=0,
        producer_id=7,
        producer_epoch=2,
        base_sequence=9,
        timestamp=5,
        partition_leader_epoch=4,
        transactional=True,
    )
    header = parse_header(batch)
    assert header.size == len(batch) == header.batch_length + BATCH_OVERHEAD
    assert (header.base_offset, header.last_offset, header.last_offset_delta) == (100, 102, 2)
    assert header.partition_leader_epoch == 4
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 9)
    assert header.is_transactional and not header.is_control
    assert header.timestamp_type == 0 and header.compression == 0
    assert (header.base_timestamp, header.max_timestamp, header.record_count) == (5, 5, 3)
    control = parse_header(build_batch([(b"\0\0\0\1", b"")], control=True, compression=4))
    assert control.is_control and not control.is_transactional and control.compression == 4


# kafka-python cross-checks


def test_uncompressed_bytes_identical_to_kafka_python() -> None:
    records = _sample_records()
    theirs = _kafka_python_build(records, 0, producer=(1234, 5, 77), transactional=True)
    ours = build_batch(
        records,
        producer_id=1234,
        producer_epoch=5,
        base_sequence=77,
        transactional=True,
        partition_leader_epoch=0,  # kafka-python writes 0, Java -1
    )
    assert ours == theirs


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_validate_and_decode(codec: int) -> None:
    _require_codec(codec)
    records = _sample_records(300)
    batch = _kafka_python_build(records, codec, producer=(99, 1, 10))
    header = validate_batch(batch)
    assert header.compression == codec  # kafka-python sends uncompressed if it does not help
    assert header.size == len(batch)
    assert (header.record_count, header.last_offset_delta) == (300, 299)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (99, 1, 10)
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    decoded = list(iter_records(batch))
    assert decoded == _expected(records)
    assert [tuple(r) for r in decoded] == _kafka_python_read(batch)


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_read_by_kafka_python(codec: int) -> None:
    _require_codec(codec)
    records = _sample_records(300)
    records.append(NewRecord(b"big", bytes(range(256)) * 600, (), 1_700_000_000_999))  # > 64 KiB
    batch = build_batch(records, compression=codec, base_offset=1000)
    assert parse_header(batch).compression == codec
    assert _kafka_python_read(batch) == [tuple(r) for r in _expected(records, 1000)]
    assert list(iter_records(batch)) == _expected(records, 1000)


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time(codec: int) -> None:
    _require_codec(codec)
    records = _sample_records(20)
    buf = bytearray(
        build_batch(
            records,
            compression=codec,
            transactional=True,
            producer_id=3,
            producer_epoch=0,
            base_sequence=0,
        )
    )
    set_log_append_time(buf, 0, 1_800_000_000_000)
    header = validate_batch(buf)
    assert header.timestamp_type == 1
    assert header.max_timestamp == 1_800_000_000_000
    assert header.is_transactional and header.compression == codec  # other bits kept
    assert header.base_timestamp == records[0].timestamp
    assert {r.timestamp for r in iter_records(buf)} == {1_800_000_000_000}
    assert {r[1] for r in _kafka_python_read(bytes(buf))} == {1_800_000_000_000}
    built = build_batch(records, compression=codec, log_append_time=1_800_000_000_000)
    assert {r.timestamp for r in iter_records(built)} == {1_800_000_000_000}
    assert parse_header(built).timestamp_type == 1


# in-place stamping


def test_stamp_batch_keeps_crc_valid() -> None:
    batch = build_batch(_sample_records(10), compression=1)
    buf = bytearray(b"\xaa" * 5 + batch + b"\xbb" * 3)
    view = memoryview(buf)
    stamp_batch(view, 5, 123_456_789_000, 17)
    header = validate_batch(buf, 5, from_client=False)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (
        123_456_789_000,
        17,
        parse_header(batch).crc,
    )
    assert buf[:5] == b"\xaa" * 5 and buf[-3:] == b"\xbb" * 3
    assert [r.offset for r in iter_records(view[5:])] == list(
        range(123_456_789_000, 123_456_789_010)
    )
    view.release()
    stamp_batch(buf, 5, 0, -1)
    assert bytes(buf[5:-3]) == batch


def test_set_log_append_time_recomputes_crc_at_position() -> None:
    batch = build_batch([(b"k", b"v")], timestamp=10)
    buf = bytearray(batch + batch)
    set_log_append_time(buf, len(batch), 99)
    assert validate_batch(buf, 0) == parse_header(batch)
    second = validate_batch(buf, len(batch))
    assert second.crc != parse_header(batch).crc
    assert second.crc == _crc32c_bitwise(bytes(buf[len(batch) + 21 :]))


# iter_batches


def test_iter_batches_positions_and_partial_tail() -> None:
    batches = [build_batch(_sample_records(n), compression=n % 5) for n in (1, 5, 9)]
    data = b"".join(batches)
    expected, pos = [], 0
    for batch in batches:
        expected.append((pos, parse_header(batch)))
        pos += len(batch)
    assert list(iter_batches(data)) == expected
    for cut in range(1, len(batches[2])):
        assert list(iter_batches(data[:-cut])) == expected[:2]
    assert list(iter_batches(b"")) == []


def test_iter_batches_rejects_impossible_length() -> None:
    data = build_batch([(b"k", b"v")]) + _patch(build_batch([(b"k", b"v")]), ">i", 8, 20, False)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data))


# validation errors


def test_error_classes() -> None:
    assert issubclass(CorruptRecordError, KafkaError)
    assert issubclass(InvalidRecordError, KafkaError)
    assert CorruptRecordError("x").code == ErrorCode.CORRUPT_MESSAGE
    assert InvalidRecordError("x").code == ErrorCode.INVALID_RECORD


def test_every_truncation_is_corrupt() -> None:
    batch = build_batch(_sample_records(5))
    for length in range(len(batch)):
        with pytest.raises(CorruptRecordError):
            validate_batch(batch[:length])
        with pytest.raises(CorruptRecordError):
            list(iter_records(batch[:length]))


@pytest.mark.parametrize("batch_length", [-1, 0, 14, 48, 10**9])
def test_bad_batch_length_is_corrupt(batch_length: int) -> None:
    batch = _patch(build_batch([(b"k", b"v")]), ">i", 8, batch_length, False)
    with pytest.raises(CorruptRecordError):
        validate_batch(batch)
    with pytest.raises(CorruptRecordError):
        list(iter_records(batch))


def test_length_shorter_than_buffer_checks_only_the_batch() -> None:
    batch = build_batch([(b"k", b"v")])
    assert validate_batch(batch + b"trailing").size == len(batch)


def test_crc_mismatch_is_corrupt() -> None:
    batch = build_batch(_sample_records(5))
    for position in (17, 21, 30, 60, 61, len(batch) - 1):
        buf = bytearray(batch)
        buf[position] ^= 0x01
        with pytest.raises(CorruptRecordError, match="CRC"):
            validate_batch(buf)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_invalid_record(magic: int) -> None:
    long_batch = _patch(build_batch([(b"k", b"v")]), ">b", 16, magic, False)
    # A v1 message with a 4-byte value: shorter than a v2 header.
    legacy = struct.pack(">qiIbbqi", 0, 26, 0, magic, 0, -1, -1) + struct.pack(">i", 4) + b"abcd"
    for data in (long_batch, legacy):
        with pytest.raises(InvalidRecordError):
            validate_batch(data)
    with pytest.raises(CorruptRecordError):
        parse_header(long_batch)  # readers only know v2


@pytest.mark.parametrize("magic", [3, -1, 127])
def test_unknown_magic_is_corrupt(magic: int) -> None:
    batch = _patch(build_batch([(b"k", b"v")]), ">b", 16, magic, False)
    with pytest.raises(CorruptRecordError):
        validate_batch(batch)
    with pytest.raises(CorruptRecordError):
        validate_batch(batch[:40])


def test_client_checks() -> None:
    good = build_batch([(b"k", b"v")] * 3)
    cases = {
        "base offset": _patch(good, ">q", 0, 5, False),
        "count 0": _patch(_patch(good, ">i", 57, 0), ">i", 23, -1),
        "delta != count - 1": _patch(good, ">i", 23, 5),
        "count != delta + 1": _patch(good, ">i", 57, 2),
        "control": build_batch([(b"\0\0\0\0", b"")], control=True),
        "producer without sequence": build_batch([(b"k", b"v")], producer_id=5, producer_epoch=0),
        "codec 5": _patch(good, ">h", 21, 5),
        "negative count": _patch(good, ">i", 57, -1),
    }
    for name, batch in cases.items():
        with pytest.raises(InvalidRecordError):
            validate_batch(batch)
            pytest.fail(name)
    # Batches the broker itself wrote, replicated or compacted pass without the client checks.
    for name in ("base offset", "count 0", "delta != count - 1", "count != delta + 1", "control"):
        validate_batch(cases[name], from_client=False)
    with pytest.raises(InvalidRecordError):
        validate_batch(_patch(good, ">i", 57, 4), from_client=False)  # more records than offsets
    with pytest.raises(InvalidRecordError):
        validate_batch(cases["negative count"], from_client=False)


def test_memoryview_and_position() -> None:
    batch = build_batch(_sample_records(4), compression=3)
    data = bytearray(b"x" * 7 + batch)
    assert validate_batch(memoryview(data), 7) == parse_header(batch)
    assert parse_header(data, 7) == parse_header(batch)
    assert list(iter_records(memoryview(data)[7:])) == list(iter_records(batch))


# record decoding errors


def test_record_count_mismatch_is_invalid() -> None:
    for codec in (0, 4):
        batch = build_batch(_sample_records(5), compression=codec)
        for count in (4, 6):
            with pytest.raises(InvalidRecordError):
                list(iter_records(_patch(batch, ">i", 57, count)))


def test_malformed_record_is_invalid() -> None:
    batch = bytearray(HAND_BATCH)
    batch[61] = 0x18  # record length 12, one more than present
    with pytest.raises(InvalidRecordError):
        list(iter_records(bytes(batch)))
    batch[61] = 0x14  # record length 10: the header value overruns it
    with pytest.raises(InvalidRecordError):
        list(iter_records(bytes(batch)))
    batch = bytearray(HAND_BATCH)
    batch[69] = 0x01  # header key length -1 (null)
    with pytest.raises(InvalidRecordError):
        list(iter_records(bytes(batch)))


def test_undecodable_compressed_records_are_corrupt() -> None:
    for codec in (1, 2, 3, 4):
        batch = bytearray(build_batch(_sample_records(5), compression=codec))
        batch[61:] = b"\x7f\xff\xff\x7f" + b"garbage" * 10  # snappy: claims 127 bytes
        struct.pack_into(">i", batch, 8, len(batch) - BATCH_OVERHEAD)
        struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
        validate_batch(batch)  # the produce path does not decompress
        with pytest.raises(CorruptRecordError):
            list(iter_records(batch))


@pytest.mark.parametrize("codec", [0, 4])
def test_scan_record_keys_reads_every_varint_width(codec: int) -> None:
    """Keys, values and deltas whose varints take one, two and three bytes (the scan decodes
    the first two inline), null keys and values, headers: as the full decode reads them."""
    sizes = [0, 1, 63, 64, 8191, 8192]
    recs = [
        NewRecord(
            None if i % 7 == 3 else bytes(sizes[i % 6]),
            None if i % 5 == 1 else bytes(sizes[(i + 2) % 6]),
            [("h", b"x")] if i % 3 == 0 else [],
            1_000 + i * 1_000_003 % 70_000,
        )
        for i in range(200)
    ]
    batch = build_batch(recs, base_offset=10**12, compression=codec)
    _keys_agree_with_records(batch)
    assert scan_record_keys(batch).offsets == list(range(10**12, 10**12 + 200))


# build_batch API


def test_build_batch_accepts_tuples_and_defaults() -> None:
    batch = build_batch(
        [(b"a", b"1"), (None, None, [("h", None)]), NewRecord(value=b"3")], timestamp=42
    )
    assert list(iter_records(batch)) == [
        Record(0, 42, b"a", b"1", ()),
        Record(1, 42, None, None, (("h", None),)),
        Record(2, 42, None, b"3", ()),
    ]
    header = parse_header(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert header.partition_leader_epoch == -1


def test_build_batch_default_time_is_now() -> None:
    import time

    before = int(time.time() * 1000)
    (record,) = iter_records(build_batch([(b"k", b"v")]))
    assert before <= record.timestamp <= int(time.time() * 1000)


def test_build_batch_rejects_empty() -> None:
    with pytest.raises(ValueError):
        build_batch([])


def test_non_utf8_header_key_round_trips() -> None:
    batch = bytearray(build_batch([NewRecord(b"k", b"v", [("h", b"1")], 1)]))
    batch[71] = 0xFF  # the header key byte "h", now invalid UTF-8
    (record,) = iter_records(batch)
    rebuilt = build_batch([NewRecord(b"k", b"v", record.headers, 1)])
    assert rebuilt[61:] == bytes(batch[61:])


# fuzz: mutated batches raise only our two errors


def _mutate(rng: random.Random, batch: bytes) -> bytes:
    buf = bytearray(batch)
    action = rng.randrange(6)
    if action == 0:
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    elif action == 1:
        del buf[rng.randrange(len(buf)) :]
    elif action == 2:
        buf += rng.randbytes(rng.randint(1, 64))
    elif action == 3:
        struct.pack_into(">i", buf, 8, rng.choice([rng.randrange(-10, 200), rng.randrange(2**31)]))
    elif action == 4:
        field = rng.choice([(">i", 57), (">i", 23), (">h", 21), (">q", 0), (">b", 16)])
        struct.pack_into(field[0], buf, field[1], rng.randrange(-3, 8))
    else:  # damage the records section only
        start = BATCH_HEADER_SIZE + rng.randrange(max(1, len(buf) - BATCH_HEADER_SIZE))
        for _ in range(rng.randint(1, 3)):
            if start < len(buf):
                buf[start] = rng.randrange(256)
            start += rng.randrange(1, 30)
    # Half the time make the CRC right, so decoding goes past the CRC check.
    if rng.random() < 0.5 and len(buf) > BATCH_HEADER_SIZE:
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


def _keys_agree_with_records(data: bytes) -> None:
    """``scan_record_keys``, and when the full decode succeeds, the same answer as it."""
    offsets, keys, null_keys, null_values = scan_record_keys(data)
    try:
        decoded = list(iter_records(data))
    except KafkaError:
        return
    assert offsets == [r.offset for r in decoded]
    assert keys == [r.key for r in decoded]
    assert null_keys == keys.count(None)
    assert null_values == [i for i, r in enumerate(decoded) if r.value is None]


def test_fuzz_only_record_errors_escape() -> None:
    rng = random.Random(20240611)
    seeds = [
        build_batch(_sample_records(n), compression=codec) for codec in CODECS for n in (1, 3, 40)
    ]
    seeds.append(HAND_BATCH)
    outcomes = {"ok": 0, "corrupt": 0, "invalid": 0}
    for _ in range(20000):
        data = _mutate(rng, rng.choice(seeds))
        for check in (
            lambda d: validate_batch(d),
            lambda d: validate_batch(d, from_client=False),
            lambda d: list(iter_records(d)),
            lambda d: list(iter_batches(d)),
            _keys_agree_with_records,
        ):
            try:
                check(data)
                outcomes["ok"] += 1
            except CorruptRecordError:
                outcomes["corrupt"] += 1
            except InvalidRecordError:
                outcomes["invalid"] += 1
    assert all(outcomes.values()), outcomes
