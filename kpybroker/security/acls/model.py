"""Kafka's ACL model: resource patterns, access control entries, bindings, and their filters.

The enums carry Kafka's wire codes as values and its constants' names, so a
code read off the wire or a name from a Kafka log maps straight to a member;
``from_code`` turns an unknown code into ``UNKNOWN`` as Kafka's ``fromCode``
does. ``kafka_name`` and ``from_kafka_name`` are the Pascal-case spellings of
``SecurityUtils`` (``Topic``, ``DescribeConfigs``, ``Allow``) that ZooKeeper
paths, the ACL JSON and Kafka's messages use.

The classes follow ``org.apache.kafka.common.acl`` and ``.resource``,
including what their constructors refuse (a pattern of type ``ANY``, an entry
for operation ``ANY``: those are filters' values) and the filters' matching
rules (``matches``, ``matches_at_most_one``, ``find_indefinite_field``), which
DescribeAcls and DeleteAcls are defined by.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, Self

from kpybroker.protocol.errors import ErrorCode
from kpybroker.security.principal import USER_TYPE, KafkaPrincipal

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "authorization_error",
    "supported_operations",
    "to_32bit_field",
]

WILDCARD_RESOURCE = "*"
"""The name of a literal pattern that matches every resource of its type."""
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = KafkaPrincipal(USER_TYPE, "*")
"""``User:*``: an entry for every principal (of any type)."""
CLUSTER_NAME = "kafka-cluster"
"""The one name of the CLUSTER resource."""


class _KafkaEnum(enum.IntEnum):
    """A Kafka enum: wire codes as values, Kafka's constant names as names."""

    @classmethod
    def from_code(cls, code: int) -> Self:
        """The member with wire code ``code``; ``UNKNOWN`` for a code this version lacks."""
        try:
            return cls(code)
        except ValueError:
            return cls["UNKNOWN"]

    @property
    def kafka_name(self) -> str:
        """``SecurityUtils``' Pascal-case name: ``DescribeConfigs`` for DESCRIBE_CONFIGS."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, text: str) -> Self:
        """The member named ``text`` as ``SecurityUtils`` reads names: the Pascal-case name in
        any letter case (``Read``, ``READ``, ``clusteraction``), else ``UNKNOWN``."""
        table = _names_of(cls)
        return table.get(text) or table.get(text.upper()) or cls["UNKNOWN"]


@functools.cache
def _names_of(cls: type[_KafkaEnum]) -> dict[str, _KafkaEnum]:
    table: dict[str, _KafkaEnum] = {}
    for member in cls:
        table[member.kafka_name] = member
        table[member.kafka_name.upper()] = member
    return table


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    """In filters: any resource type."""
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    """In filters: any operation."""
    ALL = 2
    """In entries: every operation."""
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15
    """KIP-939 (Kafka 4.1+): transactions prepared for an external commit."""


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    """In filters: either permission type."""
    DENY = 2
    ALLOW = 3


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    """In filters: patterns of any type whose name is the filter's name."""
    MATCH = 2
    """In filters: every pattern that would apply to a resource of the filter's name."""
    LITERAL = 3
    """The name itself, or every name when it is ``*``."""
    PREFIXED = 4
    """Every name that starts with the pattern's name."""

    @property
    def is_specific(self) -> bool:
        """A pattern's type rather than a filter's (Kafka's ``isSpecific``)."""
        return self not in (PatternType.UNKNOWN, PatternType.ANY, PatternType.MATCH)


