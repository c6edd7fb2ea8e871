"""KIP-219: from which version a client throttles itself (Kafka 4.4 clients' rule).

The table was read off Kafka 4.4's ``AbstractResponse.shouldClientThrottle`` for every API
key and version it supports; a few rows are checked here.
"""

from __future__ import annotations

import pytest

from kpybroker.quotas.client_throttling import client_throttles


@pytest.mark.parametrize(
    ("api_key", "throttles_from"),
    [
        (0, 6),  # Produce
        (1, 8),  # Fetch
        (3, 6),  # Metadata
        (18, 2),  # ApiVersions
        (19, 3),  # CreateTopics
        (20, 2),  # DeleteTopics
        (23, 2),  # OffsetForLeaderEpoch
        (37, 1),  # CreatePartitions
        (48, 0),  # DescribeClientQuotas
    ],
)
def test_client_throttles_from(api_key: int, throttles_from: int) -> None:
    assert client_throttles(api_key, throttles_from)
    assert client_throttles(api_key, throttles_from + 5)
    assert not client_throttles(api_key, throttles_from - 1)


@pytest.mark.parametrize("api_key", [4, 7, 17, 27, 36, 52, 58, 83, 1000])
def test_never_for_inter_broker_sasl_raft_and_unknown_keys(api_key: int) -> None:
    assert not client_throttles(api_key, 0)
    assert not client_throttles(api_key, 100)
