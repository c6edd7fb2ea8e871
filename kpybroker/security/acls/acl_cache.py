"""The ACLs an authorizer holds, indexed for the questions it is asked.

Authorizing a request looks up the ACLs that apply to one resource: the
literal pattern of its name, the wildcard ``*``, and every prefixed pattern
whose name starts the resource's name. Literal patterns are a dict per
resource type. Prefixed ones are a sorted list per resource type, walked the
way Kafka's ``StandardAuthorizerData`` walks its tree: from the greatest name
not after the resource's, jumping back past every name that cannot be a
prefix, so that a lookup costs a few bisections whatever the number of ACLs.

``authorize_by_resource_type`` asks instead for every ACL of one principal on
one resource type, so the ACLs are indexed by principal too.
"""

from __future__ import annotations

import logging
from bisect import bisect_right, insort
from collections.abc import Iterable
from dataclasses import dataclass

from kpybroker.security.acls.model import (
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
)
from kpybroker.security.principal import KafkaPrincipal, parse_principal

__all__ = ["AclCache", "IndexedAcl"]

log = logging.getLogger(__name__)

_ALL_OPERATIONS = frozenset(AclOperation)
_IMPLIED_BY_ALLOW: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.READ: frozenset({AclOperation.DESCRIBE}),
    AclOperation.WRITE: frozenset({AclOperation.DESCRIBE}),
    AclOperation.DELETE: frozenset({AclOperation.DESCRIBE}),
    AclOperation.ALTER: frozenset({AclOperation.DESCRIBE}),
    AclOperation.ALTER_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS}),
}
"""What allowing an operation allows besides (StandardAuthorizerData's IMPLIES_DESCRIBE and
IMPLIES_DESCRIBE_CONFIGS). Denials imply nothing: denying READ leaves DESCRIBE alone."""


@dataclass(frozen=True, slots=True, eq=False)
class IndexedAcl:
    """One ACL ready for decisions: its principal parsed, and the operations it decides."""

    binding: AclBinding
    principal: KafkaPrincipal
    any_principal: bool
    """The entry is for ``User:*``: every principal."""
    host: str
    covers: frozenset[AclOperation]
    """The operations this ACL allows or denies: its own, those an ALLOW implies, or all."""
    allow: bool

    @classmethod
    def of(cls, binding: AclBinding) -> IndexedAcl:
        """Raises ``ValueError`` when the entry's principal does not parse."""
        entry = binding.entry
        allow = entry.permission_type is AclPermissionType.ALLOW
        if entry.operation is AclOperation.ALL:
            covers = _ALL_OPERATIONS
        elif allow:
            covers = _IMPLIED_BY_ALLOW.get(entry.operation, frozenset()) | {entry.operation}
        else:
            covers = frozenset({entry.operation})
        principal = parse_principal(entry.principal)
        any_principal = principal == WILDCARD_PRINCIPAL
        return cls(binding, principal, any_principal, entry.host, covers, allow)


def _shared_length(first: str, second: str) -> int:
    """How many characters the two strings start with alike."""
    length = 0
    for one, other in zip(first, second, strict=False):
        if one != other:
            break
        length += 1
    return length


