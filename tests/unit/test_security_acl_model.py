"""Kafka's ACL model: wire codes, names, what the constructors refuse, the filters' rules.

The filter cases are those of Kafka's AclBindingTest, ResourcePatternTest and
ResourcePatternFilterTest.
"""

from __future__ import annotations

import pytest

from kpybroker.protocol.errors import ErrorCode
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
    authorization_error,
    supported_operations,
    to_32bit_field,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


# -- enums ---------------------------------------------------------------------------


def test_wire_codes_are_kafkas() -> None:
    assert [(t.name, t.value) for t in ResourceType] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("TOPIC", 2),
        ("GROUP", 3),
        ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5),
        ("DELEGATION_TOKEN", 6),
        ("USER", 7),
    ]
    assert [(o.name, o.value) for o in AclOperation] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("ALL", 2),
        ("READ", 3),
        ("WRITE", 4),
        ("CREATE", 5),
        ("DELETE", 6),
        ("ALTER", 7),
        ("DESCRIBE", 8),
        ("CLUSTER_ACTION", 9),
        ("DESCRIBE_CONFIGS", 10),
        ("ALTER_CONFIGS", 11),
        ("IDEMPOTENT_WRITE", 12),
        ("CREATE_TOKENS", 13),
        ("DESCRIBE_TOKENS", 14),
        ("TWO_PHASE_COMMIT", 15),
    ]
    assert [(p.name, p.value) for p in AclPermissionType] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("DENY", 2),
        ("ALLOW", 3),
    ]
    assert [(p.name, p.value) for p in PatternType] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("MATCH", 2),
        ("LITERAL", 3),
        ("PREFIXED", 4),
    ]


def test_unknown_codes_read_as_unknown() -> None:
    assert ResourceType.from_code(2) is TOPIC
    assert ResourceType.from_code(99) is ResourceType.UNKNOWN
    assert AclOperation.from_code(-1) is AclOperation.UNKNOWN
    assert AclPermissionType.from_code(4) is AclPermissionType.UNKNOWN
    assert PatternType.from_code(5) is PatternType.UNKNOWN


def test_names_as_kafka_writes_them() -> None:
    assert TOPIC.kafka_name == "Topic"
    assert ResourceType.TRANSACTIONAL_ID.kafka_name == "TransactionalId"
    assert ResourceType.DELEGATION_TOKEN.kafka_name == "DelegationToken"
    assert AclOperation.DESCRIBE_CONFIGS.kafka_name == "DescribeConfigs"
    assert AclOperation.TWO_PHASE_COMMIT.kafka_name == "TwoPhaseCommit"
    assert AclPermissionType.ALLOW.kafka_name == "Allow"


def test_names_read_as_security_utils_reads_them() -> None:
    """The Pascal-case name in any case; the enum constant's name only when it has no
    underscore (SecurityUtils looks the name up as written, then upper-cased)."""
    assert AclOperation.from_kafka_name("ClusterAction") is AclOperation.CLUSTER_ACTION
    assert AclOperation.from_kafka_name("clusterACTION") is AclOperation.CLUSTER_ACTION
    assert AclOperation.from_kafka_name("READ") is AclOperation.READ
    assert AclOperation.from_kafka_name("CLUSTER_ACTION") is AclOperation.UNKNOWN
    assert ResourceType.from_kafka_name("transactionalid") is ResourceType.TRANSACTIONAL_ID
    assert AclPermissionType.from_kafka_name("deny") is AclPermissionType.DENY
    assert AclPermissionType.from_kafka_name("Maybe") is AclPermissionType.UNKNOWN


def test_specific_pattern_types() -> None:
    assert [p for p in PatternType if p.is_specific] == [LITERAL, PREFIXED]


# -- constructors ----------------------------------------------------------------------

ENTRY = AccessControlEntry("User:ANONYMOUS", "", AclOperation.ALL, AclPermissionType.ALLOW)


