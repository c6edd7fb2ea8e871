"""Byte-rate and request quotas: precedence, shared rates, throttles, and bounded memory.

``PRECEDENCE`` was produced by Kafka 4.4's ``ClientQuotaManager``: for each set of
configured entities (bound i + 1 for entity i of ``ENTITIES``), the metric tags
(``getOrCreateQuotaSensors(...).metricTags()``) and the bound (``quota(user, clientId)``)
of four clients. All 255 sets were compared with this implementation; a sample is kept.
"""

from __future__ import annotations

import pytest

from kpybroker.quotas.client_quota_manager import (
    INT_MAX,
    ClientQuotaManager,
    RequestQuotaManager,
)
from kpybroker.quotas.entity import DEFAULT, ClientQuotaEntity
from kpybroker.quotas.quota_overrides import QuotaOverrides

T = 1_700_000_000_000
HOUR_MS = 3_600_000

ENTITIES = [
    ClientQuotaEntity("alice", "c1"),
    ClientQuotaEntity("alice", DEFAULT),
    ClientQuotaEntity("alice", None),
    ClientQuotaEntity(DEFAULT, "c1"),
    ClientQuotaEntity(DEFAULT, DEFAULT),
    ClientQuotaEntity(DEFAULT, None),
    ClientQuotaEntity(None, "c1"),
    ClientQuotaEntity(None, DEFAULT),
]
CLIENTS = [("alice", "c1"), ("alice", "c2"), ("bob", "c1"), ("bob", "c2")]

#: Set of configured entities (bit i: ENTITIES[i]) -> "tags=bound" of each of CLIENTS.
PRECEDENCE = {
    1: "alice|c1=1 alice|c2=- bob|c1=- bob|c2=-",
    2: "alice|c1=2 alice|c2=2 bob|c1=- bob|c2=-",
    4: "alice|=3 alice|=3 bob|=- bob|=-",
    8: "alice|c1=4 alice|c2=- bob|c1=4 bob|c2=-",
    16: "alice|c1=5 alice|c2=5 bob|c1=5 bob|c2=5",
    32: "alice|=6 alice|=6 bob|=6 bob|=6",
    64: "|c1=7 |c2=- |c1=7 |c2=-",
    128: "|c1=8 |c2=8 |c1=8 |c2=8",
    255: "alice|c1=1 alice|c2=2 bob|c1=4 bob|c2=5",
    68: "alice|=3 alice|=3 |c1=7 |c2=-",
    160: "alice|=6 alice|=6 bob|=6 bob|=6",
    72: "alice|c1=4 |c2=- bob|c1=4 |c2=-",
    34: "alice|c1=2 alice|c2=2 bob|=6 bob|=6",
    20: "alice|=3 alice|=3 bob|c1=5 bob|c2=5",
    192: "|c1=7 |c2=8 |c1=7 |c2=8",
    136: "alice|c1=4 |c2=8 bob|c1=4 |c2=8",
}


@pytest.mark.parametrize("mask", list(PRECEDENCE))
def test_precedence_and_metric_tags_match_kafka(mask: int) -> None:
    overrides = QuotaOverrides()
    for i, entity in enumerate(ENTITIES):
        if mask & (1 << i):
            overrides.set(entity, float(i + 1))
    seen = []
    for user, client_id in CLIENTS:
        tags = overrides.metric_tags(user, client_id)
        bound = overrides.limit(tags)
        seen.append(f"{tags[0]}|{tags[1]}=" + ("-" if bound is None else str(int(bound))))
    assert " ".join(seen) == PRECEDENCE[mask]


def test_removing_the_last_quota_of_a_kind_restores_single_kind_tags() -> None:
    overrides = QuotaOverrides()
    overrides.set(ClientQuotaEntity(user="alice"), 10)
    overrides.set(ClientQuotaEntity(client_id="c1"), 20)
    assert overrides.metric_tags("bob", "c1") == ("", "c1")
    assert overrides.metric_tags("alice", "c1") == ("alice", "")
    overrides.set(ClientQuotaEntity(client_id="c1"), None)
    assert overrides.metric_tags("bob", "c1") == ("bob", "")  # users only, as in Kafka 4.x
    overrides.set(ClientQuotaEntity(user="alice"), None)
    assert not overrides.enabled


def test_a_user_quota_is_shared_by_all_the_users_client_ids() -> None:
    produce = ClientQuotaManager()
    produce.update_quota(ClientQuotaEntity(user="alice"), 1000)
    assert produce.record("alice", "c1", 8000, T) == 0  # 800/s
    assert produce.record("alice", "c2", 5000, T + 500) == 2500  # the 1238/s of Kafka's test
    assert produce.record("bob", "c1", 1_000_000, T) == 0  # no quota for bob
    assert produce.metered_groups == 2


