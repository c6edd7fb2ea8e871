"""A broker set up the way an operator secures Kafka, for the security tests.

One CA signs the broker's certificate and the clients'. The broker listens on
four listeners: PLAINTEXT (the harness's own port), SASL_PLAINTEXT, SASL_SSL
and SSL (client certificates required, ``CN=alice,...`` mapped to ``alice``).
SASL offers PLAIN (users in the JAAS config), SCRAM-SHA-256 and SCRAM-SHA-512
(users added through AlterUserScramCredentials, by ``admin``) and OAUTHBEARER
(Kafka's unsecured validator). ACLs are on, nothing is allowed without one,
and ``admin`` is the super user. The same settings start kpybroker and, with
``KPYBROKER_TEST_TARGET=kafka``, Apache Kafka, so the tests check both.

The settings are those of ``docs/secure-server.properties``, the example
``docs/security.md`` explains, with this run's files and ports.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from kpybroker.config import read_properties
from kpybroker.testing.processes import free_port
from tests.helpers.brokers import KpyBroker, ManagedBroker, Overrides, selected_target
from tests.helpers.certificates import CertificateAuthority, Identity
from tests.helpers.process import REPO_ROOT

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SECURE_LISTENERS = ("SASL_PLAINTEXT", "SASL_SSL", "SSL")
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@dataclass(eq=False)
class Credentials:
    """The key material of a secured broker and its clients, as files."""

    directory: Path
    ca: CertificateAuthority = field(default_factory=CertificateAuthority)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.ca_pem = self.ca.write_pem(self.directory / "ca.pem")
        self.truststore = self.ca.write_truststore(self.directory / "truststore.p12")
        server = self.ca.server("CN=localhost,O=kpybroker tests")
        self.server_pem = server.write_pem(self.directory / "broker.pem")
        self.server_keystore = server.write_pkcs12(self.directory / "broker.p12")

    @functools.cache  # noqa: B019 - one per user and credentials object
    def client(self, user: str) -> ClientFiles:
        """A client certificate for ``user`` (``CN=<user>,O=kpybroker tests``), as files."""
        identity = self.ca.client(f"CN={user},O=kpybroker tests")
        return ClientFiles.write(identity, self.directory / user)


@dataclass(frozen=True)
class ClientFiles:
    key_pem: Path
    chain_pem: Path
    keystore: Path

    @classmethod
    def write(cls, identity: Identity, stem: Path) -> ClientFiles:
        return cls(
            identity.write_key_pem(stem.with_suffix(".key")),
            identity.write_chain_pem(stem.with_suffix(".crt")),
            identity.write_pkcs12(stem.with_suffix(".p12")),
        )


def jaas(module: str, **options: str) -> str:
    """A one-entry JAAS config, as ``sasl.jaas.config`` takes it."""
    text = " ".join(f'{key}="{value}"' for key, value in options.items())
    return f"{module} required {text};".replace(" ;", ";")


#: The operator's example (docs/security.md): the settings every secured test broker gets.
EXAMPLE = REPO_ROOT / "docs" / "secure-server.properties"
EXAMPLE_SSL_DIR = "/etc/kpybroker/ssl/"


def server_properties(credentials: Credentials, ports: dict[str, int]) -> dict[str, str]:
    """The example's settings but the listeners, with this run's key and trust stores."""
    settings = read_properties(EXAMPLE)
    for key in ("listeners", "advertised.listeners"):
        del settings[key]
    stores = {
        f"{EXAMPLE_SSL_DIR}broker.p12": str(credentials.server_keystore),
        f"{EXAMPLE_SSL_DIR}truststore.p12": str(credentials.truststore),
    }
    return {key: stores.get(value, value) for key, value in settings.items()}


class SecureKpyBroker(KpyBroker):
    """kpybroker with the four listeners; ``ports`` names each one's port."""

    def __init__(
        self, base_dir: Path, credentials: Credentials, overrides: Overrides | None = None
    ) -> None:
        super().__init__(base_dir, overrides)
        self.credentials = credentials
        self.ports = {name: free_port(self.host) for name in SECURE_LISTENERS}

    def command(self) -> list[str]:
        settings = {
            **server_properties(self.credentials, self.ports),
            # As the reference Kafka's single-node defaults, so that groups form as fast.
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
            "listeners": ",".join(
                [f"PLAINTEXT://{self.host}:{self.port}"]
                + [f"{name}://{self.host}:{port}" for name, port in self.ports.items()]
            ),
        }
        saved = self.overrides
        self.overrides = settings
        try:
            return super().command()
        finally:
            self.overrides = saved

    def bootstrap_for(self, listener: str) -> str:
        return f"{self.host}:{self.ports[listener]}"


def secure_broker(
    base_dir: Path, credentials: Credentials, overrides: Overrides | None = None
) -> ManagedBroker:
    """An unstarted secured broker of the selected target (kpybroker or Apache Kafka)."""
    if selected_target() == "kafka":
        from tests.helpers.reference_kafka import SecureReferenceKafka

        return SecureReferenceKafka(base_dir, credentials, overrides)
    return SecureKpyBroker(base_dir, credentials, overrides)
