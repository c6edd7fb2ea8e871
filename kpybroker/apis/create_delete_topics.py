"""CreateTopics (key 19) and DeleteTopics (key 20).

CreateTopics versions: 0-1 are gone in Kafka 4; 1 adds validate_only; 4
lets num_partitions and replication_factor be -1 (broker defaults); 5 is
flexible and returns the created topic's partition count, replication factor
and configs; 7 returns its topic ID.

DeleteTopics versions: 0 is gone in Kafka 4; 4 is flexible; 5 adds error
messages; 6 names topics by name or by ID.

The rules (name, partitions, replication factor, configs) live in
kpybroker/topic_admin.py; these handlers only map requests and errors. The error
messages are Kafka's: CreateTopics answers a null one on success, in every
version; DeleteTopics v5+ answers a missing topic or topic ID with the
error's default message.
"""

from __future__ import annotations

from collections import Counter

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import create_topics, delete_topics
from kpybroker.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kpybroker.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

DUPLICATE_NAME = "Duplicate topic name."


@api(create_topics, 2, 7)
async def handle_create_topics(
    ctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    counts = Counter(t.name for t in request.topics)
    results = [await create_topic(ctx, request, t) for t in request.topics if counts[t.name] == 1]
    # As Kafka's ControllerApis: a name given twice is left out of the creation and
    # answered once, after the others.
    results += [
        CreatableTopicResult(
            name=name, error_code=ErrorCode.INVALID_REQUEST, error_message=DUPLICATE_NAME
        )
        for name, count in counts.items()
        if count > 1
    ]
    return CreateTopicsResponse(topics=results)


async def create_topic(
    ctx: RequestContext, request: CreateTopicsRequest, topic: CreatableTopic
) -> CreatableTopicResult:
    """One topic's answer: its error and message, or on success a null message (as
    Kafka, in every version) and what was created."""
    manager = ctx.services.topics
    result = CreatableTopicResult(name=topic.name, error_message=None)
    try:
        created = await manager.create(
            topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments={a.partition_index: list(a.broker_ids) for a in topic.assignments},
            configs={c.name: c.value for c in topic.configs},
            validate_only=request.validate_only,
        )
    except KafkaError as exc:
        result.error_code = exc.code
        result.error_message = exc.message
        return result
    result.topic_id = created.topic_id if not request.validate_only else bytes(16)
    result.num_partitions = len(created.partitions)
    result.replication_factor = created.replication_factor
    result.configs = [
        CreatableTopicConfigs(
            name=entry.name,
            value=entry.value,
            read_only=entry.read_only,
            config_source=entry.source,
            is_sensitive=entry.sensitive,
        )
        for entry in manager.describe_configs(created)
    ]
    return result


@api(delete_topics, 1, 6)
async def handle_delete_topics(
    ctx: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    manager = ctx.services.topics
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        result = DeletableTopicResult(name=name, topic_id=topic_id or bytes(16))
        results.append(result)
        try:
            if name is None:
                topic = manager.by_id(topic_id)
                if topic is None:
                    raise KafkaError.with_default_message(ErrorCode.UNKNOWN_TOPIC_ID)
                name = result.name = topic.name
            result.topic_id = await manager.delete(name)
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = exc.message
    return DeleteTopicsResponse(responses=results)
