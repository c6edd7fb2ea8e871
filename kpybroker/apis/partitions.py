"""CreatePartitions (key 37): add partitions to existing topics.

Versions: 0 is the original; 1 is the same wire (it let Kafka throttle); 2 is
flexible; 3 is the same wire as 2, and refuses topics over the client's mutation
quota (THROTTLING_QUOTA_EXCEEDED; older versions are only throttled, see
``create_delete_topics``). validate_only checks without creating.

The rules and Kafka's messages (no decrease, the same replication factor, one
assignment per new partition) live in kpybroker/topic_admin.py beside create and delete.

As Kafka 4's controller: a topic named twice is answered once, then each topic the
principal may not ALTER gets TOPIC_AUTHORIZATION_FAILED (whether or not it exists),
then the others are grown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable

from kpybroker.apis.create_delete_topics import (
    DUPLICATE_NAME,
    charged,
    error_fields,
    mutation_quota,
    now_ms,
)
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import create_partitions
from kpybroker.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from kpybroker.quotas.controller_mutation_quota import ControllerMutationQuota
from kpybroker.security.acls.model import AclOperation, ResourceType
from kpybroker.topic_admin import MAX_PARTITIONS_PER_REQUEST, TOO_MANY_ADDED


@api(create_partitions, 0, 3)
async def handle_create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    names = [name for name, count in counts.items() if count == 1]
    alterable = ctx.authorized_names(AclOperation.ALTER, ResourceType.TOPIC, names)
    if oversized(ctx, [t for t in request.topics if t.name in alterable]):
        # As Kafka's answer to the controller's exception: every topic asked for, in order.
        return CreatePartitionsResponse(
            results=[
                CreatePartitionsTopicResult(
                    name=t.name,
                    error_code=ErrorCode.POLICY_VIOLATION,
                    error_message=TOO_MANY_ADDED,
                )
                for t in request.topics
            ]
        )
    quota = mutation_quota(ctx, create_partitions.API_KEY)
    results = [
        CreatePartitionsTopicResult(
            name=name, error_code=ErrorCode.INVALID_REQUEST, error_message=DUPLICATE_NAME
        )
        for name, count in counts.items()
        if count > 1
    ]
    results += [
        CreatePartitionsTopicResult(
            name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None
        )
        for name in names
        if name not in alterable
    ]
    results += [
        await grow(ctx, request, topic, quota)
        for topic in request.topics
        if topic.name in alterable
    ]
    return CreatePartitionsResponse(
        throttle_time_ms=quota.throttle_time_ms(now_ms()), results=results
    )


def oversized(ctx: RequestContext, topics: list[CreatePartitionsTopic]) -> bool:
    """Whether the existing ones of these topics gain more partitions in all than Kafka 4's
    controller adds in one request (unknown topics and decreases count for nothing)."""
    manager = ctx.services.topics
    gained = 0
    for topic in topics:
        existing = manager.get(topic.name)
        if existing is not None:
            gained += max(topic.count - len(existing.partitions), 0)
    return gained > MAX_PARTITIONS_PER_REQUEST


async def grow(
    ctx: RequestContext,
    request: CreatePartitionsRequest,
    topic: CreatePartitionsTopic,
    quota: ControllerMutationQuota,
) -> CreatePartitionsTopicResult:
    """One topic's answer, charging the partitions it gains to the quota."""
    manager = ctx.services.topics
    existing = manager.get(topic.name)
    # Only read once the topic is known to exist (the change validates that first).
    current = 0 if existing is None else len(existing.partitions)
    assignments = (
        None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
    )

    def add(validate_only: bool) -> Awaitable[None]:
        return manager.add_partitions(
            topic.name,
            topic.count,
            assignments,
            validate_only=validate_only,
            timeout_ms=request.timeout_ms,
        )

    result = CreatePartitionsTopicResult(name=topic.name)
    try:
        await charged(quota, add, lambda _: topic.count - current, request.validate_only)
    except KafkaError as exc:
        result.error_code, result.error_message = error_fields(exc)
    return result
