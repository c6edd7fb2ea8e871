"""Record-batch compression codecs, numbered as in batch attributes bits 0-2.

Only the records section of a v2 batch is compressed, as one blob. The produce path
decompresses every compressed batch to check its records (and stores it as
received unless the topic's compression.type differs); compaction, tools and
tests read and rewrite records with it too.

Formats, chosen so that Java, librdkafka and kafka-python clients read what we
write and we read what they write:

- gzip: an RFC 1952 stream. Written by zlib at level 6 (Java's default level);
  read by cramjam, which also accepts concatenated members as Java's
  ``GZIPInputStream`` does.
- snappy: the xerial ``SnappyOutputStream`` framing that Java and librdkafka write
  (magic ``\\x82SNAPPY\\x00``, int32 version, int32 compatible version, then blocks of
  int32 length + raw snappy, 32 KiB of input per block). Unframed raw snappy is also
  accepted on input, since some clients send it.
- lz4: the standard LZ4 frame format, written with independent blocks because
  Java's ``Lz4BlockInputStream`` rejects linked blocks, and without a content
  checksum, which Java's reader skips anyway (as Java's writer does).
- zstd: a zstd frame at level 3 (Java's default); any number of frames on input.

All decompression failures raise :class:`CompressionError` (CORRUPT_MESSAGE) so
that bad client data can never surface as a codec library's own exception.

Decompressed output is bounded (:func:`decompression_limit`): a batch of a
megabyte can hold a gigabyte of zeros (a decompression bomb), and the records
section is decompressed whole, so without a bound one produce request could take
all of the broker's memory. Java's broker streams the records instead and never
holds the whole section; it refuses a bomb of zeros as INVALID_RECORD when the
first record does not parse, and a batch over the bound here is INVALID_RECORD
too (:class:`DecompressedTooLarge`). A caller may ask for a lower bound, to try
a batch cheaply before giving it more.
"""

import struct
import zlib
from collections.abc import Callable
from typing import TypeAlias

import cramjam

from .errors import ErrorCode, KafkaError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {
    NONE: "none",
    GZIP: "gzip",
    SNAPPY: "snappy",
    LZ4: "lz4",
    ZSTD: "zstd",
}

GZIP_LEVEL = 6
ZSTD_LEVEL = 3
XERIAL_BLOCK_SIZE = 32 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)
_INT32 = struct.Struct(">i")
#: The decompressed bound is at least this, and at least ``MAX_RATIO`` times the input.
MIN_DECOMPRESSED_LIMIT = 64 * 1024 * 1024
MAX_RATIO = 64
#: First output buffer, as a multiple of the input; while too small, it grows by
#: ``_GROWTH`` up to the bound. Growing, not jumping to the bound, matters: a batch of
#: repeated values compresses far better than 8:1, and zero-filling the whole bound
#: (64 MiB) for each such batch cost more than all the rest of its produce.
_FIRST_GUESS_RATIO = 8
_FIRST_GUESS_MIN = 64 * 1024
_GROWTH = 8
#: cramjam's error when the output buffer given to ``decompress_into`` is full.
_OUTPUT_FULL = "failed to write whole buffer"

Buffer: TypeAlias = bytes | bytearray | memoryview


class CompressionError(KafkaError):
    """Compressed records that cannot be decoded; reported as CORRUPT_MESSAGE."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.CORRUPT_MESSAGE, message)


class DecompressedTooLarge(KafkaError):
    """Compressed records that inflate past the bound asked for; INVALID_RECORD, as Kafka
    answers a bomb of zeros (its record reader fails on the first record)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            ErrorCode.INVALID_RECORD,
            f"the records decompress to more than {limit} bytes (a decompression bomb?)",
        )
        self.limit = limit


class UnsupportedCodecError(KafkaError):
    """A codec id outside 0-4; reported as UNSUPPORTED_COMPRESSION_TYPE."""

    def __init__(self, codec: int) -> None:
        super().__init__(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"unknown compression codec {codec}"
        )
        self.codec = codec


def _gzip_compress(data: Buffer) -> bytes:
    # stdlib zlib is about 1.7x faster than cramjam's gzip encoder at the same level.
    return zlib.compress(data, GZIP_LEVEL, wbits=31)


def decompression_limit(compressed_size: int) -> int:
    """The most bytes ``compressed_size`` bytes may decompress to: no legitimate batch
    comes near (compression ratios of real records stay well below 64), a bomb does."""
    return max(MIN_DECOMPRESSED_LIMIT, MAX_RATIO * compressed_size)


