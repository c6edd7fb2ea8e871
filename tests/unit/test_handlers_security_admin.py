"""The security admin APIs against fakes: ACLs, SCRAM credentials and client quotas, with
Kafka 4.4's answers (permission checks, validation messages, orders)."""

from __future__ import annotations

from collections.abc import Sequence

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    alter_client_quotas,
    alter_user_scram_credentials,
    create_acls,
    delete_acls,
    describe_acls,
    describe_client_quotas,
    describe_user_scram_credentials,
)
from kpybroker.security.acls.acl_store import AclDeleteResult, DeletedAcl
from kpybroker.security.acls.authorizer import AclAuthorizer
from kpybroker.security.acls.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kpybroker.security.acls.validation import AclError, validate_new_binding
from kpybroker.security.principal import KafkaPrincipal
from kpybroker.security.sasl.scram_credentials import ScramMechanism, credential_from_string
from tests.helpers.fake_services import FakeEntityConfigs, call, services

ADMIN = KafkaPrincipal.user("admin")
ALICE = KafkaPrincipal.user("alice")
CLUSTER = ResourceType.CLUSTER


class FakeAcls:
    """ACL writes straight into an authorizer, validated as the store validates them."""

    def __init__(self, authorizer: AclAuthorizer) -> None:
        self.authorizer = authorizer

    async def create(self, bindings: Sequence[AclBinding]) -> list[AclError | None]:
        errors = [validate_new_binding(b) for b in bindings]
        for binding, error in zip(bindings, errors, strict=True):
            if error is None:
                self.authorizer.add(binding)
        return errors

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        results = []
        for binding_filter in filters:
            matched = self.authorizer.acls(binding_filter)
            for binding in matched:
                self.authorizer.remove(binding)
            results.append(AclDeleteResult(None, tuple(DeletedAcl(b) for b in matched)))
        return results


def secured() -> tuple[AclAuthorizer, object]:
    authz = AclAuthorizer(super_users=[ADMIN])
    return authz, services(authorizer=authz, acls=FakeAcls(authz))


def creation(name: str, operation: int = AclOperation.READ, resource_type: int = 2) -> object:
    return create_acls.AclCreation(
        resource_type=resource_type,
        resource_name=name,
        resource_pattern_type=PatternType.LITERAL,
        principal="User:alice",
        host="*",
        operation=operation,
        permission_type=AclPermissionType.ALLOW,
    )


# -- ACLs --------------------------------------------------------------------------------


def test_create_describe_delete_acls() -> None:
    authz, svc = secured()
    request = create_acls.CreateAclsRequest(creations=[creation("t"), creation("")])
    results = call(svc, request, 3, ADMIN).results
    assert [(r.error_code, r.error_message) for r in results] == [
        (ErrorCode.NONE, ""),
        (ErrorCode.INVALID_REQUEST, "Invalid empty resource name"),
    ]
    assert authz.authorize(ALICE, "1.2.3.4", AclOperation.READ, ResourceType.TOPIC, "t")
    described = call(
        svc,
        describe_acls.DescribeAclsRequest(
            resource_type_filter=ResourceType.ANY,
            resource_name_filter=None,
            principal_filter=None,
            host_filter=None,
            pattern_type_filter=PatternType.ANY,
            operation=AclOperation.ANY,
            permission_type=AclPermissionType.ANY,
        ),
        3,
        ADMIN,
    )
    assert described.error_code == ErrorCode.NONE
    assert [(r.resource_name, [a.principal for a in r.acls]) for r in described.resources] == [
        ("t", ["User:alice"])
    ]
    deleted = call(
        svc,
        delete_acls.DeleteAclsRequest(
            filters=[
                delete_acls.DeleteAclsFilter(
                    resource_type_filter=ResourceType.TOPIC,
                    resource_name_filter="t",
                    principal_filter=None,
                    host_filter=None,
                    pattern_type_filter=PatternType.LITERAL,
                    operation=AclOperation.ANY,
                    permission_type=AclPermissionType.ANY,
                )
            ]
        ),
        3,
        ADMIN,
    )
    assert [m.resource_name for m in deleted.filter_results[0].matching_acls] == ["t"]
    assert authz.acl_count == 0


