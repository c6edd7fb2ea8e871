"""The embedded metadata store: an in-memory tree persisted in a data directory.

``BuiltinEnsemble`` plays the ZooKeeper server (one tree, one data directory)
and each ``BuiltinMetadataStore`` is one client session on it. A broker uses
``BuiltinMetadataStore(data_dir)``, which owns a private ensemble; several
sessions on one ensemble stand in for several brokers in tests.

Persistence: group commit of whole snapshots
---------------------------------------------
A mutating call applies its change to the in-memory tree at once (so that later
calls validate against it), stamps it with the next zxid, and then waits until
a snapshot that includes that zxid is durable. One flusher task writes the
snapshots. Each time it wakes up it encodes the tree as it is at that moment,
which covers every change made since its previous write, and changes made while
a write is in flight are covered by the next one. The number of writes is thus
bounded by how long a write takes, not by the number of calls: 10,000 creates
issued together (``asyncio.gather``) are applied in one event-loop turn and
share one snapshot write.

Callers never observe a change that is not durable yet: a read waits for the
zxid it read at (no wait at all when nothing is pending), and watch events are
delivered only once the change that fired them is durable, after the results of
the calls waiting for that write. A crash can therefore lose only changes whose
calls had not returned and that nobody has seen, as with ZooKeeper.

Encoding is cheap enough to do on the event loop: a snapshot is the
concatenation of per-node records, and each node keeps its encoded record until
it changes, so building a snapshot is one ``join`` of cached bytes; the
checksum and the file I/O run in a worker thread.

A snapshot is written to ``metadata.snapshot.tmp``, fsynced, renamed over
``metadata.snapshot``, and the directory is fsynced. A temp file found at start
comes from a write that was never renamed; no call that depended on it
returned, so it is deleted. Ephemeral nodes are never written (and vanish with
their sessions anyway), but the zxid counter and their parents' ``cversion``
are, so zxids and sequence numbers never repeat after a restart.

A failed write (disk full, I/O error) is fatal for the ensemble: memory is
ahead of the disk and cannot be rolled back, so the waiting calls and every
later call raise ``ConnectionLossError`` ("outcome unknown"), as they would
against a ZooKeeper server that died.

File format: header ``>8sqII`` (magic, zxid, record count, CRC-32 of the body),
then one record per persistent node, parents before children: ``>IIqqqqii``
(path length, data length, czxid, mzxid, ctime, mtime, version, cversion), the
UTF-8 path, the data.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import struct
import sys
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from kpybroker.metadata.store import (
    ANY_VERSION,
    BadVersionError,
    ConnectionLossError,
    EventType,
    MetadataStore,
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
    node_name,
    parent_path,
    validate_path,
)

__all__ = [
    "SNAPSHOT_FILE",
    "TEMP_FILE",
    "BuiltinEnsemble",
    "BuiltinMetadataStore",
    "SnapshotCorruptError",
]

log = logging.getLogger(__name__)

SNAPSHOT_FILE = "metadata.snapshot"
TEMP_FILE = SNAPSHOT_FILE + ".tmp"

_MAGIC = b"KPYMETA\x01"
_HEADER = struct.Struct(">8sqII")
_RECORD = struct.Struct(">IIqqqqii")

_T = TypeVar("_T")


class SnapshotCorruptError(Exception):
    """The snapshot fails its checks.

    Refusing to start beats starting empty: an empty tree would silently drop
    every topic of the cluster.
    """


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _invoke(callback: Callable[[_T], None], argument: _T) -> None:
    """Run a user callback; its failure is logged and must not break the store."""
    try:
        callback(argument)
    except Exception:
        log.exception("metadata store callback %r failed", callback)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: Up to this many children are kept in a tuple, more in a set. The tree holds two nodes
#: per partition, one with a single child ("state") and one with none, and a set is 216
#: bytes even when empty; a node with many children (a topic's partitions) needs the set.
_FEW_CHILDREN = 8


@dataclass(slots=True, eq=False)
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int = 0
    cversion: int = 0
    owner: int = 0
    children: tuple[str, ...] | set[str] = ()
    record: bytes | None = None
    """This node's snapshot record, kept until the node changes (see module doc)."""

    def stat(self) -> NodeStat:
        return NodeStat(
            czxid=self.czxid,
            mzxid=self.mzxid,
            ctime=self.ctime,
            mtime=self.mtime,
            version=self.version,
            cversion=self.cversion,
            ephemeral_owner=self.owner,
            data_length=len(self.data),
            num_children=len(self.children),
        )

    def encode(self, path: str) -> bytes:
        if self.record is None:
            raw_path = path.encode()
            self.record = (
                _RECORD.pack(
                    len(raw_path),
                    len(self.data),
                    self.czxid,
                    self.mzxid,
                    self.ctime,
                    self.mtime,
                    self.version,
                    self.cversion,
                )
                + raw_path
                + self.data
            )
        return self.record

    def add_child(self, name: str) -> None:
        # Interned: the same names recur under every parent ("state" under each of tens of
        # thousands of partitions, partition numbers under every topic).
        name = sys.intern(name)
        children = self.children
        if isinstance(children, set):
            children.add(name)
        elif name not in children:
            grown = (*children, name)
            self.children = grown if len(grown) <= _FEW_CHILDREN else set(grown)

    def discard_child(self, name: str) -> None:
        children = self.children
        if isinstance(children, set):
            children.discard(name)
        else:
            self.children = tuple(child for child in children if child != name)

    def touch(self) -> None:
        """Mark the node changed so that the next snapshot re-encodes it."""
        self.record = None


