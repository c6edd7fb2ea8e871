"""Authorization and the controller mutation quota of CreateTopics, DeleteTopics and
CreatePartitions, as Kafka 4.4's controller does them.

Against fakes of the topic administration and a real ``AclAuthorizer``: what a refused
principal is answered (codes, messages, fields left at their defaults, order), that
permission comes before existence, that nothing refused reaches the topic
administration; and KIP-599's quota: strict versions refuse the topics asked for while
the client is in debt (THROTTLING_QUOTA_EXCEEDED, no message), older ones only throttle,
validate-only requests are charged, refused topics are not.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from kpybroker.apis.support.context import Services
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import create_partitions, create_topics, delete_topics
from kpybroker.quotas.entity import ClientQuotaEntity
from kpybroker.security.acls.authorizer import AclAuthorizer
from kpybroker.security.acls.model import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kpybroker.security.principal import KafkaPrincipal
from tests.helpers.fake_services import FakeTopics, call, services, topic_of

ALICE = KafkaPrincipal.user("alice")
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
ZERO_ID = bytes(16)
TOPIC_AUTHZ = ErrorCode.TOPIC_AUTHORIZATION_FAILED
THROTTLED = ErrorCode.THROTTLING_QUOTA_EXCEEDED
AUDIT_LOGGER = "kafka.authorizer.logger"


def granting(*grants: tuple[ResourceType, str, AclOperation]) -> AclAuthorizer:
    """An authorizer that allows alice exactly ``grants`` (and what they imply)."""
    authorizer = AclAuthorizer(super_users=(), allow_if_no_acls=False)
    for resource_type, name, operation in grants:
        authorizer.add(
            AclBinding(
                ResourcePattern(resource_type, name, PatternType.LITERAL),
                AccessControlEntry(str(ALICE), "*", operation, AclPermissionType.ALLOW),
            )
        )
    return authorizer


def limited(rate: float, **kwargs: Any) -> Services:
    """Services whose controller mutation quota lets alice make ``rate`` partitions a second
    (a rested bucket holds 11 seconds' worth, Kafka's default window)."""
    built = services(**kwargs)
    built.quotas.controller_mutation.update_quota(ClientQuotaEntity(user="alice"), rate)
    return built


# -- CreateTopics -------------------------------------------------------------------------


def creatable(name: str, partitions: int = 1) -> create_topics.CreatableTopic:
    return create_topics.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
    )


def create(*topics: create_topics.CreatableTopic, validate_only: bool = False) -> Any:
    return create_topics.CreateTopicsRequest(
        topics=list(topics), timeout_ms=1000, validate_only=validate_only
    )


def test_create_topics_without_an_authorizer_shows_what_it_created() -> None:
    topics = FakeTopics()
    [result] = call(services(topics=topics), create(creatable("t", 3)), 7).topics
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 3, 1)
    assert (result.topic_config_error_code, result.topic_id) == (0, topics.get("t").topic_id)


def test_create_topics_refuses_without_create_whether_or_not_the_topic_exists() -> None:
    topics = FakeTopics(topic_of("theirs"))
    authorizer = granting((TOPIC, "mine", AclOperation.CREATE))
    request = create(
        creatable("theirs"),
        creatable("mine", 2),
        creatable("dup"),
        creatable("new"),
        creatable("dup"),
        creatable("__cluster_metadata"),
    )
    answer = call(services(topics=topics, authorizer=authorizer), request, 7, ALICE).topics
    assert [(t.name, t.error_code, t.error_message) for t in answer] == [
        ("mine", 0, None),
        ("dup", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("theirs", TOPIC_AUTHZ, "Authorization failed."),
        ("new", TOPIC_AUTHZ, "Authorization failed."),
        (
            "__cluster_metadata",
            ErrorCode.INVALID_REQUEST,
            "Creation of internal topic __cluster_metadata is prohibited.",
        ),
    ]
    refused = answer[2]
    assert (refused.topic_id, refused.num_partitions, refused.replication_factor) == (
        ZERO_ID,
        -1,
        -1,
    )
    assert (refused.configs, refused.topic_config_error_code) == ([], 0)
    assert [name for name, _ in topics.created] == ["mine"]


def test_created_topic_details_need_describe_configs() -> None:
    topics = FakeTopics()
    authorizer = granting(
        (CLUSTER, CLUSTER_NAME, AclOperation.CREATE), (TOPIC, "open", AclOperation.ALTER_CONFIGS)
    )
    request = create(creatable("open", 2), creatable("closed", 2))
    answer = call(services(topics=topics, authorizer=authorizer), request, 7, ALICE).topics
    described = {t.name: t for t in answer}
    assert (described["open"].topic_config_error_code, described["open"].num_partitions) == (0, 2)
    closed = described["closed"]
    assert (closed.error_code, closed.topic_config_error_code) == (0, TOPIC_AUTHZ)
    assert (closed.num_partitions, closed.replication_factor, closed.configs) == (-1, -1, [])
    assert closed.topic_id == topics.get("closed").topic_id


def test_only_a_creator_learns_that_a_topic_exists() -> None:
    topics = FakeTopics()
    topics.refuse["taken"] = KafkaError(
        ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'taken' already exists."
    )
    creator = granting((CLUSTER, CLUSTER_NAME, AclOperation.CREATE))
    [seen] = call(
        services(topics=topics, authorizer=creator), create(creatable("taken")), 7, ALICE
    ).topics
    assert seen.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    [hidden] = call(
        services(topics=topics, authorizer=granting()), create(creatable("taken")), 7, ALICE
    ).topics
    assert hidden.error_code == TOPIC_AUTHZ


def test_create_topics_logs_only_the_refused_topic_create(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    call(services(authorizer=granting()), create(creatable("t")), 7, ALICE)
    denials = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    # Not the cluster CREATE nor DESCRIBE_CONFIGS, which Kafka asks with logIfDenied=false.
    assert len(denials) == 1
    assert "operation = CREATE" in denials[0] and "Topic:LITERAL:t" in denials[0]


# -- DeleteTopics -------------------------------------------------------------------------


def delete_by_name(*names: str) -> delete_topics.DeleteTopicsRequest:
    return delete_topics.DeleteTopicsRequest(topic_names=list(names), timeout_ms=1000)


def delete_v6(*entries: tuple[str | None, bytes]) -> delete_topics.DeleteTopicsRequest:
    return delete_topics.DeleteTopicsRequest(
        topics=[delete_topics.DeleteTopicState(name=n, topic_id=i) for n, i in entries],
        timeout_ms=1000,
    )


def answers(response: Any) -> list[tuple[str | None, bytes, int, str | None]]:
    """The entries in a fixed order (Kafka shuffles them)."""
    entries = [(r.name, r.topic_id, r.error_code, r.error_message) for r in response.responses]
    return sorted(entries, key=lambda e: (e[0] or "", e[1]))


def test_delete_topics_by_name_checks_permission_before_existence() -> None:
    topics = FakeTopics(topic_of("gone"), topic_of("seen"), topic_of("hidden"))
    authorizer = granting(
        (TOPIC, "gone", AclOperation.DELETE),  # implies DESCRIBE
        (TOPIC, "seen", AclOperation.DESCRIBE),
        (TOPIC, "missing-seen", AclOperation.DESCRIBE),
    )
    request = delete_by_name("gone", "seen", "hidden", "missing-hidden", "missing-seen")
    response = call(services(topics=topics, authorizer=authorizer), request, 5, ALICE)
    refused = "Topic authorization failed."
    assert answers(response) == [
        ("gone", ZERO_ID, 0, None),
        ("hidden", ZERO_ID, TOPIC_AUTHZ, refused),
        ("missing-hidden", ZERO_ID, TOPIC_AUTHZ, refused),
        (
            "missing-seen",
            ZERO_ID,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        ),
        ("seen", ZERO_ID, TOPIC_AUTHZ, refused),
    ]
    assert topics.deleted == ["gone"]


def test_delete_topics_by_id_names_a_refused_topic_only_to_who_may_see_it() -> None:
    gone, seen, hidden = topic_of("gone"), topic_of("seen"), topic_of("hidden")
    topics = FakeTopics(gone, seen, hidden)
    unknown = uuid.uuid4().bytes
    authorizer = granting((TOPIC, "gone", AclOperation.DELETE), (TOPIC, "seen", AclOperation.READ))
    request = delete_v6(
        (None, gone.topic_id), (None, seen.topic_id), (None, hidden.topic_id), (None, unknown)
    )
    response = call(services(topics=topics, authorizer=authorizer), request, 6, ALICE)
    by_id = {r.topic_id: (r.name, r.error_code, r.error_message) for r in response.responses}
    assert by_id == {
        gone.topic_id: ("gone", 0, None),
        seen.topic_id: ("seen", TOPIC_AUTHZ, "Topic authorization failed."),
        hidden.topic_id: (None, TOPIC_AUTHZ, "Topic authorization failed."),
        # Before any check: topic ids are no secret.
        unknown: (None, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
    }
    assert topics.deleted == ["gone"]


def test_delete_on_the_cluster_allows_every_topic_and_is_not_logged_when_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    topics = FakeTopics(topic_of("a"), topic_of("b"))
    everything = granting((CLUSTER, CLUSTER_NAME, AclOperation.DELETE))
    response = call(
        services(topics=topics, authorizer=everything), delete_by_name("a", "b", "c"), 5, ALICE
    )
    assert [(n, code) for n, _, code, _ in answers(response)] == [
        ("a", 0),
        ("b", 0),
        ("c", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    call(services(authorizer=granting()), delete_by_name("x"), 5, ALICE)
    denials = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert not any("Cluster:" in d for d in denials)
    assert sorted(d.split("operation = ")[1].split()[0] for d in denials) == [
        "DELETE",
        "DESCRIBE",
    ]


def test_delete_topics_answer_is_shuffled(monkeypatch: pytest.MonkeyPatch) -> None:
    shuffled: list[list[Any]] = []
    monkeypatch.setattr(
        "kpybroker.apis.create_delete_topics.random.shuffle", lambda x: shuffled.append(x)
    )
    topics = FakeTopics(topic_of("a"), topic_of("b"))
    response = call(services(topics=topics), delete_by_name("a", "b"), 5)
    assert [r.name for r in shuffled[0]] == [r.name for r in response.responses]


@pytest.mark.parametrize(
    ("version", "code"),
    [(2, ErrorCode.INVALID_REQUEST), (3, ErrorCode.TOPIC_DELETION_DISABLED)],
)
def test_disabled_deletion_fails_the_whole_request_before_any_check(
    version: int, code: ErrorCode
) -> None:
    topics = FakeTopics(topic_of("a"))
    built = services(topics=topics, authorizer=granting(), config={"delete.topic.enable": "false"})
    response = call(built, delete_by_name("a", "nope"), version, ALICE)
    assert [(r.name, r.topic_id, r.error_code, r.error_message) for r in response.responses] == [
        ("a", ZERO_ID, code, None),
        ("nope", ZERO_ID, code, None),
    ]
    assert topics.deleted == []


def test_delete_topics_v6_refuses_malformed_entries() -> None:
    a, b = topic_of("a"), topic_of("b")
    topics = FakeTopics(a, b, topic_of("c"))
    twice = uuid.uuid4().bytes
    request = delete_v6(
        (None, ZERO_ID),
        ("c", a.topic_id),
        ("dup", ZERO_ID),
        ("dup", ZERO_ID),
        (None, twice),
        (None, twice),
        (None, b.topic_id),
        ("b", ZERO_ID),
    )
    response = call(services(topics=topics), request, 6)
    assert answers(response) == [
        (None, ZERO_ID, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        (None, twice, ErrorCode.INVALID_REQUEST, "Duplicate topic id."),
        # The id given on its own gets no answer of its own, and neither is deleted.
        (
            "b",
            b.topic_id,
            ErrorCode.INVALID_REQUEST,
            "The provided topic name maps to an ID that was already supplied.",
        ),
        (
            "c",
            a.topic_id,
            ErrorCode.INVALID_REQUEST,
            "You may not specify both topic name and topic id.",
        ),
        ("dup", ZERO_ID, ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
    ]
    assert topics.deleted == []


# -- CreatePartitions ---------------------------------------------------------------------


def grow(*wanted: tuple[str, int], validate_only: bool = False) -> Any:
    return create_partitions.CreatePartitionsRequest(
        topics=[
            create_partitions.CreatePartitionsTopic(name=n, count=c, assignments=None)
            for n, c in wanted
        ],
        timeout_ms=1000,
        validate_only=validate_only,
    )


def test_create_partitions_needs_alter_on_each_topic() -> None:
    topics = FakeTopics(topic_of("a"), topic_of("b"))
    topics.refuse["a"] = KafkaError(
        ErrorCode.INVALID_PARTITIONS, "Topic already has 1 partition(s)."
    )
    authorizer = granting((TOPIC, "a", AclOperation.ALTER), (TOPIC, "b", AclOperation.DESCRIBE))
    request = grow(("a", 1), ("b", 2), ("nope", 2), ("d", 2), ("d", 3))
    results = call(services(topics=topics, authorizer=authorizer), request, 3, ALICE).results
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("d", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("b", TOPIC_AUTHZ, None),
        ("nope", TOPIC_AUTHZ, None),
        ("a", ErrorCode.INVALID_PARTITIONS, "Topic already has 1 partition(s)."),
    ]


def test_create_partitions_without_an_authorizer_grows_every_topic() -> None:
    topics = FakeTopics(topic_of("a"), topic_of("b"))
    results = call(services(topics=topics), grow(("a", 2), ("b", 3)), 3).results
    assert [(r.name, r.error_code) for r in results] == [("a", 0), ("b", 0)]


# -- the controller mutation quota --------------------------------------------------------


def test_strict_create_topics_refuses_every_topic_asked_for_in_debt() -> None:
    topics = FakeTopics()
    topics.refuse["bad"] = KafkaError(ErrorCode.INVALID_PARTITIONS, "no")
    built = limited(1.0, topics=topics)
    request = create(creatable("big", 20), creatable("bad"), creatable("small"), creatable("more"))
    response = call(built, request, 6, ALICE)
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("big", 0, None),  # a rested bucket takes one topic of any size
        ("bad", ErrorCode.INVALID_PARTITIONS, "no"),  # validated before the quota
        ("small", THROTTLED, None),
        ("more", THROTTLED, None),
    ]
    assert response.throttle_time_ms > 0
    assert "small" not in topics.topics


def test_permissive_create_topics_creates_and_throttles() -> None:
    topics = FakeTopics()
    response = call(
        limited(1.0, topics=topics), create(creatable("big", 20), creatable("small")), 5, ALICE
    )
    assert [(t.name, t.error_code) for t in response.topics] == [("big", 0), ("small", 0)]
    assert response.throttle_time_ms > 0


def test_validate_only_is_charged() -> None:
    built = limited(1.0)
    checked = call(built, create(creatable("big", 20), validate_only=True), 6, ALICE)
    assert checked.topics[0].error_code == 0
    [refused] = call(built, create(creatable("small")), 6, ALICE).topics
    assert (refused.error_code, refused.error_message) == (THROTTLED, None)


def test_refused_topics_are_not_charged() -> None:
    built = limited(
        1.0,
        authorizer=granting(
            (TOPIC, "small", AclOperation.CREATE), (TOPIC, "next", AclOperation.CREATE)
        ),
    )
    first = call(built, create(creatable("big", 20), creatable("small")), 6, ALICE)
    assert [(t.name, t.error_code) for t in first.topics] == [("small", 0), ("big", TOPIC_AUTHZ)]
    assert first.throttle_time_ms == 0
    [then] = call(built, create(creatable("next")), 6, ALICE).topics
    assert then.error_code == 0


def test_no_quota_means_no_throttle_and_one_creation() -> None:
    topics = FakeTopics()
    response = call(services(topics=topics), create(creatable("big", 2000)), 7, ALICE)
    assert (response.topics[0].error_code, response.throttle_time_ms) == (0, 0)
    assert len(topics.created) == 1


@pytest.mark.parametrize(("version", "strict"), [(4, False), (5, True)])
def test_delete_topics_quota(version: int, strict: bool) -> None:
    topics = FakeTopics(topic_of("big", 20), topic_of("small"))
    built = limited(1.0, topics=topics)
    first = call(built, delete_by_name("big"), version, ALICE)
    assert [r.error_code for r in first.responses] == [0]
    second = call(built, delete_by_name("small"), version, ALICE)
    [answer] = second.responses
    assert (answer.error_code, answer.error_message) == ((THROTTLED, None) if strict else (0, None))
    assert second.throttle_time_ms > 0
    assert topics.deleted == (["big"] if strict else ["big", "small"])


@pytest.mark.parametrize(("version", "strict"), [(2, False), (3, True)])
def test_create_partitions_quota(version: int, strict: bool) -> None:
    topics = FakeTopics(topic_of("a"), topic_of("b"))
    built = limited(1.0, topics=topics)
    response = call(built, grow(("a", 30), ("b", 2)), version, ALICE)
    expected = (THROTTLED, None) if strict else (0, None)
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        ("a", 0, None),
        ("b", *expected),
    ]
    assert response.throttle_time_ms > 0
