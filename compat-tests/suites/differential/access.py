"""Who may do what on the secured pair: SCRAM users and ACLs, set up as the super user.

A security scenario acts as a principal of its own (a SCRAM user named
after it), so the ACLs it grants and the users it adds change nothing for
the other scenarios sharing the pair. Set-up goes through the scenario's
probe on the PLAINTEXT listener, where ``User:ANONYMOUS`` is a super user,
and is not observed: only the answers of the scenario's own steps are.

Kafka applies a new SCRAM credential or ACL once the metadata log reaches
the broker, a moment after the controller answers; kpybroker at once. So
:func:`grant` waits until the broker's own DescribeAcls lists the new
entries, and :func:`login` retries a refused login, as an operator would.
"""

from __future__ import annotations

from dataclasses import dataclass

from compat.wire import AuthenticationFailed
from kpybroker.protocol.messages import alter_user_scram_credentials, create_acls, describe_acls
from kpybroker.security.acls.model import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kpybroker.security.sasl.scram_credentials import ScramMechanism

from .probe import Probe, error

SCRAM_ITERATIONS = 4096
CLUSTER = "kafka-cluster"

__all__ = [
    "CLUSTER",
    "Acl",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "add_scram_user",
    "allow",
    "deny",
    "grant",
    "login",
]


@dataclass(frozen=True)
class Acl:
    """One ACL binding, as CreateAcls takes it."""

    resource_type: ResourceType
    name: str
    principal: str
    operation: AclOperation
    permission: AclPermissionType = AclPermissionType.ALLOW
    pattern: PatternType = PatternType.LITERAL
    host: str = "*"


def allow(
    user: str, resource_type: ResourceType, name: str, *operations: AclOperation, prefixed=False
) -> list[Acl]:
    """ALLOW ``operations`` on one resource (a name prefix when ``prefixed``) to ``User:user``."""
    pattern = PatternType.PREFIXED if prefixed else PatternType.LITERAL
    return [Acl(resource_type, name, f"User:{user}", op, pattern=pattern) for op in operations]


def deny(
    user: str, resource_type: ResourceType, name: str, *operations: AclOperation, prefixed=False
) -> list[Acl]:
    """DENY ``operations`` on one resource to ``User:user`` (a DENY wins over any ALLOW)."""
    pattern = PatternType.PREFIXED if prefixed else PatternType.LITERAL
    return [
        Acl(resource_type, name, f"User:{user}", op, AclPermissionType.DENY, pattern)
        for op in operations
    ]


def add_scram_user(p: Probe, user: str) -> None:
    """SCRAM-SHA-256 and -512 credentials for ``user`` (password ``PairedBroker.password``).

    One request per mechanism, since Kafka refuses a user twice in one request.
    The salt is fixed, so the server's first message differs between the
    brokers in its nonce only.
    """
    assert p.secured is not None
    password = p.secured.password(user)
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        salt = f"{user}/{mechanism.mechanism_name}".encode()
        upsertion = alter_user_scram_credentials.ScramCredentialUpsertion(
            name=user,
            mechanism=mechanism.type,
            iterations=SCRAM_ITERATIONS,
            salt=salt,
            salted_password=mechanism.salted_password(password, salt, SCRAM_ITERATIONS),
        )
        request = alter_user_scram_credentials.AlterUserScramCredentialsRequest(
            deletions=[], upsertions=[upsertion]
        )
        [result] = p.call(request, 0).results
        assert result.error_code == 0, f"{p.name}: SCRAM user {user}: {error(result.error_code)}"


def grant(p: Probe, acls: list[Acl]) -> None:
    """Create ``acls`` and wait until the broker's authorizer has them."""
    request = create_acls.CreateAclsRequest(
        creations=[
            create_acls.AclCreation(
                resource_type=acl.resource_type,
                resource_name=acl.name,
                resource_pattern_type=acl.pattern,
                principal=acl.principal,
                host=acl.host,
                operation=acl.operation,
                permission_type=acl.permission,
            )
            for acl in acls
        ]
    )
    codes = [error(r.error_code) for r in p.call(request, 3).results]
    assert set(codes) == {"NONE"}, f"{p.name}: CreateAcls {acls}: {codes}"
    for acl in acls:
        p.retry(lambda a=acl: _listed(p, a), bool, f"the ACL {acl}")


def _listed(p: Probe, acl: Acl) -> bool:
    request = describe_acls.DescribeAclsRequest(
        resource_type_filter=acl.resource_type,
        resource_name_filter=acl.name,
        pattern_type_filter=acl.pattern,
        principal_filter=acl.principal,
        host_filter=acl.host,
        operation=acl.operation,
        permission_type=acl.permission,
    )
    answer = p.call(request, 3)
    return answer.error_code == 0 and bool(answer.resources)


def login(
    p: Probe,
    listener: str,
    user: str,
    mechanism: str = "SCRAM-SHA-256",
    *,
    authenticate_version: int = 2,
) -> Probe:
    """A session of ``p`` logged in as ``user``, retried while the broker learns a new user."""

    def attempt() -> Probe | None:
        try:
            return p.session(listener, user, mechanism, authenticate_version=authenticate_version)
        except AuthenticationFailed:
            return None

    session = p.retry(attempt, lambda s: s is not None, f"{user}'s login on {listener}")
    assert session is not None
    return session
