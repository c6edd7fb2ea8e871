"""The ACL authorizer's decisions: Kafka 4's StandardAuthorizer rules.

The cases are ported from Kafka's StandardAuthorizerTest (authorize) and 3.9's
BaseAuthorizerTest (authorizeByResourceType, which StandardAuthorizer inherits
from the Authorizer interface); a few more pin corners that were checked
against Kafka 4.4's StandardAuthorizer.
"""

from __future__ import annotations

import logging
import random

import pytest

from kpybroker.security.acls.acl_cache import AclCache
from kpybroker.security.acls.authorizer import AclAuthorizer, client_host
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
    supported_operations,
    to_32bit_field,
)
from kpybroker.security.principal import KafkaPrincipal

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, WRITE, DELETE = AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE
DESCRIBE, ALTER, ALL = AclOperation.DESCRIBE, AclOperation.ALTER, AclOperation.ALL
DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
LOCALHOST = "127.0.0.1"


def acl(
    resource_type: ResourceType,
    name: str,
    pattern_type: PatternType,
    principal: str,
    host: str,
    operation: AclOperation,
    permission: AclPermissionType,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission),
    )


def authorizer(*acls: AclBinding, allow_if_no_acls: bool = False) -> AclAuthorizer:
    """Kafka's createAndInitializeStandardAuthorizer: ``User:superman`` is a super user."""
    authz = AclAuthorizer([KafkaPrincipal.user("superman")], allow_if_no_acls)
    for binding in acls:
        authz.add(binding)
    return authz


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal.user(name)


def decisions(
    authz: AclAuthorizer,
    who: str,
    questions: list[tuple[AclOperation, ResourceType, str]],
    host: str = LOCALHOST,
) -> list[bool]:
    return [authz.authorize(user(who), host, *question) for question in questions]


# -- configuration ---------------------------------------------------------------------


def test_super_users_config() -> None:
    def super_users(value: str | None) -> set[str]:
        configs = {} if value is None else {"super.users": value}
        return {str(p) for p in AclAuthorizer.from_configs(configs).super_users}

    assert super_users(None) == set()
    assert super_users(" ") == set()
    assert super_users("User:bob;User:alice ") == {"User:bob", "User:alice"}
    assert super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    with pytest.raises(ValueError, match="principalType:principalName but got bob"):
        super_users("bob;:alice")


def test_allow_everyone_config() -> None:
    def allows(configs: dict[str, object]) -> bool:
        return AclAuthorizer.from_configs(configs).allow_if_no_acls

    assert not allows({})
    assert allows({"allow.everyone.if.no.acl.found": "true"})
    assert allows({"allow.everyone.if.no.acl.found": " TRUE "})
    assert not allows({"allow.everyone.if.no.acl.found": "false"})
    assert not allows({"allow.everyone.if.no.acl.found": "yes"})


# -- StandardAuthorizerTest --------------------------------------------------------------


@pytest.mark.parametrize("allow_if_no_acls", [True, False])
def test_allow_everyone_if_no_acl_found(allow_if_no_acls: bool) -> None:
    authz = authorizer(
        acl(TOPIC, "topic1", LITERAL, "User:Alice", "*", READ, ALLOW),
        allow_if_no_acls=allow_if_no_acls,
    )
    assert decisions(authz, "Bob", [(READ, TOPIC, "topic1"), (READ, TOPIC, "topic2")]) == [
        False,
        allow_if_no_acls,
    ]


def test_an_acl_for_anyone_else_makes_the_default_deny() -> None:
    """The no-ACL default applies only to resources without any ACL, whoever it names;
    a wildcard or prefixed ACL counts as one."""
    authz = authorizer(
        acl(TOPIC, "*", LITERAL, "User:alice", "*", READ, ALLOW),
        acl(GROUP, "g", PREFIXED, "User:alice", "*", READ, ALLOW),
        allow_if_no_acls=True,
    )
    assert decisions(
        authz, "bob", [(READ, TOPIC, "t"), (READ, GROUP, "g1"), (READ, GROUP, "h")]
    ) == [
        False,
        False,
        True,
    ]


