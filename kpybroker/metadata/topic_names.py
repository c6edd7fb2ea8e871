"""Kafka's rules for topic names, in one place for the whole broker.

A topic name reaches the broker in many requests (CreateTopics, Metadata,
DescribeConfigs, DescribeProducers, DescribeTopicPartitions, ...) and becomes
a path component of the topic's znodes and log directories; every one of
those places checks it here, so that each answers a bad name alike, with
Kafka 4.x's messages (``org.apache.kafka.common.internals.Topic``):

- ``Topic.validate``: not empty, not "." nor "..", at most 249 characters,
  only ASCII alphanumerics, '.', '_' and '-';
- the collision rule of ``ReplicationControlManager.createTopic``: '.' and '_'
  may not be the only difference from an existing topic's name, since both
  become '_' in metric names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kpybroker.protocol.errors import ErrorCode, KafkaError

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
#: Topics only the broker writes to (the group, transaction and share coordinators).
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})

__all__ = [
    "INTERNAL_TOPICS",
    "LEGAL_CHARACTERS",
    "LEGAL_NAME",
    "MAX_NAME_LENGTH",
    "OFFSETS_TOPIC",
    "SHARE_GROUP_STATE_TOPIC",
    "TRANSACTION_STATE_TOPIC",
    "colliding_topic",
    "topic_name_error",
    "unify_collision_chars",
    "validate_no_collision",
    "validate_topic_name",
]

MAX_NAME_LENGTH = 249
LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
LEGAL_CHARACTERS = "ASCII alphanumerics, '.', '_' and '-'"


def topic_name_error(name: str) -> str | None:
    """Kafka's ``Topic.validate``, with its messages (4.x wording); None for a legal name."""
    reason = _invalid_name_reason(name)
    return None if reason is None else f"Topic name is invalid: {reason}"


def validate_topic_name(name: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION, with Kafka's message, unless ``name`` is legal."""
    message = topic_name_error(name)
    if message is not None:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, message)


def _invalid_name_reason(name: str) -> str | None:
    """Kafka's ``Topic.detectInvalidTopic``."""
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if not LEGAL_NAME.fullmatch(name):
        return f"'{name}' contains one or more characters other than {LEGAL_CHARACTERS}"
    return None


def unify_collision_chars(name: str) -> str:
    """Kafka's ``Topic.unifyCollisionChars``: '.' as '_', as metric names show both."""
    return name.replace(".", "_")


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """The first of ``existing`` whose name differs from ``name`` only in '.' versus '_'
    (or is ``name``), or None."""
    if "." not in name and "_" not in name:
        return None
    unified = unify_collision_chars(name)
    return next((other for other in existing if unify_collision_chars(other) == unified), None)


def validate_no_collision(name: str, existing: Iterable[str]) -> None:
    """Raise INVALID_TOPIC_EXCEPTION, with Kafka's message, when ``name`` collides with
    one of ``existing`` (see ``colliding_topic``)."""
    clash = colliding_topic(name, existing)
    if clash is not None:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{name}' collides with existing topic: {clash}",
        )
