"""Where ACLs live in the store, and how their znodes are encoded: Kafka 3.x's ZooKeeper layout.

Kafka's ``AclAuthorizer`` (``kafka.zk.ZkData``: ``ZkAclStore``, ``ResourceZNode``,
``ZkAclChangeStore``) kept one znode per resource pattern, holding every ACL
entry of that pattern, and announced each change with a sequential node:

=================================================  =======================================
``/kafka-acl/<ResourceType>/<name>``                literal patterns (and the ``*``
                                                    wildcard): ``{"acls":[{"principal":
                                                    "User:alice","permissionType":"Allow",
                                                    "host":"*","operation":"Read"}],
                                                    "version":1}``
``/kafka-acl-extended/prefixed/<ResourceType>/..``  prefixed patterns, the same JSON
``/kafka-acl-changes/acl_changes_<seq>``            a literal pattern changed:
                                                    ``TOPIC:<name>``
``/kafka-acl-extended-changes/acl_changes_<seq>``   a prefixed one: ``{"version":1,
                                                    "resourceType":"TOPIC","name":..,
                                                    "patternType":"PREFIXED"}``
=================================================  =======================================

The spellings differ by place, as in Kafka: paths and the ACL JSON use the
Pascal-case names of ``SecurityUtils`` (``Topic``, ``TransactionalId``,
``Allow``, ``DescribeConfigs``), change notifications the enum constants'
names (``TOPIC``, ``TRANSACTIONAL_ID``, ``PREFIXED``). The JSON is compact, with
keys in the order Jackson wrote Kafka's hash maps, so that a znode written here
is byte for byte what Kafka 3.9 wrote for the same single entry.

This module sits in the metadata layer, below the ACL model: it deals in the
strings stored, and the security side maps them to and from its enums. Decoders
raise one of ``znodes.DECODE_ERRORS`` on a malformed payload.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from kpybroker.metadata.store import NodeStat

__all__ = [
    "ACL_CHANGE_PREFIX",
    "ACL_JSON_VERSION",
    "EXTENDED_ACL_CHANGES_PATH",
    "EXTENDED_ACL_PATH",
    "LITERAL",
    "LITERAL_ACL_CHANGES_PATH",
    "LITERAL_ACL_PATH",
    "NOTIFICATION_EXPIRY_MS",
    "AclEntryNode",
    "AclNode",
    "acl_changes_path",
    "acl_store_path",
    "decode_acls",
    "decode_extended_change",
    "decode_literal_change",
    "encode_acls",
    "encode_extended_change",
    "encode_literal_change",
    "is_storable_name",
    "resource_path",
    "resource_type_path",
]

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
"""Name of the sequential change-notification nodes, before ZooKeeper's 10-digit suffix."""
NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000
"""Age after which Kafka deleted a change notification (ZkNodeChangeNotificationListener)."""
ACL_JSON_VERSION = 1
LITERAL = "LITERAL"
"""The pattern type stored under ``/kafka-acl``; every other one has its own extended store."""


# -- paths ---------------------------------------------------------------------


def acl_store_path(pattern_type: str) -> str:
    """The root of one pattern type's ACLs; ``pattern_type`` is the enum name (``PREFIXED``)."""
    if pattern_type == LITERAL:
        return LITERAL_ACL_PATH
    return f"{EXTENDED_ACL_PATH}/{pattern_type.lower()}"


def resource_type_path(pattern_type: str, resource_type: str) -> str:
    """The parent of one resource type's patterns; ``resource_type`` as Kafka spells it
    in paths (``Topic``)."""
    return f"{acl_store_path(pattern_type)}/{resource_type}"


def resource_path(pattern_type: str, resource_type: str, name: str) -> str:
    return f"{resource_type_path(pattern_type, resource_type)}/{name}"


def acl_changes_path(pattern_type: str) -> str:
    """Where changes of ``pattern_type``'s ACLs are announced: literal ones apart (the
    pre-2.0 format), all the others in the extended store."""
    return LITERAL_ACL_CHANGES_PATH if pattern_type == LITERAL else EXTENDED_ACL_CHANGES_PATH