@pytest.mark.parametrize(
    ("resource_type", "pattern_type", "message"),
    [
        (ResourceType.ANY, LITERAL, "resourceType must not be ANY"),
        (TOPIC, PatternType.MATCH, "patternType must not be MATCH"),
        (TOPIC, PatternType.ANY, "patternType must not be ANY"),
    ],
)
def test_a_pattern_is_not_a_filter(
    resource_type: ResourceType, pattern_type: PatternType, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ResourcePattern(resource_type, "foo", pattern_type)


def test_unknown_patterns_can_be_built() -> None:
    assert ResourcePattern(TOPIC, "foo", PatternType.UNKNOWN).is_unknown
    assert ResourcePattern(ResourceType.UNKNOWN, "foo", LITERAL).is_unknown


def test_an_entry_is_not_a_filter() -> None:
    with pytest.raises(ValueError, match="operation must not be ANY"):
        AccessControlEntry("User:a", "*", AclOperation.ANY, AclPermissionType.ALLOW)
    with pytest.raises(ValueError, match="permissionType must not be ANY"):
        AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ANY)


# -- AclBindingTest ---------------------------------------------------------------------

ACL1 = AclBinding(ResourcePattern(TOPIC, "mytopic", LITERAL), ENTRY)
ACL2 = AclBinding(
    ResourcePattern(TOPIC, "mytopic", LITERAL),
    AccessControlEntry("User:*", "", AclOperation.READ, AclPermissionType.ALLOW),
)
ACL3 = AclBinding(
    ResourcePattern(TOPIC, "mytopic2", LITERAL),
    AccessControlEntry("User:ANONYMOUS", "127.0.0.1", AclOperation.READ, AclPermissionType.DENY),
)
UNKNOWN_ACL = AclBinding(
    ResourcePattern(TOPIC, "mytopic2", LITERAL),
    AccessControlEntry("User:ANONYMOUS", "127.0.0.1", AclOperation.UNKNOWN, AclPermissionType.DENY),
)
ANY_ANONYMOUS = AclBindingFilter(
    ResourcePatternFilter.ANY,
    AccessControlEntryFilter("User:ANONYMOUS", None, AclOperation.ANY, AclPermissionType.ANY),
)
ANY_DENY = AclBindingFilter(
    ResourcePatternFilter.ANY,
    AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.DENY),
)
ANY_MYTOPIC = AclBindingFilter(
    ResourcePatternFilter(TOPIC, "mytopic", LITERAL), AccessControlEntryFilter.ANY
)


def test_binding_matching() -> None:
    assert AclBinding(ResourcePattern(TOPIC, "mytopic", LITERAL), ENTRY) == ACL1
    assert ACL1 != ACL2
    for acl in (ACL1, ACL2, ACL3, UNKNOWN_ACL):
        assert AclBindingFilter.ANY.matches(acl)
    assert [ANY_ANONYMOUS.matches(a) for a in (ACL1, ACL2, ACL3, UNKNOWN_ACL)] == [
        True,
        False,
        True,
        True,
    ]
    assert [ANY_DENY.matches(a) for a in (ACL1, ACL2, ACL3, UNKNOWN_ACL)] == [
        False,
        False,
        True,
        True,
    ]
    assert [ANY_MYTOPIC.matches(a) for a in (ACL1, ACL2, ACL3, UNKNOWN_ACL)] == [
        True,
        True,
        False,
        False,
    ]


def test_binding_unknowns() -> None:
    assert not any(a.is_unknown for a in (ACL1, ACL2, ACL3, ANY_ANONYMOUS, ANY_DENY, ANY_MYTOPIC))
    assert UNKNOWN_ACL.is_unknown


def test_matches_at_most_one() -> None:
    for acl in (ACL1, ACL2, ACL3):
        assert acl.to_filter().find_indefinite_field() is None
        assert acl.to_filter().matches_at_most_one()
    for binding_filter in (ANY_ANONYMOUS, ANY_DENY, ANY_MYTOPIC):
        assert not binding_filter.matches_at_most_one()


