"""The error_message fields of admin answers, as Apache Kafka 4.1 fills them: null, empty
or a message, version by version, for success and for each error.

Raw requests through the generated codecs, which tell a null string (None) from an
empty one. Passes against Apache Kafka too (``KPYBROKER_TEST_TARGET=kafka``), which
is where the expected values were taken from:

- CreateTopics (every version): null on success, validate_only included; the
  controller's message for each error; a name given twice is answered once, after
  the others, "Duplicate topic name." (``ControllerApis.createTopics``).
- FindCoordinator v1-3: ``Errors.message()`` always, so "NONE" on success
  (``KafkaApis.handleFindCoordinatorRequestLessThanV4``); v4+: empty for every
  answer of ``getCoordinator``, the default message only when the whole request
  fails (an unknown key type).
- Topic names are checked with ``Topic.validate``'s 4.x messages, by CreateTopics
  and DescribeProducers alike; DescribeProducers and DeleteTopics v5+ give the
  default message of a missing topic or topic ID.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kpybroker.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from kpybroker.protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from kpybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from tests.helpers.brokers import ManagedBroker
from tests.helpers.groups_wire import Wire, find_coordinator

pytestmark = pytest.mark.timeout(120)

INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)
NO_SUCH_TOPIC = "This server does not host this topic-partition."
LONG_NAME = "x" * 250
#: Illegal topic names and Kafka 4.1's Topic.validate message for each.
ILLEGAL_NAMES = {
    "": "Topic name is invalid: the empty string is not allowed",
    ".": "Topic name is invalid: '.' is not allowed",
    "..": "Topic name is invalid: '..' is not allowed",
    LONG_NAME: (
        f"Topic name is invalid: the length of '{LONG_NAME}' is longer than the max allowed "
        "length 249"
    ),
    "bad name!": (
        "Topic name is invalid: 'bad name!' contains one or more characters other than ASCII "
        "alphanumerics, '.', '_' and '-'"
    ),
}


def new_topic(name: str, partitions: int = 1, factor: int = 1, **configs: str) -> CreatableTopic:
    return CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=factor,
        configs=[
            CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()
        ],
    )


def create(
    wire: Wire, version: int, *topics: CreatableTopic, validate_only: bool = False
) -> list[tuple[str, int, str | None]]:
    request = CreateTopicsRequest(
        topics=list(topics), timeout_ms=30_000, validate_only=validate_only
    )
    return [(t.name, t.error_code, t.error_message) for t in wire.call(request, version).topics]


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_messages(module_broker: ManagedBroker, version: int) -> None:
    name = f"made-{version}-{uuid.uuid4().hex[:6]}"
    with Wire(module_broker.bootstrap) as wire:
        assert create(wire, version, new_topic(name)) == [(name, 0, None)]
        checked = create(wire, version, new_topic(name + "-checked"), validate_only=True)
        assert checked == [(name + "-checked", 0, None)]
        assert create(wire, version, new_topic(name)) == [
            (name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        ]
        for illegal, message in ILLEGAL_NAMES.items():
            assert create(wire, version, new_topic(illegal)) == [
                (illegal, ErrorCode.INVALID_TOPIC_EXCEPTION, message)
            ]
        assert create(wire, version, new_topic(name + "-p", partitions=0)) == [
            (
                name + "-p",
                ErrorCode.INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            )
        ]
        assert create(wire, version, new_topic(name + "-r", factor=0)) == [
            (
                name + "-r",
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        ]
        assert create(wire, version, new_topic(name + "-c", retention_ms="soon")) == [
            (
                name + "-c",
                ErrorCode.INVALID_CONFIG,
                "Invalid value soon for configuration retention.ms: Not a number of type LONG",
            )
        ]
        twice, once = name + "-twice", name + "-once"
        assert create(wire, version, new_topic(twice), new_topic(once), new_topic(twice)) == [
            (once, 0, None),
            (twice, ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ]


def coordinator(wire: Wire, version: int, key_type: int, key: str) -> tuple[Any, ...]:
    if version >= 4:
        request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        [found] = wire.call(request, version).coordinators
    else:
        found = wire.call(FindCoordinatorRequest(key=key, key_type=key_type), version)
    return found.error_code, found.error_message


def test_find_coordinator_messages(module_broker: ManagedBroker) -> None:
    find_coordinator(module_broker.bootstrap, "located")  # Kafka: not available at first
    invalid = ErrorCode.INVALID_REQUEST
    with Wire(module_broker.bootstrap) as wire:
        assert coordinator(wire, 0, 0, "located") == (0, "")  # no message on the v0 wire
        for version in (1, 2, 3):
            assert coordinator(wire, version, 0, "located") == (0, "NONE")
            assert coordinator(wire, version, 2, "shared") == (invalid, INVALID_REQUEST_MESSAGE)
            assert coordinator(wire, version, 7, "odd") == (invalid, INVALID_REQUEST_MESSAGE)
        assert coordinator(wire, 4, 0, "located") == (0, "")
        assert coordinator(wire, 4, 2, "shared") == (invalid, "")  # share groups need v6
        assert coordinator(wire, 4, 7, "odd") == (invalid, INVALID_REQUEST_MESSAGE)


def test_describe_producers_topic_errors(module_broker: ManagedBroker) -> None:
    def answer(name: str) -> tuple[int, str | None]:
        request = DescribeProducersRequest(topics=[TopicRequest(name=name, partition_indexes=[0])])
        [part] = wire.call(request, 0).topics[0].partitions
        return part.error_code, part.error_message

    with Wire(module_broker.bootstrap) as wire:
        for illegal, message in ILLEGAL_NAMES.items():
            assert answer(illegal) == (ErrorCode.INVALID_TOPIC_EXCEPTION, message)
        assert answer("no-such-topic") == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_SUCH_TOPIC)


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_messages(module_broker: ManagedBroker, version: int) -> None:
    name = f"doomed-{version}-{uuid.uuid4().hex[:6]}"
    missing_id = uuid.uuid4().bytes
    with Wire(module_broker.bootstrap) as wire:
        assert create(wire, 7, new_topic(name)) == [(name, 0, None)]
        if version >= 6:
            states = [DeleteTopicState(name=n) for n in (name, "no-such-topic")]
            states.append(DeleteTopicState(name=None, topic_id=missing_id))
            request = DeleteTopicsRequest(topics=states, timeout_ms=30_000)
        else:
            request = DeleteTopicsRequest(topic_names=[name, "no-such-topic"], timeout_ms=30_000)
        answers = {
            r.name or r.topic_id: (r.error_code, r.error_message)
            for r in wire.call(request, version).responses
        }
    messages = version >= 5  # the field exists from v5
    expected = {
        name: (0, None),
        "no-such-topic": (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            NO_SUCH_TOPIC if messages else None,
        ),
    }
    if version >= 6:
        expected[missing_id] = (
            ErrorCode.UNKNOWN_TOPIC_ID,
            "This server does not host this topic ID.",
        )
    assert answers == expected  # Kafka answers in no particular order
