"""Tests of ``kpybroker.metadata.topic_names``: Kafka's topic name rules and messages."""

from __future__ import annotations

import pytest

from kpybroker.metadata.topic_names import (
    MAX_NAME_LENGTH,
    colliding_topic,
    topic_name_error,
    validate_no_collision,
    validate_topic_name,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError

LEGAL = ["a", "A-z_0.9", "x" * MAX_NAME_LENGTH, "...", "__consumer_offsets"]
ILLEGAL = {
    "": "Topic name is invalid: the empty string is not allowed",
    ".": "Topic name is invalid: '.' is not allowed",
    "..": "Topic name is invalid: '..' is not allowed",
    "x" * 250: f"Topic name is invalid: the length of '{'x' * 250}' is longer than the max "
    "allowed length 249",
    "bad name!": "Topic name is invalid: 'bad name!' contains one or more characters other "
    "than ASCII alphanumerics, '.', '_' and '-'",
    "a/b": "Topic name is invalid: 'a/b' contains one or more characters other than ASCII "
    "alphanumerics, '.', '_' and '-'",
    "é": "Topic name is invalid: 'é' contains one or more characters other than ASCII "
    "alphanumerics, '.', '_' and '-'",
}


@pytest.mark.parametrize("name", LEGAL)
def test_legal_names_pass(name: str) -> None:
    assert topic_name_error(name) is None
    validate_topic_name(name)


@pytest.mark.parametrize(("name", "message"), ILLEGAL.items())
def test_illegal_names_get_kafkas_messages(name: str, message: str) -> None:
    assert topic_name_error(name) == message
    with pytest.raises(KafkaError) as caught:
        validate_topic_name(name)
    assert caught.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert caught.value.message == message


def test_period_and_underscore_collide() -> None:
    existing = ["other", "a_b", "a.b.c"]
    assert colliding_topic("a.b", existing) == "a_b"
    assert colliding_topic("a_b_c", existing) == "a.b.c"
    assert colliding_topic("a-b", existing) is None
    assert colliding_topic("other", existing) is None  # no '.' or '_': never a collision
    with pytest.raises(KafkaError) as caught:
        validate_no_collision("a.b", existing)
    assert caught.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert caught.value.message == "Topic 'a.b' collides with existing topic: a_b"
    validate_no_collision("a-b", existing)