def test_a_default_client_id_quota_meters_each_client_id_apart() -> None:
    produce = ClientQuotaManager()
    produce.update_quota(ClientQuotaEntity(client_id=DEFAULT), 1000)
    assert produce.record("alice", "c1", 13000, T) == 3000
    assert produce.record("bob", "c1", 10, T) == 3010  # same client id: same rate
    assert produce.record("alice", "c2", 13000, T) == 3000
    assert produce.metered_groups == 2


def test_a_quota_change_applies_to_the_rate_measured_so_far() -> None:
    fetch = ClientQuotaManager()
    entity = ClientQuotaEntity(client_id="c1")
    fetch.update_quota(entity, 1_000_000)
    assert fetch.record("u", "c1", 15000, T) == 0
    fetch.update_quota(entity, 1000)
    assert fetch.record("u", "c1", 0, T) == 5000
    assert fetch.configured_quota(entity) == 1000
    assert fetch.quota_for("u", "c1") == 1000


def test_without_quotas_nothing_is_metered() -> None:
    produce = ClientQuotaManager()
    assert not produce.quotas_enabled
    assert produce.record("alice", "c1", 1e12, T) == 0
    assert produce.metered_groups == 0
    assert produce.quota_for("alice", "c1") is None
    assert produce.max_value_in_quota_window("alice", "c1") == INT_MAX


def test_removing_the_last_quota_drops_every_rate() -> None:
    produce = ClientQuotaManager()
    entity = ClientQuotaEntity(client_id="c1")
    produce.update_quota(entity, 1000)
    produce.record("u", "c1", 1, T)
    produce.update_quota(entity, None)
    assert (produce.quotas_enabled, produce.metered_groups) == (False, 0)


def test_a_throttled_fetch_takes_its_bytes_back() -> None:
    fetch = ClientQuotaManager()
    fetch.update_quota(ClientQuotaEntity(client_id="c1"), 1000)
    assert fetch.record("u", "c1", 15000, T) == 5000
    fetch.unrecord("u", "c1", 15000, T)
    assert fetch.record("u", "c1", 0, T) == 0


def test_the_largest_fetch_that_fits_the_window() -> None:
    fetch = ClientQuotaManager()
    fetch.update_quota(ClientQuotaEntity(client_id="c1"), 1000.5)
    assert fetch.max_value_in_quota_window("u", "c1") == 10005  # bound x 10 windows x 1 s
    assert fetch.max_value_in_quota_window("u", "c2") == INT_MAX
    fetch.update_quota(ClientQuotaEntity(client_id="c2"), 1e12)
    assert fetch.max_value_in_quota_window("u", "c2") == INT_MAX


def test_byte_rate_throttles_are_capped_at_int_max() -> None:
    produce = ClientQuotaManager()
    produce.update_quota(ClientQuotaEntity(client_id="c1"), 0.001)
    assert produce.record("u", "c1", 1e12, T) == INT_MAX


def test_request_time_is_recorded_as_a_percentage_and_capped_at_a_window() -> None:
    request = RequestQuotaManager()
    request.update_quota(ClientQuotaEntity(user="alice"), 50)  # half the event loop
    assert request.record_request_time("alice", "c1", 4_500_000_000, T) == 0  # 450 %s -> 45 %
    assert request.record_request_time("alice", "c1", 1_000_000_000, T + 100) == 900
    assert request.record_request_time("alice", "c1", 900_000_000, T + 200) == 1000


def test_rates_expire_after_an_hour_without_use() -> None:
    produce = ClientQuotaManager()
    produce.update_quota(ClientQuotaEntity(client_id=DEFAULT), 1000)
    for i in range(100):  # a client making up a client id per connection
        produce.record("u", f"client-{i}", 1, T + i)
    assert produce.metered_groups == 100
    produce.record("u", "client-0", 1, T + HOUR_MS)  # used again: kept
    produce.record("u", "late", 1, T + 10 + HOUR_MS)  # client-1..client-9 idle > 1 h
    assert produce.metered_groups == 100 - 9 + 1
    produce.record("u", "late", 1, T + 3 * HOUR_MS)
    assert produce.metered_groups == 1


def test_max_sensors_bounds_the_rates_kept() -> None:
    produce = ClientQuotaManager(max_sensors=10)
    produce.update_quota(ClientQuotaEntity(client_id=DEFAULT), 1000)
    for i in range(100):
        produce.record("u", f"client-{i}", 1, T + i)
    assert produce.metered_groups == 10
