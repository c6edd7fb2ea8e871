"""The ACL authorizer: may this principal, from this host, do this operation on this resource?

The rules are those of Kafka 4's ``StandardAuthorizer`` (``StandardAuthorizerData``):

* a principal listed in ``super.users`` may do anything;
* the ACLs that apply to a resource are those of its literal name, of the
  wildcard ``*`` and of every prefixed pattern its name starts with; an ACL
  applies to a request when its principal is the request's or ``User:*``, its
  host the client's address or ``*``, and its operation the requested one or ALL;
* an ALLOW of READ, WRITE, DELETE or ALTER allows DESCRIBE too, an ALLOW of
  ALTER_CONFIGS allows DESCRIBE_CONFIGS; a DENY implies nothing;
* any applicable DENY denies; else any applicable ALLOW allows; else, when the
  resource has no ACLs at all (for anyone), ``allow.everyone.if.no.acl.found``
  decides, and when it has some, the request is denied.

Kafka logs each denial of an explicit request at INFO on ``kafka.authorizer.logger``
(questions that only shape an answer, such as which topics to list, are not
logged); so does ``_log_denial``, in Kafka's words.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Mapping

from kpybroker.config.core import ConfigError
from kpybroker.security.acls.acl_cache import AclCache, IndexedAcl
from kpybroker.security.acls.model import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    supported_operations,
    to_32bit_field,
)
from kpybroker.security.principal import KafkaPrincipal, parse_principal

__all__ = [
    "ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG",
    "AUTHORIZER_CLASSES",
    "SUPER_USERS_CONFIG",
    "AclAuthorizer",
    "client_host",
    "configured_authorizer",
]

SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG = "allow.everyone.if.no.acl.found"

audit_log = logging.getLogger("kafka.authorizer.logger")
"""Kafka's name for the authorizer's decision log, so that its log settings read the same."""

_BY_TYPE_PROBE = "hardcode"
"""The resource name Kafka's ``authorizeByResourceType`` tries first (Authorizer.java)."""


#: ``authorizer.class.name`` values that turn ACLs on: Kafka 4's KRaft authorizer, and the
#: ZooKeeper-mode one of Kafka 3.x, whose ACLs kpybroker keeps where it kept them.
AUTHORIZER_CLASSES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)


def configured_authorizer(class_name: str, configs: Mapping[str, object]) -> AclAuthorizer | None:
    """The authorizer ``authorizer.class.name`` asks for: None when it is empty (everything is
    allowed); ``ConfigError`` for a Java class kpybroker cannot run."""
    if not class_name.strip():
        return None
    if class_name.strip() not in AUTHORIZER_CLASSES:
        raise ConfigError(
            "authorizer.class.name",
            f"Authorizer class {class_name} cannot be loaded by kpybroker: use "
            f"{AUTHORIZER_CLASSES[0]} (or {AUTHORIZER_CLASSES[1]}) for ACLs",
        )
    return AclAuthorizer.from_configs(configs)


def client_host(address: str) -> str:
    """A client's address as ACL hosts name it: Java's ``InetAddress.getHostAddress``.

    Java writes IPv6 addresses uncompressed, without leading zeros
    (``0:0:0:0:0:0:0:1`` for ``::1``), and an IPv4-mapped IPv6 address as the
    IPv4 one; an ACL for host ``::1`` therefore never matched in Kafka, and the
    same text must be compared here.
    """
    text, percent, scope = address.partition("%")
    try:
        parsed = ipaddress.ip_address(text)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv4Address):
        return text
    if parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    groups = ":".join(f"{int(group, 16):x}" for group in parsed.exploded.split(":"))
    return groups + percent + scope