def _check_version(path: str, node: _Node, version: int) -> None:
    if version not in (ANY_VERSION, node.version):
        raise BadVersionError(f"{path}: expected version {version}, found {node.version}")


def _decode_snapshot(raw: bytes) -> tuple[int, dict[str, _Node]]:
    """Parse a snapshot into (zxid, nodes in creation order)."""
    if len(raw) < _HEADER.size:
        raise SnapshotCorruptError("snapshot shorter than its header")
    magic, zxid, count, crc = _HEADER.unpack_from(raw)
    if magic != _MAGIC:
        raise SnapshotCorruptError(f"bad magic {magic!r}")
    body = memoryview(raw)[_HEADER.size :]
    if zlib.crc32(body) != crc:
        raise SnapshotCorruptError("checksum mismatch")
    nodes: dict[str, _Node] = {}
    pos = 0
    try:
        for _ in range(count):
            start = pos
            path_len, data_len, czxid, mzxid, ctime, mtime, version, cversion = _RECORD.unpack_from(
                body, pos
            )
            pos += _RECORD.size
            path = str(body[pos : pos + path_len], "utf-8")
            pos += path_len
            data = bytes(body[pos : pos + data_len])
            pos += data_len
            node = _Node(data, czxid, mzxid, ctime, mtime, version, cversion)
            node.record = bytes(body[start:pos])
            if path != "/":
                parent = nodes.get(parent_path(path))
                if parent is None:
                    raise SnapshotCorruptError(f"{path} precedes its parent")
                parent.add_child(node_name(path))
            nodes[path] = node
    except (struct.error, UnicodeDecodeError) as exc:
        raise SnapshotCorruptError(f"truncated or garbled record at byte {pos}") from exc
    if pos != len(body) or "/" not in nodes:
        raise SnapshotCorruptError("record count does not match the body")
    return zxid, nodes


