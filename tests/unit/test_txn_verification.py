"""The leader's side of KIP-890 on the Produce path: what a producer is answered when
the transaction coordinator refuses a first write, by Produce version, as Kafka 4's
ReplicaManager answers (``handleProduceAppend``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kpybroker.apis.support.txn_verification import verify_first_writes
from kpybroker.log.producer_state import VerificationGuard
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.records import build_batch

TP = ("t", 0)
BATCH = memoryview(
    build_batch(
        [(None, b"v")], producer_id=7, producer_epoch=1, base_sequence=0, transactional=True
    )
)


class Verifier:
    """The coordinator answers every add or verification with ``error``."""

    def __init__(self, error: ErrorCode) -> None:
        self.error = error

    async def add_or_verify(self, transactional_id, producer, partitions, **_options):
        return dict.fromkeys(partitions, self.error)


def answered(error: ErrorCode, produce_version: int) -> object:
    """What the first write of a transaction to ``TP`` gets: its guard, or an error."""
    partition = SimpleNamespace(
        start_txn_verification=lambda pid, epoch: (VerificationGuard(), True)
    )
    services = SimpleNamespace(
        replicas=SimpleNamespace(leader_partition=lambda topic, index: partition),
        txn_verifier=Verifier(error),
    )
    ctx = SimpleNamespace(services=services, api_version=produce_version)
    return asyncio.run(verify_first_writes(ctx, "app", {TP: BATCH}))[TP]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "version", "expected"),
    [
        # Transaction version 2 (Produce v12+): Kafka 4 leaves CONCURRENT_TRANSACTIONS as it
        # is, the usual answer while the previous transaction writes its markers.
        (ErrorCode.CONCURRENT_TRANSACTIONS, 12, ErrorCode.CONCURRENT_TRANSACTIONS),
        (ErrorCode.CONCURRENT_TRANSACTIONS, 13, ErrorCode.CONCURRENT_TRANSACTIONS),
        # Older clients may not retry it correctly: NOT_ENOUGH_REPLICAS, retried by all.
        (ErrorCode.CONCURRENT_TRANSACTIONS, 11, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, 12, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NETWORK_EXCEPTION, 13, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NOT_COORDINATOR, 11, ErrorCode.NOT_ENOUGH_REPLICAS),
        # Not retriable: as the coordinator (via the verifier's own mapping) answered.
        (ErrorCode.INVALID_PRODUCER_EPOCH, 12, ErrorCode.INVALID_PRODUCER_EPOCH),
        (ErrorCode.INVALID_TXN_STATE, 10, ErrorCode.INVALID_TXN_STATE),
    ],
)
def test_a_refused_first_write_is_answered_as_kafka_does(
    error: ErrorCode, version: int, expected: ErrorCode
) -> None:
    assert answered(error, version) == expected


def test_a_verified_write_gets_its_guard() -> None:
    assert isinstance(answered(ErrorCode.NONE, 12), VerificationGuard)
