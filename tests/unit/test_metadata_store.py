"""Contract tests for ``MetadataStore``, run against every backend.

A backend is a ``Backend``: something that opens sessions on one shared store,
can expire a session, and can restart the store. ``BACKENDS`` names them: the
built-in store, and ZooKeeper (a real server shared by the run, each test in its
own chroot). The ClusterMetadata tests run on every backend too.
"""

from __future__ import annotations

import re

import pytest

from kpybroker.metadata.store import (
    BadVersionError,
    EventType,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SessionState,
    WatchedEvent,
    node_name,
)
from tests.helpers.metadata_backends import Backend, Recorder, drain_events, scenario
from tests.helpers.waiting import eventually

# -- nodes, data, versions -------------------------------------------------------


@scenario
async def test_create_get_set_delete(backend: Backend) -> None:
    store = await backend.connect()
    assert await store.create("/a", b"one") == "/a"
    data, stat = await store.get("/a")
    assert data == b"one"
    assert (stat.version, stat.data_length, stat.num_children, stat.ephemeral_owner) == (0, 3, 0, 0)
    stat = await store.set("/a", b"two", version=0)
    assert stat.version == 1
    assert (await store.get("/a"))[0] == b"two"
    with pytest.raises(BadVersionError):
        await store.set("/a", b"three", version=0)
    stat = await store.set("/a", b"three")  # -1 matches any version
    assert stat.version == 2
    with pytest.raises(BadVersionError):
        await store.delete("/a", version=1)
    await store.delete("/a", version=2)
    with pytest.raises(NoNodeError):
        await store.get("/a")
    assert await store.exists("/a") is None
    with pytest.raises(NoNodeError):
        await store.set("/a", b"")
    with pytest.raises(NoNodeError):
        await store.delete("/a")


@scenario
async def test_create_errors_and_parents(backend: Backend) -> None:
    store = await backend.connect()
    await store.create("/a")
    with pytest.raises(NodeExistsError):
        await store.create("/a")
    with pytest.raises(NoNodeError):
        await store.create("/missing/child")
    assert await store.create("/x/y/z", b"leaf", make_parents=True) == "/x/y/z"
    data, stat = await store.get("/x/y")
    assert (data, stat.ephemeral_owner, stat.num_children) == (b"", 0, 1)
    assert await store.get_children("/x") == ["y"]
    for bad in ("relative", "/trailing/", "//double", "/a/./b", "/a/../b", ""):
        with pytest.raises(ValueError):
            await store.create(bad)


@scenario
async def test_delete_non_empty_and_recursive(backend: Backend) -> None:
    store = await backend.connect()
    await store.create("/t/a/b", make_parents=True)
    await store.create("/t/c")
    with pytest.raises(NotEmptyError):
        await store.delete("/t")
    with pytest.raises(BadVersionError):
        await store.delete("/t", version=7, recursive=True)
    assert await store.exists("/t/a/b") is not None  # nothing deleted
    await store.delete("/t", version=0, recursive=True)
    assert await store.exists("/t") is None
    assert await store.exists("/t/a/b") is None


@scenario
async def test_stat_zxids_and_cversion(backend: Backend) -> None:
    store = await backend.connect()
    await store.create("/p")
    _, created = await store.get("/p")
    await store.create("/p/c1")
    await store.create("/p/c2")
    await store.delete("/p/c1")
    changed = await store.set("/p", b"data")
    assert changed.czxid == created.czxid
    assert changed.mzxid > created.mzxid
    assert changed.mtime >= changed.ctime > 0
    assert changed.cversion == 3  # two creates and a delete
    assert changed.num_children == 1
    assert sorted(await store.get_children("/p")) == ["c2"]


@scenario
async def test_sequential_nodes(backend: Backend) -> None:
    store = await backend.connect()
    await store.create("/q")
    first = await store.create("/q/item-", b"1", sequential=True)
    second = await store.create("/q/item-", b"2", sequential=True)
    assert (first, second) == ("/q/item-0000000000", "/q/item-0000000001")
    await store.delete(second)
    third = await store.create("/q/", sequential=True, ephemeral=True)
    # The parent's counter only grows: a deleted node's number is not handed out again.
    # ZooKeeper counts the parent's child creations ("/q/0000000002"); the built-in
    # store uses its cversion, which counts the delete too ("/q/0000000003").
    assert re.fullmatch(r"/q/\d{10}", third)
    assert int(node_name(third)) > int(second[-10:])
    assert (await store.get(third))[1].ephemeral_owner == store.session_id


# -- sessions and ephemeral nodes ------------------------------------------------


@scenario
async def test_ephemeral_node_vanishes_when_session_closes(backend: Backend) -> None:
    owner = await backend.connect()
    observer = await backend.connect()
    assert owner.session_id != observer.session_id
    await owner.create("/brokers/0", b"me", ephemeral=True, make_parents=True)
    stat = await observer.exists("/brokers/0")
    assert stat is not None
    assert stat.ephemeral_owner == owner.session_id
    deleted = Recorder()
    await observer.get("/brokers/0", deleted)
    states = Recorder()
    owner.add_session_listener(states)
    await owner.close()
    await eventually(lambda: deleted.events)
    assert deleted.events == [WatchedEvent(EventType.DELETED, "/brokers/0")]
    assert states.events == []  # ending the session on purpose is not losing it
    assert await observer.exists("/brokers/0") is None
    assert await observer.exists("/brokers") is not None  # make_parents made it persistent
    with pytest.raises(SessionExpiredError):
        await owner.get("/brokers")


