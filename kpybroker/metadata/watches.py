"""The machinery that keeps the cluster metadata cache current: refreshes, watches, views.

The cache is level-triggered: a watch event only says "look again"; the
handler re-reads the node (which re-arms the watch), stores the result, and
reports a change only when the decoded value differs. Refreshes run one at a
time per node and apply what they read before awaiting anything else; since a
session's replies come back in request order, the cache applies each node's
changes in the order the store made them.

This module holds the parts of that which know nothing of what the znodes
mean: running refreshes (``Refresher``), reading a node with a watch left on
it (``read_watched``), mirroring the children of a znode (``ChildMirror``),
and building topic views from what was read (``TopicViewCache``,
``TopicViews``). ``ClusterMetadata`` wires them to Kafka's layout and to its
listeners; kept apart, the concurrency rules can be read and tested on their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping
from contextlib import suppress
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from kpybroker.metadata.model import PartitionMetadata, PartitionState, TopicMetadata
from kpybroker.metadata.store import (
    MetadataStore,
    NodeStat,
    NoNodeError,
    WatchCallback,
    WatchedEvent,
    join_path,
    node_name,
)
from kpybroker.metadata.znodes import DECODE_ERRORS, TopicNode

__all__ = [
    "ChildMirror",
    "RefreshLater",
    "Refresher",
    "TopicViewCache",
    "TopicViews",
    "decode_or_none",
    "read_watched",
    "store_value",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

RefreshLater = Callable[..., None]
"""``refresh_later(refresh, *args)``: run ``refresh(*args)`` in the background, as a
watch event asks; ``ClusterMetadata._refresh_later``."""


def decode_or_none(path: str, decoder: Callable[..., _T], *args: Any) -> _T | None:
    """Decode a znode, or log and return None: one malformed node (written by
    someone else) must not stop the cache from following the rest."""
    try:
        return decoder(*args)
    except DECODE_ERRORS:
        log.exception("ignoring malformed znode %s", path)
        return None


def store_value(cache: dict[Any, _T], key: Any, value: _T | None) -> bool:
    """Put ``value`` (None: absence) into ``cache``; return whether that changed anything."""
    if value is None:
        return cache.pop(key, None) is not None
    if cache.get(key) == value:
        return False
    cache[key] = value
    return True


async def read_watched(
    store: MetadataStore, path: str, watch: WatchCallback, floor: str
) -> tuple[bytes, NodeStat] | None:
    """Read ``path`` and leave ``watch`` so that its next change, including its
    creation, is reported.

    A missing node gets an exists-watch, unless ``floor`` (an ancestor, or
    ``path`` itself) is missing too: then nothing is watched, so that
    reading the partitions of a deleted topic leaves no watches behind.
    (Watching the parent's children instead would cost a listing of every
    sibling per node: quadratic for a topic of thousands of partitions.)
    """
    while True:
        with suppress(NoNodeError):
            return await store.get(path, watch)
        if floor == path or await store.exists(floor) is None:
            return None
        if await store.exists(path, watch) is None:
            return None
        # created meanwhile: read again


class Refresher:
    """Runs refreshes one at a time per key, coalescing requests for the same key.

    The key is the refresh function and its arguments. A request made while
    that refresh runs gets one more run after it (the running one may have
    read before the change that prompted the request); all requests made
    meanwhile share that run. The future a request returns completes when a
    run that started after the request has finished.
    """

    def __init__(self) -> None:
        self._tasks: dict[Hashable, asyncio.Task[None]] = {}
        self._waiting: dict[Hashable, list[asyncio.Future[None]]] = {}

    def request(
        self, refresh: Callable[..., Awaitable[None]], *args: Hashable
    ) -> asyncio.Future[None]:
        key = (refresh, args)
        done = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(done)
        if key not in self._tasks:
            self._tasks[key] = asyncio.create_task(self._drain(key, refresh, args))
        return done

    async def _drain(
        self, key: Hashable, refresh: Callable[..., Awaitable[None]], args: tuple[Hashable, ...]
    ) -> None:
        try:
            while waiters := self._waiting.pop(key, None):
                try:
                    await refresh(*args)
                except Exception as exc:
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_exception(exc)
                else:
                    for waiter in waiters:
                        if not waiter.done():
                            waiter.set_result(None)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
        finally:
            del self._tasks[key]

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for waiters in self._waiting.values():
            for waiter in waiters:
                waiter.cancel()
        self._waiting.clear()


class ChildMirror(Generic[_T]):
    """The children of one znode, decoded, kept current by watches.

    A child watch on the parent reports additions and removals, a data watch on
    each child its changes and deletion; ``on_change(name)`` is called whenever
    an item's decoded value appears, changes or disappears. Reads run on
    ``refresher``; watch events are answered through ``refresh_later``.
    """

    def __init__(
        self,
        store: MetadataStore,
        refresher: Refresher,
        refresh_later: RefreshLater,
        path: str,
        decode: Callable[[str, bytes, NodeStat], _T],
        on_change: Callable[[str], None],
    ) -> None:
        self.items: dict[str, _T] = {}
        self._store = store
        self._refresher = refresher
        self._refresh_later = refresh_later
        self._path = path
        self._decode = decode
        self._on_change = on_change

    def reload(self, everything: bool) -> asyncio.Future[None]:
        """Re-read the children list and the new children, or all of them after a session loss."""
        return self._refresher.request(self._load_list, everything)

    def refresh(self, name: str) -> asyncio.Future[None]:
        return self._refresher.request(self._load_item, name)

    async def _load_list(self, everything: bool) -> None:
        names = await self._store.get_children(self._path, self._on_list_event)
        for gone in self.items.keys() - set(names):
            del self.items[gone]
            self._on_change(gone)
        todo = names if everything else [name for name in names if name not in self.items]
        await asyncio.gather(*(self.refresh(name) for name in todo))

    async def _load_item(self, name: str) -> None:
        path = join_path(self._path, name)
        found = await read_watched(self._store, path, self._on_item_event, floor=path)
        value = None if found is None else decode_or_none(path, self._decode, name, *found)
        if store_value(self.items, name, value):
            self._on_change(name)

    def _on_list_event(self, event: WatchedEvent) -> None:
        self._refresh_later(self._load_list, False)

    def _on_item_event(self, event: WatchedEvent) -> None:
        self._refresh_later(self._load_item, node_name(event.path))


class TopicViewCache:
    """``TopicMetadata`` views of the mirrored topic znodes, configs and partition states,
    each built on first access after a change and kept until the next one.

    ``states`` maps topic to partition to (state, state znode version); the
    cache reads the mirrors and ``states`` as they are when a view is built.
    """

    def __init__(
        self,
        topic_nodes: ChildMirror[TopicNode],
        topic_configs: ChildMirror[dict[str, str]],
        states: Mapping[str, Mapping[int, tuple[PartitionState, int]]],
    ) -> None:
        self._topic_nodes = topic_nodes
        self._topic_configs = topic_configs
        self._states = states
        self._views: dict[str, TopicMetadata] = {}
        #: Per built view, the partitions whose state changed since it was built.
        self._patched: dict[str, set[int]] = {}
        self._names_by_id: dict[bytes, str] | None = None  # built on first use

    def drop(self, name: str) -> None:
        """Forget the view of topic ``name``: its node or its configs changed."""
        self._views.pop(name, None)
        self._patched.pop(name, None)
        self._names_by_id = None

    def name_of(self, topic_id: bytes) -> str | None:
        """The name of the topic with ``topic_id``; the index is rebuilt after a topic change."""
        if self._names_by_id is None:
            self._names_by_id = {
                node.topic_id.bytes: name for name, node in self._topic_nodes.items.items()
            }
        return self._names_by_id.get(topic_id)

    def patch(self, name: str, partition: int) -> None:
        """Note a new state of one partition of topic ``name``; a built view gets it, and
        every other noted since, in one copy when it is next asked for. Not a rebuild,
        and not a copy per partition: each of a new topic's thousands of partitions
        reports its state apart."""
        view = self._views.get(name)
        if view is None:
            return
        if partition not in view.partitions:
            self.drop(name)
            return
        self._patched.setdefault(name, set()).add(partition)

    def partition(self, name: str, index: int) -> tuple[uuid.UUID, PartitionMetadata] | None:
        """The topic id and one partition of topic ``name``, without building its view:
        what a listener told of one partition's change reads."""
        node = self._topic_nodes.items.get(name)
        if node is None or index not in node.replicas:
            return None
        return node.topic_id, self._partition(node, self._states.get(name, {}), index)

    def view(self, name: str) -> TopicMetadata:
        """The view of topic ``name``; ``KeyError`` when there is no such topic."""
        view = self._views.get(name)
        if view is None:
            node = self._topic_nodes.items[name]
            states = self._states.get(name, {})
            view = TopicMetadata(
                name,
                node.topic_id,
                MappingProxyType({p: self._partition(node, states, p) for p in node.replicas}),
                MappingProxyType(self._topic_configs.items.get(name, {})),
            )
            self._views[name] = view
            self._patched.pop(name, None)
        elif patched := self._patched.pop(name, None):
            node = self._topic_nodes.items[name]
            states = self._states.get(name, {})
            partitions = dict(view.partitions)
            for index in patched:
                partitions[index] = self._partition(node, states, index)
            view = dataclasses.replace(view, partitions=MappingProxyType(partitions))
            self._views[name] = view
        return view

    @staticmethod
    def _partition(
        node: TopicNode, states: Mapping[int, tuple[PartitionState, int]], index: int
    ) -> PartitionMetadata:
        state, version = states.get(index, (None, None))
        return PartitionMetadata(
            index,
            node.replicas[index],
            state,
            version,
            node.adding.get(index, ()),
            node.removing.get(index, ()),
        )


class TopicViews(Mapping[str, TopicMetadata]):
    """``ClusterMetadata.topics()``: a live mapping of the cached topics to their views."""

    def __init__(self, cache: TopicViewCache) -> None:
        self._cache = cache

    def __getitem__(self, name: str) -> TopicMetadata:
        return self._cache.view(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._cache._topic_nodes.items)

    def __contains__(self, name: object) -> bool:
        return name in self._cache._topic_nodes.items

    def __len__(self) -> int:
        return len(self._cache._topic_nodes.items)
