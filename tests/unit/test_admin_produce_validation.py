"""compression.type: batches in another codec are rewritten in the topic's, records intact."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kpybroker.apis.produce_validation import in_topic_codec
from kpybroker.log.config import LogConfig
from kpybroker.protocol.records import (
    NewRecord,
    build_batch,
    iter_records,
    parse_header,
    validate_batch,
)

RECORDS = [
    NewRecord(b"k1", b"v1" * 50, [("h", b"x")], 1_000),
    NewRecord(None, b"v2", (), 1_005),
    NewRecord(b"k3", None, (), 1_002),
]


def batch(codec: int) -> memoryview:
    data = build_batch(
        RECORDS, compression=codec, producer_id=7, producer_epoch=1, base_sequence=10
    )
    return memoryview(bytearray(data))


@pytest.mark.parametrize(
    ("topic_codec", "codec_id"), [("gzip", 1), ("lz4", 3), ("uncompressed", 0)]
)
def test_recompresses_into_the_topic_codec(topic_codec: str, codec_id: int) -> None:
    source = batch(4 if codec_id != 4 else 1)
    config = replace(LogConfig(), compression_type=topic_codec)
    result = in_topic_codec(source, config)
    header = validate_batch(result)  # CRC recomputed
    original = parse_header(source)
    assert header.compression == codec_id
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 10)
    assert header.record_count == 3 and header.max_timestamp == original.max_timestamp
    got = [(r.key, r.value, tuple(r.headers), r.timestamp) for r in iter_records(result)]
    assert got == [(r.key, r.value, tuple(r.headers), r.timestamp) for r in RECORDS]


@pytest.mark.parametrize("topic_codec", ["producer", "zstd"])
def test_leaves_a_batch_alone_when_codecs_agree(topic_codec: str) -> None:
    source = batch(4)
    assert in_topic_codec(source, replace(LogConfig(), compression_type=topic_codec)) is source
