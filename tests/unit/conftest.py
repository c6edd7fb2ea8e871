"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.metadata_backends import backend
from tests.helpers.zookeeper import ZooKeeperServer

#: ``backend``: every metadata store backend, for the contract tests (metadata_backends.py).
__all__ = ["backend"]


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper server for the whole run; tests keep apart by chroot.

    Started on first use only, so that runs without a ZooKeeper test pay nothing;
    when the package is missing, the tests that use it fail (they do not skip).
    """
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()
