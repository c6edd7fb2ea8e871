"""Fresh brokers for a suite: kpybroker, or the reference Apache Kafka, on free loopback ports.

The launchers are the integration tests' own (``tests/helpers/brokers.py``,
``tests/helpers/reference_kafka.py``), so the compat suites and the tests
start brokers the same way. What this module adds is what a suite run
needs around them: each broker's output saved beside the results, its
ERROR lines and tracebacks collected (a broker that logs an internal error
while the clients see nothing wrong still has a bug), and a clean-shutdown
check at the end.

A suite may ask for a secured broker (``Suite.secured``): the security
tests' own (``tests/helpers/secure_broker.py``), with its key material in
the work directory and its SCRAM users added, described to the tests by a
:class:`compat.security.SecuredBroker`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from compat.security import ClientFiles, SecuredBroker
from tests.helpers.brokers import ManagedBroker, create_broker
from tests.helpers.certificates import PASSWORD
from tests.helpers.reference_kafka import ReferenceKafka, SecureReferenceKafka
from tests.helpers.secure_broker import SECURE_LISTENERS, USERS, Credentials, SecureKpyBroker
from tests.helpers.secure_clients import add_scram_users

#: Lines worth reporting from a broker's log.
_ERROR_LINE = re.compile(r"\b(ERROR|CRITICAL)\b")


@dataclass
class BrokerRun:
    """A started broker plus what was noticed about it when it stopped."""

    broker: ManagedBroker
    log_path: Path
    security: SecuredBroker | None = None  # a secured broker's other listeners and files
    problems: list[str] = field(default_factory=list)
    error_lines: list[str] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap


def error_lines(text: str, limit: int = 50) -> list[str]:
    """ERROR/CRITICAL lines from a broker's output, each followed by its exception, if any.

    A traceback is reduced to its last line (``BrokenPipeError: [Errno 32] ...``),
    which is what tells one error from another in the report.
    """
    found: list[str] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if _ERROR_LINE.search(line) and not line.startswith("Traceback"):
            found.append(line.rstrip()[:400])
        elif line.startswith("Traceback "):
            end = index + 1
            while end < len(lines) and (lines[end].startswith((" ", "\t")) or not lines[end]):
                end += 1
            if end < len(lines):
                found.append(f"    -> {lines[end].strip()[:300]}")
        if len(found) >= limit:
            break
    return found


def _create(
    kind: str,
    work_dir: Path,
    overrides: Mapping[str, object] | None,
    credentials: Credentials | None,
) -> ManagedBroker:
    """An unstarted broker, secured when given ``credentials``; Apache Kafka gets node id 0,
    like kpybroker's default broker.id.

    Clients and suites may assume broker 0 (kafka-python's fixtures do); the
    differential suite then compares node ids without translating them.
    """
    if credentials is None:
        if kind == "kafka":
            return ReferenceKafka(work_dir, overrides, node_id=0)
        return create_broker(kind, work_dir, overrides)
    if kind == "kafka":
        kafka = SecureReferenceKafka(work_dir, credentials, overrides)
        kafka.node_id = 0  # its constructor takes no node id; settings() reads it at start
        return kafka
    return SecureKpyBroker(work_dir, credentials, overrides)


def _endpoints(broker: ManagedBroker) -> dict[str, str]:
    """Each listener's ``host:port`` by listener name, PLAINTEXT first."""
    endpoints = {"PLAINTEXT": broker.bootstrap}
    if isinstance(broker, SecureKpyBroker | SecureReferenceKafka):
        endpoints |= {name: broker.bootstrap_for(name) for name in SECURE_LISTENERS}
    return endpoints


def describe(broker: ManagedBroker, credentials: Credentials) -> SecuredBroker:
    """What the tests of a secured broker need to know, with a client certificate per user."""
    clients = {}
    for user in USERS:
        files = credentials.client(user)
        clients[user] = ClientFiles(str(files.key_pem), str(files.chain_pem), str(files.keystore))
    endpoints = _endpoints(broker)
    del endpoints["PLAINTEXT"]  # that one is the suite's ``bootstrap``
    return SecuredBroker(
        listeners=endpoints,
        ca_pem=str(credentials.ca_pem),
        truststore=str(credentials.truststore),
        store_password=PASSWORD,
        users=dict(USERS),
        clients=clients,
    )


@contextmanager
def fresh_broker(
    kind: str,
    work_dir: Path,
    log_path: Path,
    overrides: Mapping[str, object] | None = None,
    *,
    secured: bool = False,
) -> Iterator[BrokerRun]:
    """Start ``kind`` ("kpybroker" or "kafka") in ``work_dir``; stop it and save its log on exit.

    Override values may name the broker's own address as ``{host}`` and
    ``{port}``, and all its listeners as ``{listeners}`` (e.g.
    ``advertised.listeners``), which are only known once the launcher has
    picked free ports. A ``secured`` broker is ``secure_broker``'s, its
    SCRAM users added before it is handed over. The returned
    :class:`BrokerRun` collects shutdown problems (a crash during the suite,
    an unclean exit) for the runner to report as suite problems.
    """
    credentials = Credentials(work_dir / "credentials") if secured else None
    broker = _create(kind, work_dir, overrides, credentials)
    listeners = ",".join(f"{name}://{address}" for name, address in _endpoints(broker).items())
    broker.overrides = {
        key: value.format(host=broker.host, port=broker.port, listeners=listeners)
        for key, value in broker.overrides.items()
    }
    run = BrokerRun(broker, log_path)
    started = False
    try:
        broker.start()
        started = True
        if credentials is not None:
            add_scram_users(broker)
            run.security = describe(broker, credentials)
        yield run
    finally:
        if started:
            if not broker.is_running:
                run.problems.append(
                    f"{kind} exited during the suite (status {broker.process.returncode})"
                )
            try:
                code = broker.stop()
                if code not in broker.clean_exit_codes:
                    run.problems.append(f"{kind} exited with status {code} after SIGTERM")
            except AssertionError as exc:
                run.problems.append(str(exc).splitlines()[0])
        text = broker.log_text()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(text)
        if kind == "kpybroker":
            run.error_lines = error_lines(text)
