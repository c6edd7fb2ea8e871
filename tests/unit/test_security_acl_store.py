"""The ACL store on every metadata backend: Kafka's znodes, writes, and following other brokers.

"Another broker" is a second ``AclStore`` on a second session of the same store.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from kpybroker.metadata.acl_znodes import AclEntryNode, encode_acls
from kpybroker.protocol.errors import ErrorCode
from kpybroker.security.acls import acl_store
from kpybroker.security.acls.acl_store import AclDeleteResult, AclStore, DeletedAcl
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
    ResourcePatternFilter,
    ResourceType,
)
from kpybroker.security.principal import KafkaPrincipal
from tests.helpers.metadata_backends import Backend, scenario
from tests.helpers.waiting import eventually

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
READ, WRITE = AclOperation.READ, AclOperation.WRITE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = KafkaPrincipal.user("alice"), KafkaPrincipal.user("bob")
HOST = "10.0.0.1"


def acl(
    name: str,
    principal: str = "User:alice",
    operation: AclOperation = READ,
    pattern_type: PatternType = LITERAL,
    permission: AclPermissionType = ALLOW,
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, "*", operation, permission),
    )


@asynccontextmanager
async def brokers(backend: Backend, count: int = 1) -> AsyncIterator[list[AclStore]]:
    """``count`` started ACL stores, each on its own session."""
    stores = [AclStore(await backend.connect(), AclAuthorizer()) for _ in range(count)]
    try:
        for store in stores:
            await store.start()
        yield stores
    finally:
        for store in stores:
            await store.close()


async def children(store: AclStore, path: str) -> list[str]:
    return sorted(await store.store.get_children(path))


async def data(store: AclStore, path: str) -> bytes:
    return (await store.store.get(path))[0]


def allows(store: AclStore, principal: KafkaPrincipal, operation: AclOperation, name: str) -> bool:
    return store.authorizer.authorize(principal, HOST, operation, TOPIC, name)


@scenario
async def test_start_creates_kafkas_acl_paths(backend: Backend) -> None:
    async with brokers(backend) as [store]:
        types = ["Cluster", "DelegationToken", "Group", "Topic", "TransactionalId", "User"]
        assert await children(store, "/kafka-acl") == types
        assert await children(store, "/kafka-acl-extended") == ["prefixed"]
        assert await children(store, "/kafka-acl-extended/prefixed") == types
        assert await children(store, "/kafka-acl-changes") == []
        assert await children(store, "/kafka-acl-extended-changes") == []


@scenario
async def test_create_writes_kafkas_znodes(backend: Backend) -> None:
    async with brokers(backend) as [store]:
        results = await store.create(
            [
                acl("orders"),
                acl("orders", "User:bob", WRITE, permission=DENY),
                acl("tx-", pattern_type=PREFIXED, resource_type=ResourceType.TRANSACTIONAL_ID),
            ]
        )
        assert results == [None, None, None]
        orders = json.loads(await data(store, "/kafka-acl/Topic/orders"))
        assert orders["version"] == 1
        assert sorted(orders["acls"], key=lambda entry: entry["principal"]) == [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "host": "*",
                "operation": "Read",
            },
            {"principal": "User:bob", "permissionType": "Deny", "host": "*", "operation": "Write"},
        ]
        assert await data(store, "/kafka-acl-extended/prefixed/TransactionalId/tx-") == (
            b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*",'
            b'"operation":"Read"}],"version":1}'
        )
        # Kafka's brokers are told what changed.
        [literal] = await children(store, "/kafka-acl-changes")
        assert literal.startswith("acl_changes_")
        assert await data(store, f"/kafka-acl-changes/{literal}") == b"TOPIC:orders"
        [extended] = await children(store, "/kafka-acl-extended-changes")
        assert json.loads(await data(store, f"/kafka-acl-extended-changes/{extended}")) == {
            "version": 1,
            "resourceType": "TRANSACTIONAL_ID",
            "name": "tx-",
            "patternType": "PREFIXED",
        }
        # The writer's own authorizer has its ACLs when create returns.
        assert allows(store, ALICE, READ, "orders")
        assert not allows(store, BOB, WRITE, "orders")
        assert store.authorizer.authorize(
            ALICE, HOST, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, "tx-1"
        )


@scenario
async def test_create_answers_per_binding(backend: Backend) -> None:
    async with brokers(backend) as [store]:
        results = await store.create(
            [
                acl("ok"),
                acl("bad", resource_type=ResourceType.CLUSTER),
                acl("a/b"),
                acl("ok", "User:bob"),
                acl("worse", "bob"),
            ]
        )
        assert results == [
            None,
            (
                ErrorCode.INVALID_REQUEST,
                "The only valid name for the CLUSTER resource is kafka-cluster",
            ),
            (ErrorCode.INVALID_REQUEST, "Failed to create ACL"),
            None,
            (ErrorCode.UNKNOWN_SERVER_ERROR, None),
        ]
        assert await children(store, "/kafka-acl/Topic") == ["ok"]
        assert await children(store, "/kafka-acl/Cluster") == []
        assert len(store.authorizer.acls()) == 2


@scenario
async def test_creating_an_existing_acl_changes_nothing(backend: Backend) -> None:
    async with brokers(backend) as [store]:
        assert await store.create([acl("t")]) == [None]
        before = await data(store, "/kafka-acl/Topic/t")
        assert await store.create([acl("t")]) == [None]
        assert await data(store, "/kafka-acl/Topic/t") == before
        assert len(await children(store, "/kafka-acl-changes")) == 1


@scenario
async def test_another_broker_follows_every_change(backend: Backend) -> None:
    async with brokers(backend, 2) as [writer, follower]:
        assert not allows(follower, ALICE, READ, "t")
        await writer.create([acl("t"), acl("t", pattern_type=PREFIXED, operation=WRITE)])
        await eventually(
            lambda: allows(follower, ALICE, READ, "t") and allows(follower, ALICE, WRITE, "t2")
        )
        # A znode written by someone else (Kafka's tools) counts as well.
        entries = [AclEntryNode("User:bob", "Allow", "Read", "*")]
        await writer.store.set("/kafka-acl/Topic/t", encode_acls(entries))
        await eventually(
            lambda: allows(follower, BOB, READ, "t") and not allows(follower, ALICE, READ, "t")
        )
        await writer.delete([AclBindingFilter.ANY])
        await eventually(lambda: follower.authorizer.acl_count == 0)
        assert await children(follower, "/kafka-acl/Topic") == []


@scenario
async def test_delete_by_filters(backend: Backend) -> None:
    async with brokers(backend) as [store]:
        alice_t = acl("t")
        bob_t = acl("t", "User:bob", permission=DENY)
        alice_prefix = acl("t", pattern_type=PREFIXED)
        alice_u = acl("u")
        assert await store.create([alice_t, bob_t, alice_prefix, alice_u]) == [None] * 4
        alice = AccessControlEntryFilter(
            "User:alice", None, AclOperation.ANY, AclPermissionType.ANY
        )
        unknown = AccessControlEntryFilter(None, None, AclOperation.UNKNOWN, AclPermissionType.ANY)
        filters = [
            AclBindingFilter(ResourcePatternFilter(TOPIC, "t", PatternType.MATCH), alice),
            AclBindingFilter(ResourcePatternFilter(TOPIC, "t", LITERAL), alice),
            AclBindingFilter(ResourcePatternFilter.ANY, unknown),
            AclBindingFilter(ResourcePatternFilter(GROUP, None, PatternType.ANY), alice),
        ]
        results = await store.delete(filters)
        assert {d.binding for d in results[0].deleted} == {alice_t, alice_prefix}
        assert results[1] == AclDeleteResult(deleted=(DeletedAcl(alice_t),))
        assert results[2] == AclDeleteResult((ErrorCode.INVALID_REQUEST, "Unknown entryFilter."))
        assert results[3] == AclDeleteResult()
        assert set(store.authorizer.acls()) == {bob_t, alice_u}
        assert await children(store, "/kafka-acl-extended/prefixed/Topic") == []
        assert json.loads(await data(store, "/kafka-acl/Topic/t"))["acls"] == [
            {"principal": "User:bob", "permissionType": "Deny", "host": "*", "operation": "Read"}
        ]
        # Deleting what is not there deletes nothing.
        assert await store.delete([alice_t.to_filter()]) == [AclDeleteResult()]


@scenario
async def test_delete_finds_acls_this_broker_has_not_seen_yet(backend: Backend) -> None:
    """A filter naming one pattern reads it from the store (Kafka's filterToResources)."""
    async with brokers(backend, 2) as [writer, deleter]:
        binding = acl("fresh", pattern_type=PREFIXED)
        await writer.create([binding])
        any_type = AclBindingFilter(
            ResourcePatternFilter(TOPIC, "fresh", PatternType.ANY), AccessControlEntryFilter.ANY
        )
        assert await deleter.delete([any_type]) == [AclDeleteResult(deleted=(DeletedAcl(binding),))]
        await eventually(lambda: writer.authorizer.acl_count == 0)


@scenario
async def test_concurrent_writers_both_land(backend: Backend) -> None:
    """Two brokers writing one pattern at once: compare-and-set, read again, retry."""
    async with brokers(backend, 2) as [first, second]:
        ours, theirs = acl("t"), acl("t", "User:bob")
        assert await asyncio.gather(first.create([ours]), second.create([theirs])) == [
            [None],
            [None],
        ]
        for store in (first, second):
            await eventually(lambda store=store: set(store.authorizer.acls()) == {ours, theirs})
        stored = json.loads(await data(first, "/kafka-acl/Topic/t"))["acls"]
        assert {entry["principal"] for entry in stored} == {"User:alice", "User:bob"}


@scenario
async def test_entries_it_cannot_use_survive_writes(backend: Backend) -> None:
    async with brokers(backend) as [store]:
        foreign = [
            AclEntryNode("alice", "Allow", "Read", "*"),  # no principal type
            AclEntryNode("User:carol", "Allow", "Frobnicate", "*"),  # an unknown operation
            AclEntryNode("User:dave", "Any", "Read", "*"),  # not a permission an ACL has
        ]
        await store.store.create("/kafka-acl/Topic/t", encode_acls(foreign))
        assert await store.create([acl("t", "User:bob")]) == [None]
        stored = json.loads(await data(store, "/kafka-acl/Topic/t"))["acls"]
        assert {entry["principal"] for entry in stored} == {
            "alice",
            "User:carol",
            "User:dave",
            "User:bob",
        }
        assert {b.entry.principal for b in store.authorizer.acls()} == {"User:carol", "User:bob"}
        assert allows(store, BOB, READ, "t")
        assert not allows(store, KafkaPrincipal.user("carol"), READ, "t")


@scenario
async def test_acls_are_read_again_after_session_expiry(backend: Backend) -> None:
    async with brokers(backend, 2) as [writer, follower]:
        await writer.create([acl("t")])
        await eventually(lambda: allows(follower, ALICE, READ, "t"))
        await backend.expire(follower.store)
        await writer.create([acl("u")])
        await eventually(lambda: allows(follower, ALICE, READ, "u"))
        # The new session's watches work.
        await writer.create([acl("v")])
        await eventually(lambda: allows(follower, ALICE, READ, "v"))


@scenario
async def test_acls_persist_across_restart(backend: Backend) -> None:
    async with brokers(backend) as [store]:
        await store.create([acl("t"), acl("g", resource_type=GROUP, pattern_type=PREFIXED)])
    await backend.restart()
    async with brokers(backend) as [store]:
        assert store.authorizer.acl_count == 2
        assert store.authorizer.authorize(ALICE, HOST, READ, GROUP, "g1")


@scenario
async def test_expired_change_notifications_are_cleared(backend: Backend) -> None:
    async with brokers(backend) as [store]:
        await store.create([acl("t")])
        await store.create([acl("u")])
        assert len(await children(store, "/kafka-acl-changes")) == 2
        expiry = acl_store.NOTIFICATION_EXPIRY_MS
        acl_store.NOTIFICATION_EXPIRY_MS = -60_000  # everything is old now
        try:
            await store.create([acl("v")])
        finally:
            acl_store.NOTIFICATION_EXPIRY_MS = expiry
        assert await children(store, "/kafka-acl-changes") == []


@scenario
async def test_writes_that_fail_in_the_store_report_unknown_server_error(backend: Backend) -> None:
    async with brokers(backend) as [store]:
        binding = acl("t")
        await store.create([binding])
        await store.store.close()
        assert await store.create([acl("u")]) == [(ErrorCode.UNKNOWN_SERVER_ERROR, None)]
        assert await store.delete([binding.to_filter()]) == [
            AclDeleteResult(deleted=(DeletedAcl(binding, (ErrorCode.UNKNOWN_SERVER_ERROR, None)),))
        ]
        # The authorizer keeps deciding with what it had.
        assert allows(store, ALICE, READ, "t")