@pytest.mark.parametrize(
    ("binding_filter", "field"),
    [
        (AclBindingFilter.ANY, "Resource type is ANY."),
        (
            AclBindingFilter(
                ResourcePatternFilter(ResourceType.UNKNOWN, "a", LITERAL), ACL1.entry.to_filter()
            ),
            "Resource type is UNKNOWN.",
        ),
        (ANY_MYTOPIC, "Principal is NULL"),
        (
            AclBindingFilter(ResourcePatternFilter(TOPIC, None, LITERAL), ACL1.entry.to_filter()),
            "Resource name is NULL.",
        ),
        (
            AclBindingFilter(
                ResourcePatternFilter(TOPIC, "a", PatternType.MATCH), ACL1.entry.to_filter()
            ),
            "Resource pattern type is MATCH.",
        ),
        (
            AclBindingFilter(
                ResourcePatternFilter(TOPIC, "a", PatternType.UNKNOWN), ACL1.entry.to_filter()
            ),
            "Resource pattern type is UNKNOWN.",
        ),
        (
            AclBindingFilter(
                ACL1.pattern.to_filter(),
                AccessControlEntryFilter("User:a", None, AclOperation.READ, AclPermissionType.DENY),
            ),
            "Host is NULL",
        ),
        (
            AclBindingFilter(
                ACL1.pattern.to_filter(),
                AccessControlEntryFilter("User:a", "*", AclOperation.ANY, AclPermissionType.DENY),
            ),
            "Operation is ANY",
        ),
        (
            AclBindingFilter(
                ACL1.pattern.to_filter(),
                AccessControlEntryFilter("User:a", "*", AclOperation.READ, AclPermissionType.ANY),
            ),
            "Permission type is ANY",
        ),
        (
            AclBindingFilter(
                ACL1.pattern.to_filter(),
                AccessControlEntryFilter(
                    "User:a", "*", AclOperation.READ, AclPermissionType.UNKNOWN
                ),
            ),
            "Permission type is UNKNOWN",
        ),
    ],
)
def test_find_indefinite_field(binding_filter: AclBindingFilter, field: str) -> None:
    assert binding_filter.find_indefinite_field() == field
    assert not binding_filter.matches_at_most_one()


# -- ResourcePatternFilterTest ------------------------------------------------------------


def test_filter_unknowns() -> None:
    assert ResourcePatternFilter(ResourceType.UNKNOWN, None, LITERAL).is_unknown
    assert ResourcePatternFilter(GROUP, None, PatternType.UNKNOWN).is_unknown
    assert not ResourcePatternFilter(GROUP, None, PatternType.ANY).is_unknown


@pytest.mark.parametrize(
    ("resource_filter", "pattern", "matches"),
    [
        ((TOPIC, "Name", LITERAL), (GROUP, "Name", LITERAL), False),
        ((TOPIC, "Different", PREFIXED), (TOPIC, "Name", PREFIXED), False),
        ((TOPIC, "NAME", LITERAL), (TOPIC, "Name", LITERAL), False),
        ((TOPIC, "Name", LITERAL), (TOPIC, "Name", PREFIXED), False),
        ((ResourceType.ANY, "Name", PREFIXED), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, None, PREFIXED), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, None, PatternType.ANY), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, None, PatternType.MATCH), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, "Name", LITERAL), (TOPIC, "Name", LITERAL), True),
        ((TOPIC, "Name", PatternType.ANY), (TOPIC, "Name", LITERAL), True),
        ((TOPIC, "Name", PatternType.MATCH), (TOPIC, "Name", LITERAL), True),
        ((TOPIC, "Name-something", PatternType.MATCH), (TOPIC, "Name", LITERAL), False),
        ((TOPIC, "*", LITERAL), (TOPIC, "*", LITERAL), True),
        ((TOPIC, "Name", LITERAL), (TOPIC, "*", LITERAL), False),
        ((TOPIC, "*", LITERAL), (TOPIC, "Name", LITERAL), False),
        ((TOPIC, "Name", PatternType.ANY), (TOPIC, "*", LITERAL), False),
        ((TOPIC, "Name", PatternType.MATCH), (TOPIC, "*", LITERAL), True),
        ((TOPIC, "Name", PREFIXED), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, "Name", PREFIXED), (TOPIC, "Name-something", PREFIXED), False),
        ((TOPIC, "Name-something", PREFIXED), (TOPIC, "Name", PREFIXED), False),
        ((TOPIC, "Name-something", PatternType.ANY), (TOPIC, "Name", PREFIXED), False),
        ((TOPIC, "Name-something", PatternType.MATCH), (TOPIC, "Name", PREFIXED), True),
        ((TOPIC, "Name", PatternType.UNKNOWN), (TOPIC, "Name", LITERAL), False),
    ],
)
def test_pattern_filter_matches(
    resource_filter: tuple[ResourceType, str | None, PatternType],
    pattern: tuple[ResourceType, str, PatternType],
    matches: bool,
) -> None:
    assert ResourcePatternFilter(*resource_filter).matches(ResourcePattern(*pattern)) is matches