def foo_acl(operation: AclOperation, permission: AclPermissionType) -> AclBinding:
    return acl(TOPIC, "foo_", PREFIXED, "User:bob", "*", operation, permission)


@pytest.mark.parametrize("operation", [DESCRIBE, READ, WRITE, DELETE, ALTER])
def test_operations_that_imply_describe(operation: AclOperation) -> None:
    assert authorizer(foo_acl(operation, ALLOW)).authorize(
        user("bob"), LOCALHOST, DESCRIBE, TOPIC, "foo_bar"
    )


def test_implication_rules() -> None:
    def decide(binding: AclBinding, operation: AclOperation) -> bool:
        return authorizer(binding).authorize(user("bob"), LOCALHOST, operation, TOPIC, "foo_bar")

    assert not decide(foo_acl(AclOperation.CREATE, ALLOW), DESCRIBE)
    for operation in (READ, WRITE, DELETE, ALTER):
        # A DENY implies nothing: DESCRIBE is left to the default, which denies.
        authz = authorizer(foo_acl(operation, DENY), foo_acl(DESCRIBE, ALLOW))
        assert authz.authorize(user("bob"), LOCALHOST, DESCRIBE, TOPIC, "foo_bar")
        assert not authz.authorize(user("bob"), LOCALHOST, operation, TOPIC, "foo_bar")
    assert not decide(foo_acl(DESCRIBE, DENY), DESCRIBE)
    for operation in (DESCRIBE_CONFIGS, ALTER_CONFIGS):
        assert decide(foo_acl(operation, ALLOW), DESCRIBE_CONFIGS)
    denied_alter = authorizer(foo_acl(ALTER_CONFIGS, DENY), foo_acl(DESCRIBE_CONFIGS, ALLOW))
    assert denied_alter.authorize(user("bob"), LOCALHOST, DESCRIBE_CONFIGS, TOPIC, "foo_bar")
    assert not decide(foo_acl(ALTER_CONFIGS, ALLOW), ALTER)
    assert not decide(foo_acl(ALTER, ALLOW), DESCRIBE_CONFIGS)


def bar_acl(operation: AclOperation, permission: AclPermissionType) -> AclBinding:
    return acl(GROUP, "bar", LITERAL, "User:*", "*", operation, permission)


def test_principal_matching() -> None:
    authz = authorizer(foo_acl(READ, ALLOW), bar_acl(READ, DENY))
    assert authz.authorize(user("bob"), LOCALHOST, READ, TOPIC, "foo_bar")
    assert not authz.authorize(user("alice"), LOCALHOST, READ, TOPIC, "foo_bar")
    assert not authz.authorize(user("alice"), LOCALHOST, READ, GROUP, "bar")
    # User:* names principals of every type.
    group_principal = KafkaPrincipal("Group", "admins")
    assert not authz.authorize(group_principal, LOCALHOST, READ, GROUP, "bar")
    assert not authz.authorize(KafkaPrincipal("Group", "bob"), LOCALHOST, READ, TOPIC, "foo_bar")


def test_simple_authorizations() -> None:
    authz = authorizer(
        foo_acl(READ, ALLOW),
        foo_acl(WRITE, ALLOW),
        bar_acl(DESCRIBE_CONFIGS, ALLOW),
        bar_acl(ALTER_CONFIGS, ALLOW),
    )
    assert authz.authorize(user("bob"), LOCALHOST, READ, TOPIC, "foo_")
    assert authz.authorize(user("fred"), LOCALHOST, ALTER_CONFIGS, GROUP, "bar")


