"""``kpybroker.testing.processes.free_port``: ports for servers that are started later."""

from __future__ import annotations

import random
import socket

import pytest

from kpybroker.testing import processes
from kpybroker.testing.processes import free_port


class SamePick(random.Random):
    """A picker that draws the same port every time, as two unlucky draws would."""

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        return processes.LOWEST_PICKED_PORT + 4321


def test_a_port_is_not_handed_out_again_before_its_server_could_bind_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cluster picks ZooKeeper's port and its brokers' before any of them binds: the
    picks must differ even though none is bound yet (two equal ones failed a CI run)."""
    monkeypatch.setattr(processes, "_picker", SamePick())
    picks = [free_port() for _ in range(5)]
    assert len(set(picks)) == len(picks)


def test_the_port_is_free_to_bind() -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