class BuiltinEnsemble:
    """The embedded "ZooKeeper server": one tree, persisted in ``data_dir``.

    All sessions of one ensemble must run on the event loop that started it.
    An ensemble is started once and stopped once; restart means a new instance.
    """

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)
        self._nodes: dict[str, _Node] = {}
        self._zxid = 0
        self._durable_zxid = 0
        self._sessions: dict[int, BuiltinMetadataStore] = {}
        self._ephemerals: dict[int, set[str]] = {}
        self._session_ids = itertools.count(1)
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._wake = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._stopping = False
        self._failure: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._flusher is not None and not self._stopping

    async def start(self) -> None:
        """Load the last snapshot (or start empty) and start the flusher."""
        if self._flusher is not None:
            raise RuntimeError("a BuiltinEnsemble is started only once")
        self._zxid, self._nodes = await asyncio.to_thread(self._load)
        self._durable_zxid = self._zxid
        self._flusher = asyncio.create_task(self._flush_loop(), name="metadata-flusher")

    async def stop(self) -> None:
        """End the remaining sessions, write what is pending, stop the flusher."""
        if not self.running:
            return
        for session in list(self._sessions.values()):
            session._terminate(SessionState.LOST)
        self._stopping = True
        self._wake.set()
        assert self._flusher is not None
        await self._flusher

    # -- persistence -----------------------------------------------------------

    def _load(self) -> tuple[int, dict[str, _Node]]:
        if not self.data_dir.exists():
            self.data_dir.mkdir(parents=True)
            _fsync_dir(self.data_dir.parent)
        (self.data_dir / TEMP_FILE).unlink(missing_ok=True)
        try:
            raw = (self.data_dir / SNAPSHOT_FILE).read_bytes()
        except FileNotFoundError:
            return 0, {"/": _Node(b"", 0, 0, 0, 0)}
        return _decode_snapshot(raw)

    def _write_snapshot(self, zxid: int, count: int, body: bytes) -> None:
        """Atomically replace the snapshot (runs in a worker thread)."""
        temp = self.data_dir / TEMP_FILE
        with open(temp, "wb") as file:
            file.write(_HEADER.pack(_MAGIC, zxid, count, zlib.crc32(body)))
            file.write(body)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, self.data_dir / SNAPSHOT_FILE)
        _fsync_dir(self.data_dir)

    async def _flush_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._zxid > self._durable_zxid:
                zxid = self._zxid
                records = [
                    node.encode(path) for path, node in self._nodes.items() if not node.owner
                ]
                try:
                    await asyncio.to_thread(
                        self._write_snapshot, zxid, len(records), b"".join(records)
                    )
                except Exception as exc:
                    self._fail(exc)
                    return
                self._durable_zxid = zxid
                self._release(zxid)
            if self._stopping:
                return

    def _release(self, zxid: int) -> None:
        """Complete the calls and then deliver the watch events covered by ``zxid``."""
        while self._waiters and self._waiters[0][0] <= zxid:
            _, waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        for session in self._sessions.values():
            session._release(zxid)

    def _fail(self, exc: BaseException) -> None:
        log.critical("cannot persist metadata in %s; the store is now unusable", self.data_dir)
        self._failure = exc
        while self._waiters:
            _, waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(self._loss())

    def _loss(self) -> ConnectionLossError:
        error = ConnectionLossError(f"metadata store in {self.data_dir} failed to persist")
        error.__cause__ = self._failure
        return error

    async def _sync(self) -> None:
        """Wait until every change applied so far is durable."""
        zxid = self._zxid
        if zxid <= self._durable_zxid:
            return
        if self._failure is not None:
            raise self._loss()
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((zxid, waiter))
        await waiter

    # -- sessions ----------------------------------------------------------------

    def _open_session(self, session: BuiltinMetadataStore) -> int:
        if not self.running:
            raise SessionExpiredError("the metadata ensemble is not running")
        session_id = next(self._session_ids)
        self._sessions[session_id] = session
        self._ephemerals[session_id] = set()
        return session_id

    def _close_session(self, session_id: int) -> None:
        """Forget the session and delete its ephemeral nodes."""
        del self._sessions[session_id]
        for path in list(self._ephemerals[session_id]):
            self._remove(path)
        del self._ephemerals[session_id]

    def _check(self) -> None:
        if self._failure is not None:
            raise self._loss()

    # -- the tree ----------------------------------------------------------------

    def _next_zxid(self) -> int:
        self._zxid += 1
        self._wake.set()
        return self._zxid

    def _emit(self, event_type: EventType, path: str) -> None:
        event = WatchedEvent(event_type, path)
        for session in self._sessions.values():
            session._trigger(self._zxid, event)

    def _node(self, path: str) -> _Node:
        validate_path(path)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    def _create(
        self,
        session_id: int,
        path: str,
        data: bytes,
        ephemeral: bool,
        sequential: bool,
        make_parents: bool,
    ) -> str:
        # A sequential path may end in "/" (the name is then just the suffix).
        validate_path(path + "0" if sequential else path)
        if path == "/":
            raise NodeExistsError(path)
        parent_name = parent_path(path)
        parent = self._nodes.get(parent_name)
        if parent is None:
            if not make_parents:
                raise NoNodeError(f"parent of {path} does not exist")
            parent = self._make_ancestors(parent_name)
        if sequential:
            path = f"{path}{parent.cversion:010d}"
        if path in self._nodes:
            raise NodeExistsError(path)
        self._add(path, parent, data, session_id if ephemeral else 0)
        return path

    def _make_ancestors(self, path: str) -> _Node:
        missing = []
        while path not in self._nodes:
            missing.append(path)
            path = parent_path(path)
        for ancestor in reversed(missing):
            self._add(ancestor, self._nodes[parent_path(ancestor)], b"", 0)
        return self._nodes[missing[0]]

    def _add(self, path: str, parent: _Node, data: bytes, owner: int) -> None:
        if parent.owner:
            raise NoChildrenForEphemeralsError(path)
        zxid = self._next_zxid()
        now = _now_ms()
        self._nodes[path] = _Node(data, zxid, zxid, now, now, owner=owner)
        parent.add_child(node_name(path))
        parent.cversion += 1
        parent.touch()
        if owner:
            self._ephemerals[owner].add(path)
        self._emit(EventType.CREATED, path)
        self._emit(EventType.CHILD, parent_path(path))

    def _set(self, path: str, data: bytes, version: int) -> NodeStat:
        node = self._node(path)
        _check_version(path, node, version)
        node.data = data
        node.version += 1
        node.mzxid = self._next_zxid()
        node.mtime = _now_ms()
        node.touch()
        self._emit(EventType.CHANGED, path)
        return node.stat()

    def _delete(self, path: str, version: int, recursive: bool) -> None:
        node = self._node(path)
        if path == "/":
            raise ValueError("the root node cannot be deleted")
        _check_version(path, node, version)
        if node.children and not recursive:
            raise NotEmptyError(path)
        subtree = [path]
        for parent in subtree:  # grows while iterating: breadth-first, parents first
            subtree.extend(join_path(parent, name) for name in self._nodes[parent].children)
        for doomed in reversed(subtree):
            self._remove(doomed)

    def _remove(self, path: str) -> None:
        node = self._nodes.pop(path)
        self._next_zxid()
        parent_name = parent_path(path)
        parent = self._nodes[parent_name]
        parent.discard_child(node_name(path))
        parent.cversion += 1
        parent.touch()
        if node.owner:
            self._ephemerals[node.owner].discard(path)
        self._emit(EventType.DELETED, path)
        self._emit(EventType.CHILD, parent_name)