def test_entry_filter_matches_each_field() -> None:
    entry = AccessControlEntry("User:a", "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW)
    assert AccessControlEntryFilter.ANY.matches(entry)
    assert entry.to_filter().matches(entry)
    for other in (
        AccessControlEntryFilter("User:b", None, AclOperation.ANY, AclPermissionType.ANY),
        AccessControlEntryFilter(None, "*", AclOperation.ANY, AclPermissionType.ANY),
        AccessControlEntryFilter(None, None, AclOperation.ALL, AclPermissionType.ANY),
        AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.DENY),
    ):
        assert not other.matches(entry)


# -- per resource type -------------------------------------------------------------------


def test_supported_operations_are_kafka_44s() -> None:
    ops = AclOperation
    assert supported_operations(TOPIC) == {
        ops.READ,
        ops.WRITE,
        ops.CREATE,
        ops.DESCRIBE,
        ops.DELETE,
        ops.ALTER,
        ops.DESCRIBE_CONFIGS,
        ops.ALTER_CONFIGS,
    }
    assert supported_operations(GROUP) == {
        ops.READ,
        ops.DESCRIBE,
        ops.DELETE,
        ops.DESCRIBE_CONFIGS,
        ops.ALTER_CONFIGS,
    }
    assert supported_operations(ResourceType.CLUSTER) == {
        ops.CREATE,
        ops.CLUSTER_ACTION,
        ops.DESCRIBE_CONFIGS,
        ops.ALTER_CONFIGS,
        ops.IDEMPOTENT_WRITE,
        ops.ALTER,
        ops.DESCRIBE,
    }
    assert supported_operations(ResourceType.TRANSACTIONAL_ID) == {
        ops.DESCRIBE,
        ops.WRITE,
        ops.TWO_PHASE_COMMIT,
    }
    assert supported_operations(ResourceType.DELEGATION_TOKEN) == {ops.DESCRIBE}
    assert supported_operations(ResourceType.USER) == {ops.CREATE_TOKENS, ops.DESCRIBE_TOKENS}
    with pytest.raises(ValueError, match="Not a concrete resource type"):
        supported_operations(ResourceType.ANY)


def test_32bit_field_sets_the_operations_codes() -> None:
    assert to_32bit_field([]) == 0
    assert to_32bit_field([AclOperation.READ, AclOperation.DESCRIBE]) == (1 << 3) | (1 << 8)
    # What a topic's authorized operations are with every one allowed (Kafka: 3576).
    assert to_32bit_field(supported_operations(TOPIC)) == 3576


def test_authorization_errors() -> None:
    assert authorization_error(TOPIC) is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert authorization_error(GROUP) is ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert authorization_error(ResourceType.CLUSTER) is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert (
        authorization_error(ResourceType.TRANSACTIONAL_ID)
        is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    with pytest.raises(ValueError, match="Authorization error type not known"):
        authorization_error(ResourceType.USER)
