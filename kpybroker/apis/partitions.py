"""CreatePartitions (key 37): add partitions to existing topics.

Versions: 0 is the original; 1 is the same wire (it let Kafka throttle); 2 is
flexible; 3 is the same wire as 2. validate_only checks without creating.

The rules and Kafka's messages (no decrease, the same replication factor, one
assignment per new partition) live in kpybroker/topic_admin.py beside create and delete.
"""

from __future__ import annotations

from collections import Counter

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import create_partitions
from kpybroker.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)


@api(create_partitions, 0, 3)
async def handle_create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        result = CreatePartitionsTopicResult(name=topic.name)
        results.append(result)
        try:
            if counts[topic.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            assignments = (
                None
                if topic.assignments is None
                else [list(a.broker_ids) for a in topic.assignments]
            )
            await ctx.services.topics.add_partitions(
                topic.name, topic.count, assignments, validate_only=request.validate_only
            )
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
    return CreatePartitionsResponse(results=results)
