"""Metadata (key 3): brokers, controller, topics and their partitions' leaders.

Versions: in v0 an empty topic list means every topic, from v1 a null list
does (and an empty one none); v1 adds racks, the controller and is_internal;
v2 the cluster ID; v4 lets the client forbid auto-creation (before v4 it is
always allowed); v5 offline replicas; v7 leader epochs; v8 authorized
operations; v9 is flexible; v10 topic IDs (v10+ may ask by ID); v11 drops
cluster authorized operations; v12 lets a topic name be null in answers; v13
adds a top-level error code (KIP-1102). Kafka sets that code only in the answer
it makes of an exception (``MetadataRequest.getErrorResponse``), never on the
way it answers a request it can handle, so it is always NONE here too.

Auto-creation follows ``auto.create.topics.enable`` and ``num.partitions``.
The topic is created before the answer, so the answer already has its
leaders (Kafka answers LEADER_NOT_AVAILABLE first and clients retry).

Clients ask for every topic often, and with thousands of partitions building
and encoding the answer costs tens of milliseconds; ``TopicAnswers``
(``support/metadata_answers.py``) keeps each topic's encoded entry until
something it depends on changes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.metadata_answers import NO_OPERATIONS
from kpybroker.apis.support.registry import api
from kpybroker.metadata.topic_names import INTERNAL_TOPICS, OFFSETS_TOPIC, topic_name_error
from kpybroker.protocol._codec import Encoded
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import metadata
from kpybroker.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
)
from kpybroker.security.acls.model import AclOperation, ResourceType
from kpybroker.topic_admin import Topic

AUTO_CREATE_FROM = 4
TOPIC = ResourceType.TOPIC


def error_topic(
    code: ErrorCode,
    name: str | None,
    topic_id: bytes | None = None,
    *,
    operations: int = NO_OPERATIONS,
    is_internal: bool = False,
) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=code,
        name=name,
        topic_id=topic_id or bytes(16),
        is_internal=is_internal,
        topic_authorized_operations=operations,
    )


async def auto_create(ctx: RequestContext, name: str) -> Topic:
    """A topic a client asked for, created with the broker's defaults; ``__consumer_offsets``
    the group coordinator's way (offsets.topic.*, compacted), as Kafka's auto-creation does."""
    if name == OFFSETS_TOPIC:
        await ctx.services.groups.ensure_offsets_topic()
        return ctx.services.topics.get(name)
    return await ctx.services.topics.auto_create(name)


#: Where Kafka's answer puts a requested topic: unknown ids, then the topics it has, then
#: the names it does not have (created now, or refused), then those the principal may not
#: create, then those it may not describe.
UNKNOWN_ID, EXISTING, MISSING, CREATE_DENIED, DESCRIBE_DENIED = range(5)


class Creation:
    """Whether the principal may create a topic: CREATE on the cluster (asked once, without
    logging a denial, as Kafka does), else CREATE on the topic."""

    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx
        self._on_cluster: bool | None = None

    def allowed(self, name: str) -> bool:
        if self._on_cluster is None:
            self._on_cluster = self.ctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False)
        return self._on_cluster or self.ctx.authorize(AclOperation.CREATE, TOPIC, name)


async def requested_topics(
    ctx: RequestContext, request: MetadataRequest, include_operations: bool
) -> AsyncIterator[tuple[int, Topic | MetadataResponseTopic]]:
    """Yield (place, topic or error topic) for each requested topic, creating as allowed.

    DESCRIBE is asked before anything is looked up by name, so that a topic the
    principal may not describe is TOPIC_AUTHORIZATION_FAILED whether it exists or not.
    """
    topics = ctx.services.topics
    allow_create = (
        ctx.api_version < AUTO_CREATE_FROM or request.allow_auto_topic_creation
    ) and ctx.services.config().get("auto.create.topics.enable")
    creation = Creation(ctx)
    seen = set()
    for wanted in request.topics:
        if wanted.name is None:
            topic = topics.by_id(wanted.topic_id)
            if topic is None:
                yield UNKNOWN_ID, error_topic(ErrorCode.UNKNOWN_TOPIC_ID, None, wanted.topic_id)
            elif not ctx.authorize(AclOperation.DESCRIBE, TOPIC, topic.name):
                denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                yield DESCRIBE_DENIED, error_topic(denied, None, wanted.topic_id)
            else:
                yield EXISTING, topic
            continue
        name = wanted.name
        if name in seen:
            continue
        seen.add(name)
        if not ctx.authorize(AclOperation.DESCRIBE, TOPIC, name):
            yield DESCRIBE_DENIED, error_topic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
            continue
        topic = topics.get(name)
        if topic is not None:
            yield EXISTING, topic
            continue
        operations = ctx.authorized_operations(TOPIC, name) if include_operations else NO_OPERATIONS
        try:
            if not allow_create:
                # Kafka still validates the name: a bad one is INVALID_TOPIC_EXCEPTION.
                invalid = topic_name_error(name) is not None
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION
                    if invalid
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
            if not creation.allowed(name):
                yield (
                    CREATE_DENIED,
                    error_topic(
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        name,
                        is_internal=name in INTERNAL_TOPICS,
                    ),
                )
                continue
            topic = await auto_create(ctx, name)
        except KafkaError as exc:
            yield MISSING, error_topic(exc.code, name, operations=operations)
            continue
        yield MISSING, topic


@api(metadata, 0, 13)
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    services = ctx.services
    include_operations = request.include_topic_authorized_operations
    everything = request.topics is None or (ctx.api_version == 0 and not request.topics)
    answers = services.metadata_answers
    topics: list[MetadataResponseTopic | Encoded] = []
    live = frozenset(services.cluster.live_broker_ids())

    def entry(topic: Topic) -> Encoded:
        operations = (
            ctx.authorized_operations(TOPIC, topic.name) if include_operations else NO_OPERATIONS
        )
        offline = services.replicas.offline_here(topic.name)
        return answers.get(ctx.api_version, topic, operations, live, offline)

    if everything:
        # Topics the principal may not describe are left out, without a denial logged each.
        every = services.topics.all()
        allowed = ctx.authorized_names(
            AclOperation.DESCRIBE, TOPIC, (t.name for t in every), log_if_denied=False
        )
        topics = [entry(topic) for topic in every if topic.name in allowed]
    else:
        placed = []
        async for place, item in requested_topics(ctx, request, include_operations):
            placed.append((place, item if isinstance(item, MetadataResponseTopic) else entry(item)))
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
        cluster_authorized_operations=cluster_operations(ctx, request),
    )


def cluster_operations(ctx: RequestContext, request: MetadataRequest) -> int:
    """v8-10, on request: what the principal may do on the cluster, 0 without DESCRIBE."""
    if not request.include_cluster_authorized_operations:
        return NO_OPERATIONS
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster")
