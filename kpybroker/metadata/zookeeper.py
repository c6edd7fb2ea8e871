"""The metadata store's ZooKeeper backend: a kazoo client behind ``MetadataStore``.

A broker selects it with ``zookeeper.connect`` (``host:port[,host:port...][/chroot]``).
As Kafka did, it creates a missing chroot at start, through a short-lived
session without the chroot (a chrooted session cannot create its own root).

Threads and the event loop
--------------------------
kazoo runs one connection thread per client, which reads replies and watch
notifications in the order the server sent them. Its default handler then hands
reply callbacks and watch callbacks to two different worker threads, which loses
that order. This backend installs ``_InlineHandler`` instead: kazoo's callbacks
run in the connection thread itself, and all they do is queue the outcome for
the event loop (``_hand_over``, one ``call_soon_threadsafe`` per burst). The
loop therefore sees results, watch events and session states in exactly the
server's order. It never waits for kazoo: every request is one of kazoo's
``*_async`` calls, at most ``MAX_IN_FLIGHT`` of them at a time, and what blocks
(starting and stopping kazoo's threads, short side sessions) runs in a worker
thread.

Watches across connection loss
------------------------------
kazoo forgets every watch when the connection drops: unlike ZooKeeper's Java
client it does not send SetWatches after reconnecting, although the session
(and, by the interface's promise, its watches) lives on. So the store keeps its
own table of armed watches, each with the zxid of the state it was armed on, and
gives kazoo a single watcher that only tells which path changed. When the
session comes back over a new connection, the store reads every watched node
again, which arms the server's watch anew, and fires the watches whose node
changed while the client was away, as SetWatches would have. Replies and events
that arrive before those reads are answered are held back until then, so that
no caller sees a change before the event of a watch it had on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import select
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import kazoo.exceptions
from kazoo.client import KazooClient
from kazoo.handlers.threading import AsyncResult, KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.states import Callback, KazooState, ZnodeStat
from kazoo.protocol.states import EventType as KazooEventType
from kazoo.protocol.states import WatchedEvent as KazooWatchedEvent
from kazoo.retry import KazooRetry

from kpybroker.metadata.store import (
    ANY_VERSION,
    BadVersionError,
    ConnectionLossError,
    EventType,
    MetadataStore,
    MetadataStoreError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NodeStat,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    SessionListener,
    SessionState,
    WatchCallback,
    WatchedEvent,
    join_path,
    parent_path,
    validate_path,
)

__all__ = ["ZooKeeperMetadataStore"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Longest pause between reconnection attempts. kazoo's default backoff grows to
#: an hour, which would leave a broker disconnected long after ZooKeeper is back.
RECONNECT_MAX_DELAY = 1.0

#: Most requests handed to kazoo and not answered yet. kazoo wakes its connection
#: thread with one byte per request through a socket pair that holds about 270;
#: past that, handing it a request would block the event loop until it catches up.
MAX_IN_FLIGHT = 128

_ERRORS: dict[type[Exception], type[MetadataStoreError]] = {
    kazoo.exceptions.NoNodeError: NoNodeError,
    kazoo.exceptions.NodeExistsError: NodeExistsError,
    kazoo.exceptions.BadVersionError: BadVersionError,
    kazoo.exceptions.NotEmptyError: NotEmptyError,
    kazoo.exceptions.NoChildrenForEphemeralsError: NoChildrenForEphemeralsError,
    # kazoo's ConnectionClosedError (a call on a stopped client) is one of these.
    kazoo.exceptions.SessionExpiredError: SessionExpiredError,
    kazoo.exceptions.ConnectionLoss: ConnectionLossError,
    kazoo.exceptions.OperationTimeoutError: ConnectionLossError,
    KazooTimeoutError: ConnectionLossError,
}

_SESSION_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}

#: What fires data watches (set by ``get`` and ``exists``) and child watches.
_DATA_EVENTS = frozenset({EventType.CREATED, EventType.DELETED, EventType.CHANGED})
_CHILD_EVENTS = frozenset({EventType.CHILD, EventType.DELETED})

#: kazoo's NONE events are absent: kazoo sends them to its watchers when it drops
#: them on a connection loss, which this store handles itself (module docstring).
_EVENT_TYPES = {
    KazooEventType.CREATED: EventType.CREATED,
    KazooEventType.DELETED: EventType.DELETED,
    KazooEventType.CHANGED: EventType.CHANGED,
    KazooEventType.CHILD: EventType.CHILD,
}


def _translate(exc: BaseException, path: str) -> MetadataStoreError:
    """The interface's error for a kazoo error (the base class for the rare others)."""
    for kind in type(exc).__mro__:
        if kind in _ERRORS:
            error = _ERRORS[kind](path)
            break
    else:
        error = MetadataStoreError(f"{path}: {exc!r}")
    error.__cause__ = exc
    return error


