"""Keeps an ``AclAuthorizer`` in step with the ACL znodes, and writes them for CreateAcls and
DeleteAcls.

Every broker of a cluster runs one ``AclStore`` on the shared metadata store,
so an ACL created through any broker takes effect on all of them. ACLs live
where Kafka 3's ``AclAuthorizer`` kept them (``metadata.acl_znodes``): one znode
per resource pattern, holding all of that pattern's entries. The store mirrors
the children of each ``/kafka-acl/<ResourceType>`` and
``/kafka-acl-extended/prefixed/<ResourceType>`` with watches (``ChildMirror``),
and hands each pattern's entries to the authorizer whenever its znode appears,
changes or goes.

Writes are Kafka's ``updateResourceAcls``: read a pattern's entries (from the
mirror, else the store), change them, and write them back compared-and-set on
the znode version read (creating the znode for a first entry, deleting it with
the last); when someone else wrote in between, read again and retry, at most
``MAX_UPDATE_RETRIES`` times. A write that changed something is announced with
a change notification, as Kafka's brokers expect, and notifications older than
Kafka's expiry are cleared then. Entries are rewritten as they were read, so an
entry this code cannot interpret (written by another tool) survives the writes
of its neighbours.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial

from kpybroker.metadata.acl_znodes import (
    ACL_CHANGE_PREFIX,
    EXTENDED_ACL_CHANGES_PATH,
    LITERAL_ACL_CHANGES_PATH,
    NOTIFICATION_EXPIRY_MS,
    AclEntryNode,
    AclNode,
    acl_changes_path,
    decode_acls,
    encode_acls,
    encode_extended_change,
    encode_literal_change,
    is_storable_name,
    resource_path,
    resource_type_path,
)
from kpybroker.metadata.store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    SessionState,
    join_path,
)
from kpybroker.metadata.watches import ChildMirror, Refresher
from kpybroker.protocol.errors import ErrorCode
from kpybroker.security.acls.authorizer import AclAuthorizer
from kpybroker.security.acls.model import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kpybroker.security.acls.validation import AclError, validate_filter, validate_new_binding

__all__ = ["MAX_UPDATE_RETRIES", "AclDeleteResult", "AclStore", "DeletedAcl"]

log = logging.getLogger(__name__)

MAX_UPDATE_RETRIES = 10
"""How often a write is retried after losing a race (Kafka's ``maxUpdateRetries``)."""
_RETRY_BACKOFF_S = 0.1
_RETRY_JITTER_S = 0.05

_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
_RESOURCE_TYPES = tuple(t for t in ResourceType if t > ResourceType.ANY)
"""Every concrete resource type: each has its directory in both pattern stores."""
_FAILED: AclError = (ErrorCode.UNKNOWN_SERVER_ERROR, None)
"""What a write that failed in the store reports (Kafka wraps the error, hiding its message)."""

_Entries = frozenset[AclEntryNode]
_Change = Callable[[_Entries], _Entries]
"""What a write does to a pattern's stored entries."""


@dataclass(frozen=True, slots=True)
class DeletedAcl:
    """An ACL a DeleteAcls filter matched; ``error`` when deleting it failed."""

    binding: AclBinding
    error: AclError | None = None


@dataclass(frozen=True, slots=True)
class AclDeleteResult:
    """One filter's outcome: refused (``error``), or the ACLs it matched."""

    error: AclError | None = None
    deleted: tuple[DeletedAcl, ...] = ()


def _entry_of(node: AclEntryNode) -> AccessControlEntry | None:
    """A stored entry as the model's, or None when it cannot be one (operation or
    permission ANY, which only filters have)."""
    try:
        return AccessControlEntry(
            node.principal,
            node.host,
            AclOperation.from_kafka_name(node.operation),
            AclPermissionType.from_kafka_name(node.permission_type),
        )
    except ValueError:
        return None


def _node_of(entry: AccessControlEntry) -> AclEntryNode:
    return AclEntryNode(
        entry.principal,
        entry.permission_type.kafka_name,
        entry.operation.kafka_name,
        entry.host,
    )


def _path(pattern: ResourcePattern) -> str:
    return resource_path(pattern.pattern_type.name, pattern.resource_type.kafka_name, pattern.name)


def _with(entries: Iterable[AccessControlEntry], nodes: _Entries) -> _Entries:
    """``nodes`` with ``entries`` added, unless an equal entry is there already."""
    held = {_entry_of(node) for node in nodes}
    return nodes | {_node_of(entry) for entry in entries if entry not in held}


def _without(filters: Sequence[AccessControlEntryFilter], nodes: _Entries) -> _Entries:
    """``nodes`` without the entries any of ``filters`` matches."""
    return frozenset(node for node in nodes if not _matched(filters, node))


def _matched(filters: Sequence[AccessControlEntryFilter], node: AclEntryNode) -> bool:
    entry = _entry_of(node)
    return entry is not None and any(f.matches(entry) for f in filters)


class AclStore:
    """The ACL znodes, mirrored into ``authorizer``; ``start`` loads them all."""

    def __init__(self, store: MetadataStore, authorizer: AclAuthorizer) -> None:
        self.authorizer = authorizer
        self.store = store
        self._refresher = Refresher()
        self._mirrors = {
            (pattern_type, resource_type): ChildMirror(
                store,
                self._refresher,
                self._refresh_later,
                resource_type_path(pattern_type.name, resource_type.kafka_name),
                decode_acls,
                partial(self._changed, pattern_type, resource_type),
            )
            for pattern_type in _PATTERN_TYPES
            for resource_type in _RESOURCE_TYPES
        }
        self._write_lock = asyncio.Lock()
        """One write at a time from this broker, as Kafka's authorizer had its lock."""
        self._session_lost = False
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Create the ACL paths (Kafka's ``createAclPaths``), load every ACL and follow them."""
        for path in (LITERAL_ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH):
            await self._ensure(path)
        for pattern_type, resource_type in self._mirrors:
            await self._ensure(resource_type_path(pattern_type.name, resource_type.kafka_name))
        self.store.add_session_listener(self._on_session_state)
        await self._load_all()

    async def close(self) -> None:
        """Stop following the ACLs (the store stays open)."""
        if self._closed:
            return
        self._closed = True
        with suppress(ValueError):  # not started
            self.store.remove_session_listener(self._on_session_state)
        await self._refresher.close()

    # -- writes ----------------------------------------------------------------------

    async def create(self, bindings: Sequence[AclBinding]) -> list[AclError | None]:
        """Create ACLs (CreateAcls): per binding, None when it exists now, or why not.

        Each binding is checked first (``validate_new_binding``); the valid ones are
        written one znode per resource pattern. An ACL that exists already is a success.
        """
        results = [validate_new_binding(binding) for binding in bindings]
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, (binding, refusal) in enumerate(zip(bindings, results, strict=True)):
            if refusal is None:
                by_pattern.setdefault(binding.pattern, []).append(index)
        changes = {
            pattern: partial(_with, [bindings[index].entry for index in indexes])
            for pattern, indexes in by_pattern.items()
        }
        for pattern, outcome in (await self._update_all(changes)).items():
            if isinstance(outcome, Exception):
                for index in by_pattern[pattern]:
                    results[index] = _FAILED
        return results

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """Delete the ACLs that match ``filters`` (DeleteAcls): per filter, the ACLs it
        matched, or why the filter was refused (``validate_filter``).

        The patterns looked at are those this broker knows of, plus the pattern a
        filter names exactly, so that an ACL created elsewhere a moment ago goes too.
        An ACL several filters match is listed under each, as Kafka 4 lists it.
        """
        refusals = [validate_filter(binding_filter) for binding_filter in filters]
        valid = [f for f, refusal in zip(filters, refusals, strict=True) if refusal is None]
        matching = {
            pattern: [f.entry_filter for f in valid if f.pattern_filter.matches(pattern)]
            for pattern in self._known_patterns() | self._named_patterns(valid)
        }
        changes = {
            pattern: partial(_without, entry_filters)
            for pattern, entry_filters in matching.items()
            if entry_filters
        }
        deleted: list[DeletedAcl] = []
        for pattern, outcome in (await self._update_all(changes)).items():
            if isinstance(outcome, Exception):
                nodes = self._cached(pattern).entries
                error: AclError | None = _FAILED
            else:
                nodes, error = outcome[0] - outcome[1], None
            for node in nodes:
                entry = _entry_of(node)
                if entry is not None and _matched(matching[pattern], node):
                    deleted.append(DeletedAcl(AclBinding(pattern, entry), error))
        return [
            AclDeleteResult(refusal)
            if refusal is not None
            else AclDeleteResult(deleted=tuple(d for d in deleted if f.matches(d.binding)))
            for f, refusal in zip(filters, refusals, strict=True)
        ]

    async def _update_all(
        self, changes: dict[ResourcePattern, _Change]
    ) -> dict[ResourcePattern, tuple[_Entries, _Entries] | Exception]:
        """Apply each pattern's change; per pattern (entries before, after) or the error."""
        async with self._write_lock:
            outcomes = await asyncio.gather(
                *(self._update(pattern, change) for pattern, change in changes.items()),
                return_exceptions=True,
            )
            if any(isinstance(outcome, tuple) and outcome[0] != outcome[1] for outcome in outcomes):
                await self._purge_notifications()
        results = {}
        for pattern, outcome in zip(changes, outcomes, strict=True):
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome
            if isinstance(outcome, Exception):
                log.warning("updating the ACLs of %s failed", pattern, exc_info=outcome)
            results[pattern] = outcome
        return results

    async def _update(self, pattern: ResourcePattern, change: _Change) -> tuple[_Entries, _Entries]:
        """Kafka's ``updateResourceAcls``: change the pattern's entries, compare-and-set on
        the znode version, read again and retry when that lost a race."""
        path = _path(pattern)
        node = self._mirror(pattern).items.get(pattern.name) or await self._read(path)
        for _ in range(MAX_UPDATE_RETRIES + 1):
            before = frozenset() if node is None else node.entries
            after = change(before)
            try:
                await self._write(path, node, after)
                break
            except (BadVersionError, NoNodeError, NodeExistsError):
                await asyncio.sleep(_RETRY_BACKOFF_S + random.random() * _RETRY_JITTER_S)
                node = await self._read(path)
        else:
            raise RuntimeError(
                f"Failed to update ACLs for {pattern} after trying a maximum of "
                f"{MAX_UPDATE_RETRIES} times"
            )
        if after != before:
            await self._announce(pattern)
        await self._mirror(pattern).refresh(pattern.name)
        return before, after

    async def _write(self, path: str, node: AclNode | None, entries: _Entries) -> None:
        if entries:
            if node is None:
                await self.store.create(path, encode_acls(entries), make_parents=True)
            else:
                await self.store.set(path, encode_acls(entries), node.version)
        elif node is not None:
            with suppress(NoNodeError):
                await self.store.delete(path, node.version)

    async def _read(self, path: str) -> AclNode | None:
        try:
            data, stat = await self.store.get(path)
        except NoNodeError:
            return None
        return decode_acls(path, data, stat)

    async def _announce(self, pattern: ResourcePattern) -> None:
        """Write the change notification Kafka's brokers follow. A failure is logged: the
        ACLs are written, and this store does not need it."""
        if pattern.pattern_type is PatternType.LITERAL:
            data = encode_literal_change(pattern.resource_type.name, pattern.name)
        else:
            data = encode_extended_change(
                pattern.resource_type.name, pattern.name, pattern.pattern_type.name
            )
        parent = acl_changes_path(pattern.pattern_type.name)
        try:
            await self.store.create(join_path(parent, ACL_CHANGE_PREFIX), data, sequential=True)
        except Exception:
            log.warning("announcing the change of the ACLs of %s failed", pattern, exc_info=True)

    async def _purge_notifications(self) -> None:
        """Delete the change notifications older than Kafka's expiry, as Kafka's brokers
        did; once per write request, and a failure is only logged."""
        expired_before = time.time_ns() // 1_000_000 - NOTIFICATION_EXPIRY_MS
        for parent in (LITERAL_ACL_CHANGES_PATH, EXTENDED_ACL_CHANGES_PATH):
            try:
                await self._purge_older(parent, expired_before)
            except Exception:
                log.warning("clearing old ACL change notifications failed", exc_info=True)

    async def _purge_older(self, parent: str, expired_before: int) -> None:
        """Oldest first, as their sequence numbers order them, up to the first one kept."""
        for name in sorted(await self.store.get_children(parent)):
            path = join_path(parent, name)
            stat = await self.store.exists(path)
            if stat is None:
                continue
            if stat.ctime >= expired_before:
                break
            with suppress(NoNodeError):
                await self.store.delete(path)

    async def _ensure(self, path: str) -> None:
        with suppress(NodeExistsError):
            await self.store.create(path, make_parents=True)

    # -- mirror --------------------------------------------------------------------

    def _mirror(self, pattern: ResourcePattern) -> ChildMirror[AclNode]:
        return self._mirrors[(pattern.pattern_type, pattern.resource_type)]

    def _cached(self, pattern: ResourcePattern) -> AclNode:
        return self._mirror(pattern).items.get(pattern.name) or AclNode(frozenset(), -1)

    def _known_patterns(self) -> set[ResourcePattern]:
        return {
            ResourcePattern(resource_type, name, pattern_type)
            for (pattern_type, resource_type), mirror in self._mirrors.items()
            for name in mirror.items
        }

    @staticmethod
    def _named_patterns(filters: Iterable[AclBindingFilter]) -> set[ResourcePattern]:
        """The patterns filters name exactly (Kafka's ``filterToResources``)."""
        named = set()
        for binding_filter in filters:
            pattern_filter = binding_filter.pattern_filter
            if not pattern_filter.matches_at_most_one() or pattern_filter.name is None:
                continue
            if not is_storable_name(pattern_filter.name):
                continue
            if pattern_filter.pattern_type is PatternType.ANY:
                pattern_types: Iterable[PatternType] = _PATTERN_TYPES
            else:
                pattern_types = (pattern_filter.pattern_type,)
            for pattern_type in pattern_types:
                named.add(
                    ResourcePattern(pattern_filter.resource_type, pattern_filter.name, pattern_type)
                )
        return named

    def _changed(self, pattern_type: PatternType, resource_type: ResourceType, name: str) -> None:
        """A pattern's znode appeared, changed or went: give the authorizer its entries."""
        pattern = ResourcePattern(resource_type, name, pattern_type)
        node = self._mirrors[(pattern_type, resource_type)].items.get(name)
        entries = []
        for stored in () if node is None else node.entries:
            entry = _entry_of(stored)
            if entry is None:
                log.warning("ignoring ACL %s of %s: ANY is a filter's value", stored, pattern)
            else:
                entries.append(entry)
        self.authorizer.set_acls(pattern, entries)

    async def _load_all(self) -> None:
        await asyncio.gather(*(mirror.reload(True) for mirror in self._mirrors.values()))

    def _refresh_later(self, refresh: Callable[..., Awaitable[None]], *args: Hashable) -> None:
        """Answer a watch event: refresh in the background, logging failures."""
        if not self._closed:
            self._refresher.request(refresh, *args).add_done_callback(_log_failure)

    def _on_session_state(self, state: SessionState) -> None:
        """After a session loss the watches are gone: read everything again on the new one."""
        if state is SessionState.LOST:
            self._session_lost = True
        elif state is SessionState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._refresh_later(self._load_all)


def _log_failure(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and (exc := done.exception()) is not None:
        log.warning("refreshing the ACLs failed", exc_info=exc)