class BuiltinMetadataStore(MetadataStore):
    """One session on a ``BuiltinEnsemble``.

    ``BuiltinMetadataStore(data_dir)`` owns a private ensemble, started and
    stopped with the session; ``BuiltinMetadataStore(ensemble=...)`` joins a
    running one that its creator starts and stops.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        ensemble: BuiltinEnsemble | None = None,
    ) -> None:
        if ensemble is None:
            if data_dir is None:
                raise TypeError("pass data_dir or ensemble")
            ensemble = BuiltinEnsemble(data_dir)
            self._owns_ensemble = True
        elif data_dir is not None:
            raise TypeError("pass data_dir or ensemble, not both")
        else:
            self._owns_ensemble = False
        self.ensemble = ensemble
        self._session_id = 0
        #: The watches left on each path: a tuple, not a set (216 bytes even for the one
        #: watch that most of the tens of thousands of watched paths have).
        self._data_watches: dict[str, tuple[WatchCallback, ...]] = {}
        self._child_watches: dict[str, tuple[WatchCallback, ...]] = {}
        self._pending_events: deque[tuple[int, WatchCallback, WatchedEvent]] = deque()
        self._listeners: list[SessionListener] = []

    @property
    def session_id(self) -> int:
        return self._session_id

    def add_session_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        self._listeners.remove(listener)

    async def start(self) -> None:
        if self._session_id:
            raise RuntimeError("session already started")
        if self._owns_ensemble:
            await self.ensemble.start()
        self._session_id = self.ensemble._open_session(self)
        self._report(SessionState.CONNECTED)

    async def close(self) -> None:
        try:
            if self._session_id:
                self._terminate(None)
                await self.ensemble._sync()
        finally:
            if self._owns_ensemble:
                await self.ensemble.stop()

    async def expire_session(self) -> None:
        """Expire the session as a ZooKeeper server does after a timeout, then reconnect.

        Fault injection for tests: listeners see ``LOST`` and then ``CONNECTED``
        with a new session id, ephemeral nodes are deleted and watches dropped.
        """
        self._live()
        self._terminate(SessionState.LOST)
        self._session_id = self.ensemble._open_session(self)
        self._report(SessionState.CONNECTED)
        await self.ensemble._sync()

    def _terminate(self, report: SessionState | None) -> None:
        self.ensemble._close_session(self._session_id)
        self._session_id = 0
        self._data_watches.clear()
        self._child_watches.clear()
        self._pending_events.clear()
        if report is not None:
            self._report(report)

    def _report(self, state: SessionState) -> None:
        loop = asyncio.get_running_loop()
        for listener in self._listeners:
            loop.call_soon(_invoke, listener, state)

    def _live(self) -> BuiltinEnsemble:
        if not self._session_id:
            raise SessionExpiredError("the session is not open")
        self.ensemble._check()
        return self.ensemble

    # -- watches -----------------------------------------------------------------

    def _trigger(self, zxid: int, event: WatchedEvent) -> None:
        """Consume the watches ``event`` fires; they are delivered once ``zxid`` is durable."""
        watches: set[WatchCallback] = set()
        if event.type is not EventType.CHILD:
            watches.update(self._data_watches.pop(event.path, ()))
        if event.type in (EventType.CHILD, EventType.DELETED):
            watches.update(self._child_watches.pop(event.path, ()))
        self._pending_events.extend((zxid, watch, event) for watch in watches)

    def _release(self, zxid: int) -> None:
        loop = asyncio.get_running_loop()
        while self._pending_events and self._pending_events[0][0] <= zxid:
            _, watch, event = self._pending_events.popleft()
            loop.call_soon(_invoke, watch, event)

    @staticmethod
    def _arm(
        table: dict[str, tuple[WatchCallback, ...]], path: str, watch: WatchCallback | None
    ) -> None:
        """Leave ``watch`` on ``path``, once (as ZooKeeper: the same watch set twice fires once)."""
        if watch is not None:
            armed = table.get(path, ())
            if watch not in armed:
                table[path] = (*armed, watch)

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
        ensemble = self._live()
        created = ensemble._create(
            self._session_id, path, bytes(data), ephemeral, sequential, make_parents
        )
        await ensemble._sync()
        return created

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, NodeStat]:
        ensemble = self._live()
        node = ensemble._node(path)
        self._arm(self._data_watches, path, watch)
        result = node.data, node.stat()
        await ensemble._sync()
        return result

    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> NodeStat:
        ensemble = self._live()
        stat = ensemble._set(path, bytes(data), version)
        await ensemble._sync()
        return stat

    async def delete(self, path: str, version: int = ANY_VERSION, recursive: bool = False) -> None:
        ensemble = self._live()
        ensemble._delete(path, version, recursive)
        await ensemble._sync()

    async def exists(self, path: str, watch: WatchCallback | None = None) -> NodeStat | None:
        ensemble = self._live()
        validate_path(path)
        node = ensemble._nodes.get(path)
        self._arm(self._data_watches, path, watch)
        stat = None if node is None else node.stat()
        await ensemble._sync()
        return stat

    async def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        ensemble = self._live()
        node = ensemble._node(path)
        self._arm(self._child_watches, path, watch)
        children = sorted(node.children)
        await ensemble._sync()
        return children