# -- what is authorized -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """The resources an ACL applies to: a type, a name, and how the name matches."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __post_init__(self) -> None:
        if self.resource_type is ResourceType.ANY:
            raise ValueError("resourceType must not be ANY")
        if self.pattern_type in (PatternType.MATCH, PatternType.ANY):
            raise ValueError(f"patternType must not be {self.pattern_type.name}")

    @property
    def is_unknown(self) -> bool:
        return (
            self.resource_type is ResourceType.UNKNOWN or self.pattern_type is PatternType.UNKNOWN
        )

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who may (ALLOW) or may not (DENY) do an operation, from where.

    The principal is kept as written (``User:alice``): Kafka compares entries by
    their strings, and parses the principal only to authorize.
    """

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        if self.operation is AclOperation.ANY:
            raise ValueError("operation must not be ANY")
        if self.permission_type is AclPermissionType.ANY:
            raise ValueError("permissionType must not be ANY")

    @property
    def is_unknown(self) -> bool:
        return (
            self.operation is AclOperation.UNKNOWN
            or self.permission_type is AclPermissionType.UNKNOWN
        )

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(
            self.principal, self.host, self.operation, self.permission_type
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown

    def to_filter(self) -> AclBindingFilter:
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())


# -- filters ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Selects resource patterns (DescribeAcls, DeleteAcls); a None name matches any."""

    ANY: ClassVar[ResourcePatternFilter]
    """Matches every pattern."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    @property
    def is_unknown(self) -> bool:
        return (
            self.resource_type is ResourceType.UNKNOWN or self.pattern_type is PatternType.UNKNOWN
        )

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``: type ANY matches every type; pattern
        type ANY matches patterns of any type by exact name, MATCH the patterns that
        would apply to a resource called ``name``."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type is PatternType.ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        raise ValueError(f"Unsupported PatternType: {pattern.pattern_type.name}")

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def find_indefinite_field(self) -> str | None:
        """Why the filter may match more than one pattern (Kafka's wording), or None."""
        if self.resource_type is ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type is ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type is PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type is PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Selects entries; a None principal or host matches any, as do the ANY values."""

    ANY: ClassVar[AccessControlEntryFilter]
    """Matches every entry."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    @property
    def is_unknown(self) -> bool:
        return (
            self.operation is AclOperation.UNKNOWN
            or self.permission_type is AclPermissionType.UNKNOWN
        )

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is AclOperation.ANY or self.operation == entry.operation)
            and (
                self.permission_type is AclPermissionType.ANY
                or self.permission_type == entry.permission_type
            )
        )

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def find_indefinite_field(self) -> str | None:
        if self.principal is None:
            return "Principal is NULL"
        if self.host is None:
            return "Host is NULL"
        if self.operation is AclOperation.ANY:
            return "Operation is ANY"
        if self.operation is AclOperation.UNKNOWN:
            return "Operation is UNKNOWN"
        if self.permission_type is AclPermissionType.ANY:
            return "Permission type is ANY"
        if self.permission_type is AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects ACLs: DescribeAcls lists, DeleteAcls deletes, the ones it matches."""

    ANY: ClassVar[AclBindingFilter]
    """Matches every ACL."""

    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(
            binding.entry
        )

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None

    def find_indefinite_field(self) -> str | None:
        return (
            self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()
        )


ResourcePatternFilter.ANY = ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)
AccessControlEntryFilter.ANY = AccessControlEntryFilter(
    None, None, AclOperation.ANY, AclPermissionType.ANY
)
AclBindingFilter.ANY = AclBindingFilter(ResourcePatternFilter.ANY, AccessControlEntryFilter.ANY)


# -- per resource type ----------------------------------------------------------------

_SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[AclOperation]] = MappingProxyType(
    {
        ResourceType.TOPIC: frozenset(
            {
                AclOperation.READ,
                AclOperation.WRITE,
                AclOperation.CREATE,
                AclOperation.DESCRIBE,
                AclOperation.DELETE,
                AclOperation.ALTER,
                AclOperation.DESCRIBE_CONFIGS,
                AclOperation.ALTER_CONFIGS,
            }
        ),
        ResourceType.GROUP: frozenset(
            {
                AclOperation.READ,
                AclOperation.DESCRIBE,
                AclOperation.DELETE,
                AclOperation.DESCRIBE_CONFIGS,
                AclOperation.ALTER_CONFIGS,
            }
        ),
        ResourceType.CLUSTER: frozenset(
            {
                AclOperation.CREATE,
                AclOperation.CLUSTER_ACTION,
                AclOperation.DESCRIBE_CONFIGS,
                AclOperation.ALTER_CONFIGS,
                AclOperation.IDEMPOTENT_WRITE,
                AclOperation.ALTER,
                AclOperation.DESCRIBE,
            }
        ),
        ResourceType.TRANSACTIONAL_ID: frozenset(
            {AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT}
        ),
        ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
        ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
    }
)

_AUTHORIZATION_ERRORS: Mapping[ResourceType, ErrorCode] = MappingProxyType(
    {
        ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
    }
)


def supported_operations(resource_type: ResourceType) -> frozenset[AclOperation]:
    """The operations that apply to resources of this type (Kafka 4.4's
    ``AclEntry.supportedOperations``): what an answer's authorized operations may hold."""
    try:
        return _SUPPORTED_OPERATIONS[resource_type]
    except KeyError:
        raise ValueError("Not a concrete resource type") from None


def authorization_error(resource_type: ResourceType) -> ErrorCode:
    """The error of an operation denied on a resource of this type
    (Kafka's ``AclEntry.authorizationError``)."""
    try:
        return _AUTHORIZATION_ERRORS[resource_type]
    except KeyError:
        raise ValueError("Authorization error type not known") from None


def to_32bit_field(operations: Iterable[AclOperation]) -> int:
    """Authorized operations as the wire has them: bit ``code`` set per operation
    (Kafka's ``Utils.to32BitField``)."""
    field = 0
    for operation in operations:
        if not 0 <= operation <= 31:
            raise ValueError(f"out of range: {operation.value}")
        field |= 1 << operation
    return field