def test_deny_precedence_with_operation_all() -> None:
    authz = authorizer(
        acl(TOPIC, "foo", LITERAL, "User:alice", "*", ALL, DENY),
        acl(TOPIC, "foo", PREFIXED, "User:alice", "*", READ, ALLOW),
        acl(TOPIC, "foo", LITERAL, "User:*", "*", ALL, DENY),
        acl(TOPIC, "foo", PREFIXED, "User:*", "*", DESCRIBE, ALLOW),
    )
    assert decisions(
        authz,
        "alice",
        [
            (WRITE, TOPIC, "foo"),
            (READ, TOPIC, "foo"),
            (DESCRIBE, TOPIC, "foo"),
            (READ, TOPIC, "foobar"),
        ],
    ) == [False, False, False, True]
    assert decisions(
        authz,
        "bob",
        [
            (DESCRIBE, TOPIC, "foo"),
            (READ, TOPIC, "foo"),
            (WRITE, TOPIC, "foo"),
            (DESCRIBE, TOPIC, "foobaz"),
            (READ, TOPIC, "foobaz"),
        ],
    ) == [False, False, False, True, False]


def test_topic_acl_with_operation_all() -> None:
    authz = authorizer(
        acl(TOPIC, "foo", LITERAL, "User:*", "*", ALL, ALLOW),
        acl(TOPIC, "bar", PREFIXED, "User:alice", "*", ALL, ALLOW),
        acl(TOPIC, "baz", LITERAL, "User:bob", "*", ALL, ALLOW),
    )
    assert decisions(
        authz,
        "alice",
        [
            (WRITE, TOPIC, "foo"),
            (DESCRIBE_CONFIGS, TOPIC, "bar"),
            (DESCRIBE, TOPIC, "baz"),
        ],
    ) == [True, True, False]
    assert decisions(
        authz, "bob", [(WRITE, TOPIC, "foo"), (READ, TOPIC, "bar"), (DESCRIBE, TOPIC, "baz")]
    ) == [True, False, True]
    assert decisions(
        authz, "malory", [(DESCRIBE, TOPIC, "foo"), (WRITE, TOPIC, "bar"), (READ, TOPIC, "baz")]
    ) == [True, False, False]


def test_host_address_acl_validation() -> None:
    host1, host2 = "192.168.1.1", "192.168.1.2"
    authz = authorizer(
        acl(TOPIC, "foo", LITERAL, "User:alice", host1, READ, DENY),
        acl(TOPIC, "foo", LITERAL, "User:alice", "*", READ, ALLOW),
        acl(TOPIC, "bar", LITERAL, "User:bob", host2, READ, ALLOW),
        acl(TOPIC, "bar", LITERAL, "User:*", LOCALHOST, DESCRIBE, ALLOW),
    )
    questions = [(READ, TOPIC, "foo"), (READ, TOPIC, "bar"), (DESCRIBE, TOPIC, "bar")]
    assert decisions(authz, "alice", questions, LOCALHOST) == [True, False, True]
    assert decisions(authz, "alice", questions, host1) == [False, False, False]
    assert decisions(authz, "alice", questions, host2) == [True, False, False]
    assert decisions(authz, "bob", questions, LOCALHOST) == [False, False, True]
    assert decisions(authz, "bob", questions, host1) == [False, False, False]
    assert decisions(authz, "bob", questions, host2) == [False, True, True]


def many_acls() -> AclAuthorizer:
    return authorizer(
        acl(TOPIC, "green2", LITERAL, "User:*", "*", READ, ALLOW),
        acl(TOPIC, "green", PREFIXED, "User:bob", "*", READ, ALLOW),
        acl(TOPIC, "betamax4", LITERAL, "User:bob", "*", READ, ALLOW),
        acl(TOPIC, "betamax", LITERAL, "User:bob", "*", READ, ALLOW),
        acl(TOPIC, "beta", PREFIXED, "User:*", "*", READ, ALLOW),
        acl(TOPIC, "alpha", PREFIXED, "User:*", "*", READ, ALLOW),
        acl(TOPIC, "alp", PREFIXED, "User:bob", "*", READ, DENY),
        acl(GROUP, "*", LITERAL, "User:bob", "*", WRITE, ALLOW),
        acl(GROUP, "wheel", LITERAL, "User:*", "*", WRITE, DENY),
    )


