"""The secured pair: kpybroker and Apache Kafka, both set up as ``tests/helpers/secure_broker.py``.

The security scenarios (``@secured_scenario``) need brokers that most
scenarios must not have: TLS and SASL listeners, ACLs on with nothing
allowed by default. Starting a pair per scenario would cost a Kafka start
each, so one pair is started the first time a security scenario runs and
serves every security scenario of the run (the ``secured_pair`` fixture).
Scenarios keep out of each other's way by acting as principals of their
own (SCRAM users they add, ``access.py``) on resources named after them.

Both brokers get the differential suite's settings (one node, node id 0),
secure_broker's (``server_properties``), every listener advertised, and
``connections.max.reauth.ms`` on the SASL_SSL listener only, so that a
session lifetime can be compared with and without it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compat.wire import KafkaConnection, sasl_client, tls_context
from tests.helpers.reference_kafka import SecureReferenceKafka
from tests.helpers.secure_broker import USERS, Credentials, SecureKpyBroker

from .suite import DifferentialSuite

#: The listener whose sessions expire, and after how long.
REAUTH_LISTENER = "SASL_SSL"
REAUTH_MS = 3_600_000
CLIENT_ID = "compat-differential"


def overrides() -> dict[str, object]:
    """The settings both secured brokers get on top of secure_broker's own."""
    settings = {
        key: value
        for key, value in DifferentialSuite().overrides().items()
        # The secured brokers advertise every listener (set once their ports are known).
        if key != "advertised.listeners"
    }
    settings[f"listener.name.{REAUTH_LISTENER.lower()}.connections.max.reauth.ms"] = REAUTH_MS
    return settings


@dataclass
class PairedBroker:
    """One broker of the pair: its listeners, and connections to them as a chosen user."""

    name: str
    broker: Any  # SecureKpyBroker or SecureReferenceKafka: bootstrap_for, ports, log_text
    credentials: Credentials

    @property
    def bootstrap(self) -> str:
        """The PLAINTEXT listener, where ``User:ANONYMOUS`` is a super user (for set-up)."""
        return str(self.broker.bootstrap)

    def address(self, listener: str) -> str:
        """``host:port`` of one of the listeners (PLAINTEXT, SASL_PLAINTEXT, SASL_SSL, SSL)."""
        return (
            self.bootstrap if listener == "PLAINTEXT" else str(self.broker.bootstrap_for(listener))
        )

    @staticmethod
    def password(user: str) -> str:
        """A PLAIN user's password (the JAAS config's), else the one scenarios give SCRAM users."""
        return USERS.get(user, f"{user}-secret")

    def connect(
        self,
        listener: str,
        user: str | None = None,
        mechanism: str = "PLAIN",
        *,
        handshake_version: int = 1,
        authenticate_version: int = 2,
    ) -> KafkaConnection:
        """A connection to ``listener``: TLS where the listener has it, logged in as ``user``.

        On SSL ``user`` names the client certificate (``CN=<user>``, principal
        ``User:<user>``); on the SASL listeners it logs in with ``mechanism``;
        without ``user`` the connection is left as the broker first sees it.
        Raises :class:`compat.wire.AuthenticationFailed` when the login is refused.
        """
        tls = None
        if listener in ("SSL", "SASL_SSL"):
            certificate = None
            if listener == "SSL" and user is not None:
                files = self.credentials.client(user)
                certificate = (files.chain_pem, files.key_pem)
            tls = tls_context(self.credentials.ca_pem, certificate)
        conn = KafkaConnection(self.address(listener), client_id=CLIENT_ID, tls=tls)
        if user is not None and listener.startswith("SASL_"):
            try:
                conn.authenticate(
                    sasl_client(mechanism, user, self.password(user)),
                    handshake_version=handshake_version,
                    authenticate_version=authenticate_version,
                )
            except BaseException:
                conn.close()
                raise
        return conn


@dataclass
class SecuredPair:
    """Apache Kafka (the reference) and the target of the run, both secured alike."""

    kafka: PairedBroker
    target: PairedBroker


def _advertise_every_listener(broker: Any) -> None:
    endpoints = [f"PLAINTEXT://{broker.host}:{broker.port}"]
    endpoints += [f"{name}://{broker.host}:{port}" for name, port in broker.ports.items()]
    broker.overrides["advertised.listeners"] = ",".join(endpoints)


def _create(kind: str, directory: Path, credentials: Credentials) -> Any:
    if kind == "kafka":
        broker: Any = SecureReferenceKafka(directory, credentials, overrides())
        broker.node_id = 0  # as kpybroker's broker.id, so node ids compare as they are
    else:
        broker = SecureKpyBroker(directory, credentials, overrides())
    _advertise_every_listener(broker)
    return broker


@contextlib.contextmanager
def secured_pair(work_dir: Path, artifacts: Path, target: str) -> Iterator[SecuredPair]:
    """Start the pair (Kafka, then ``target``); on exit stop both and save their logs.

    A broker that does not shut down cleanly fails the run's last security
    scenario (the fixture's teardown), as an unclean main broker fails the suite.
    """
    credentials = Credentials(work_dir / "credentials")
    started: list[tuple[str, Any]] = []
    problems: list[str] = []
    try:
        for label, kind in (("secured-reference-kafka", "kafka"), (f"secured-{target}", target)):
            broker = _create(kind, work_dir / label, credentials)
            started.append((label, broker))
            broker.start()
        (_, kafka), (_, main) = started
        yield SecuredPair(
            PairedBroker("Apache Kafka", kafka, credentials),
            PairedBroker(target, main, credentials),
        )
    finally:
        for label, broker in started:
            problems += _stop(label, broker, artifacts)
    if problems:
        raise AssertionError("\n".join(problems))


def _stop(label: str, broker: Any, artifacts: Path) -> list[str]:
    problems = []
    if broker.process is not None:
        if not broker.is_running:
            problems.append(f"{label} exited during the run (status {broker.process.returncode})")
        try:
            code = broker.stop()
            if code not in broker.clean_exit_codes:
                problems.append(f"{label} exited with status {code} after SIGTERM")
        except AssertionError as exc:
            problems.append(str(exc).splitlines()[0])
    artifacts.mkdir(parents=True, exist_ok=True)
    (artifacts / f"{label}.log").write_text(broker.log_text())
    return problems