def _bounded(
    decompress_into: Callable[[Buffer, bytearray], int], data: Buffer, limit: int
) -> bytes:
    """Decompress into a buffer of a first guess, then of ever larger ones up to ``limit``;
    the codec stops writing when a buffer is full, so a bomb costs at most the limit (and
    the smaller tries before it, a seventh of that), never its own size."""
    size = min(limit, max(_FIRST_GUESS_MIN, _FIRST_GUESS_RATIO * len(data)))
    while True:
        out = bytearray(size)
        try:
            written = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if _OUTPUT_FULL not in str(exc):
                raise
            if size >= limit:
                raise DecompressedTooLarge(limit) from None
            size = min(limit, size * _GROWTH)
            continue
        with memoryview(out) as view:
            return bytes(view[:written])


def _gzip_decompress(data: Buffer, limit: int) -> bytes:
    return _bounded(cramjam.gzip.decompress_into, data, limit)


def _snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts: list[bytes | cramjam.Buffer] = [_XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE])
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: Buffer, limit: int) -> bytes:
    view = memoryview(data)
    end = len(view)
    # Like Java's and kafka-python's readers, detect the framing by its magic alone:
    # the version fields are ignored because some producers write them little-endian.
    if end < _XERIAL_HEADER_SIZE or view[: len(_XERIAL_MAGIC)] != _XERIAL_MAGIC:
        _check_snappy_length(view, limit, limit)
        return bytes(cramjam.snappy.decompress_raw(view))
    parts: list[cramjam.Buffer] = []
    remaining = limit
    pos = _XERIAL_HEADER_SIZE
    while pos < end:
        if end - pos < 4:
            raise CompressionError("snappy: truncated xerial block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise CompressionError(f"snappy: xerial block length {length} exceeds the data")
        block = view[pos : pos + length]
        remaining -= _check_snappy_length(block, remaining, limit)
        parts.append(cramjam.snappy.decompress_raw(block))
        pos += length
    return b"".join(parts)


def _check_snappy_length(block: Buffer, remaining: int, limit: int) -> int:
    """The length a raw snappy block declares, checked against what is left of the bound
    ``limit`` before anything is allocated."""
    length = cramjam.snappy.decompress_raw_len(block)
    if length > remaining:
        raise DecompressedTooLarge(limit)
    return length


def _lz4_compress(data: Buffer) -> bytes:
    compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    # The streaming compressor (the only API that sets the frame flags) takes bytes only.
    compressor.compress(data if type(data) is bytes else bytes(data))
    return bytes(compressor.finish())


def _lz4_decompress(data: Buffer, limit: int) -> bytes:
    return _bounded(cramjam.lz4.decompress_into, data, limit)


def _zstd_compress(data: Buffer) -> bytes:
    return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))


def _zstd_decompress(data: Buffer, limit: int) -> bytes:
    return _bounded(cramjam.zstd.decompress_into, data, limit)


_COMPRESSORS: dict[int, Callable[[Buffer], bytes]] = {
    NONE: bytes,
    GZIP: _gzip_compress,
    SNAPPY: _snappy_compress,
    LZ4: _lz4_compress,
    ZSTD: _zstd_compress,
}


def _copy(data: Buffer, _limit: int) -> bytes:
    return bytes(data)


_DECOMPRESSORS: dict[int, Callable[[Buffer, int], bytes]] = {
    NONE: _copy,
    GZIP: _gzip_decompress,
    SNAPPY: _snappy_decompress,
    LZ4: _lz4_decompress,
    ZSTD: _zstd_decompress,
}


def compress(codec: int, data: Buffer) -> bytes:
    """Compress ``data`` with ``codec`` (0 none ... 4 zstd) in the format Kafka clients read."""
    try:
        compressor = _COMPRESSORS[codec]
    except KeyError:
        raise UnsupportedCodecError(codec) from None
    return compressor(data)


def decompress(codec: int, data: Buffer, limit: int | None = None) -> bytes:
    """Decompress ``data`` written with ``codec``, to at most ``limit`` bytes (default:
    :func:`decompression_limit`).

    Raises :class:`CompressionError` for data the codec cannot decode,
    :class:`DecompressedTooLarge` past the limit and :class:`UnsupportedCodecError` for an
    unknown codec id.
    """
    try:
        decompressor = _DECOMPRESSORS[codec]
    except KeyError:
        raise UnsupportedCodecError(codec) from None
    try:
        return decompressor(data, decompression_limit(len(data)) if limit is None else limit)
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"{CODEC_NAMES[codec]}: {exc}") from exc