def test_authorization_with_many_acls() -> None:
    authz = many_acls()
    assert decisions(authz, "bob", [(READ, TOPIC, "green1"), (WRITE, GROUP, "wheel")]) == [
        True,
        False,
    ]
    assert decisions(
        authz, "bob", [(READ, TOPIC, "alpha"), (WRITE, GROUP, "arbitrary"), (READ, TOPIC, "ala")]
    ) == [False, True, False]


def test_prefix_acls() -> None:
    authz = authorizer(
        acl(TOPIC, "fooa", PREFIXED, "User:alice", "*", ALL, ALLOW),
        acl(TOPIC, "foobar", LITERAL, "User:bob", "*", ALL, ALLOW),
        acl(TOPIC, "f", PREFIXED, "User:bob", "*", ALL, ALLOW),
    )
    assert decisions(
        authz, "bob", [(WRITE, TOPIC, "foobarr"), (READ, TOPIC, "goobar"), (READ, TOPIC, "fooa")]
    ) == [True, False, True]
    assert decisions(
        authz, "alice", [(DESCRIBE, TOPIC, "fooa"), (WRITE, TOPIC, "bar"), (READ, TOPIC, "baz")]
    ) == [True, False, False]


def test_super_users_may_do_anything() -> None:
    authz = authorizer(acl(TOPIC, "*", LITERAL, "User:*", "*", ALL, DENY))
    assert authz.authorize(user("superman"), LOCALHOST, WRITE, TOPIC, "t")
    assert not authz.authorize(user("bob"), LOCALHOST, WRITE, TOPIC, "t")
    # Only the principal's type and name count.
    assert not authz.authorize(KafkaPrincipal("Group", "superman"), LOCALHOST, WRITE, TOPIC, "t")


def test_removing_the_last_acl_restores_the_default() -> None:
    binding = acl(TOPIC, "t", LITERAL, "User:alice", "*", READ, ALLOW)
    authz = authorizer(binding, allow_if_no_acls=True)
    assert not authz.authorize(user("bob"), LOCALHOST, READ, TOPIC, "t")
    authz.remove(binding)
    assert authz.authorize(user("bob"), LOCALHOST, READ, TOPIC, "t")
    assert authz.acl_count == 0


def test_acls_with_an_unparsable_principal_are_left_out(caplog: pytest.LogCaptureFixture) -> None:
    pattern = ResourcePattern(TOPIC, "t", LITERAL)
    authz = authorizer()
    good = AccessControlEntry("User:alice", "*", READ, ALLOW)
    authz.set_acls(pattern, [AccessControlEntry("alice", "*", READ, DENY), good])
    assert authz.acls() == [AclBinding(pattern, good)]
    assert authz.authorize(user("alice"), LOCALHOST, READ, TOPIC, "t")
    assert "ignoring ACL" in caplog.text


def test_listing_acls() -> None:
    authz = many_acls()
    assert len(authz.acls()) == authz.acl_count == 9
    topics = AclBindingFilter(
        ResourcePatternFilter(TOPIC, "green1", PatternType.MATCH), AccessControlEntryFilter.ANY
    )
    assert {b.pattern.name for b in authz.acls(topics)} == {"green"}
    denials = AclBindingFilter(
        ResourcePatternFilter.ANY,
        AccessControlEntryFilter(None, None, AclOperation.ANY, DENY),
    )
    assert {b.pattern.name for b in authz.acls(denials)} == {"alp", "wheel"}


# -- authorized operations ------------------------------------------------------------------


