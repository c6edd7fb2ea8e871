"""Stock clients produce and consume 100,000 records through a 3-partition topic.

Each client (confluent-kafka, kafka-python) x each compression codec x
idempotent or not: the topic is created with the client's own admin API, every
record comes back with its key, value, headers and timestamp, in order, at
contiguous offsets from 0, at the offset its acknowledgement named; and the
broker keeps the producer's compression (``compression.type=producer``).
"""

from __future__ import annotations

import pytest

from tests.helpers.brokers import ManagedBroker
from tests.helpers.clients import CLIENTS, CODECS, ClientDriver
from tests.helpers.records import (
    CODEC_IDS,
    expected_counts,
    make_records,
    segment_batch_codecs,
    verify_roundtrip,
)

RECORDS = 100_000
PARTITIONS = 3


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS, ids=str)
def test_roundtrip(
    module_broker: ManagedBroker, client: ClientDriver, codec: str, idempotent: bool
) -> None:
    """100,000 records out and back, every one checked."""
    topic = f"roundtrip-{client.name}-{codec}-{'idem' if idempotent else 'plain'}"
    records = make_records(RECORDS, PARTITIONS)
    client.create_topic(module_broker.bootstrap, topic, PARTITIONS)

    report = client.produce(
        module_broker.bootstrap, topic, records, codec=codec, idempotent=idempotent
    )
    report.raise_for_errors(RECORDS)

    consumed = client.consume(module_broker.bootstrap, topic, expected_counts(records, PARTITIONS))
    verify_roundtrip(records, PARTITIONS, consumed, report)

    # Both clients send a batch uncompressed when compressing would not shrink
    # it; every other batch must be stored with the producer's codec.
    codec_id = CODEC_IDS[codec]
    for partition in range(PARTITIONS):
        codecs = segment_batch_codecs(module_broker.log_dir, topic, partition)
        assert codec_id in codecs and codecs <= {0, codec_id}, (
            f"partition {partition}: batches on disk use codecs {codecs}, "
            f"the producer sent {codec} ({codec_id})"
        )
