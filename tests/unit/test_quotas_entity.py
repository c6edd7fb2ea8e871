"""Client quota entities, from the stored config entities."""

from __future__ import annotations

import pytest

from kpybroker.metadata.entity_configs import CLIENT_ID, USER
from kpybroker.quotas.entity import DEFAULT, ClientQuotaEntity


def test_entities_of_stored_configs() -> None:
    assert ClientQuotaEntity.of(((USER, "CN=foo"), (CLIENT_ID, None))) == ClientQuotaEntity(
        "CN=foo", DEFAULT
    )
    literal = ClientQuotaEntity.of(((CLIENT_ID, "<default>"),))
    assert literal == ClientQuotaEntity(client_id="<default>")  # a client id so named
    assert literal != ClientQuotaEntity(client_id=DEFAULT)


def test_an_entity_names_something() -> None:
    with pytest.raises(ValueError):
        ClientQuotaEntity()
