"""The configs of users, client ids and addresses: quotas and SCRAM credentials.

Kafka's ZooKeeper mode kept them as config znodes (``znodes``): per user,
per user and client id, per client id and per address, each kind with a
``<default>`` entity. Every broker needs them at once when they change (a new
SCRAM user may log in anywhere, a quota binds on every broker), so they are
cached here and kept current by watches, as the topic and broker configs are
in ``cluster_metadata``: a mirror of the children of ``/config/users``,
``/config/clients`` and ``/config/ips``, and one of each user's ``clients``.

An entity is a tuple of (type, name) pairs in Kafka's order, user before
client id, with None for the default: ``(("user", "alice"), ("client-id",
None))`` is alice's default client. The names are Kafka's
``ClientQuotaEntity`` types, as DescribeClientQuotas speaks them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import suppress
from functools import partial
from types import MappingProxyType

from kpybroker.metadata.store import (
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    WatchedEvent,
    join_path,
)
from kpybroker.metadata.watches import ChildMirror, Refresher
from kpybroker.metadata.znodes import (
    CLIENTS_CONFIG_PATH,
    DEFAULT_ENTITY,
    ENTITY_CONFIG_PATHS,
    IPS_CONFIG_PATH,
    USER_CLIENTS,
    USERS_CONFIG_PATH,
    decode_config,
    desanitize,
    encode_config,
    sanitize,
)

log = logging.getLogger(__name__)

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

Entity = tuple[tuple[str, str | None], ...]
"""((type, name or None for the default), ...), user before client id."""


def entity_path(entity: Entity) -> str:
    """The config znode of ``entity``; ``ValueError`` for a combination Kafka has none for."""
    kinds = tuple(kind for kind, _ in entity)
    names = [_component(name) for _, name in entity]
    if kinds == (USER,):
        return join_path(USERS_CONFIG_PATH, names[0])
    if kinds == (USER, CLIENT_ID):
        user = join_path(USERS_CONFIG_PATH, names[0])
        return join_path(join_path(user, USER_CLIENTS), names[1])
    if kinds == (CLIENT_ID,):
        return join_path(CLIENTS_CONFIG_PATH, names[0])
    if kinds == (IP,):
        return join_path(IPS_CONFIG_PATH, _address(entity[0][1]))
    raise ValueError(f"no config entity of types {kinds}")


def _component(name: str | None) -> str:
    """A user or client id as its path component; None is the default entity."""
    return DEFAULT_ENTITY if name is None else sanitize(name)


def _name(component: str) -> str | None:
    return None if component == DEFAULT_ENTITY else desanitize(component)


def _address(address: str | None) -> str:
    """Addresses are not sanitized (Kafka writes them as they are)."""
    return DEFAULT_ENTITY if address is None else address


class EntityConfigs:
    """The cached configs of every user, client id and address, and the writes to them.

    ``on_change(entity)`` is called (on the event loop) after an entity's
    configs appear, change or go.
    """

    def __init__(self, store: MetadataStore, on_change: Callable[[Entity], None]) -> None:
        self.store = store
        self._on_change = on_change
        self._refresher = Refresher()
        mirror = partial(ChildMirror, store, self._refresher, self._refresh_later)
        self._users = mirror(USERS_CONFIG_PATH, decode_config, self._user_changed)
        self._clients = mirror(
            CLIENTS_CONFIG_PATH, decode_config, partial(self._changed, CLIENT_ID)
        )
        self._ips = mirror(IPS_CONFIG_PATH, decode_config, self._ip_changed)
        #: sanitized user -> the mirror of its clients' configs
        self._user_clients: dict[str, ChildMirror[dict[str, str]]] = {}
        self._closed = False

    async def start(self) -> None:
        for path in ENTITY_CONFIG_PATHS:
            with suppress(NodeExistsError):
                await self.store.create(path, b"", make_parents=True)
        await self.reload()

    async def reload(self) -> None:
        """Read everything again and re-arm the watches (at start, after a session loss)."""
        await asyncio.gather(
            self._users.reload(True), self._clients.reload(True), self._ips.reload(True)
        )
        await asyncio.gather(*(m.reload(True) for m in self._user_clients.values()))

    async def close(self) -> None:
        self._closed = True
        await self._refresher.close()

    # -- reads -------------------------------------------------------------------------

    def configs(self, entity: Entity) -> Mapping[str, str]:
        """The configs set for exactly ``entity`` (empty when none)."""
        kinds = tuple(kind for kind, _ in entity)
        names = [_component(name) for _, name in entity]
        found: dict[str, str] | None = None
        if kinds == (USER,):
            found = self._users.items.get(names[0])
        elif kinds == (USER, CLIENT_ID):
            clients = self._user_clients.get(names[0])
            found = None if clients is None else clients.items.get(names[1])
        elif kinds == (CLIENT_ID,):
            found = self._clients.items.get(names[0])
        elif kinds == (IP,):
            found = self._ips.items.get(_address(entity[0][1]))
        return MappingProxyType(found or {})

    def __iter__(self) -> Iterator[tuple[Entity, Mapping[str, str]]]:
        """Every entity that has a config znode, with its configs."""
        for user, configs in list(self._users.items.items()):
            yield ((USER, _name(user)),), MappingProxyType(configs)
            clients = self._user_clients.get(user)
            for client, client_configs in list(clients.items.items()) if clients else ():
                yield (
                    ((USER, _name(user)), (CLIENT_ID, _name(client))),
                    MappingProxyType(client_configs),
                )
        for client, configs in list(self._clients.items.items()):
            yield ((CLIENT_ID, _name(client)),), MappingProxyType(configs)
        for address, configs in list(self._ips.items.items()):
            yield ((IP, None if address == DEFAULT_ENTITY else address),), MappingProxyType(configs)

    # -- writes ------------------------------------------------------------------------

    async def alter(self, entity: Entity, changes: Mapping[str, str | None]) -> None:
        """Set (a value) or remove (None) configs of ``entity``, keeping the others.

        As Kafka's ``AdminZkClient.changeConfigs`` the whole znode is written
        again; an entity left with no configs keeps its (empty) znode.
        """
        path = entity_path(entity)
        configs = dict(self.configs(entity))
        for key, value in changes.items():
            if value is None:
                configs.pop(key, None)
            else:
                configs[key] = value
        data = encode_config(configs)
        while True:
            with suppress(NoNodeError):
                await self.store.set(path, data)
                break
            with suppress(NodeExistsError):
                await self.store.create(path, data, make_parents=True)
                break
        await self._refresh(entity)

    async def _refresh(self, entity: Entity) -> None:
        """Read ``entity``'s node now, so that a write is visible when it returns."""
        kinds = tuple(kind for kind, _ in entity)
        names = [_component(name) for _, name in entity]
        if kinds == (USER, CLIENT_ID):
            await self._users.refresh(names[0])
            await self._clients_of(names[0]).refresh(names[1])
        elif kinds == (USER,):
            await self._users.refresh(names[0])
        elif kinds == (CLIENT_ID,):
            await self._clients.refresh(names[0])
        else:
            await self._ips.refresh(_address(entity[0][1]))

    # -- cache -------------------------------------------------------------------------

    def _refresh_later(self, refresh: Callable[..., object], *args: Hashable) -> None:
        if not self._closed:
            self._refresher.request(refresh, *args).add_done_callback(_log_failure)

    def _clients_of(self, user: str) -> ChildMirror[dict[str, str]]:
        mirror = self._user_clients.get(user)
        if mirror is None:
            path = join_path(join_path(USERS_CONFIG_PATH, user), USER_CLIENTS)
            mirror = _OptionalChildMirror(
                self.store,
                self._refresher,
                self._refresh_later,
                path,
                decode_config,
                partial(self._user_client_changed, user),
            )
            self._user_clients[user] = mirror
        return mirror

    def _user_changed(self, user: str) -> None:
        if user in self._users.items:
            self._refresh_later(self._clients_of(user)._load_list, False)
        else:
            mirror = self._user_clients.pop(user, None)
            for client in list(mirror.items) if mirror else ():
                self._changed_entity(((USER, _name(user)), (CLIENT_ID, _name(client))))
        self._changed_entity(((USER, _name(user)),))

    def _user_client_changed(self, user: str, client: str) -> None:
        self._changed_entity(((USER, _name(user)), (CLIENT_ID, _name(client))))

    def _changed(self, kind: str, component: str) -> None:
        self._changed_entity(((kind, _name(component)),))

    def _ip_changed(self, address: str) -> None:
        self._changed_entity(((IP, None if address == DEFAULT_ENTITY else address),))

    def _changed_entity(self, entity: Entity) -> None:
        try:
            self._on_change(entity)
        except Exception:
            log.exception("entity config listener failed for %s", entity)


class _OptionalChildMirror(ChildMirror[dict[str, str]]):
    """A mirror of a parent that may not exist yet (a user's ``clients``): until it
    does, it has no children, and an exists-watch reports its creation."""

    async def _load_list(self, everything: bool) -> None:
        try:
            await super()._load_list(everything)
        except NoNodeError:
            for gone in list(self.items):
                del self.items[gone]
                self._on_change(gone)
            if await self._store.exists(self._path, self._on_created) is not None:
                await super()._load_list(everything)  # created meanwhile

    def _on_created(self, event: WatchedEvent) -> None:
        self._refresh_later(self._load_list, False)


def _log_failure(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and (exc := done.exception()) is not None:
        log.warning("refreshing entity configs failed", exc_info=exc)
