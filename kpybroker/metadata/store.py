"""The ZooKeeper-shaped metadata store interface.

Everything above this module (``ClusterMetadata``, the controller) talks to a
``MetadataStore`` only, so that the built-in backend and a ZooKeeper backend
(kazoo) can be swapped without touching callers. The interface therefore keeps
ZooKeeper's semantics rather than inventing friendlier ones:

* Nodes are addressed by absolute slash-separated paths and hold bytes.
* Every node has a ``version`` that ``set``/``delete`` can compare-and-set on
  (``-1`` matches any version, as ZooKeeper's ``-1``).
* Ephemeral nodes belong to the session of the store that created them and
  disappear when that session is closed or expires; they cannot have children.
* Sequential nodes get a 10-digit, zero-padded suffix taken from the parent's
  ``cversion`` (ZooKeeper's rule, so names sort in creation order).
* Watches are one-shot: a callback registered by ``get``/``exists`` (a data
  watch) or ``get_children`` (a child watch) fires at most once, for the first
  matching change after the read. A callable registered twice for the same path
  and kind is one watch (ZooKeeper and kazoo keep watchers in sets). Watches do
  not survive the session: when it expires, session listeners get
  ``SessionState.LOST`` instead and the caller must read again to re-arm.
* Within one session, results and watch events are delivered in the order the
  store applied the changes; a session never sees a change before the event of a
  watch it had set on it.

Callbacks (watches and session listeners) are plain functions called on the
event loop that uses the store; they must not block. A callback that needs to
read the store schedules a task.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

__all__ = [
    "ANY_VERSION",
    "BadVersionError",
    "ConnectionLossError",
    "EventType",
    "MetadataStore",
    "MetadataStoreError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NodeStat",
    "NotEmptyError",
    "SessionExpiredError",
    "SessionListener",
    "SessionState",
    "WatchCallback",
    "WatchedEvent",
    "join_path",
    "node_name",
    "parent_path",
    "validate_path",
]

ANY_VERSION = -1
"""The ``version`` argument that makes ``set``/``delete`` unconditional."""


class EventType(enum.Enum):
    """What a watch reports; the names follow ZooKeeper's ``EventType``."""

    CREATED = "created"
    """The node was created (data watch left by ``exists`` on a missing node)."""
    DELETED = "deleted"
    """The node was deleted (data and child watches on the node)."""
    CHANGED = "changed"
    """The node's data was set (data watches)."""
    CHILD = "child"
    """A child was created or deleted (child watches on the parent)."""


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    """One watch firing: what happened and to which node.

    It carries no data on purpose (as in ZooKeeper): the receiver reads the node
    again, which also re-arms its watch.
    """

    type: EventType
    path: str


WatchCallback = Callable[[WatchedEvent], None]


class SessionState(enum.Enum):
    """Session states reported to session listeners; kazoo's ``KazooState``."""

    CONNECTED = "connected"
    """The session is usable; after ``LOST`` this is a new session."""
    SUSPENDED = "suspended"
    """Connection lost, session maybe still alive (ZooKeeper backend only)."""
    LOST = "lost"
    """The session expired: its ephemeral nodes and its watches are gone."""


SessionListener = Callable[[SessionState], None]


@dataclass(frozen=True, slots=True)
class NodeStat:
    """The fields of ZooKeeper's ``Stat`` that callers use.

    ``czxid`` and ``mzxid`` are the store-wide transaction ids of the node's
    creation and last data change; Kafka uses a broker node's ``czxid`` as the
    broker epoch. Times are milliseconds since the epoch. ``ephemeral_owner`` is
    the owning session id, 0 for a persistent node.
    """

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int


class MetadataStoreError(Exception):
    """Base of the errors a store raises; each subclass is a ZooKeeper error code."""


class NoNodeError(MetadataStoreError):
    """The node (or, for ``create``, its parent) does not exist."""


class NodeExistsError(MetadataStoreError):
    """``create`` on a path that exists."""


class BadVersionError(MetadataStoreError):
    """The expected version did not match: someone else changed the node."""


