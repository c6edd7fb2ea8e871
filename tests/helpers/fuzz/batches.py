"""Record batches for the ``records`` fields: valid ones built with the broker's own
builder, and hostile ones.

Hostile kinds: a CRC that does not match, a compressed section that is not valid
data for its codec, a decompression bomb (a batch under a megabyte that
inflates to hundreds of megabytes or a gibibyte), record counts that disagree
with the records present or with lastOffsetDelta, an uncompressed records
section of random bytes, and plain random bytes. Every hostile batch but the
first has a correct CRC, so that it gets past the CRC check to the code behind
it.
"""

from __future__ import annotations

import struct
from functools import cache

import cramjam
from crc32c import crc32c
from hypothesis import strategies as st

from kpybroker.protocol import compression
from kpybroker.protocol.records import ATTRIBUTES_OFFSET, BATCH_HEADER_SIZE, CRC_OFFSET, build_batch

_HEADER = struct.Struct(">qiibIhiqqqhii")
_UINT32 = struct.Struct(">I")
_INT32 = struct.Struct(">i")
LAST_OFFSET_DELTA_OFFSET = 23
RECORD_COUNT_OFFSET = 57
MIB = 1024 * 1024
#: Compressed copies of one MiB of zeros per bomb: each codec's stream may be
#: concatenated, and every bomb stays under message.max.bytes (1 MiB) so that the
#: broker gets as far as decompressing it.
BOMB_COPIES = {compression.GZIP: 900, compression.ZSTD: 1024, compression.LZ4: 200}
_CODECS = {
    compression.GZIP: cramjam.gzip,
    compression.ZSTD: cramjam.zstd,
    compression.LZ4: cramjam.lz4,
}


def with_crc(batch: bytearray) -> bytes:
    """``batch`` with its CRC-32C recomputed over what it now holds."""
    _UINT32.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def assemble(payload: bytes, codec: int, record_count: int) -> bytes:
    """A v2 batch around ``payload`` (the records section, compressed or not), CRC correct."""
    header = _HEADER.pack(
        0, BATCH_HEADER_SIZE - 12 + len(payload), -1, 2, 0, codec, record_count - 1,
        0, 0, -1, -1, -1, record_count,
    )  # fmt: skip
    return with_crc(bytearray(header + payload))


@cache
def bomb(codec: int) -> bytes:
    """A batch of one record whose records section decompresses to ``BOMB_COPIES`` MiB."""
    one = bytes(_CODECS[codec].compress(bytes(MIB)))
    return assemble(one * BOMB_COPIES[codec], codec, 1)


def with_bad_crc(batch: bytes) -> bytes:
    bad = bytearray(batch)
    bad[CRC_OFFSET] ^= 0xFF
    return bytes(bad)


def recounted(batch: bytes, record_count: int, last_offset_delta: int) -> bytes:
    """``batch`` claiming other counts than its records have, CRC correct."""
    changed = bytearray(batch)
    _INT32.pack_into(changed, RECORD_COUNT_OFFSET, record_count)
    _INT32.pack_into(changed, LAST_OFFSET_DELTA_OFFSET, last_offset_delta)
    return with_crc(changed)


_records = st.lists(
    st.tuples(st.none() | st.binary(max_size=16), st.none() | st.binary(max_size=32)),
    min_size=1,
    max_size=4,
)
_codecs = st.sampled_from(sorted(compression.CODEC_NAMES))


@st.composite
def valid_batches(draw: st.DrawFn) -> bytes:
    return build_batch(draw(_records), compression=draw(_codecs))


@st.composite
def bad_compression(draw: st.DrawFn) -> bytes:
    """Random bytes, or a real compressed section cut short, under a codec's flag."""
    codec = draw(st.sampled_from(sorted(set(compression.CODEC_NAMES) - {compression.NONE})))
    real = bytes(build_batch(draw(_records), compression=codec)[BATCH_HEADER_SIZE:])
    payload = draw(st.one_of(st.binary(max_size=64), st.just(real[: len(real) // 2])))
    return assemble(payload, codec, 1)


@st.composite
def miscounted(draw: st.DrawFn) -> bytes:
    batch = draw(valid_batches())
    count = draw(st.sampled_from([0, -1, 2**31 - 1]) | st.integers(0, 8))
    delta = draw(st.sampled_from([count - 1, 0, -1]))
    return recounted(batch, count, delta)


def garbage_records(garbage: bytes) -> bytes:
    return assemble(garbage, compression.NONE, 1)


def record_sets() -> st.SearchStrategy[bytes]:
    """What a produce request's ``records`` field may hold, valid or not. Bombs are rarer
    than the rest: each costs the broker (and the codec target) a bounded decompression of
    tens of megabytes."""
    kinds = [
        *[valid_batches()] * 4,
        valid_batches().map(with_bad_crc),
        bad_compression(),
        miscounted(),
        st.binary(max_size=64).map(garbage_records),
        st.binary(max_size=80),
    ]
    common = st.sampled_from(kinds).flatmap(_itself)
    return st.one_of(common, common, common, st.sampled_from(sorted(BOMB_COPIES)).map(bomb))


def _itself(strategy: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return strategy
