"""Supplied by kpybroker's compat-tests in place of the module the sdist leaves out.

``test/integration/fixtures.py`` imports ``ExternalService`` and
``SpawnedService`` from here. With ``KAFKA_URI`` set, the fixtures only wrap
the broker that compat-tests/run started in an ``ExternalService``.

The SASL and SSL tests have no external mode: upstream's fixtures always
start a broker of their own for them, with one listener of the transport
asked for, on a port they chose (``kafka.Kafka`` with the ``kafka.properties``
they rendered). Here that broker is the secured one compat-tests/run started
(``COMPAT_SECURITY``), which has a listener of every transport, so
``SpawnedService`` stands in for the process: it serves the fixture's port by
relaying each connection to the runner's listener of the same security
protocol (clients then follow the broker's metadata to that listener itself),
and gives the fixture the CA that signed that broker's certificate as the
``ca-cert`` its clients trust, since the broker does not use the key store
the fixture generated. The SCRAM user the fixture's storage format would add
(alice, alice-secret) is one the runner already added.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import socketserver
import threading
from pathlib import Path

from compat.security import SecuredBroker

log = logging.getLogger(__name__)


class ExternalService:
    """A service someone else started: only its address."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def dump_logs(self) -> None:
        pass

    def wait_for(self, pattern: str, timeout: float = 30) -> bool:
        return True


class SpawnedService:
    """The broker a fixture asks for (``kafka-run-class.sh kafka.Kafka <properties>``),
    served by the runner's secured broker through a relay on the fixture's port."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        if len(args) < 3 or args[1] != "kafka.Kafka":
            raise RuntimeError(
                "compat-tests stands in for a Kafka broker only (kafka.Kafka), not for "
                f"{' '.join(map(str, args))}"
            )
        self.properties = Path(args[-1])
        self._relay: _Relay | None = None

    def start(self) -> None:
        settings = _read_properties(self.properties)
        listener = settings["listeners"].split(",")[0]
        protocol, _, address = listener.partition("://")
        host, _, port = address.rpartition(":")
        target = _runner_listener(protocol)
        if "ssl.truststore.location" in settings:
            ssl_dir = Path(settings["ssl.truststore.location"]).parent
            shutil.copyfile(_secured_broker().ca_pem, ssl_dir / "ca-cert")
        self._relay = _Relay((host, int(port)), target)
        threading.Thread(target=self._relay.serve_forever, daemon=True).start()
        log.info("serving %s on %s:%s from the runner's broker at %s", protocol, host, port, target)

    def stop(self) -> None:
        if self._relay is not None:
            self._relay.shutdown()
            self._relay.server_close()
            self._relay = None

    def wait_for(self, pattern: str, timeout: float = 30) -> bool:
        """The runner's broker was ready (its SCRAM users too) before the tests began."""
        return self._relay is not None

    def dump_logs(self) -> None:
        log.info("the broker's log is the runner's: compat-tests/results/kafka-python/")


def _read_properties(path: Path) -> dict[str, str]:
    settings = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            settings[key.strip()] = value.strip()
    return settings


def _secured_broker() -> SecuredBroker:
    secured = SecuredBroker.from_env()
    if secured is None:
        raise RuntimeError("COMPAT_SECURITY is not set: the suite's broker is not a secured one")
    return secured


def _runner_listener(protocol: str) -> tuple[str, int]:
    """The runner's listener for a security protocol, as ``(host, port)``."""
    if protocol == "PLAINTEXT":
        address = os.environ["COMPAT_BOOTSTRAP"]
    else:
        address = _secured_broker().bootstrap_for(protocol)
    host, _, port = address.rpartition(":")
    return host, int(port)


class _Relay(socketserver.ThreadingTCPServer):
    """Accepts on the fixture's port; each connection is piped to ``target`` both ways."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], target: tuple[str, int]) -> None:
        self.target = target
        super().__init__(address, _Pipe)


class _Pipe(socketserver.BaseRequestHandler):
    server: _Relay

    def handle(self) -> None:
        with socket.create_connection(self.server.target) as upstream:
            back = threading.Thread(target=_copy, args=(upstream, self.request), daemon=True)
            back.start()
            _copy(self.request, upstream)
            back.join()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    """Bytes from ``source`` to ``sink`` until ``source`` ends; then end ``sink``'s side."""
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