def test_authorized_operations() -> None:
    authz = authorizer(
        acl(TOPIC, "t", LITERAL, "User:alice", "*", READ, ALLOW),
        acl(TOPIC, "t", LITERAL, "User:alice", "*", ALTER_CONFIGS, ALLOW),
    )
    expected = {READ, DESCRIBE, ALTER_CONFIGS, DESCRIBE_CONFIGS}
    assert authz.authorized_operations(user("alice"), LOCALHOST, TOPIC, "t") == expected
    assert authz.authorized_operations_field(
        user("alice"), LOCALHOST, TOPIC, "t"
    ) == to_32bit_field(expected)
    assert authz.authorized_operations(user("bob"), LOCALHOST, TOPIC, "t") == set()
    assert authz.authorized_operations(user("superman"), LOCALHOST, CLUSTER, "kafka-cluster") == (
        supported_operations(CLUSTER)
    )


# -- authorizeByResourceType (BaseAuthorizerTest) ----------------------------------------------

HOST1, HOST2 = "192.168.1.1", "192.168.1.2"


def by_type(
    authz: AclAuthorizer,
    operation: AclOperation,
    resource_type: ResourceType,
    who: str = "user1",
    host: str = HOST1,
) -> bool:
    return authz.authorize_by_resource_type(user(who), host, operation, resource_type)


def test_by_type_multiple_add_and_remove() -> None:
    resource = ResourcePattern(TOPIC, "sb1-topic", LITERAL)
    deny_read = AclBinding(resource, AccessControlEntry("User:user1", HOST1, READ, DENY))
    allow_read = AclBinding(resource, AccessControlEntry("User:user1", HOST1, READ, ALLOW))
    authz = authorizer()
    for _ in range(3):
        assert not by_type(authz, READ, TOPIC)
        authz.add(allow_read)
        assert by_type(authz, READ, TOPIC)
        for _ in range(3):
            authz.add(deny_read)
            assert not by_type(authz, READ, TOPIC)
            authz.remove(deny_read)
            authz.add(allow_read)
            assert by_type(authz, READ, TOPIC)
        authz.remove(allow_read)
        assert not by_type(authz, READ, TOPIC)


def test_by_type_unrelated_deny_does_not_dominate_allow() -> None:
    authz = authorizer(
        acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, READ, DENY),
        acl(TOPIC, "sb1", LITERAL, "User:user2", HOST1, READ, DENY),
        acl(TOPIC, "sb1", LITERAL, "User:user1", HOST2, WRITE, DENY),
        acl(TOPIC, "sb1", LITERAL, "User:user2", HOST2, READ, DENY),
        acl(TOPIC, "sb1", LITERAL, "User:user1", HOST2, READ, ALLOW),
        acl(TOPIC, "sb2", LITERAL, "User:user1", HOST2, READ, DENY),
        acl(GROUP, "s", PREFIXED, "User:user1", HOST2, READ, DENY),
    )
    assert not by_type(authz, READ, TOPIC)
    assert not by_type(authz, READ, GROUP)
    assert not by_type(authz, READ, ResourceType.TRANSACTIONAL_ID)
    assert not by_type(authz, READ, CLUSTER)
    assert by_type(authz, READ, TOPIC, host=HOST2)


def test_by_type_deny_takes_precedence() -> None:
    authz = authorizer(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, WRITE, ALLOW))
    assert by_type(authz, WRITE, TOPIC)
    authz.add(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, WRITE, DENY))
    assert not by_type(authz, WRITE, TOPIC)


def test_by_type_prefixed_deny_dominates() -> None:
    def grant(name: str, permission: AclPermissionType) -> None:
        authz.add(acl(GROUP, name, PREFIXED, "User:user1", HOST1, READ, permission))

    authz = authorizer()
    grant("abcde", ALLOW)
    assert by_type(authz, READ, GROUP)
    grant("abcd", DENY)
    assert not by_type(authz, READ, GROUP)
    grant("abc", ALLOW)
    assert by_type(authz, READ, GROUP)
    grant("a", DENY)
    assert not by_type(authz, READ, GROUP)
    grant("ab", ALLOW)
    assert not by_type(authz, READ, GROUP)


