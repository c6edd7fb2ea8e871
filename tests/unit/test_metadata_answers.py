"""The Metadata handler's cache of encoded topic entries (``TopicAnswers``)."""

from __future__ import annotations

import dataclasses
import uuid
from types import MappingProxyType

from kpybroker.apis.support.metadata_answers import NO_OPERATIONS, TopicAnswers, topic_metadata
from kpybroker.metadata.model import PartitionMetadata, PartitionState, TopicMetadata
from kpybroker.protocol._codec import Encoded
from kpybroker.protocol.messages.metadata import MetadataResponse
from kpybroker.topic_admin import Topic


def topic(leader: int = 1) -> Topic:
    partitions = {
        p: PartitionMetadata(p, (1, 2), PartitionState(leader, 3, (1, 2), 1), 0) for p in range(3)
    }
    return Topic(TopicMetadata("t", uuid.uuid4(), MappingProxyType(partitions), {}))


def test_an_entry_encodes_as_the_objects_would_in_every_version() -> None:
    t = topic()
    for version in range(13):
        cached = TopicAnswers().get(version, t, NO_OPERATIONS, frozenset({1, 2}))
        assert isinstance(cached, Encoded)
        built = topic_metadata(t, NO_OPERATIONS, {1, 2})
        with_cache = MetadataResponse(brokers=[], topics=[cached]).encode_bytes(version)
        without = MetadataResponse(brokers=[], topics=[built]).encode_bytes(version)
        assert with_cache == without


def test_entries_stand_until_the_view_or_the_live_brokers_change() -> None:
    answers = TopicAnswers()
    t = topic()
    first = answers.get(12, t, NO_OPERATIONS, frozenset({1, 2}))
    assert answers.get(12, t, NO_OPERATIONS, frozenset({1, 2})) is first
    assert answers.get(12, t, 3576, frozenset({1, 2})) is not first  # other operations
    changed = Topic(dataclasses.replace(t.meta))  # a new view, as after any change
    assert answers.get(12, changed, NO_OPERATIONS, frozenset({1, 2})) is not first
    again = answers.get(12, changed, NO_OPERATIONS, frozenset({1, 2}))
    assert answers.get(12, changed, NO_OPERATIONS, frozenset({2})) != again  # leader 1 away
    offline = frozenset({(2, 1)})  # broker 2's replica of partition 1: its log dir failed
    assert answers.get(12, changed, NO_OPERATIONS, frozenset({1, 2}), offline) != again
    answers.prune(set())
    assert len(answers) == 0


def test_replicas_in_a_failed_log_dir_are_offline() -> None:
    entry = topic_metadata(topic(), NO_OPERATIONS, {1, 2}, {(2, 1)})
    assert [p.offline_replicas for p in entry.partitions] == [[], [2], []]