def test_acl_apis_need_cluster_permissions() -> None:
    _, svc = secured()
    refused = call(svc, create_acls.CreateAclsRequest(creations=[creation("t")]), 3, ALICE)
    assert refused.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert refused.results[0].error_message.endswith("needs ALTER permission.")
    described = call(
        svc,
        describe_acls.DescribeAclsRequest(
            resource_type_filter=ResourceType.ANY,
            resource_name_filter=None,
            principal_filter=None,
            host_filter=None,
            pattern_type_filter=PatternType.ANY,
            operation=AclOperation.ANY,
            permission_type=AclPermissionType.ANY,
        ),
        2,
        ALICE,
    )
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert described.error_message.endswith("needs DESCRIBE permission.")


def test_without_an_authorizer_acl_apis_say_security_is_disabled() -> None:
    svc = services()
    created = call(svc, create_acls.CreateAclsRequest(creations=[creation("t")]), 3)
    assert (created.results[0].error_code, created.results[0].error_message) == (
        ErrorCode.SECURITY_DISABLED,
        "No Authorizer is configured.",
    )
    described = call(
        svc,
        describe_acls.DescribeAclsRequest(
            resource_type_filter=ResourceType.ANY,
            resource_name_filter=None,
            principal_filter=None,
            host_filter=None,
            pattern_type_filter=PatternType.ANY,
            operation=AclOperation.ANY,
            permission_type=AclPermissionType.ANY,
        ),
        1,
    )
    assert (described.error_code, described.error_message) == (
        ErrorCode.SECURITY_DISABLED,
        "No Authorizer is configured on the broker",
    )


def test_a_creation_naming_any_fails_the_whole_request() -> None:
    _, svc = secured()
    request = create_acls.CreateAclsRequest(
        creations=[creation("t"), creation("u", operation=AclOperation.ANY)]
    )
    results = call(svc, request, 3, ADMIN).results
    assert [r.error_code for r in results] == [ErrorCode.UNKNOWN_SERVER_ERROR] * 2


def test_a_cluster_acl_must_name_the_cluster() -> None:
    _, svc = secured()
    request = create_acls.CreateAclsRequest(creations=[creation("other", resource_type=CLUSTER)])
    result = call(svc, request, 3, ADMIN).results[0]
    assert result.error_message == "The only valid name for the CLUSTER resource is kafka-cluster"


# -- SCRAM credentials -------------------------------------------------------------------


def upsertion(name: str, iterations: int = 4096, mechanism: int = 1) -> object:
    salted = ScramMechanism.SCRAM_SHA_256.salted_password("pw", b"salt", iterations)
    return alter_user_scram_credentials.ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=b"salt", salted_password=salted
    )


def test_alter_then_describe_scram_credentials() -> None:
    entities = FakeEntityConfigs()
    svc = services(entity_configs=entities)
    request = alter_user_scram_credentials.AlterUserScramCredentialsRequest(
        deletions=[alter_user_scram_credentials.ScramCredentialDeletion(name="ghost", mechanism=1)],
        upsertions=[upsertion("alice"), upsertion("bob", iterations=100), upsertion("", 4096)],
    )
    results = {r.user: (r.error_code, r.error_message) for r in call(svc, request, 0).results}
    assert results == {
        "alice": (ErrorCode.NONE, None),
        "ghost": (
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        ),
        "bob": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
    }
    stored = credential_from_string(entities.entities[(("user", "alice"),)]["SCRAM-SHA-256"])
    assert stored == ScramMechanism.SCRAM_SHA_256.credential("pw", 4096, salt=b"salt")
    described = call(
        svc,
        describe_user_scram_credentials.DescribeUserScramCredentialsRequest(
            users=[
                describe_user_scram_credentials.UserName("alice"),
                describe_user_scram_credentials.UserName("nobody"),
                describe_user_scram_credentials.UserName("nobody"),
            ]
        ),
        0,
    )
    assert [(r.user, r.error_code) for r in described.results] == [
        ("alice", ErrorCode.NONE),
        ("nobody", ErrorCode.DUPLICATE_RESOURCE),
    ]
    assert [(c.mechanism, c.iterations) for c in described.results[0].credential_infos] == [
        (1, 4096)
    ]
    everyone = call(
        svc, describe_user_scram_credentials.DescribeUserScramCredentialsRequest(users=None), 0
    )
    assert [r.user for r in everyone.results] == ["alice"]


