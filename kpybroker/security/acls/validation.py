"""Which ACLs CreateAcls refuses, and which filters DeleteAcls refuses, with Kafka's errors.

Kafka 4 checks a new ACL in two places: ``AclApis.handleCreateAcls`` (the
CLUSTER resource's name, an empty name) and then the controller's
``AclControlManager.validateNewAcl`` (types that are a filter's or unknown).
Kafka 3.9's ``AclAuthorizer``, which kept ACLs in ZooKeeper as the store here
does, refused besides a name that cannot be a znode's (``/``), and failed a
principal that does not parse when it came to write it.

Bindings with a filter's value in them (resource type ANY, pattern type ANY or
MATCH, operation or permission ANY) cannot be built (``model`` refuses them as
Kafka's constructors do): in Kafka that fails the whole CreateAcls request
with UNKNOWN_SERVER_ERROR and no message, before any of these checks.
"""

from __future__ import annotations

from kpybroker.metadata.acl_znodes import is_storable_name
from kpybroker.protocol.errors import ErrorCode
from kpybroker.security.acls.model import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kpybroker.security.principal import parse_principal

__all__ = ["AclError", "validate_filter", "validate_new_binding"]

AclError = tuple[ErrorCode, str | None]
"""An error of one ACL or filter and the message Kafka gives with it (None: no message)."""


def validate_new_binding(binding: AclBinding) -> AclError | None:
    """Why CreateAcls refuses ``binding``, or None when it may be created."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return _invalid(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        return _invalid("Invalid empty resource name")
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return _invalid(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return _invalid(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return _invalid(f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return _invalid(f"Invalid permissionType {entry.permission_type.name}")
    if not is_storable_name(pattern.name):
        return _invalid("Failed to create ACL")
    try:
        parse_principal(entry.principal)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR, None
    return None


def validate_filter(binding_filter: AclBindingFilter) -> AclError | None:
    """Why DeleteAcls refuses ``binding_filter`` (``AclControlManager.validateFilter``)."""
    if binding_filter.pattern_filter.is_unknown:
        return _invalid("Unknown patternFilter.")
    if binding_filter.entry_filter.is_unknown:
        return _invalid("Unknown entryFilter.")
    return None


def _invalid(message: str) -> AclError:
    return ErrorCode.INVALID_REQUEST, message