class NotEmptyError(MetadataStoreError):
    """Non-recursive ``delete`` of a node that has children."""


class NoChildrenForEphemeralsError(MetadataStoreError):
    """``create`` below an ephemeral node."""


class SessionExpiredError(MetadataStoreError):
    """The call was made on a session that is closed, expired or not started."""


class ConnectionLossError(MetadataStoreError):
    """The store cannot confirm the call: the change may or may not have happened."""


def validate_path(path: str) -> None:
    """Raise ``ValueError`` unless ``path`` is a ZooKeeper-legal absolute path.

    Checked up front so that both backends reject the same paths (kazoo raises
    ``ValueError`` too) instead of one of them creating oddly named nodes.
    """
    if not path.startswith("/"):
        raise ValueError(f"path must be absolute: {path!r}")
    if path == "/":
        return
    for name in path[1:].split("/"):
        if name in ("", ".", "..") or "\x00" in name:
            raise ValueError(f"invalid path: {path!r}")


def join_path(parent: str, name: str) -> str:
    """``parent``/``name``, without doubling the slash of the root."""
    return f"{parent.rstrip('/')}/{name}"


def parent_path(path: str) -> str:
    """The parent of a non-root path."""
    return path.rsplit("/", 1)[0] or "/"


def node_name(path: str) -> str:
    """The last component of a path."""
    return path.rsplit("/", 1)[1]


class MetadataStore(abc.ABC):
    """An async, ZooKeeper-shaped store of small data nodes; see the module docstring.

    Usage: ``await store.start()`` (or ``async with store``) opens the session,
    ``await store.close()`` ends it and deletes its ephemeral nodes.
    """

    @abc.abstractmethod
    async def start(self) -> None:
        """Open the session; the store is usable when this returns."""

    @abc.abstractmethod
    async def close(self) -> None:
        """End the session: its ephemeral nodes are deleted, its watches dropped."""

    @property
    @abc.abstractmethod
    def session_id(self) -> int:
        """The current session's id, the ``ephemeral_owner`` of its ephemeral nodes."""

    @abc.abstractmethod
    def add_session_listener(self, listener: SessionListener) -> None:
        """Report session state changes (loss and re-establishment) to ``listener``."""

    @abc.abstractmethod
    def remove_session_listener(self, listener: SessionListener) -> None:
        """Stop reporting to ``listener``."""

    @abc.abstractmethod
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a node and return its path (with the suffix when ``sequential``).

        Raises ``NodeExistsError``; ``NoNodeError`` when the parent is missing,
        unless ``make_parents``, which creates missing ancestors as empty
        persistent nodes; ``NoChildrenForEphemeralsError`` below an ephemeral node.
        """

    @abc.abstractmethod
    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, NodeStat]:
        """Return the node's data and stat; ``watch`` fires on its next change or deletion.

        Raises ``NoNodeError`` (and leaves no watch) when the node is missing.
        """

    @abc.abstractmethod
    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> NodeStat:
        """Replace the node's data if its version is ``version`` (or ``version`` is -1).

        Raises ``NoNodeError`` or ``BadVersionError``; returns the new stat.
        """

    @abc.abstractmethod
    async def delete(self, path: str, version: int = ANY_VERSION, recursive: bool = False) -> None:
        """Delete the node if its version is ``version`` (or ``version`` is -1).

        Raises ``NoNodeError``, ``BadVersionError``, or ``NotEmptyError`` unless
        ``recursive``; a recursive delete checks ``version`` on ``path`` only and,
        as with kazoo, is not atomic on a ZooKeeper backend.
        """

    @abc.abstractmethod
    async def exists(self, path: str, watch: WatchCallback | None = None) -> NodeStat | None:
        """Return the node's stat or None; ``watch`` fires on creation, change or deletion."""

    @abc.abstractmethod
    async def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        """Return the names of the node's children (order unspecified).

        ``watch`` fires when a child is created or deleted, or the node is deleted.
        Raises ``NoNodeError`` (and leaves no watch) when the node is missing.
        """

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
