"""Tests of ``EntityConfigs``: users', client ids' and addresses' configs at Kafka's paths,
followed by every broker. "Another broker" is a second instance on a second session."""

from __future__ import annotations

import json

import pytest

from kpybroker.metadata.entity_configs import (
    CLIENT_ID,
    IP,
    USER,
    Entity,
    EntityConfigs,
    entity_path,
)
from kpybroker.metadata.znodes import desanitize, sanitize
from tests.helpers.metadata_backends import Backend, scenario
from tests.helpers.waiting import eventually

ALICE: Entity = ((USER, "alice"),)
ALICE_APP: Entity = ((USER, "alice"), (CLIENT_ID, "app"))
DEFAULT_USER_CLIENT: Entity = ((USER, None), (CLIENT_ID, None))


async def started(backend: Backend) -> tuple[EntityConfigs, list[Entity]]:
    changes: list[Entity] = []
    configs = EntityConfigs(await backend.connect(), changes.append)
    await configs.start()
    return configs, changes


@pytest.mark.parametrize(
    ("entity", "path"),
    [
        (ALICE, "/config/users/alice"),
        (((USER, "CN=bob,O=x"),), "/config/users/CN%3Dbob%2CO%3Dx"),
        (ALICE_APP, "/config/users/alice/clients/app"),
        (DEFAULT_USER_CLIENT, "/config/users/<default>/clients/<default>"),
        (((CLIENT_ID, "my app*"),), "/config/clients/my%20app%2A"),
        (((IP, "10.0.0.1"),), "/config/ips/10.0.0.1"),
        (((IP, None),), "/config/ips/<default>"),
    ],
)
def test_entities_live_at_kafkas_paths(entity: Entity, path: str) -> None:
    assert entity_path(entity) == path


@pytest.mark.parametrize(
    ("name", "sanitized"),
    [
        ("alice", "alice"),
        ("user@example.com", "user%40example.com"),
        ("a b*c~d+e/é", "a%20b%2Ac%7Ed%2Be%2F%C3%A9"),
        ("CN=foo,OU=bar", "CN%3Dfoo%2COU%3Dbar"),
        ("<default>", "%3Cdefault%3E"),
        ("x%y", "x%25y"),
    ],
)
def test_names_are_sanitized_as_kafka_does(name: str, sanitized: str) -> None:
    """Kafka 4.4's ``Sanitizer`` outputs."""
    assert sanitize(name) == sanitized
    assert desanitize(sanitized) == name
    assert desanitize("a+b") == "a b"  # URLDecoder


def test_a_user_named_default_is_not_the_default() -> None:
    assert entity_path(((USER, "<default>"),)) == "/config/users/%3Cdefault%3E"
    assert entity_path(((USER, None),)) == "/config/users/<default>"


def test_there_is_no_client_then_user_entity() -> None:
    with pytest.raises(ValueError):
        entity_path(((CLIENT_ID, "app"), (USER, "alice")))


@scenario
async def test_writes_are_kafkas_znodes_and_reach_other_brokers(backend: Backend) -> None:
    one, _ = await started(backend)
    other, seen = await started(backend)
    await one.alter(ALICE, {"producer_byte_rate": "1024", "SCRAM-SHA-256": "salt=x"})
    await one.alter(ALICE_APP, {"consumer_byte_rate": "2048"})
    await one.alter(((IP, None),), {"connection_creation_rate": "10.0"})
    data, _ = await one.store.get("/config/users/alice")
    assert json.loads(data) == {
        "version": 1,
        "config": {"producer_byte_rate": "1024", "SCRAM-SHA-256": "salt=x"},
    }
    assert one.configs(ALICE_APP) == {"consumer_byte_rate": "2048"}
    await eventually(lambda: other.configs(ALICE_APP) == {"consumer_byte_rate": "2048"})
    await eventually(lambda: other.configs(((IP, None),)) == {"connection_creation_rate": "10.0"})
    assert other.configs(ALICE)["producer_byte_rate"] == "1024"
    assert {ALICE, ALICE_APP, ((IP, None),)} <= set(seen)

    await one.alter(ALICE, {"producer_byte_rate": None})
    await eventually(lambda: "producer_byte_rate" not in other.configs(ALICE))
    assert dict(other.configs(ALICE)) == {"SCRAM-SHA-256": "salt=x"}
    assert dict(iter(other)) == {
        ALICE: {"SCRAM-SHA-256": "salt=x"},
        ALICE_APP: {"consumer_byte_rate": "2048"},
        ((IP, None),): {"connection_creation_rate": "10.0"},
    }
    await one.close()
    await other.close()


@scenario
async def test_a_user_made_by_a_client_quota_alone_has_no_configs(backend: Backend) -> None:
    one, _ = await started(backend)
    await one.alter(DEFAULT_USER_CLIENT, {"request_percentage": "50.0"})
    assert dict(one.configs(((USER, None),))) == {}
    assert dict(one.configs(DEFAULT_USER_CLIENT)) == {"request_percentage": "50.0"}
    restarted, _ = await started(backend)
    assert dict(restarted.configs(DEFAULT_USER_CLIENT)) == {"request_percentage": "50.0"}
    await one.store.delete("/config/users/<default>", recursive=True)
    await eventually(lambda: not restarted.configs(DEFAULT_USER_CLIENT))
    await one.close()
    await restarted.close()
