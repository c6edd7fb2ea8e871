"""Client properties files for Kafka's Java tools, as an operator writes them for a secured broker.

Kafka's tools take a client's security settings from a file (``--command-config``): the
protocol, the SASL mechanism with its JAAS line, and the PKCS12 trust store (and, for mutual TLS,
key store) of ``tests/helpers/secure_broker.py``'s ``Credentials``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.certificates import PASSWORD
from tests.helpers.secure_broker import (
    OAUTH_MODULE,
    PLAIN_MODULE,
    SCRAM_MODULE,
    USERS,
    Credentials,
    jaas,
)


@dataclass(frozen=True)
class ClientProperties:
    """A written properties file and the listener its settings are for."""

    path: Path
    listener: str


def write_properties(path: Path, settings: Mapping[str, str]) -> Path:
    """``settings`` as a Java properties file (``Properties.load`` reads a backslash as an
    escape, so each one is doubled)."""
    lines = (f"{key}={_escaped(value)}\n" for key, value in settings.items())
    path.write_text("".join(lines))
    return path


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\")


def trust_settings(credentials: Credentials) -> dict[str, str]:
    """The trust store that makes a client trust the broker's CA."""
    return {
        "ssl.truststore.location": str(credentials.truststore),
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.password": PASSWORD,
    }


def sasl_settings(
    credentials: Credentials, mechanism: str, user: str, password: str | None = None
) -> dict[str, str]:
    """SASL_SSL as ``user``: PLAIN and SCRAM log in with ``password`` (by default the user's in
    ``USERS``), OAUTHBEARER with Kafka's unsecured token whose subject is ``user``."""
    if mechanism == "OAUTHBEARER":
        login = jaas(OAUTH_MODULE, unsecuredLoginStringClaim_sub=user)
    else:
        module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
        login = jaas(module, username=user, password=USERS[user] if password is None else password)
    return {
        "security.protocol": "SASL_SSL",
        **trust_settings(credentials),
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": login,
    }


def mutual_tls_settings(credentials: Credentials, user: str) -> dict[str, str]:
    """SSL with ``user``'s client certificate in a PKCS12 key store."""
    return {
        "security.protocol": "SSL",
        **trust_settings(credentials),
        "ssl.keystore.location": str(credentials.client(user).keystore),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.password": PASSWORD,
    }


@dataclass(frozen=True)
class ClientPropertiesWriter:
    """Writes properties files into ``directory``, one per identity, named after it."""

    directory: Path
    credentials: Credentials

    def write(self, stem: str, listener: str, settings: Mapping[str, str]) -> ClientProperties:
        return ClientProperties(
            write_properties(self.directory / f"{stem}.properties", settings), listener
        )

    def sasl(self, mechanism: str, user: str, password: str | None = None) -> ClientProperties:
        stem = f"{user}-{mechanism.lower()}"
        if password is not None:  # one file per password tried
            stem += "-" + hashlib.sha256(password.encode()).hexdigest()[:8]
        return self.write(
            stem, "SASL_SSL", sasl_settings(self.credentials, mechanism, user, password)
        )

    def mutual_tls(self, user: str) -> ClientProperties:
        return self.write(f"{user}-ssl", "SSL", mutual_tls_settings(self.credentials, user))
