"""Topic-config effects on a produced batch that need its records: recompression.

A topic's ``compression.type`` other than ``producer`` is the codec its batches are
stored in. When a producer's batch uses another codec, Kafka's ``LogValidator``
decompresses it and writes a new batch in the topic's codec, keeping every record's
key, value, headers and timestamp and the batch's producer id, epoch and sequence.
This is the one place the produce path decodes records, as it is in Kafka; a batch
already in the topic's codec (or any batch, under ``producer``) is not touched.

Stamping LogAppendTime, the timestamp bounds and max.message.bytes need only the batch
header and are the log's job (kpybroker/log/partition_log.py).
"""

from __future__ import annotations

from kpybroker.log.config import LogConfig
from kpybroker.protocol.records import NewRecord, build_batch, iter_records, parse_header

#: compression.type values and their codec ids (``producer`` keeps the producer's).
TOPIC_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def in_topic_codec(batch: memoryview, config: LogConfig) -> memoryview | bytearray:
    """``batch``, recompressed into the topic's codec when it is in another one."""
    codec = TOPIC_CODECS.get(config.compression_type)
    header = parse_header(batch)
    if codec is None or codec == header.compression:
        return batch
    records = [NewRecord(r.key, r.value, r.headers, r.timestamp) for r in iter_records(batch)]
    return bytearray(
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