class AclAuthorizer:
    """Decides from the ACLs it holds. The ACL store hands it each pattern's entries
    whole (``set_acls``); ``add`` and ``remove`` change one binding.

    ``host`` arguments are the client's address as ``client_host`` writes it.
    """

    def __init__(
        self, super_users: Iterable[KafkaPrincipal] = (), allow_if_no_acls: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acls = allow_if_no_acls
        self._cache = AclCache()

    @classmethod
    def from_configs(cls, configs: Mapping[str, object]) -> AclAuthorizer:
        """An authorizer set up as ``StandardAuthorizer.configure`` reads the broker's configs:
        ``super.users`` is a semicolon-separated list of principals (blanks ignored; one that
        does not parse raises ``ValueError``), ``allow.everyone.if.no.acl.found`` is true
        when it says ``true`` in any case."""
        listed = str(configs.get(SUPER_USERS_CONFIG) or "").split(";")
        super_users = [parse_principal(text.strip()) for text in listed if text.strip()]
        allow = str(configs.get(ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG, "")).strip().lower()
        return cls(super_users, allow == "true")

    # -- the ACLs held ---------------------------------------------------------------

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Make ``entries`` all the ACLs of ``pattern`` (none: it has no ACLs any more)."""
        self._cache.set_acls(pattern, entries)

    def add(self, binding: AclBinding) -> None:
        self._cache.add(binding)

    def remove(self, binding: AclBinding) -> None:
        self._cache.remove(binding)

    def acls(self, binding_filter: AclBindingFilter = AclBindingFilter.ANY) -> list[AclBinding]:
        """The ACLs the filter matches: DescribeAcls' answer."""
        return self._cache.bindings(binding_filter)

    @property
    def acl_count(self) -> int:
        return len(self._cache)

    # -- decisions -------------------------------------------------------------------

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        """May ``principal`` do ``operation`` on the resource ``name`` of ``resource_type``?

        ``log_if_denied=False`` is for questions that only shape an answer
        (authorized operations, filtering a listing), which Kafka does not log as denials.
        """
        if principal in self.super_users:
            return True
        allowed, rule = self._decide(principal, host, operation, resource_type, name)
        if not allowed and log_if_denied:
            self._log_denial(principal, host, operation, resource_type, name, rule)
        return allowed

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> set[AclOperation]:
        """Which of the operations a resource of this type supports the principal may do."""
        return {
            operation
            for operation in supported_operations(resource_type)
            if self.authorize(principal, host, operation, resource_type, name, log_if_denied=False)
        }

    def authorized_operations_field(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """``authorized_operations`` as the 32-bit field answers carry."""
        return to_32bit_field(self.authorized_operations(principal, host, resource_type, name))

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """May the principal do ``operation`` on at least one resource of this type?

        Kafka's ``Authorizer.authorizeByResourceType`` (which ``StandardAuthorizer``
        keeps): allowed when a resource named ``hardcode`` would be (super users,
        wildcard and matching prefixed ACLs, the no-ACL default); otherwise when the
        principal's (or ``User:*``'s) ACLs for exactly this operation or ALL, from this
        host, allow some name that no DENY covers: a literal name not denied itself nor
        by a prefix, a prefix not denied by a shorter-or-equal one. A wildcard DENY
        denies everything. Unlike ``authorize``, no operation implies another here.
        Raises ``ValueError`` for a filter's resource type or operation, as Kafka does.
        """
        if resource_type is ResourceType.ANY:
            raise ValueError("Must specify a non-filter resource type for authorizeByResourceType")
        if resource_type is ResourceType.UNKNOWN:
            raise ValueError("Unknown resource type")
        if operation is AclOperation.ANY:
            raise ValueError("Must specify a non-filter operation type for authorizeByResourceType")
        if operation is AclOperation.UNKNOWN:
            raise ValueError("Unknown operation type")
        if self.authorize(
            principal, host, operation, resource_type, _BY_TYPE_PROBE, log_if_denied=False
        ):
            return True
        denied_literals: set[str] = set()
        denied_prefixes: set[str] = set()
        allowed_literals: set[str] = set()
        allowed_prefixes: set[str] = set()
        for acl in self._applicable_by_type(principal, host, operation, resource_type):
            pattern = acl.binding.pattern
            literal = pattern.pattern_type is PatternType.LITERAL
            if acl.allow:
                (allowed_literals if literal else allowed_prefixes).add(pattern.name)
            elif literal and pattern.name == WILDCARD_RESOURCE:
                return False
            else:
                (denied_literals if literal else denied_prefixes).add(pattern.name)
        if WILDCARD_RESOURCE in allowed_literals:
            return True

        def dominated(name: str) -> bool:
            return any(name[:length] in denied_prefixes for length in range(1, len(name) + 1))

        return any(not dominated(name) for name in allowed_literals - denied_literals) or any(
            not dominated(name) for name in allowed_prefixes
        )

    def _applicable_by_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> Iterable[IndexedAcl]:
        """The principal's (and ``User:*``'s) ACLs on resources of this type for this host
        and for exactly this operation or ALL."""
        for who in {principal, WILDCARD_PRINCIPAL}:
            for acl in self._cache.of_principal(resource_type, who):
                entry = acl.binding.entry
                if (
                    acl.host in (WILDCARD_HOST, host)
                    and entry.operation in (operation, AclOperation.ALL)
                    and entry.permission_type in (AclPermissionType.ALLOW, AclPermissionType.DENY)
                ):
                    yield acl

    def _decide(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> tuple[bool, IndexedAcl | None]:
        """The decision and the ACL it rests on (None: the default)."""
        allowed_by = None
        groups = self._cache.matching(resource_type, name)
        for acls in groups:
            for acl in acls:
                if (
                    operation in acl.covers
                    and (acl.host == WILDCARD_HOST or acl.host == host)
                    and (acl.any_principal or acl.principal == principal)
                ):
                    if not acl.allow:
                        return False, acl
                    allowed_by = acl
        if allowed_by is not None:
            return True, allowed_by
        return (not groups and self.allow_if_no_acls), None

    def _log_denial(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        rule: IndexedAcl | None,
    ) -> None:
        """The one place a denial is reported (Kafka's audit line, at INFO)."""
        if audit_log.isEnabledFor(logging.INFO):
            audit_log.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = "
                "%s:LITERAL:%s based on rule %s",
                principal,
                operation.name,
                host,
                resource_type.kafka_name,
                name,
                "DefaultDeny" if rule is None else f"MatchingAcl(acl={rule.binding})",
            )
