"""SCRAM users: their credentials as Kafka's ZooKeeper mode kept them, in the user's config.

``kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'
--entity-type users --entity-name alice`` (AlterUserScramCredentials) stores, under the
user's config entity (``/config/users/alice``), one config per mechanism whose value is
the salted credential in Kafka's text form (``salt=...,stored_key=...,server_key=...,
iterations=...``); the password itself is never stored. Every broker reads the same
entity, so a user added on one broker may log in on any.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from kpybroker.metadata.entity_configs import USER, Entity
from kpybroker.security.sasl.scram_credentials import (
    CredentialLookup,
    ScramCredential,
    ScramMechanism,
    credential_from_string,
)

log = logging.getLogger(__name__)

EntityConfigs = Callable[[Entity], Mapping[str, str]]
"""The configs of an entity (``EntityConfigs.configs``)."""


def user_entity(user: str) -> Entity:
    return ((USER, user),)


def stored_credentials(configs: Mapping[str, str]) -> dict[ScramMechanism, ScramCredential]:
    """The SCRAM credentials among a user's configs; a malformed one is logged and left out."""
    found = {}
    for mechanism in ScramMechanism:
        text = configs.get(mechanism.mechanism_name)
        if text is None:
            continue
        try:
            found[mechanism] = credential_from_string(text)
        except ValueError as exc:
            log.warning("ignoring the stored %s credential: %s", mechanism.mechanism_name, exc)
    return found


def credential_lookup(configs: EntityConfigs) -> CredentialLookup:
    """What a SCRAM server asks: the credential of (mechanism name, user), or None."""

    def lookup(mechanism_name: str, user: str) -> ScramCredential | None:
        mechanism = ScramMechanism.for_mechanism_name(mechanism_name)
        if mechanism is None:
            return None
        return stored_credentials(configs(user_entity(user))).get(mechanism)

    return lookup
