"""The partition leader's questions to the transaction coordinator (KIP-890): local calls,
the mapping of the answers, and the retries of an add while a transaction completes.
The remote form (AddPartitionsToTxn v5 between brokers) runs in the cluster tests."""

import asyncio

from kpybroker.protocol.errors import ErrorCode
from kpybroker.transaction_coordinator.partition_verifier import (
    PartitionVerifier,
    VerifierSettings,
)
from kpybroker.transaction_coordinator.shard import ProducerIdAndEpoch

PRODUCER = ProducerIdAndEpoch(7, 3)
TP = ("t", 0)


class LocalCoordinator:
    """This broker coordinates every id; add answers from ``adds`` in turn."""

    def __init__(self, adds: list[ErrorCode], verified: ErrorCode = ErrorCode.NONE) -> None:
        self.adds = adds
        self.verified = verified
        self.calls: list[str] = []

    def leader_of(self, transactional_id: str) -> int | None:
        return 0

    async def add_partitions(self, transactional_id, producer, partitions, transaction_version):
        self.calls.append(f"add v{transaction_version}")
        return self.adds.pop(0)

    def verify_partitions(self, transactional_id, producer, partitions):
        self.calls.append("verify")
        return dict.fromkeys(partitions, self.verified)

    async def wait_until_free(self, transactional_id: str, timeout_s: float) -> None:
        """The previous transaction completes at once."""
        self.calls.append(f"wait {timeout_s:g} s")


class NeverCompletes(LocalCoordinator):
    """The previous transaction never completes: each wait lasts its whole timeout."""

    async def wait_until_free(self, transactional_id: str, timeout_s: float) -> None:
        await asyncio.sleep(timeout_s)


def verifier(coordinator: object, max_ms: int = 100, backoff_ms: int = 1) -> PartitionVerifier:
    settings = VerifierSettings(
        request_timeout_ms=1000, retry_backoff_ms=backoff_ms, retry_max_ms=max_ms
    )
    return PartitionVerifier(0, coordinator, lambda broker: None, settings)  # type: ignore[arg-type]


def ask(v: PartitionVerifier, *, add: bool, abortable_known: bool = True) -> ErrorCode:
    return ask_counting(v, add=add, abortable_known=abortable_known)[0]


def ask_counting(
    v: PartitionVerifier, *, add: bool, abortable_known: bool
) -> tuple[ErrorCode, int]:
    """The partition's answer, and how many attempts it took."""
    attempts: list[int] = []
    errors = asyncio.run(
        v.add_or_verify(
            "app",
            PRODUCER,
            [TP],
            add=add,
            abortable_known=abortable_known,
            before_attempt=lambda: attempts.append(1),
        )
    )
    return errors[TP], len(attempts)


def test_an_add_is_retried_while_the_previous_transaction_completes() -> None:
    busy = ErrorCode.CONCURRENT_TRANSACTIONS
    coordinator = LocalCoordinator([busy, busy, ErrorCode.NONE])
    assert ask_counting(verifier(coordinator), add=True, abortable_known=True) == (
        ErrorCode.NONE,
        3,
    )
    assert coordinator.calls == ["add v2", "wait 0.001 s", "add v2", "wait 0.001 s", "add v2"]
    # Not forever: after retry_max_ms the producer gets the error (its leader maps it).
    always_busy = NeverCompletes([busy] * 1000)
    assert ask(verifier(always_busy, max_ms=20), add=True) == busy


def test_a_local_coordinator_cuts_the_backoff_short() -> None:
    """With the coordinator here, the leader retries as soon as the previous transaction
    has completed (the fake's at once), not an hour of backoff later; the backoff
    bounds the wait."""
    busy = ErrorCode.CONCURRENT_TRANSACTIONS
    coordinator = LocalCoordinator([busy, ErrorCode.NONE])
    hour_ms = 3_600_000
    v = verifier(coordinator, max_ms=hour_ms, backoff_ms=hour_ms)
    assert ask(v, add=True) == ErrorCode.NONE
    assert coordinator.calls == ["add v2", "wait 3600 s", "add v2"]


def test_answers_are_mapped_for_the_leader_as_kafka_does() -> None:
    fenced = LocalCoordinator([ErrorCode.PRODUCER_FENCED])
    assert ask(verifier(fenced), add=True) == ErrorCode.INVALID_PRODUCER_EPOCH
    not_added = LocalCoordinator([], verified=ErrorCode.TRANSACTION_ABORTABLE)
    assert ask(verifier(not_added), add=False) == ErrorCode.TRANSACTION_ABORTABLE
    assert ask(verifier(not_added), add=False, abortable_known=False) == (
        ErrorCode.INVALID_TXN_STATE
    )
    assert not_added.calls == ["verify", "verify"]  # a verification is never retried


def test_no_coordinator_is_coordinator_not_available() -> None:
    class Gone(LocalCoordinator):
        def leader_of(self, transactional_id: str) -> int | None:
            return None

    assert ask(verifier(Gone([])), add=True) == ErrorCode.COORDINATOR_NOT_AVAILABLE