def test_scram_apis_need_cluster_permissions() -> None:
    _, svc = secured()
    request = alter_user_scram_credentials.AlterUserScramCredentialsRequest(
        upsertions=[upsertion("zed"), upsertion("alice")]
    )
    results = call(svc, request, 0, ALICE).results
    assert [(r.user, r.error_code) for r in results] == [
        ("alice", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        ("zed", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ]
    described = call(
        svc,
        describe_user_scram_credentials.DescribeUserScramCredentialsRequest(
            users=[describe_user_scram_credentials.UserName("alice")]
        ),
        0,
        ALICE,
    )
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [(r.user, r.error_code) for r in described.results] == [
        ("", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    ]


# -- Client quotas -----------------------------------------------------------------------


def entry(ops: dict[str, float | None], **entity: str | None) -> object:
    return alter_client_quotas.EntryData(
        entity=[alter_client_quotas.EntityData(k.replace("_", "-"), v) for k, v in entity.items()],
        ops=[
            alter_client_quotas.OpData(key, value or 0.0, value is None)
            for key, value in ops.items()
        ],
    )


def test_alter_then_describe_client_quotas() -> None:
    entities = FakeEntityConfigs()
    svc = services(entity_configs=entities)
    request = alter_client_quotas.AlterClientQuotasRequest(
        entries=[
            entry({"producer_byte_rate": 1024.0}, user="alice"),
            entry({"request_percentage": 50.0}, user=None, client_id="app"),
            entry({"producer_byte_rate": 1.5}, client_id="bad"),
            entry({"nonsense": 1.0}, client_id="bad2"),
            entry({"connection_creation_rate": 10.0}, ip="10.0.0.1"),
        ]
    )
    results = call(svc, request, 1).entries
    assert [(r.error_code, r.error_message) for r in results] == [
        (ErrorCode.NONE, None),
        (ErrorCode.NONE, None),
        (ErrorCode.INVALID_REQUEST, "producer_byte_rate cannot be a fractional value."),
        (ErrorCode.INVALID_REQUEST, "Invalid configuration key nonsense"),
        (ErrorCode.NONE, None),
    ]
    assert entities.entities[(("user", "alice"),)] == {"producer_byte_rate": "1024"}
    assert entities.entities[(("user", None), ("client-id", "app"))] == {
        "request_percentage": "50.0"
    }
    described = call(
        svc,
        describe_client_quotas.DescribeClientQuotasRequest(
            components=[describe_client_quotas.ComponentData("user", 2, None)], strict=False
        ),
        1,
    )
    found = {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in described.entries
    }
    assert found == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0},
        (("user", None), ("client-id", "app")): {"request_percentage": 50.0},
    }
    refused = call(
        svc,
        describe_client_quotas.DescribeClientQuotasRequest(
            components=[
                describe_client_quotas.ComponentData("ip", 2, None),
                describe_client_quotas.ComponentData("user", 2, None),
            ]
        ),
        1,
    )
    assert refused.error_code == ErrorCode.INVALID_REQUEST and refused.entries is None


def test_quota_apis_need_cluster_permissions() -> None:
    _, svc = secured()
    refused = call(
        svc,
        alter_client_quotas.AlterClientQuotasRequest(
            entries=[entry({"producer_byte_rate": 1.0}, user="alice")]
        ),
        1,
        ALICE,
    )
    assert (refused.entries[0].error_code, refused.entries[0].error_message) == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        "Cluster authorization failed.",
    )
    described = call(svc, describe_client_quotas.DescribeClientQuotasRequest(), 1, ALICE)
    assert (described.error_code, described.error_message, described.entries) == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        None,
        None,
    )