class _PrefixIndex:
    """The prefixed patterns of one resource type: their names in order, and their ACLs."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.acls: dict[str, tuple[IndexedAcl, ...]] = {}

    def put(self, name: str, acls: tuple[IndexedAcl, ...]) -> None:
        if name not in self.acls:
            insort(self.names, name)
        self.acls[name] = acls

    def drop(self, name: str) -> None:
        if self.acls.pop(name, None) is not None:
            del self.names[bisect_right(self.names, name) - 1]

    def matching(self, resource_name: str) -> list[tuple[IndexedAcl, ...]]:
        """The ACLs of every pattern whose name starts ``resource_name``.

        Every such name sorts at or before ``resource_name``. Take the greatest
        name there is up to a bound (``resource_name`` at first): if it is a
        prefix, it is one match, and the others are shorter, so sort before it
        with its last character cut. If not, every prefix still to be found is
        one of the part it shares with ``resource_name`` (a longer one would
        sort after it), which becomes the bound.
        """
        found = []
        names = self.names
        high = bisect_right(names, resource_name)
        while high:
            candidate = names[high - 1]
            if resource_name.startswith(candidate):
                found.append(self.acls[candidate])
                bound = candidate[:-1]
            else:
                bound = resource_name[: _shared_length(resource_name, candidate)]
            high = bisect_right(names, bound, 0, high - 1)
        return found


class AclCache:
    """Every ACL, by resource pattern, with the indexes of ``matching`` and ``of_principal``."""

    def __init__(self) -> None:
        self._acls: dict[ResourcePattern, tuple[IndexedAcl, ...]] = {}
        self._literal: dict[ResourceType, dict[str, tuple[IndexedAcl, ...]]] = {}
        self._prefixed: dict[ResourceType, _PrefixIndex] = {}
        self._by_principal: dict[tuple[ResourceType, KafkaPrincipal], set[IndexedAcl]] = {}

    def __len__(self) -> int:
        return sum(map(len, self._acls.values()))

    def entries(self, pattern: ResourcePattern) -> tuple[AccessControlEntry, ...]:
        return tuple(acl.binding.entry for acl in self._acls.get(pattern, ()))

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Make ``entries`` the ACLs of ``pattern`` (none: forget the pattern).

        An entry whose principal does not parse is left out, with a warning: it
        could never match, and Kafka would have refused to load it at all.
        """
        if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"cannot hold ACLs of pattern type {pattern.pattern_type.name}")
        acls = []
        for entry in dict.fromkeys(entries):
            try:
                acls.append(IndexedAcl.of(AclBinding(pattern, entry)))
            except ValueError as exc:
                log.warning("ignoring ACL %s on %s: %s", entry, pattern, exc)
        self._unindex(pattern)
        if acls:
            self._index(pattern, tuple(acls))

    def add(self, binding: AclBinding) -> None:
        self.set_acls(binding.pattern, (*self.entries(binding.pattern), binding.entry))

    def remove(self, binding: AclBinding) -> None:
        remaining = (e for e in self.entries(binding.pattern) if e != binding.entry)
        self.set_acls(binding.pattern, remaining)

    def matching(self, resource_type: ResourceType, name: str) -> list[tuple[IndexedAcl, ...]]:
        """The ACLs that apply to the resource ``name``, grouped by pattern: literal (and
        wildcard) first, then prefixed."""
        found = []
        literal = self._literal.get(resource_type)
        if literal is not None:
            if (acls := literal.get(name)) is not None:
                found.append(acls)
            if name != WILDCARD_RESOURCE and (acls := literal.get(WILDCARD_RESOURCE)) is not None:
                found.append(acls)
        prefixed = self._prefixed.get(resource_type)
        if prefixed is not None:
            found.extend(prefixed.matching(name))
        return found

    def of_principal(
        self, resource_type: ResourceType, principal: KafkaPrincipal
    ) -> Iterable[IndexedAcl]:
        """The ACLs on resources of ``resource_type`` whose entry names ``principal``."""
        return self._by_principal.get((resource_type, principal), ())

    def bindings(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """Every ACL the filter matches (DescribeAcls)."""
        return [
            acl.binding
            for pattern, acls in self._acls.items()
            if binding_filter.pattern_filter.matches(pattern)
            for acl in acls
            if binding_filter.entry_filter.matches(acl.binding.entry)
        ]

    def _index(self, pattern: ResourcePattern, acls: tuple[IndexedAcl, ...]) -> None:
        self._acls[pattern] = acls
        if pattern.pattern_type is PatternType.LITERAL:
            self._literal.setdefault(pattern.resource_type, {})[pattern.name] = acls
        else:
            self._prefixed.setdefault(pattern.resource_type, _PrefixIndex()).put(pattern.name, acls)
        for acl in acls:
            self._by_principal.setdefault((pattern.resource_type, acl.principal), set()).add(acl)

    def _unindex(self, pattern: ResourcePattern) -> None:
        acls = self._acls.pop(pattern, None)
        if acls is None:
            return
        if pattern.pattern_type is PatternType.LITERAL:
            del self._literal[pattern.resource_type][pattern.name]
        else:
            self._prefixed[pattern.resource_type].drop(pattern.name)
        for acl in acls:
            key = (pattern.resource_type, acl.principal)
            held = self._by_principal[key]
            held.discard(acl)
            if not held:
                del self._by_principal[key]
