"""``controller_mutation_rate`` (KIP-599): strict and permissive quotas per request.

The scenario of ``test_strict_and_permissive_requests_match_kafka`` was run through Kafka
4.4's ``ControllerMutationQuotaManager`` (3 x 1 s windows, ``<client-id c>`` at 2/s, a
controllable clock); the refusals, throttle times and message are what it gave.
"""

from __future__ import annotations

import pytest

from kpybroker.protocol.errors import ErrorCode
from kpybroker.quotas.controller_mutation_quota import (
    UNBOUNDED_QUOTA,
    ControllerMutationQuota,
    ControllerMutationQuotaManager,
    ThrottlingQuotaExceededError,
)
from kpybroker.quotas.entity import DEFAULT, ClientQuotaEntity
from kpybroker.quotas.sampled_rate import QuotaWindow

T = 1_700_000_000_000
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37


@pytest.fixture
def manager() -> ControllerMutationQuotaManager:
    manager = ControllerMutationQuotaManager(QuotaWindow(3, 1000))
    manager.update_quota(ClientQuotaEntity(client_id="c"), 2)
    return manager


def refused(quota: ControllerMutationQuota, permits: float, now_ms: int) -> int | None:
    """The throttle time of a refusal, or None when the mutation is accepted."""
    try:
        quota.record(permits, now_ms)
    except ThrottlingQuotaExceededError as error:
        assert error.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert error.message == "The throttling quota has been exceeded."
        return error.throttle_time_ms
    return None


def test_strict_and_permissive_requests_match_kafka(
    manager: ControllerMutationQuotaManager,
) -> None:
    first = manager.new_quota("u", "c", CREATE_TOPICS, 6, T)
    assert refused(first, 5, T) is None  # burst 6: 1 left
    assert refused(first, 4, T) is None  # credit left, so accepted whole: -3
    assert refused(first, 1, T) == 1500  # in debt: refused
    assert first.is_exceeded
    assert first.throttle_time_ms(T) == 1500
    assert first.throttle_time_ms(T + 400) == 1100  # what remains of it when answering

    second = manager.new_quota("u", "c", CREATE_PARTITIONS, 3, T + 1000)
    assert refused(second, 1, T + 1000) == 500

    older = manager.new_quota("u", "c", DELETE_TOPICS, 4, T + 1500)  # permissive below v5
    assert refused(older, 3, T + 1500) is None
    assert not older.is_exceeded
    assert older.throttle_time_ms(T + 1500) == 1500

    rested = manager.new_quota("u", "c", CREATE_TOPICS, 7, T + 5000)
    assert refused(rested, 10, T + 5000) is None
    assert (rested.is_exceeded, rested.throttle_time_ms(T + 5000)) == (False, 0)
    assert refused(rested, 1, T + 5001) == 2999
    assert rested.is_exceeded and rested.throttle_time_ms(T + 5001) == 2999


@pytest.mark.parametrize(
    ("api_key", "strict_from"), [(CREATE_TOPICS, 6), (DELETE_TOPICS, 5), (CREATE_PARTITIONS, 3)]
)
def test_strict_from_the_version_that_knows_the_error(
    manager: ControllerMutationQuotaManager, api_key: int, strict_from: int
) -> None:
    assert manager.new_quota("u", "c", api_key, strict_from, T).strict
    assert not manager.new_quota("u", "c", api_key, strict_from - 1, T).strict
    assert not manager.new_permissive_quota("u", "c", T).strict


def test_requests_of_one_client_share_the_bucket(manager: ControllerMutationQuotaManager) -> None:
    manager.new_quota("u", "c", CREATE_TOPICS, 6, T).record(7, T)
    assert refused(manager.new_quota("other-user", "c", CREATE_TOPICS, 6, T), 1, T) == 500
    assert refused(manager.new_quota("u", "other-client", CREATE_TOPICS, 6, T), 100, T) is None


def test_no_quota_configured_accepts_everything() -> None:
    manager = ControllerMutationQuotaManager()
    quota = manager.new_quota("u", "c", CREATE_TOPICS, 7, T)
    assert quota is UNBOUNDED_QUOTA
    quota.record(1_000_000, T)
    assert (quota.is_exceeded, quota.throttle_time_ms(T)) == (False, 0)


def test_a_client_without_a_bound_keeps_no_bucket(manager: ControllerMutationQuotaManager) -> None:
    assert manager.new_quota("u", "unlimited", CREATE_TOPICS, 7, T) is UNBOUNDED_QUOTA


def test_a_removed_then_restored_quota_starts_with_a_rested_bucket(
    manager: ControllerMutationQuotaManager,
) -> None:
    manager.update_quota(ClientQuotaEntity(client_id="other"), 100)  # keeps the manager on
    manager.new_quota("u", "c", CREATE_TOPICS, 6, T).record(100, T)  # deep in debt
    entity = ClientQuotaEntity(client_id="c")
    manager.update_quota(entity, None)
    assert manager.new_quota("u", "c", CREATE_TOPICS, 6, T + 1) is UNBOUNDED_QUOTA
    manager.update_quota(entity, 2)
    # Kafka's bucket refilled at Long.MAX_VALUE/s meanwhile: full again.
    assert refused(manager.new_quota("u", "c", CREATE_TOPICS, 6, T + 2), 6, T + 2) is None


def test_precedence_picks_the_bucket(manager: ControllerMutationQuotaManager) -> None:
    manager.update_quota(ClientQuotaEntity(user=DEFAULT), 100)  # <default user> beats <c>
    assert manager.quota_for("u", "c") == 100
    assert refused(manager.new_quota("u", "c", CREATE_TOPICS, 6, T), 301, T) is None  # burst 300
    assert refused(manager.new_quota("u", "other", CREATE_TOPICS, 6, T), 1, T) == 10


def test_a_rate_changed_mid_request_applies_to_its_next_topic(
    manager: ControllerMutationQuotaManager,
) -> None:
    quota = manager.new_quota("u", "c", CREATE_TOPICS, 6, T)
    quota.record(10, T)  # -4 at 2/s
    manager.update_quota(ClientQuotaEntity(client_id="c"), 8)
    assert refused(quota, 1, T + 500) is None  # -4 + 4
