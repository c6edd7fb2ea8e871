"""A broker whose listener's port is taken stops at once with Kafka's one-line error.

Kafka fails its start-up with ``Socket server failed to bind to <host>:<port>: Address
already in use.``; kpybroker logs the same fatal error, without a traceback (nothing in
the broker is broken), and exits with status 1 without touching its data.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.helpers.brokers import BrokerStartError, KpyBroker


def test_a_taken_port_is_one_fatal_line_and_exit_status_1(tmp_path: Path) -> None:
    broker = KpyBroker(tmp_path)
    with (
        socket.create_server((broker.host, broker.port)),
        pytest.raises(BrokerStartError) as raised,
    ):
        broker.start()
    output = broker.log_text()
    assert broker.process is not None and broker.process.returncode == 1
    assert (
        f"ERROR kpybroker: Fatal error during broker startup, shutting down: Socket server "
        f"failed to bind to {broker.host}:{broker.port}: Address already in use." in output
    )
    assert "Traceback" not in output
    assert "exited before logging its ready line" in str(raised.value)