def is_storable_name(name: str) -> bool:
    """Whether a resource name can be a znode's name: ZooKeeper's ``PathUtils.validatePath``
    for one path component.

    ZooKeeper refuses ``/`` (a component separator), ``.`` and ``..``, control
    characters, and the UTF-16 ranges U+D800..U+F8FF and U+FFF0..U+FFFF, which
    include the surrogates any character beyond U+FFFF is sent as.
    """
    if not name or name in (".", "..") or "/" in name:
        return False
    for char in name:
        code = ord(char)
        if code <= 0x1F or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xF8FF or code >= 0xFFF0:
            return False
    return True


# -- ACL znodes ------------------------------------------------------------------


class AclEntryNode(NamedTuple):
    """One ACL entry as stored: the four strings of Kafka's ``AclEntry.toMap``."""

    principal: str
    """``User:alice``."""
    permission_type: str
    """``Allow`` or ``Deny``."""
    operation: str
    """``Read``, ``DescribeConfigs``, ..."""
    host: str
    """An address, or ``*``."""


@dataclass(frozen=True, slots=True)
class AclNode:
    """A resource pattern's znode as decoded: its entries and the znode version, to
    compare-and-set on."""

    entries: frozenset[AclEntryNode]
    version: int


def encode_acls(entries: Iterable[AclEntryNode]) -> bytes:
    """Version 1 of Kafka's ResourceZNode. Kafka listed the entries in the order of a hash
    set; they are sorted here, so that equal sets give equal bytes."""
    acls = [
        {
            "principal": entry.principal,
            "permissionType": entry.permission_type,
            "host": entry.host,
            "operation": entry.operation,
        }
        for entry in sorted(set(entries))
    ]
    return _json({"acls": acls, "version": ACL_JSON_VERSION})


def decode_acls(name: str, data: bytes, stat: NodeStat) -> AclNode:
    """A resource pattern's znode; an empty one holds no ACLs (Kafka's ``AclEntry.fromBytes``)."""
    if not data:
        return AclNode(frozenset(), stat.version)
    payload = json.loads(data)
    if payload["version"] != ACL_JSON_VERSION:
        raise ValueError(f"unsupported ACL znode version {payload['version']!r}")
    entries = frozenset(
        AclEntryNode(
            _string(item["principal"]),
            _string(item["permissionType"]),
            _string(item["operation"]),
            _string(item["host"]),
        )
        for item in payload["acls"]
    )
    return AclNode(entries, stat.version)


def _json(value: object) -> bytes:
    """Compact JSON with characters beyond ASCII as UTF-8, as Jackson writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


# -- change notifications ------------------------------------------------------------


def encode_literal_change(resource_type: str, name: str) -> bytes:
    """The payload announcing a change of a literal pattern: ``<RESOURCE_TYPE>:<name>``,
    the resource type as its enum constant's name."""
    return f"{resource_type}:{name}".encode()


def decode_literal_change(data: bytes) -> tuple[str, str]:
    """(resource type, name) of a literal change notification."""
    resource_type, colon, name = data.decode().partition(":")
    if not colon:
        raise ValueError(f"expected a string in format ResourceType:ResourceName but got {data!r}")
    return resource_type, name


def encode_extended_change(resource_type: str, name: str, pattern_type: str) -> bytes:
    """The payload announcing a change of a pattern of another type: Kafka's
    ``ExtendedAclChangeEvent``, with the enum constants' names."""
    event = {
        "version": 1,
        "resourceType": resource_type,
        "name": name,
        "patternType": pattern_type,
    }
    return _json(event)


def decode_extended_change(data: bytes) -> tuple[str, str, str]:
    """(resource type, name, pattern type) of an extended change notification."""
    event = json.loads(data)
    if event["version"] > 1:
        raise ValueError(f"unsupported ACL change event version {event['version']!r}")
    return _string(event["resourceType"]), _string(event["name"]), _string(event["patternType"])
