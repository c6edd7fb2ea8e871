"""Backends of the metadata store, for the contract tests that run on every backend.

A ``Backend`` opens sessions on one shared store, can expire a session, and can
restart the store: the built-in store, and ZooKeeper (a real server shared by
the run, each test in its own chroot). Tests take the ``backend`` fixture,
parametrized over both, and write ``@scenario`` coroutines.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import pytest

from kpybroker.metadata.builtin import BuiltinEnsemble, BuiltinMetadataStore
from kpybroker.metadata.store import MetadataStore
from kpybroker.metadata.zookeeper import ZooKeeperMetadataStore
from tests.helpers.waiting import eventually
from tests.helpers.zookeeper import ZooKeeperServer

TIMEOUT = 60.0


class Backend(Protocol):
    async def connect(self) -> MetadataStore:
        """A started session on the shared store."""

    async def expire(self, store: MetadataStore) -> None:
        """Make the store's session expire (it then reconnects with a new session)."""

    async def restart(self) -> None:
        """End every session and restart the store; the next connect() sees what persisted."""

    async def stop(self) -> None:
        """End every session and stop the store."""


class BuiltinBackend:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.ensemble: BuiltinEnsemble | None = None

    async def connect(self) -> MetadataStore:
        if self.ensemble is None:
            self.ensemble = BuiltinEnsemble(self.data_dir)
            await self.ensemble.start()
        store = BuiltinMetadataStore(ensemble=self.ensemble)
        await store.start()
        return store

    async def expire(self, store: MetadataStore) -> None:
        assert isinstance(store, BuiltinMetadataStore)
        await store.expire_session()

    async def restart(self) -> None:
        await self.stop()

    async def stop(self) -> None:
        if self.ensemble is not None:
            await self.ensemble.stop()
            self.ensemble = None


class ZooKeeperBackend:
    """Sessions on the shared server, in a chroot of this test's own that the first
    session creates (as a broker does)."""

    def __init__(self, server: ZooKeeperServer) -> None:
        self.server = server
        self.address = f"{server.connect}/tests/{uuid.uuid4().hex}"
        self.stores: list[ZooKeeperMetadataStore] = []

    async def connect(self) -> MetadataStore:
        store = ZooKeeperMetadataStore(self.address, session_timeout_ms=10_000)
        self.stores.append(store)
        await store.start()
        return store

    async def expire(self, store: MetadataStore) -> None:
        assert isinstance(store, ZooKeeperMetadataStore)
        await store.expire_session()

    async def restart(self) -> None:
        await self.stop()
        await asyncio.to_thread(self.server.restart)

    async def stop(self) -> None:
        for store in self.stores:
            await store.close()
        self.stores.clear()


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Backend]] = {
    "builtin": lambda request, tmp_path: BuiltinBackend(tmp_path),
    "zookeeper": lambda request, tmp_path: ZooKeeperBackend(
        request.getfixturevalue("zookeeper_server")
    ),
}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return BACKENDS[request.param](request, tmp_path)


def scenario(test: Callable[[Backend], Awaitable[None]]) -> Callable[[Backend], None]:
    """Run an async test against the ``backend`` fixture in a fresh event loop, then stop it."""

    @functools.wraps(test)
    def run(backend: Backend) -> None:
        async def main() -> None:
            try:
                await test(backend)
            finally:
                await backend.stop()

        asyncio.run(asyncio.wait_for(main(), TIMEOUT))

    return run


class Recorder:
    """A watch callback (or session listener) that records what it receives."""

    def __init__(self) -> None:
        self.events: list[object] = []

    def __call__(self, event: object) -> None:
        self.events.append(event)


_barriers = itertools.count()


async def drain_events(store: MetadataStore) -> None:
    """Return once every watch event already due to ``store`` has been delivered.

    A session receives events in order, so when the event of a change made
    now arrives, all earlier ones have arrived too.
    """
    path = f"/barrier-{next(_barriers)}"
    seen = Recorder()
    await store.exists(path, seen)
    await store.create(path)
    await eventually(lambda: seen.events)
    await store.delete(path)
