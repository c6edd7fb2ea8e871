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
and encoding the answer costs tens of milliseconds; ``TopicAnswers``
(``support/metadata_answers.py``) keeps each topic's encoded entry until
something it depends on changes.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.metadata_answers import CLUSTER_OPERATIONS, NO_OPERATIONS
from kpybroker.apis.support.registry import api
from kpybroker.metadata.topic_names import OFFSETS_TOPIC, topic_name_error
from kpybroker.protocol._codec import Encoded
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import metadata
from kpybroker.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
)
from kpybroker.topic_admin import Topic

AUTO_CREATE_FROM = 4


def error_topic(code: ErrorCode, name: str | None, topic_id: bytes | None = None):
    return MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id or bytes(16), is_internal=False
    )


async def auto_create(ctx: RequestContext, name: str) -> Topic:
    """A topic a client asked for, created with the broker's defaults; ``__consumer_offsets``
    the group coordinator's way (offsets.topic.*, compacted), as Kafka's auto-creation does."""
    if name == OFFSETS_TOPIC:
        await ctx.services.groups.ensure_offsets_topic()
        return ctx.services.topics.get(name)
    return await ctx.services.topics.auto_create(name)


#: Where Kafka's answer puts a requested topic: unknown ids, then the topics it has,
#: then the names it does not have (created now, or refused).
UNKNOWN_ID, EXISTING, MISSING = range(3)


async def requested_topics(ctx: RequestContext, request: MetadataRequest):
    """Yield (place, topic or error topic) for each requested topic, creating as allowed."""
    topics = ctx.services.topics
    allow_create = (
        ctx.api_version < AUTO_CREATE_FROM or request.allow_auto_topic_creation
    ) and ctx.services.config().get("auto.create.topics.enable")
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
                    topic = await auto_create(ctx, wanted.name)
                except KafkaError as exc:
                    yield MISSING, error_topic(exc.code, wanted.name)
                    continue
                yield MISSING, topic
                continue
        yield EXISTING, topic


@api(metadata, 0, 12)
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    services = ctx.services
    authorized = request.include_topic_authorized_operations
    everything = request.topics is None or (ctx.api_version == 0 and not request.topics)
    answers = services.metadata_answers
    topics: list[MetadataResponseTopic | Encoded] = []
    if everything:
        live = frozenset(services.cluster.live_broker_ids())
        for topic in services.topics.all():
            topics.append(answers.get(ctx.api_version, topic, authorized, live))
    else:
        placed = []
        async for place, item in requested_topics(ctx, request):
            if not isinstance(item, MetadataResponseTopic):
                live = frozenset(services.cluster.live_broker_ids())
                item = answers.get(ctx.api_version, item, authorized, live)
            placed.append((place, item))
        placed.sort(key=lambda pair: pair[0])  # stable: request order within each place
        topics = [item for _, item in placed]
    existing = services.cluster.topics()
    if len(answers) > len(existing) + 64:  # deleted topics' entries
        answers.prune(existing.keys())
    brokers = [
        MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
        for b in services.cluster.live_brokers(ctx.listener)
    ]
    return MetadataResponse(
        brokers=brokers,
        cluster_id=services.cluster.cluster_id,
        controller_id=services.cluster.controller_id(),
        topics=topics,
        cluster_authorized_operations=(
            CLUSTER_OPERATIONS if request.include_cluster_authorized_operations else NO_OPERATIONS
        ),
    )
