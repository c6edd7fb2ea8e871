"""Metadata (key 3): brokers, controller, topics and their partitions' leaders.

Versions: in v0 an empty topic list means every topic, from v1 a null list
does (and an empty one none); v1 adds racks, the controller and is_internal;
v2 the cluster ID; v4 lets the client forbid auto-creation (before v4 it is
always allowed); v5 offline replicas; v7 leader epochs; v8 authorized
operations; v9 is flexible; v10 topic IDs (v10+ may ask by ID); v11 drops
cluster authorized operations; v12 lets a topic name be null in answers.

Auto-creation follows ``auto.create.topics.enable`` and ``num.partitions``.
The topic is created before the answer, so the answer already has its
leaders (Kafka answers LEADER_NOT_AVAILABLE first and clients retry).

Clients ask for every topic often, and with thousands of partitions building
and encoding the answer costs tens of milliseconds; ``TopicAnswers`` keeps each
topic's encoded entry until something it depends on changes.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kpybroker.apis.registry import RequestContext, api
from kpybroker.metadata.cluster import TopicMetadata
from kpybroker.protocol._codec import Encoded
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import metadata
from kpybroker.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kpybroker.topics import Topic, topic_name_error

AUTO_CREATE_FROM = 4
NO_OPERATIONS = -(2**31)
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS:
# what a topic allows when no authorizer is configured.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE.
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def topic_metadata(
    ctx: RequestContext, topic: Topic, authorized: bool, live: set[int] | None = None
) -> MetadataResponseTopic:
    if live is None:
        live = ctx.broker.live_broker_ids()
    partitions = []
    for index in sorted(topic.partitions):
        state = topic.partitions[index]
        leader_alive = state.leader in live
        partitions.append(
            MetadataResponsePartition(
                error_code=ErrorCode.NONE if leader_alive else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=index,
                leader_id=state.leader if leader_alive else -1,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=list(state.isr),
                offline_replicas=[r for r in state.replicas if r not in live],
            )
        )
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=partitions,
        topic_authorized_operations=TOPIC_OPERATIONS if authorized else NO_OPERATIONS,
    )


@dataclass(frozen=True, slots=True)
class _Answer:
    meta: TopicMetadata
    live: frozenset[int]
    encoded: Encoded


class TopicAnswers:
    """Encoded topic entries of Metadata answers, per (topic, version, authorized flag).

    An entry stands while the topic's cached view is the same object (the
    cluster cache replaces it on any change of the topic, its partitions'
    states or its configs) and the same brokers are live. Entries of topics
    that no longer exist are dropped once they outnumber the live ones.
    """

    def __init__(self) -> None:
        # topic -> (version, authorized flag) -> answer
        self._answers: dict[str, dict[tuple[int, bool], _Answer]] = {}

    def get(
        self, ctx: RequestContext, topic: Topic, authorized: bool, live: frozenset[int]
    ) -> Encoded:
        answers = self._answers.setdefault(topic.name, {})
        key = (ctx.api_version, authorized)
        answer = answers.get(key)
        if answer is None or answer.meta is not topic.meta or answer.live != live:
            entry = topic_metadata(ctx, topic, authorized, set(live))
            answer = _Answer(topic.meta, live, entry.encode_bytes(ctx.api_version))
            answers[key] = answer
        return answer.encoded

    def prune(self, existing: Collection[str]) -> None:
        """Forget the topics not in ``existing`` (called when entries may be stale)."""
        self._answers = {name: a for name, a in self._answers.items() if name in existing}

    def __len__(self) -> int:
        """How many topics have entries."""
        return len(self._answers)


def error_topic(code: ErrorCode, name: str | None, topic_id: bytes | None = None):
    return MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id or bytes(16), is_internal=False
    )


#: Where Kafka's answer puts a requested topic: unknown ids, then the topics it has,
#: then the names it does not have (created now, or refused).
UNKNOWN_ID, EXISTING, MISSING = range(3)


async def requested_topics(ctx: RequestContext, request: MetadataRequest):
    """Yield (place, topic or error topic) for each requested topic, creating as allowed."""
    topics = ctx.broker.topics
    allow_create = (
        ctx.api_version < AUTO_CREATE_FROM or request.allow_auto_topic_creation
    ) and ctx.broker.config.get("auto.create.topics.enable")
    seen = set()
    for wanted in request.topics:
        if wanted.name is None:
            topic = topics.by_id(wanted.topic_id)
            if topic is None:
                yield UNKNOWN_ID, error_topic(ErrorCode.UNKNOWN_TOPIC_ID, None, wanted.topic_id)
                continue
        else:
            if wanted.name in seen:
                continue
            seen.add(wanted.name)
            topic = topics.get(wanted.name)
            if topic is None:
                try:
                    if not allow_create:
                        # Kafka still validates the name: a bad one is INVALID_TOPIC_EXCEPTION.
                        invalid = topic_name_error(wanted.name) is not None
                        raise KafkaError(
                            ErrorCode.INVALID_TOPIC_EXCEPTION
                            if invalid
                            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        )
                    topic = await topics.auto_create(wanted.name)
                except KafkaError as exc:
                    yield MISSING, error_topic(exc.code, wanted.name)
                    continue
                yield MISSING, topic
                continue
        yield EXISTING, topic


@api(metadata, 0, 12)
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    authorized = request.include_topic_authorized_operations
    everything = request.topics is None or (ctx.api_version == 0 and not request.topics)
    answers = broker.metadata_answers
    topics: list[MetadataResponseTopic | Encoded] = []
    if everything:
        live = frozenset(broker.live_broker_ids())
        for topic in broker.topics.all():
            topics.append(answers.get(ctx, topic, authorized, live))
    else:
        placed = []
        async for place, item in requested_topics(ctx, request):
            if not isinstance(item, MetadataResponseTopic):
                live = frozenset(broker.live_broker_ids())
                item = answers.get(ctx, item, authorized, live)
            placed.append((place, item))
        placed.sort(key=lambda pair: pair[0])  # stable: request order within each place
        topics = [item for _, item in placed]
    existing = broker.cluster.topics()
    if len(answers) > len(existing) + 64:  # deleted topics' entries
        answers.prune(existing.keys())
    brokers = [
        MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
        for b in broker.live_brokers(ctx.listener)
    ]
    return MetadataResponse(
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id(),
        topics=topics,
        cluster_authorized_operations=(
            CLUSTER_OPERATIONS if request.include_cluster_authorized_operations else NO_OPERATIONS
        ),
    )