@scenario
async def test_ephemeral_node_vanishes_when_session_expires(backend: Backend) -> None:
    store = await backend.connect()
    states = Recorder()
    store.add_session_listener(states)
    old_session = store.session_id
    await store.create("/e", ephemeral=True)
    changed = Recorder()
    await store.get("/e", changed)
    await backend.expire(store)
    await eventually(lambda: SessionState.CONNECTED in states.events[1:])
    assert states.events[-2:] == [SessionState.LOST, SessionState.CONNECTED]
    assert store.session_id != old_session
    assert await store.exists("/e") is None
    await store.create("/e", ephemeral=True)  # usable again, under the new session
    await store.set("/e", b"x")
    await drain_events(store)
    assert changed.events == []  # watches do not survive the session


@scenario
async def test_ephemeral_nodes_cannot_have_children(backend: Backend) -> None:
    store = await backend.connect()
    await store.create("/e", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        await store.create("/e/child")
    with pytest.raises(NoChildrenForEphemeralsError):
        await store.create("/e/deeper/child", make_parents=True)


# -- watches ---------------------------------------------------------------------


@scenario
async def test_data_watch_fires_once_on_change(backend: Backend) -> None:
    writer = await backend.connect()
    reader = await backend.connect()
    await writer.create("/n", b"0")
    watch = Recorder()
    await reader.get("/n", watch)
    await reader.get("/n", watch)  # the same callable twice is one watch
    await writer.set("/n", b"1")
    await writer.set("/n", b"2")
    await drain_events(reader)
    assert watch.events == [WatchedEvent(EventType.CHANGED, "/n")]


@scenario
async def test_data_watch_fires_on_delete(backend: Backend) -> None:
    store = await backend.connect()
    await store.create("/n")
    watch = Recorder()
    assert await store.exists("/n", watch) is not None
    await store.delete("/n")
    await drain_events(store)
    assert watch.events == [WatchedEvent(EventType.DELETED, "/n")]


@scenario
async def test_exists_watch_fires_on_create(backend: Backend) -> None:
    store = await backend.connect()
    watch = Recorder()
    assert await store.exists("/later", watch) is None
    await store.create("/later")
    await store.delete("/later")
    await drain_events(store)
    assert watch.events == [WatchedEvent(EventType.CREATED, "/later")]


@scenario
async def test_child_watch_fires_once_on_child_create_and_delete(backend: Backend) -> None:
    store = await backend.connect()
    await store.create("/p")
    on_create = Recorder()
    assert await store.get_children("/p", on_create) == []
    await store.create("/p/a")
    await store.create("/p/b")
    await drain_events(store)
    assert on_create.events == [WatchedEvent(EventType.CHILD, "/p")]
    on_delete = Recorder()
    await store.get_children("/p", on_delete)
    await store.set("/p/a", b"data changes are not child changes")
    await store.set("/p", b"nor are the node's own")
    await store.delete("/p/a")
    await drain_events(store)
    assert on_delete.events == [WatchedEvent(EventType.CHILD, "/p")]


@scenario
async def test_child_watch_fires_when_node_is_deleted(backend: Backend) -> None:
    store = await backend.connect()
    await store.create("/p")
    watch = Recorder()
    await store.get_children("/p", watch)
    await store.delete("/p")
    await drain_events(store)
    assert watch.events == [WatchedEvent(EventType.DELETED, "/p")]


@scenario
async def test_failed_reads_leave_no_watch(backend: Backend) -> None:
    store = await backend.connect()
    watch = Recorder()
    with pytest.raises(NoNodeError):
        await store.get("/n", watch)
    with pytest.raises(NoNodeError):
        await store.get_children("/n", watch)
    await store.create("/n")
    await store.create("/n/c")
    await drain_events(store)
    assert watch.events == []


@scenario
async def test_watches_see_changes_from_other_sessions(backend: Backend) -> None:
    first = await backend.connect()
    second = await backend.connect()
    await first.create("/shared")
    children = Recorder()
    await first.get_children("/shared", children)
    await second.create("/shared/from-second", ephemeral=True)
    await eventually(lambda: children.events)
    assert children.events == [WatchedEvent(EventType.CHILD, "/shared")]


# -- persistence -----------------------------------------------------------------


@scenario
async def test_persistent_nodes_survive_restart_and_ephemerals_do_not(backend: Backend) -> None:
    store = await backend.connect()
    await store.create("/keep/a", b"alpha", make_parents=True)
    await store.set("/keep/a", b"beta")
    await store.create("/keep/gone")
    await store.delete("/keep/gone")
    await store.create("/keep/eph", ephemeral=True)
    before = await store.get("/keep/a")
    await backend.restart()

    store = await backend.connect()
    assert await store.get("/keep/a") == before
    assert await store.get_children("/keep") == ["a"]
    # The parent's cversion persisted: 3 child creates and 2 deletes (one at session end),
    # and so did its sequence counter (at least 3: see test_sequential_nodes).
    assert (await store.exists("/keep")).cversion == 5
    assert int(node_name(await store.create("/keep/s-", sequential=True))[2:]) >= 3
    await store.create("/after")
    assert (await store.get("/after"))[1].czxid > before[1].mzxid  # zxids never go back


@scenario
async def test_closed_store_refuses_calls(backend: Backend) -> None:
    store = await backend.connect()
    await store.close()
    with pytest.raises(SessionExpiredError):
        await store.create("/n")
    with pytest.raises(SessionExpiredError):
        await store.exists("/n")