def test_by_type_wildcard_deny_dominates() -> None:
    authz = authorizer(acl(GROUP, "hello", PREFIXED, "User:user1", HOST1, WRITE, ALLOW))
    assert by_type(authz, WRITE, GROUP)
    authz.add(acl(GROUP, "*", LITERAL, "User:user1", HOST1, WRITE, DENY))
    assert not by_type(authz, WRITE, GROUP)
    authz.add(acl(GROUP, "*", LITERAL, "User:user1", HOST1, WRITE, ALLOW))
    assert not by_type(authz, WRITE, GROUP)
    authz.add(acl(GROUP, "aloha", LITERAL, "User:user1", HOST1, WRITE, ALLOW))
    assert not by_type(authz, WRITE, GROUP)


def test_by_type_with_operation_all() -> None:
    authz = authorizer()
    assert not by_type(authz, READ, TOPIC)
    authz.add(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, WRITE, DENY))
    authz.add(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, ALL, ALLOW))
    assert by_type(authz, READ, TOPIC)
    authz.add(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, ALL, DENY))
    assert not by_type(authz, READ, TOPIC)


def test_by_type_with_wildcard_host() -> None:
    authz = authorizer()
    assert not by_type(authz, READ, TOPIC)
    authz.add(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, READ, ALLOW))
    assert by_type(authz, READ, TOPIC)
    authz.add(acl(TOPIC, "sb1", LITERAL, "User:user1", "*", READ, DENY))
    assert not by_type(authz, READ, TOPIC)
    authz.add(acl(TOPIC, "sb2", LITERAL, "User:user1", HOST1, READ, DENY))
    assert not by_type(authz, READ, TOPIC)
    assert not by_type(authz, READ, TOPIC, host=HOST2)
    authz.add(acl(TOPIC, "sb2", LITERAL, "User:user1", "*", READ, ALLOW))
    assert by_type(authz, READ, TOPIC, host=HOST2)
    authz.add(acl(TOPIC, "sb2", LITERAL, "User:user1", "*", READ, DENY))
    assert not by_type(authz, READ, TOPIC, host=HOST2)


def test_by_type_with_wildcard_principal() -> None:
    authz = authorizer()
    assert not by_type(authz, READ, TOPIC)
    authz.add(acl(TOPIC, "sb1", LITERAL, "User:user1", HOST1, READ, ALLOW))
    assert by_type(authz, READ, TOPIC)
    authz.add(acl(TOPIC, "sb1", LITERAL, "User:*", HOST1, READ, DENY))
    assert not by_type(authz, READ, TOPIC)
    authz.add(acl(TOPIC, "sb2", LITERAL, "User:user1", HOST1, READ, DENY))
    assert not by_type(authz, READ, TOPIC)
    assert not by_type(authz, READ, TOPIC, who="user2")
    authz.add(acl(TOPIC, "sb2", LITERAL, "User:*", HOST1, READ, ALLOW))
    assert by_type(authz, READ, TOPIC, who="user2")
    authz.add(acl(TOPIC, "sb2", LITERAL, "User:*", HOST1, READ, DENY))
    assert not by_type(authz, READ, TOPIC, who="user2")


def test_by_type_super_users_have_access() -> None:
    authz = authorizer(
        *(
            acl(resource_type, "*", LITERAL, "User:*", "*", ALL, DENY)
            for resource_type in (TOPIC, CLUSTER, GROUP, ResourceType.TRANSACTIONAL_ID)
        )
    )
    for resource_type in (TOPIC, CLUSTER, GROUP, ResourceType.TRANSACTIONAL_ID):
        assert by_type(authz, READ, resource_type, who="superman")
        assert not by_type(authz, READ, resource_type)


