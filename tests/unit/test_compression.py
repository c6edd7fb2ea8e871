"""Compression codecs: round trips, wire formats, and interop with reference encoders.

The references are independent of cramjam's framing code: stdlib gzip, the `lz4`
package (bindings to the reference liblz4), `zstandard` (bindings to the reference
libzstd) and kafka-python's xerial snappy framing (kafka.codec). The optional ones
are skipped when missing.
"""

import contextlib
import gzip
import random
import struct

import pytest

from kpybroker.protocol import compression
from kpybroker.protocol._codec import write_uvarint
from kpybroker.protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_BLOCK_SIZE,
    ZSTD,
    CompressionError,
    DecompressedTooLarge,
    UnsupportedCodecError,
    compress,
    decompress,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]


def _payload(size: int, seed: int = 7) -> bytes:
    """Compressible but not trivial data: repeated words with random numbers."""
    rng = random.Random(seed)
    words = b" ".join(b"word%d" % rng.randrange(500) for _ in range(size // 4 + 1))
    return words[:size]


SIZES = [0, 1, 100, XERIAL_BLOCK_SIZE - 1, XERIAL_BLOCK_SIZE, XERIAL_BLOCK_SIZE + 1, 300_000]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", SIZES)
def test_round_trip(codec: int, size: int) -> None:
    data = _payload(size)
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    assert decompress(codec, packed) == data


@pytest.mark.parametrize("codec", CODECS)
def test_accepts_bytearray_and_memoryview(codec: int) -> None:
    data = _payload(5000)
    framed = b"xx" + data + b"yy"
    view = memoryview(bytearray(framed))[2:-2]
    packed = compress(codec, view)
    assert compress(codec, bytearray(data)) == packed
    assert decompress(codec, memoryview(bytearray(b"..." + packed))[3:]) == data
    assert isinstance(decompress(codec, bytearray(packed)), bytes)


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec: int) -> None:
    for func in (compress, decompress):
        with pytest.raises(UnsupportedCodecError) as info:
            func(codec, b"abc")
        assert info.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert isinstance(info.value, KafkaError)


# gzip


def test_gzip_is_standard_gzip() -> None:
    data = _payload(100_000)
    packed = compress(GZIP, data)
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == data
    assert decompress(GZIP, gzip.compress(data, compresslevel=9)) == data


def test_gzip_reads_concatenated_members() -> None:
    # Java's GZIPInputStream reads multi-member streams; so must we.
    data = _payload(20_000)
    assert decompress(GZIP, gzip.compress(data[:7000]) + gzip.compress(data[7000:])) == data


# snappy


def _xerial_blocks(packed: bytes) -> list[bytes]:
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    blocks, pos = [], 16
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        blocks.append(packed[pos + 4 : pos + 4 + length])
        pos += 4 + length
    assert pos == len(packed)
    return blocks


def test_snappy_writes_xerial_framing_with_32k_blocks() -> None:
    import cramjam

    data = _payload(3 * XERIAL_BLOCK_SIZE + 10)
    blocks = _xerial_blocks(compress(SNAPPY, data))
    assert len(blocks) == 4
    raw = [bytes(cramjam.snappy.decompress_raw(block)) for block in blocks]
    assert [len(part) for part in raw] == [XERIAL_BLOCK_SIZE] * 3 + [10]
    assert b"".join(raw) == data
    assert _xerial_blocks(compress(SNAPPY, b"")) == []


def test_snappy_reads_raw_and_little_endian_versions() -> None:
    import cramjam

    data = _payload(70_000)
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    # Some producers write the xerial version fields little-endian; they are ignored.
    framed = compress(SNAPPY, data)
    swapped = framed[:8] + struct.pack("<ii", 1, 1) + framed[16:]
    assert decompress(SNAPPY, swapped) == data


def test_snappy_interop_with_kafka_python() -> None:
    codec = pytest.importorskip("kafka.codec")
    if not codec.has_snappy():
        pytest.skip("python-snappy is not installed")
    data = _payload(100_000)
    assert codec.snappy_decode(compress(SNAPPY, data)) == data
    assert decompress(SNAPPY, codec.snappy_encode(data)) == data
    assert decompress(SNAPPY, codec.snappy_encode(data, xerial_compatible=False)) == data
    assert decompress(SNAPPY, codec.snappy_encode(data, xerial_blocksize=1000)) == data


@pytest.mark.parametrize(
    "bad",
    [
        b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00",  # truncated block length
        b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09abc",  # short block
        b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xfeabc",  # negative length
        b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x03\x05ab",  # bad block
    ],
)
def test_snappy_corrupt(bad: bytes) -> None:
    with pytest.raises(CompressionError):
        decompress(SNAPPY, bad)


# lz4


def test_lz4_frame_flags_match_kafka() -> None:
    packed = compress(LZ4, _payload(200_000))
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # independent blocks: Java's reader rejects linked blocks
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum, as Java writes
    assert (bd >> 4) & 7 == 4  # 64 KiB blocks, Java's block size


def test_lz4_interop_with_reference_liblz4() -> None:
    lz4_frame = pytest.importorskip("lz4.frame")
    data = _payload(300_000)
    assert lz4_frame.decompress(compress(LZ4, data)) == data
    # kafka-python's encoder, and the other frame options a client may pick.
    for options in (
        {"block_linked": False},
        {"block_linked": True, "content_checksum": True},
        {"store_size": True, "block_size": lz4_frame.BLOCKSIZE_MAX4MB},
        {"block_checksum": True},
    ):
        assert decompress(LZ4, lz4_frame.compress(data, **options)) == data


# zstd


def test_zstd_interop_with_reference_libzstd() -> None:
    zstandard = pytest.importorskip("zstandard")
    data = _payload(300_000)
    assert zstandard.ZstdDecompressor().decompress(compress(ZSTD, data)) == data
    # Java's zstd-jni streams frames without a content size; clients may also send several.
    streamer = zstandard.ZstdCompressor(write_content_size=False)
    frame = streamer.compress(data)
    assert decompress(ZSTD, frame) == data
    assert decompress(ZSTD, frame + frame) == data + data


# corrupt input never escapes as a codec library's exception


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_raises_compression_error(codec: int) -> None:
    with pytest.raises(CompressionError) as info:
        decompress(codec, b"this is not compressed data at all")
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    assert isinstance(info.value, KafkaError)
    assert compression.CODEC_NAMES[codec] in str(info.value)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_mutated_streams_raise_only_compression_error(codec: int) -> None:
    rng = random.Random(1234 + codec)
    data = _payload(80_000)
    packed = compress(codec, data)
    for _ in range(300):
        mutated = bytearray(packed)
        action = rng.randrange(3)
        if action == 0:
            for _ in range(rng.randint(1, 4)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        elif action == 1:
            del mutated[rng.randrange(len(mutated)) :]
        else:
            mutated += rng.randbytes(rng.randint(1, 20))
        with contextlib.suppress(CompressionError):
            decompress(codec, bytes(mutated))


#: Concatenated streams of one MiB of zeros each: valid input that inflates far past
#: the bound (gzip and zstd to 1 GiB; lz4, whose ratio is lower, to 100 MiB).
BOMB_COPIES = {GZIP: 1024, ZSTD: 1024, LZ4: 100}


@pytest.mark.parametrize("codec", sorted(BOMB_COPIES), ids=["gzip", "lz4", "zstd"])
def test_decompression_bomb_is_invalid_record(codec: int) -> None:
    """Found by fuzzing: a batch under a megabyte decompressed whole to a gibibyte. Now the
    output stops at the bound, and the batch is INVALID_RECORD, as Kafka answers a bomb."""
    bomb = compress(codec, bytes(1 << 20)) * BOMB_COPIES[codec]
    with pytest.raises(DecompressedTooLarge) as raised:
        decompress(codec, bomb)
    assert raised.value.code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_a_lower_limit_stops_sooner(codec: int) -> None:
    """A caller may try a batch with a lower bound than the default before giving it more."""
    data = compress(codec, bytes(1 << 20))
    with pytest.raises(DecompressedTooLarge) as raised:
        decompress(codec, data, limit=1 << 16)
    assert raised.value.limit == 1 << 16
    assert decompress(codec, data, limit=1 << 20) == bytes(1 << 20)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_output_up_to_the_bound_decompresses(codec: int) -> None:
    """Highly compressible data under the bound still decompresses, whatever the first
    guess at its size."""
    data = bytes(compression.MIN_DECOMPRESSED_LIMIT // 2)
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("xerial", [False, True], ids=["raw", "xerial"])
def test_snappy_length_over_the_bound_is_refused_before_decompressing(xerial: bool) -> None:
    """Raw snappy declares its length first: a claim over the bound is refused unread."""
    claim = bytearray()
    write_uvarint(claim, 2**32 - 1)
    block = bytes(claim) + b"\x00" * 8
    data = block
    if xerial:
        data = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(block)) + block
    with pytest.raises(DecompressedTooLarge):
        decompress(SNAPPY, data)
