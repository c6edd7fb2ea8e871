"""CreateTopics (key 19) and DeleteTopics (key 20).

CreateTopics versions: 0-1 are gone in Kafka 4; 1 adds validate_only; 4
lets num_partitions and replication_factor be -1 (broker defaults); 5 is
flexible and returns the created topic's partition count, replication factor
and configs; 7 returns its topic ID.

DeleteTopics versions: 0 is gone in Kafka 4; 4 is flexible; 5 adds error
messages; 6 names topics by name or by ID.

The rules (name, partitions, replication factor, configs) live in
kpybroker/topics.py; these handlers only map requests and errors.
"""

from __future__ import annotations

from collections import Counter

from kpybroker.apis.registry import RequestContext, api
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import create_topics, delete_topics
from kpybroker.protocol.messages.create_topics import (
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


@api(create_topics, 2, 7)
async def handle_create_topics(
    ctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    manager = ctx.broker.topics
    counts = Counter(t.name for t in request.topics)
    results = []
    for t in request.topics:
        result = CreatableTopicResult(name=t.name)
        results.append(result)
        if counts[t.name] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = (
                f"Create topics request from client `{ctx.client_id}` "
                f"contains multiple entries for the following topics: {t.name}"
            )
            continue
        try:
            created = await manager.create(
                t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments={a.partition_index: list(a.broker_ids) for a in t.assignments},
                configs={c.name: c.value for c in t.configs},
                validate_only=request.validate_only,
            )
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = exc.message
            continue
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
    return CreateTopicsResponse(topics=results)


@api(delete_topics, 1, 6)
async def handle_delete_topics(
    ctx: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    manager = ctx.broker.topics
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
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
                name = result.name = topic.name
            result.topic_id = await manager.delete(name)
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = exc.message
    return DeleteTopicsResponse(responses=results)