def _node_stat(stat: ZnodeStat) -> NodeStat:
    return NodeStat(
        czxid=stat.czxid,
        mzxid=stat.mzxid,
        ctime=stat.ctime,
        mtime=stat.mtime,
        version=stat.version,
        cversion=stat.cversion,
        ephemeral_owner=stat.ephemeralOwner,
        data_length=stat.dataLength,
        num_children=stat.numChildren,
    )


def _mzxid(stat: ZnodeStat | None) -> int | None:
    """What a data watch is armed on: the node's last change, None while it is missing."""
    return None if stat is None else stat.mzxid


def _invoke(callback: Callable[[_T], None], argument: _T) -> None:
    """Run a user callback; its failure is logged and must not break the store."""
    try:
        callback(argument)
    except Exception:
        log.exception("metadata store callback %r failed", callback)


class _InlineAsyncResult(AsyncResult):
    """kazoo's result, whose callbacks run in the thread that completes it."""

    def _do_callbacks(self) -> None:
        for callback in self._callbacks:
            callback(self)


class _InlineHandler(SequentialThreadingHandler):
    """Runs kazoo's callbacks at once in its connection thread, in the order it reads
    them (see the module docstring). They must only hand over to the event loop:
    one that sent a request could block the thread (see ``_make_path``)."""

    def async_result(self) -> _InlineAsyncResult:
        return _InlineAsyncResult(self)

    def dispatch_callback(self, callback: Callback) -> None:
        callback.func(*callback.args)

    def select(
        self, rlist: list[Any], wlist: list[Any], xlist: list[Any], timeout: float | None = None
    ) -> tuple[list[Any], list[Any], list[Any]]:
        """select(2), done with poll(2). kazoo's own builds, fills and closes an epoll
        object on each of the several calls it makes per request, which costs it a
        third of its time; poll copes with any descriptor number just as well."""
        poller = select.poll()
        for objects, mask in ((rlist, select.POLLIN), (wlist, select.POLLOUT)):
            for obj in objects:
                poller.register(obj, mask)
        ready = dict(poller.poll(None if timeout is None else timeout * 1000))
        # A closed or failed socket is readable, as with select(2): recv then says why.
        closed = select.POLLERR | select.POLLHUP | select.POLLNVAL
        return (
            [obj for obj in rlist if ready.get(obj.fileno(), 0) & (select.POLLIN | closed)],
            [obj for obj in wlist if ready.get(obj.fileno(), 0) & (select.POLLOUT | closed)],
            [],
        )


@contextlib.contextmanager
def _side_session(
    hosts: str, timeout: float, client_id: tuple[int, bytes] | None = None
) -> Iterator[KazooClient]:
    """A short-lived, blocking kazoo session without chroot (for a worker thread)."""
    client = KazooClient(hosts=hosts, timeout=timeout, client_id=client_id)
    client.start(timeout)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _create_path(hosts: str, path: str, timeout: float) -> None:
    with _side_session(hosts, timeout) as client:
        client.ensure_path(path)


def _end_session(hosts: str, client_id: tuple[int, bytes], timeout: float) -> None:
    """End another client's session: attach to it with its id and password, then
    close it. The classic way to expire a session on purpose (kazoo's and
    ZooKeeper's own tests do it): the server closes the owner's connection when
    the session moves, and the owner learns on reconnecting that it expired."""
    with _side_session(hosts, timeout, client_id):
        pass


@dataclass(slots=True)
class _Watch:
    """The callbacks armed on one path, and the state they were armed on: the
    node's ``mzxid`` (None while it is missing) for data watches, its ``pzxid``
    for child watches."""

    callbacks: set[WatchCallback]
    armed_on: int | None


