"""What CreateAcls and DeleteAcls refuse, with the errors and messages Kafka gives."""

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
)
from kpybroker.security.acls.validation import validate_filter, validate_new_binding

INVALID = ErrorCode.INVALID_REQUEST


def binding(
    resource_type: ResourceType = ResourceType.TOPIC,
    name: str = "orders",
    pattern_type: PatternType = PatternType.LITERAL,
    principal: str = "User:alice",
    operation: AclOperation = AclOperation.READ,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, "*", operation, permission),
    )


@pytest.mark.parametrize(
    "valid",
    [
        binding(),
        binding(pattern_type=PatternType.PREFIXED, permission=AclPermissionType.DENY),
        binding(name="*", principal="User:*", operation=AclOperation.ALL),
        binding(ResourceType.CLUSTER, "kafka-cluster", operation=AclOperation.CLUSTER_ACTION),
        binding(ResourceType.TRANSACTIONAL_ID, "tx-1", operation=AclOperation.TWO_PHASE_COMMIT),
        binding(principal="User:"),
        binding(principal=":alice"),
        binding(principal="User:CN=alice,O=example:colons"),
        binding(name="a.b-c_d é"),
    ],
)
def test_valid_bindings(valid: AclBinding) -> None:
    assert validate_new_binding(valid) is None


@pytest.mark.parametrize(
    ("refused", "error"),
    [
        (
            binding(ResourceType.CLUSTER, "my-cluster"),
            (INVALID, "The only valid name for the CLUSTER resource is kafka-cluster"),
        ),
        (
            binding(ResourceType.CLUSTER, ""),
            (INVALID, "The only valid name for the CLUSTER resource is kafka-cluster"),
        ),
        (binding(name=""), (INVALID, "Invalid empty resource name")),
        (binding(ResourceType.UNKNOWN), (INVALID, "Invalid resourceType UNKNOWN")),
        (binding(pattern_type=PatternType.UNKNOWN), (INVALID, "Invalid patternType UNKNOWN")),
        (binding(operation=AclOperation.UNKNOWN), (INVALID, "Invalid operation UNKNOWN")),
        (
            binding(permission=AclPermissionType.UNKNOWN),
            (INVALID, "Invalid permissionType UNKNOWN"),
        ),
        (binding(name="a/b"), (INVALID, "Failed to create ACL")),
        (binding(name=".."), (INVALID, "Failed to create ACL")),
        (binding(name="tab\there"), (INVALID, "Failed to create ACL")),
        (binding(name="smile\U0001f600"), (INVALID, "Failed to create ACL")),
        (binding(principal="alice"), (ErrorCode.UNKNOWN_SERVER_ERROR, None)),
    ],
)
def test_refused_bindings(refused: AclBinding, error: tuple[ErrorCode, str | None]) -> None:
    assert validate_new_binding(refused) == error


def test_unknown_filters_are_refused() -> None:
    unknown_pattern = AclBindingFilter(
        ResourcePatternFilter(ResourceType.UNKNOWN, None, PatternType.ANY),
        AccessControlEntryFilter.ANY,
    )
    unknown_entry = AclBindingFilter(
        ResourcePatternFilter.ANY,
        AccessControlEntryFilter(None, None, AclOperation.UNKNOWN, AclPermissionType.ANY),
    )
    assert validate_filter(unknown_pattern) == (INVALID, "Unknown patternFilter.")
    assert validate_filter(unknown_entry) == (INVALID, "Unknown entryFilter.")
    assert validate_filter(AclBindingFilter.ANY) is None
    match_filter = AclBindingFilter(
        ResourcePatternFilter(ResourceType.TOPIC, "t", PatternType.MATCH),
        AccessControlEntryFilter.ANY,
    )
    assert validate_filter(match_filter) is None