def test_by_type_asks_a_probe_resource_first() -> None:
    """Kafka first authorizes the resource ``hardcode``: a matching prefix, or the no-ACL
    default when nothing covers that name, allows the resource type. Past the probe,
    no operation implies another."""
    no_acl_for_probe = authorizer(
        acl(TOPIC, "foo", LITERAL, "User:user1", "*", READ, DENY), allow_if_no_acls=True
    )
    assert by_type(no_acl_for_probe, READ, TOPIC)
    prefix_of_probe = authorizer(acl(TOPIC, "hard", PREFIXED, "User:user1", "*", READ, ALLOW))
    assert by_type(prefix_of_probe, READ, TOPIC)
    only_read = authorizer(acl(TOPIC, "foo", LITERAL, "User:user1", "*", READ, ALLOW))
    assert not by_type(only_read, DESCRIBE, TOPIC)
    assert only_read.authorize(user("user1"), HOST1, DESCRIBE, TOPIC, "foo")


@pytest.mark.parametrize(
    ("operation", "resource_type", "message"),
    [
        (READ, ResourceType.ANY, "Must specify a non-filter resource type"),
        (READ, ResourceType.UNKNOWN, "Unknown resource type"),
        (AclOperation.ANY, TOPIC, "Must specify a non-filter operation type"),
        (AclOperation.UNKNOWN, TOPIC, "Unknown operation type"),
    ],
)
def test_by_type_refuses_filter_values(
    operation: AclOperation, resource_type: ResourceType, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        by_type(authorizer(), operation, resource_type)


# -- the prefix walk ---------------------------------------------------------------------------


def test_prefix_lookup_finds_exactly_the_prefixes() -> None:
    """The bisecting walk over sorted prefixes agrees with checking every prefix."""
    rng = random.Random(14)
    cache = AclCache()
    names = {"".join(rng.choice("abc") for _ in range(rng.randint(1, 6))) for _ in range(120)}
    for name in names:
        cache.add(acl(TOPIC, name, PREFIXED, "User:a", "*", READ, ALLOW))
    for _ in range(500):
        resource = "".join(rng.choice("abcd") for _ in range(rng.randint(0, 8)))
        found = {acls[0].binding.pattern.name for acls in cache.matching(TOPIC, resource)}
        assert found == {name for name in names if resource.startswith(name)}, resource


def test_lookups_keep_to_their_resource_type() -> None:
    cache = AclCache()
    cache.add(acl(GROUP, "a", PREFIXED, "User:a", "*", READ, ALLOW))
    cache.add(acl(GROUP, "ab", LITERAL, "User:a", "*", READ, ALLOW))
    cache.add(acl(GROUP, "*", LITERAL, "User:a", "*", READ, ALLOW))
    assert cache.matching(TOPIC, "ab") == []
    assert len(cache.matching(GROUP, "ab")) == 3


# -- denials are logged ----------------------------------------------------------------------


def test_one_debug_line_per_denial(caplog: pytest.LogCaptureFixture) -> None:
    authz = authorizer(acl(TOPIC, "t", LITERAL, "User:alice", "*", READ, ALLOW))
    with caplog.at_level(logging.DEBUG, logger="kafka.authorizer.logger"):
        authz.authorize(user("alice"), LOCALHOST, READ, TOPIC, "t")
        authz.authorize(user("bob"), LOCALHOST, READ, TOPIC, "t", log_if_denied=False)
        authz.authorized_operations(user("bob"), LOCALHOST, TOPIC, "t")
        assert caplog.records == []
        authz.authorize(user("bob"), LOCALHOST, WRITE, TOPIC, "t")
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage() == (
        "Principal = User:bob is Denied operation = WRITE from host = 127.0.0.1 "
        "on resource = Topic:LITERAL:t based on rule DefaultDeny"
    )


# -- hosts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "host"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "0:0:0:0:0:0:0:1"),
        ("2001:db8::ff00:42:8329", "2001:db8:0:0:0:ff00:42:8329"),
        ("::ffff:1.2.3.4", "1.2.3.4"),
        ("fe80::1%1", "fe80:0:0:0:0:0:0:1%1"),
        ("not-an-address", "not-an-address"),
    ],
)
def test_client_host_is_javas_text(address: str, host: str) -> None:
    assert client_host(address) == host