class ZooKeeperMetadataStore(MetadataStore):
    """One ZooKeeper session, through kazoo; see the module docstring.

    ``connect`` is ZooKeeper's connection string. ``session_timeout_ms`` is
    proposed to the server, which may bound it; ``start`` gives up with
    ``ConnectionLossError`` after ``connection_timeout_ms`` (default: the session
    timeout). A call made while the connection is down waits for it to come back
    (or for the session to expire), as kazoo queues it.
    """

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        hosts, _, chroot = connect.partition("/")
        if not hosts:
            raise ValueError(f"no ZooKeeper host in {connect!r}")
        self.chroot = f"/{chroot}" if chroot else ""  # "host:port/" means no chroot
        if self.chroot:
            validate_path(self.chroot)
        self.connect = connect
        self._hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._session_id = 0
        self._listeners: list[SessionListener] = []
        self._new_session_waiters: list[asyncio.Future[None]] = []
        self._data_watches: dict[str, _Watch] = {}
        self._child_watches: dict[str, _Watch] = {}
        self._inbox: deque[tuple[Callable[..., None], tuple[Any, ...], bool]] = deque()
        """Calls handed over to the loop by kazoo's thread, in order (``_hand_over``)."""
        self._wakeup_pending = False
        self._held: deque[tuple[Callable[..., None], tuple[Any, ...]]] | None = None
        """Replies and events held back while watches are re-armed, or None."""
        self._rearm_round = 0
        self._rearm_left = 0
        self._in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)

    @property
    def session_id(self) -> int:
        return self._session_id

    def add_session_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        self._listeners.remove(listener)

    # -- session -----------------------------------------------------------------

    async def start(self) -> None:
        if self._client is not None:
            raise RuntimeError("session already started")
        self._loop = asyncio.get_running_loop()
        timeout = self.connection_timeout_ms / 1000
        client = self._client = KazooClient(
            hosts=self._hosts + self.chroot,
            timeout=self.session_timeout_ms / 1000,
            handler=_InlineHandler(),
            connection_retry=KazooRetry(max_tries=-1, max_delay=RECONNECT_MAX_DELAY),
        )
        client.add_listener(self._on_state)
        try:
            await self._new_session(client.start_async)
            if self.chroot and await self.exists("/") is None:
                await self._blocking(self.chroot, _create_path, self._hosts, self.chroot, timeout)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        client = self._client
        if client is None or self._closed:
            return
        self._closed = True
        # Ending the session on purpose is no state change to report (as with the
        # built-in store); kazoo would report LOST.
        client.remove_listener(self._on_state)
        await asyncio.to_thread(client.stop)
        client.close()
        self._release()  # every reply kazoo had is on the loop by now
        self._session_id = 0
        self._data_watches.clear()
        self._child_watches.clear()

    async def expire_session(self) -> None:
        """Expire the session as a ZooKeeper server does after a timeout, then reconnect.

        Fault injection for tests: listeners see ``SUSPENDED``, ``LOST`` and then
        ``CONNECTED`` with a new session id, ephemeral nodes are deleted and
        watches dropped. Returns once the new session is reported.
        """
        client_id = self._live().client_id
        if client_id is None:
            raise ConnectionLossError("not connected to ZooKeeper")
        await self._new_session(
            _end_session, self._hosts, client_id, self.connection_timeout_ms / 1000
        )

    async def _new_session(self, begin: Callable[..., object], *args: object) -> None:
        """Run ``begin(*args)`` in a worker thread; return once a new session is reported."""
        assert self._loop is not None
        waiter = self._loop.create_future()
        self._new_session_waiters.append(waiter)
        try:
            async with asyncio.timeout(self.connection_timeout_ms / 1000):
                await self._blocking(self.connect, begin, *args)
                await waiter
        except TimeoutError:
            raise ConnectionLossError(
                f"no ZooKeeper session at {self.connect} within {self.connection_timeout_ms} ms"
            ) from None
        finally:
            waiter.cancel()

    @staticmethod
    async def _blocking(path: str, function: Callable[..., _T], *args: object) -> _T:
        """Run a blocking kazoo call in a worker thread, with the interface's errors."""
        try:
            return await asyncio.to_thread(function, *args)
        except (kazoo.exceptions.KazooException, KazooTimeoutError) as exc:
            raise _translate(exc, path) from exc

    def _live(self) -> KazooClient:
        if self._client is None or self._closed:
            raise SessionExpiredError("the session is not open")
        return self._client

    def _on_state(self, state: str) -> None:
        """kazoo's session listener (connection thread)."""
        client_id = self._client.client_id if self._client is not None else None
        session_id = client_id[0] if state == KazooState.CONNECTED and client_id else 0
        self._post_unheld(self._session_changed, _SESSION_STATES[state], session_id)

    def _session_changed(self, state: SessionState, session_id: int) -> None:
        if self._closed:
            return
        if state is SessionState.CONNECTED:
            if session_id == self._session_id:
                self._rearm()  # the same session, over a new connection
            else:
                self._session_id = session_id
                for waiter in self._new_session_waiters:
                    if not waiter.done():
                        waiter.set_result(None)
                self._new_session_waiters.clear()
        elif state is SessionState.LOST:
            self._rearm_round += 1
            self._release()  # what was held happened in the lost session: before its end
            self._session_id = 0
            self._data_watches.clear()
            self._child_watches.clear()
        for listener in list(self._listeners):
            _invoke(listener, state)

    # -- handing over to the event loop --------------------------------------------

    def _post(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the loop, in order, unless replies are held back."""
        self._hand_over(function, args, True)

    def _post_unheld(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the loop, in order, even while replies are held back."""
        self._hand_over(function, args, False)

    def _hand_over(
        self, function: Callable[..., None], args: tuple[Any, ...], holdable: bool
    ) -> None:
        """Queue a call for the loop (from any thread). The loop is woken only when it is
        not due to look already: a burst of replies costs one wake-up, not one each."""
        self._inbox.append((function, args, holdable))
        if not self._wakeup_pending:
            self._wakeup_pending = True
            assert self._loop is not None
            # A loop closed under a store that was never closed has nobody left to tell.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._drain_inbox)

    def _drain_inbox(self) -> None:
        self._wakeup_pending = False  # before reading: a call queued from now on wakes us
        while self._inbox:
            function, args, holdable = self._inbox.popleft()
            if holdable and self._held is not None:
                self._held.append((function, args))
            else:
                function(*args)

    def _release(self) -> None:
        held, self._held = self._held, None
        while held:
            function, args = held.popleft()
            function(*args)

    async def _call(
        self,
        path: str,
        request: Callable[[KazooClient], AsyncResult],
        on_success: Callable[[Any], None] | None = None,
    ) -> Any:
        """Send a request and return its reply's value, raising the interface's errors.

        ``on_success`` runs with the value when the reply reaches the loop, before
        anything that followed it: that is where a watch is armed.
        """
        client = self._live()
        assert self._loop is not None
        async with self._in_flight:
            future: asyncio.Future[Any] = self._loop.create_future()
            request(client).rawlink(
                functools.partial(self._post, self._settle, future, path, on_success)
            )
            return await future

    @staticmethod
    def _settle(
        future: asyncio.Future[Any],
        path: str,
        on_success: Callable[[Any], None] | None,
        result: AsyncResult,
    ) -> None:
        if result.successful():
            if on_success is not None:
                on_success(result.value)
            if not future.done():
                future.set_result(result.value)
        elif not future.done():
            future.set_exception(_translate(result.exception, path))

    # -- watches -----------------------------------------------------------------

    def _on_watch(self, event: KazooWatchedEvent) -> None:
        """The one watcher this store gives kazoo (connection thread)."""
        event_type = _EVENT_TYPES.get(event.type)
        if event_type is not None:
            self._post(self._trigger, WatchedEvent(event_type, event.path))

    def _watcher(self, watch: WatchCallback | None) -> Callable[[KazooWatchedEvent], None] | None:
        return None if watch is None else self._on_watch

    def _arming(
        self,
        table: dict[str, _Watch],
        path: str,
        watch: WatchCallback | None,
        armed_on: Callable[[Any], int | None],
    ) -> Callable[[Any], None] | None:
        """The ``on_success`` of a read that arms ``watch`` on the state it returns."""
        if watch is None:
            return None

        def arm(value: Any) -> None:
            entry = table.get(path)
            if entry is None:
                table[path] = _Watch({watch}, armed_on(value))
            else:
                entry.callbacks.add(watch)
                entry.armed_on = armed_on(value)

        return arm

    def _trigger(self, event: WatchedEvent) -> None:
        """Fire (and so disarm) the watches ``event`` concerns."""
        callbacks: set[WatchCallback] = set()
        for table, types in (
            (self._data_watches, _DATA_EVENTS),
            (self._child_watches, _CHILD_EVENTS),
        ):
            if event.type in types and (entry := table.pop(event.path, None)):
                callbacks |= entry.callbacks
        for callback in callbacks:
            _invoke(callback, event)

    def _rearm(self) -> None:
        """Read every watched node again over the new connection (see the module docstring).

        Sent at once, without waiting for ``MAX_IN_FLIGHT``: they must go out
        before any later call.
        """
        self._rearm_round += 1
        self._rearm_left = len(self._data_watches) + len(self._child_watches)
        if not self._rearm_left:
            self._release()
            return
        if self._held is None:
            self._held = deque()
        client = self._live()
        for path in self._data_watches:
            client.exists_async(path, self._on_watch).rawlink(
                functools.partial(self._post_unheld, self._rearmed, self._rearm_round, path, False)
            )
        for path in self._child_watches:
            client.get_children_async(path, self._on_watch, include_data=True).rawlink(
                functools.partial(self._post_unheld, self._rearmed, self._rearm_round, path, True)
            )

    def _rearmed(self, round_: int, path: str, children: bool, result: AsyncResult) -> None:
        """One re-read's reply: fire the watch if its node changed meanwhile.

        A reply lost with the connection leaves the round unfinished, and the
        next connection starts another.
        """
        if round_ != self._rearm_round:
            return
        gone = isinstance(result.exception, kazoo.exceptions.NoNodeError)
        if not (result.successful() or gone):
            return
        entry = (self._child_watches if children else self._data_watches).get(path)
        if entry is not None:
            if children:
                now = None if gone else result.value[1].pzxid
                changed = EventType.DELETED if gone else EventType.CHILD
            else:
                now = _mzxid(result.value)
                if now is None:
                    changed = EventType.DELETED
                else:
                    changed = EventType.CREATED if entry.armed_on is None else EventType.CHANGED
            if now != entry.armed_on:
                self._trigger(WatchedEvent(changed, path))
        self._rearm_left -= 1
        if not self._rearm_left:
            self._release()

    # -- operations --------------------------------------------------------------

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        # A sequential path may end in "/" (the name is then just the suffix).
        validate_path(path + "0" if sequential else path)
        if path == "/":
            raise NodeExistsError(path)
        while True:
            try:
                return await self._call(
                    path,
                    lambda client: client.create_async(
                        path, bytes(data), ephemeral=ephemeral, sequence=sequential
                    ),
                )
            except NoNodeError:
                if not make_parents:
                    raise
                await self._make_path(parent_path(path))

    async def _make_path(self, path: str) -> None:
        """Create ``path`` and its missing ancestors as empty persistent nodes.

        Not kazoo's ``makepath``: that one sends requests from kazoo's callbacks,
        which here run in the connection thread, and a connection thread blocked on
        its own full wake-up pipe (``MAX_IN_FLIGHT``) never drains it.
        """
        while True:
            try:
                await self._call(path, lambda client: client.create_async(path))
                return
            except NodeExistsError:
                return
            except NoNodeError:
                await self._make_path(parent_path(path))

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, NodeStat]:
        validate_path(path)
        data, stat = await self._call(
            path,
            lambda client: client.get_async(path, self._watcher(watch)),
            self._arming(self._data_watches, path, watch, lambda value: value[1].mzxid),
        )
        return data, _node_stat(stat)

    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> NodeStat:
        validate_path(path)
        stat = await self._call(path, lambda client: client.set_async(path, bytes(data), version))
        return _node_stat(stat)

    async def delete(self, path: str, version: int = ANY_VERSION, recursive: bool = False) -> None:
        validate_path(path)
        if path == "/":
            raise ValueError("the root node cannot be deleted")
        if recursive:
            await self._delete_tree(path, version)
        else:
            await self._call(path, lambda client: client.delete_async(path, version))

    async def _delete_tree(self, path: str, version: int) -> None:
        """Delete the node, after its descendants if it has any. Trying first spares
        listing the leaves, most of any tree; ZooKeeper checks the version first."""
        while True:
            try:
                await self._call(path, lambda client: client.delete_async(path, version))
                return
            except NotEmptyError:
                children = await self.get_children(path)
                await asyncio.gather(
                    *(self._delete_descendant(join_path(path, c)) for c in children)
                )

    async def _delete_descendant(self, path: str) -> None:
        with contextlib.suppress(NoNodeError):  # someone else deleted it: fine
            await self._delete_tree(path, ANY_VERSION)

    async def exists(self, path: str, watch: WatchCallback | None = None) -> NodeStat | None:
        validate_path(path)
        stat = await self._call(
            path,
            lambda client: client.exists_async(path, self._watcher(watch)),
            self._arming(self._data_watches, path, watch, _mzxid),
        )
        return None if stat is None else _node_stat(stat)

    async def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        validate_path(path)
        # With the parent's stat, whose pzxid a child watch is armed on.
        children, _ = await self._call(
            path,
            lambda client: client.get_children_async(path, self._watcher(watch), include_data=True),
            self._arming(self._child_watches, path, watch, lambda value: value[1].pzxid),
        )
        return children
