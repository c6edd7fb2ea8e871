"""A suite's secured broker as its tests see it: listeners, users and key material.

A suite whose :attr:`compat.suite.Suite.secured` is true gets the broker of
``tests/helpers/secure_broker.py`` (kpybroker, or Apache Kafka configured the
same way). The runner describes it to the tests in ``COMPAT_SECURITY``, as
JSON; pytest suites get it as the ``security`` fixture
(:mod:`compat.pytest_plugin`), other runtimes parse the JSON themselves.

Standard library only: this module is imported inside the suites' own
virtualenvs (kafka-python, aiokafka), where kpybroker is not installed.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

ENV = "COMPAT_SECURITY"


@dataclass(frozen=True)
class ClientFiles:
    """A user's client certificate (``CN=<user>``, mapped to ``User:<user>``), as files."""

    key_pem: str  # PKCS#8, unencrypted
    chain_pem: str  # the certificate, then the CA
    keystore: str  # PKCS#12, password ``SecuredBroker.store_password``


@dataclass(frozen=True)
class SecuredBroker:
    """The listeners beyond PLAINTEXT, who may log in, and the files a client needs.

    ``listeners`` maps ``SASL_PLAINTEXT``, ``SASL_SSL`` and ``SSL`` (client
    certificate required) to ``host:port``. SASL offers PLAIN, SCRAM-SHA-256,
    SCRAM-SHA-512 and OAUTHBEARER; every user in ``users`` may log in with
    each of the first three. ``admin`` is a super user; the others need ACLs.
    """

    listeners: dict[str, str]
    ca_pem: str
    truststore: str  # PKCS#12 holding the CA
    store_password: str
    users: dict[str, str]  # name -> password
    clients: dict[str, ClientFiles]

    def bootstrap_for(self, listener: str) -> str:
        """``host:port`` of a listener (the name the test helpers' brokers use too)."""
        return self.listeners[listener]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> SecuredBroker:
        data = json.loads(text)
        data["clients"] = {user: ClientFiles(**files) for user, files in data["clients"].items()}
        return cls(**data)

    @classmethod
    def from_env(cls) -> SecuredBroker | None:
        """The runner's description (``COMPAT_SECURITY``); None for a broker not secured."""
        text = os.environ.get(ENV)
        return cls.from_json(text) if text else None
