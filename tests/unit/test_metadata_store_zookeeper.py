"""Tests of the ZooKeeper backend beyond the store contract (test_metadata_store):
the chroot, connection loss within a session, start-up failure, many calls at once,
and how a broker selects the backend."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from kpybroker.broker import open_metadata_store
from kpybroker.config import BrokerConfig
from kpybroker.metadata.builtin import BuiltinMetadataStore
from kpybroker.metadata.store import (
    ConnectionLossError,
    EventType,
    SessionExpiredError,
    SessionState,
    WatchedEvent,
)
from kpybroker.metadata.zookeeper import ZooKeeperMetadataStore
from kpybroker.testing.processes import free_port
from tests.helpers.metadata_backends import Recorder
from tests.helpers.waiting import eventually
from tests.helpers.zookeeper import ZooKeeperServer


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 120))


def chroot() -> str:
    """A chroot no other test uses."""
    return f"/tests/{uuid.uuid4().hex}"


def test_chroot_is_created_and_confines_the_session(zookeeper_server: ZooKeeperServer) -> None:
    base = chroot()

    async def main() -> None:
        async with (
            ZooKeeperMetadataStore(f"{zookeeper_server.connect}{base}/kafka") as store,
            ZooKeeperMetadataStore(zookeeper_server.connect) as root,
        ):
            assert await store.get_children("/") == []
            assert await store.create("/a", b"x") == "/a"
            assert (await root.get(f"{base}/kafka/a"))[0] == b"x"
            changed = Recorder()
            await store.get("/a", changed)
            await root.set(f"{base}/kafka/a", b"y")
            await eventually(lambda: changed.events)
            assert changed.events == [WatchedEvent(EventType.CHANGED, "/a")]
            assert await store.create("/s-", sequential=True) == "/s-0000000001"
            assert await store.get_children("/") == ["a", "s-0000000001"]

    run(main)


def test_connection_string_chroot_forms() -> None:
    assert ZooKeeperMetadataStore("h1:2181,h2:2181/kafka/prod").chroot == "/kafka/prod"
    assert ZooKeeperMetadataStore("h1:2181/").chroot == ""  # no chroot, as in ZooKeeper
    assert ZooKeeperMetadataStore("h1:2181").chroot == ""
    for bad in ("h1:2181/kafka/", "h1:2181//kafka", "/kafka"):
        with pytest.raises(ValueError):
            ZooKeeperMetadataStore(bad)


def test_connection_loss_keeps_the_session_and_its_watches(tmp_path: Path) -> None:
    """kazoo drops its watches with the connection; the store re-arms them, fires
    those whose node changed meanwhile before any reply that shows the change.

    The test crashes its own server rather than the run's shared one: a restart
    replays the data directory, and the shared one holds every earlier test's
    transactions. A CI run once saw its session expire across the restart under
    load, so the session is given the server's maximum, 60 s.
    """
    zookeeper_server = ZooKeeperServer(tmp_path)
    zookeeper_server.start()
    address = f"{zookeeper_server.connect}{chroot()}"

    async def main() -> None:
        async with ZooKeeperMetadataStore(address, session_timeout_ms=60_000) as store:
            await store.create("/eph", ephemeral=True)
            for path in ("/n", "/p", "/quiet"):
                await store.create(path)
            seen: list[object] = []
            await store.get("/n", seen.append)
            await store.get_children("/p", seen.append)
            await store.exists("/later", seen.append)
            quiet = Recorder()
            await store.get("/quiet", quiet)
            states = Recorder()
            store.add_session_listener(states)
            session = store.session_id

            zookeeper_server.kill()
            await eventually(lambda: states.events == [SessionState.SUSPENDED])

            async def change(write: Awaitable[object], done: str) -> None:
                await write
                seen.append(done)

            # Sent once the connection is back, before the watches are re-armed.
            changes = asyncio.gather(
                change(store.set("/n", b"1"), "set /n"),
                change(store.create("/p/c"), "created /p/c"),
                change(store.create("/later"), "created /later"),
            )
            await asyncio.to_thread(zookeeper_server.start)
            await changes
            assert set(seen[:3]) == {
                WatchedEvent(EventType.CHANGED, "/n"),
                WatchedEvent(EventType.CHILD, "/p"),
                WatchedEvent(EventType.CREATED, "/later"),
            }
            assert seen[3:] == ["set /n", "created /p/c", "created /later"]
            assert states.events == [SessionState.SUSPENDED, SessionState.CONNECTED]
            assert store.session_id == session
            assert (await store.exists("/eph")).ephemeral_owner == session

            async with ZooKeeperMetadataStore(address) as other:
                await other.set("/quiet", b"changed after the reconnection")
            await eventually(lambda: quiet.events)
            assert quiet.events == [WatchedEvent(EventType.CHANGED, "/quiet")]

    try:
        run(main)
    finally:
        zookeeper_server.stop()


def test_start_gives_up_when_nobody_answers() -> None:
    async def main() -> None:
        store = ZooKeeperMetadataStore(f"127.0.0.1:{free_port()}", connection_timeout_ms=500)
        started = time.monotonic()
        with pytest.raises(ConnectionLossError):
            await store.start()
        assert time.monotonic() - started < 10
        with pytest.raises(SessionExpiredError):
            await store.exists("/")

    run(main)


def test_many_concurrent_calls_that_create_parents(zookeeper_server: ZooKeeperServer) -> None:
    """More at once than kazoo's wake-up pipe holds (about 270). With this store's
    inline callbacks, kazoo's own ``makepath`` would deadlock here (``_make_path``)."""

    async def main() -> None:
        async with ZooKeeperMetadataStore(f"{zookeeper_server.connect}{chroot()}") as store:
            await asyncio.gather(
                *(store.create(f"/t/{p}/state", make_parents=True) for p in range(1000))
            )
            assert len(await store.get_children("/t")) == 1000
            await store.delete("/t", recursive=True)
            assert await store.exists("/t") is None

    run(main)


def test_broker_selects_zookeeper_when_connect_is_set(tmp_path: Path) -> None:
    store = open_metadata_store(
        BrokerConfig(
            {
                "log.dirs": str(tmp_path),
                "zookeeper.connect": "zk1:2181,zk2:2181/kafka",
                "zookeeper.session.timeout.ms": "6000",
            }
        )
    )
    assert isinstance(store, ZooKeeperMetadataStore)
    assert (store.connect, store.chroot) == ("zk1:2181,zk2:2181/kafka", "/kafka")
    assert (store.session_timeout_ms, store.connection_timeout_ms) == (6000, 6000)
    store = open_metadata_store(
        BrokerConfig({"zookeeper.connect": "zk:2181", "zookeeper.connection.timeout.ms": "900"})
    )
    assert isinstance(store, ZooKeeperMetadataStore)
    assert (store.session_timeout_ms, store.connection_timeout_ms) == (18_000, 900)
    assert isinstance(
        open_metadata_store(BrokerConfig({"log.dirs": str(tmp_path)})), BuiltinMetadataStore
    )
