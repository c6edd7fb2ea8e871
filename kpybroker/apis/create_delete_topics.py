"""CreateTopics (key 19) and DeleteTopics (key 20).

CreateTopics versions: 0-1 are gone in Kafka 4; 1 adds validate_only; 4
lets num_partitions and replication_factor be -1 (broker defaults); 5 is
flexible and returns the created topic's partition count, replication factor
and configs; 6 refuses topics over the client's mutation quota; 7 returns its
topic ID.

DeleteTopics versions: 0 is gone in Kafka 4; 4 is flexible; 5 adds error
messages and refuses topics over the quota; 6 names topics by name or by ID.

The rules (name, partitions, replication factor, configs) live in
kpybroker/topic_admin.py; these handlers only map requests and errors. The error
messages are Kafka's: CreateTopics answers a null one on success, in every
version; DeleteTopics v5+ answers a missing topic or topic ID with the
error's default message.

Authorization is the Kafka 4 controller's, as kpybroker is its own controller.
CreateTopics needs CREATE on the cluster or on each topic (refused whether or not
the topic exists), and shows a created topic's configs only with DESCRIBE_CONFIGS
on it. DeleteTopics needs DELETE on the cluster, or DESCRIBE and DELETE on each
topic; unknown topic IDs are answered before any check (IDs are not secret), and
the answer is shuffled so that its order says nothing about what was refused.

Both, and CreatePartitions, are charged to the client's controller mutation quota
(KIP-599): one charge per topic, of the partitions it creates or deletes, once it
has passed validation and authorization, right before the change (validate-only
requests too, as Kafka 4's controller charges them). From CreateTopics v6,
DeleteTopics v5 and CreatePartitions v3 the quota is strict: a topic asked for
while the client is in debt is refused with THROTTLING_QUOTA_EXCEEDED (no
message), and so is every later topic of the request; older versions are only
throttled. The answer's throttle time is the quota's.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol._codec import ZERO_UUID
from kpybroker.protocol.errors import ErrorCode, KafkaError, default_message
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
from kpybroker.quotas.controller_mutation_quota import (
    ControllerMutationQuota,
    ThrottlingQuotaExceededError,
)
from kpybroker.security.acls.model import AclOperation, ResourceType
from kpybroker.topic_admin import (
    MAX_PARTITIONS_PER_REQUEST,
    MAX_RECORDS_PER_REQUEST,
    TOO_LARGE_BATCH,
    TOO_MANY_PARTITIONS,
    Topic,
)

T = TypeVar("T")

DUPLICATE_NAME = "Duplicate topic name."
#: KRaft's own log: no client may create it.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
#: What ControllerApis answers a topic the principal may not create (not the default message).
CREATE_DENIED = "Authorization failed."
#: DeleteTopics v3 is the first that knows TOPIC_DELETION_DISABLED.
DELETION_DISABLED_FROM = 3


# ---------------------------------------------------------------------------- mutation quota


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def mutation_quota(ctx: RequestContext, api_key: int) -> ControllerMutationQuota:
    """The client's controller mutation quota for this request (strict or not by version)."""
    return ctx.services.quotas.controller_mutation.new_quota(
        ctx.principal.name, ctx.client_id or "", api_key, ctx.api_version, now_ms()
    )


async def charged(
    quota: ControllerMutationQuota,
    change: Callable[[bool], Awaitable[T]],
    partitions: Callable[[T], int],
    validate_only: bool,
) -> T:
    """Make ``change(validate_only)``, charging ``partitions(outcome)`` to the quota once the
    change is known to be valid and before it is made, as Kafka's controller does.

    A strict quota may refuse (``ThrottlingQuotaExceededError``), so it is asked after a
    validation pass and before the change; a permissive one never refuses, and is charged
    after the change, which then needs no validation pass of its own.
    """
    if not quota.strict:
        outcome = await change(validate_only)
        quota.record(partitions(outcome), now_ms())
        return outcome
    planned = await change(True)
    quota.record(partitions(planned), now_ms())
    return planned if validate_only else await change(False)


def error_fields(exc: KafkaError) -> tuple[ErrorCode, str | None]:
    """A topic's error code and message; a quota's refusal has no message (Kafka's
    ``ApiError.fromThrowable`` drops a message equal to the code's default)."""
    if isinstance(exc, ThrottlingQuotaExceededError):
        return exc.code, None
    return exc.code, exc.message


# ---------------------------------------------------------------------------- CreateTopics


@api(create_topics, 2, 7)
async def handle_create_topics(
    ctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    counts = Counter(t.name for t in request.topics)
    names = [name for name, count in counts.items() if count == 1]
    candidates = [name for name in names if name != CLUSTER_METADATA_TOPIC]
    if ctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False):
        creatable = set(candidates)
    else:
        creatable = ctx.authorized_names(AclOperation.CREATE, ResourceType.TOPIC, candidates)
    describable = ctx.authorized_names(
        AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, candidates, log_if_denied=False
    )
    refusal = await oversized(ctx, [t for t in request.topics if t.name in creatable])
    if refusal is not None:
        # As Kafka's answer to the controller's exception: every topic asked for, in order.
        return CreateTopicsResponse(
            topics=[
                refused_topic(t.name, ErrorCode.POLICY_VIOLATION, refusal) for t in request.topics
            ]
        )
    quota = mutation_quota(ctx, create_topics.API_KEY)
    results = [
        await create_topic(ctx, request, topic, quota, topic.name in describable)
        for topic in request.topics
        if topic.name in creatable
    ]
    # As Kafka's ControllerApis: the created topics, then a name given twice (answered
    # once), then the refused ones.
    results += [
        refused_topic(name, ErrorCode.INVALID_REQUEST, DUPLICATE_NAME)
        for name, count in counts.items()
        if count > 1
    ]
    results += [
        refused_topic(
            name,
            ErrorCode.INVALID_REQUEST,
            f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.",
        )
        if name == CLUSTER_METADATA_TOPIC
        else refused_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, CREATE_DENIED)
        for name in names
        if name not in creatable
    ]
    return CreateTopicsResponse(throttle_time_ms=quota.throttle_time_ms(now_ms()), topics=results)


async def oversized(ctx: RequestContext, topics: list[CreatableTopic]) -> str | None:
    """Why Kafka's controller would refuse these topics as one request, if it would: more
    partitions than ``MAX_PARTITIONS_PER_REQUEST`` in all, or more metadata records than
    ``MAX_RECORDS_PER_REQUEST`` for the topics that pass validation (each validated only
    when the request could be that large)."""
    manager = ctx.services.topics
    asked = [manager.partitions_asked(t.num_partitions, len(t.assignments)) for t in topics]
    if sum(asked) > MAX_PARTITIONS_PER_REQUEST:
        return TOO_MANY_PARTITIONS
    records = [1 + partitions + len(t.configs) for t, partitions in zip(topics, asked, strict=True)]
    if sum(records) <= MAX_RECORDS_PER_REQUEST:
        return None
    written = 0
    for topic, count in zip(topics, records, strict=True):
        try:
            await creation(ctx, topic, timeout_ms=0)(True)
        except KafkaError:
            continue
        written += count
    return TOO_LARGE_BATCH if written > MAX_RECORDS_PER_REQUEST else None


def refused_topic(name: str, code: ErrorCode, message: str) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, error_code=code, error_message=message)


def creation(
    ctx: RequestContext, topic: CreatableTopic, timeout_ms: int
) -> Callable[[bool], Awaitable[Topic]]:
    """``create(validate_only)`` for one topic of a CreateTopics request."""

    def create(validate_only: bool) -> Awaitable[Topic]:
        return ctx.services.topics.create(
            topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments={a.partition_index: list(a.broker_ids) for a in topic.assignments},
            configs={c.name: c.value for c in topic.configs},
            validate_only=validate_only,
            timeout_ms=timeout_ms,
        )

    return create


async def create_topic(
    ctx: RequestContext,
    request: CreateTopicsRequest,
    topic: CreatableTopic,
    quota: ControllerMutationQuota,
    describable: bool,
) -> CreatableTopicResult:
    """One topic's answer: its error and message, or on success a null message (as
    Kafka, in every version) and what was created; its partition count, replication
    factor and configs only to a principal allowed DESCRIBE_CONFIGS on it (otherwise
    ``topic_config_error_code`` says TOPIC_AUTHORIZATION_FAILED)."""
    manager = ctx.services.topics
    create = creation(ctx, topic, request.timeout_ms)
    result = CreatableTopicResult(name=topic.name, error_message=None)
    try:
        created = await charged(quota, create, lambda t: len(t.partitions), request.validate_only)
    except KafkaError as exc:
        result.error_code, result.error_message = error_fields(exc)
        return result
    result.topic_id = created.topic_id
    if not describable:
        result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return result
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


# ---------------------------------------------------------------------------- DeleteTopics


@api(delete_topics, 1, 6)
async def handle_delete_topics(
    ctx: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    quota = mutation_quota(ctx, delete_topics.API_KEY)
    if ctx.services.config().get("delete.topic.enable"):
        results = await TopicDeletion(ctx, quota).run(wanted)
        random.shuffle(results)
    else:
        # Checked before anything else, and the whole request fails (no message).
        code = (
            ErrorCode.TOPIC_DELETION_DISABLED
            if ctx.api_version >= DELETION_DISABLED_FROM
            else ErrorCode.INVALID_REQUEST
        )
        results = [
            DeletableTopicResult(name=name, topic_id=topic_id, error_code=code)
            for name, topic_id in wanted
        ]
    return DeleteTopicsResponse(
        throttle_time_ms=quota.throttle_time_ms(now_ms()), responses=results
    )


class TopicDeletion:
    """One DeleteTopics request, as Kafka's ``ControllerApis.deleteTopics`` answers it: each
    (name, topic ID) asked for is answered once, except an ID that a name also resolves to,
    whose only answer is the name's."""

    def __init__(self, ctx: RequestContext, quota: ControllerMutationQuota) -> None:
        self.ctx = ctx
        self.quota = quota
        self.results: list[DeletableTopicResult] = []

    def answer(
        self, name: str | None, topic_id: bytes, code: ErrorCode, message: str | None = None
    ) -> None:
        self.results.append(
            DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=code, error_message=message
            )
        )

    def refuse(self, name: str | None, topic_id: bytes, code: ErrorCode) -> None:
        """Refusals the controller words with the code's default message."""
        self.answer(name, topic_id, code, default_message(code))

    async def run(self, wanted: Sequence[tuple[str | None, bytes]]) -> list[DeletableTopicResult]:
        names, ids, duplicate_ids = self.sort_out(wanted)
        # Topic IDs are resolved before any check: an unknown one is no secret.
        by_id: dict[bytes, Topic] = {}
        for topic_id in ids:
            topic = self.ctx.services.topics.by_id(topic_id)
            if topic is None:
                self.refuse(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
            else:
                by_id[topic_id] = topic
        describable, deletable = self.authorized(names + [t.name for t in by_id.values()])
        for topic_id, topic in list(by_id.items()):
            if topic.name not in deletable:
                # The name only to a principal that may see the topic.
                shown = topic.name if topic.name in describable else None
                self.refuse(shown, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                del by_id[topic_id]
        for name in names:
            topic = self.ctx.services.topics.get(name)
            if name not in describable:
                self.refuse(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif topic is None:
                self.refuse(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif name not in deletable:
                self.refuse(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif topic.topic_id in by_id or topic.topic_id in duplicate_ids:
                # Kafka then drops the ID's own entry too, unanswered.
                by_id.pop(topic.topic_id, None)
                duplicate_ids.add(topic.topic_id)
                self.answer(
                    name,
                    topic.topic_id,
                    ErrorCode.INVALID_REQUEST,
                    "The provided topic name maps to an ID that was already supplied.",
                )
            else:
                by_id[topic.topic_id] = topic
        for topic_id, topic in by_id.items():
            await self.delete(topic_id, topic)
        return self.results

    def sort_out(
        self, wanted: Sequence[tuple[str | None, bytes]]
    ) -> tuple[list[str], list[bytes], set[bytes]]:
        """The names and the IDs each asked for once, and the IDs asked for more than once;
        every other entry is answered here."""
        name_counts: Counter[str] = Counter()
        id_counts: Counter[bytes] = Counter()
        for name, topic_id in wanted:
            if name is None and topic_id == ZERO_UUID:
                self.answer(
                    None,
                    ZERO_UUID,
                    ErrorCode.INVALID_REQUEST,
                    "Neither topic name nor id were specified.",
                )
            elif name is None:
                id_counts[topic_id] += 1
            elif topic_id == ZERO_UUID:
                name_counts[name] += 1
            else:
                self.answer(
                    name,
                    topic_id,
                    ErrorCode.INVALID_REQUEST,
                    "You may not specify both topic name and topic id.",
                )
        for name, count in name_counts.items():
            if count > 1:
                self.answer(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, DUPLICATE_NAME)
        duplicate_ids = {topic_id for topic_id, count in id_counts.items() if count > 1}
        for topic_id in duplicate_ids:
            self.answer(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
        names = [name for name, count in name_counts.items() if count == 1]
        ids = [topic_id for topic_id, count in id_counts.items() if count == 1]
        return names, ids, duplicate_ids

    def authorized(self, names: list[str]) -> tuple[set[str], set[str]]:
        """The topics the principal may see and those it may delete: all of them with
        DELETE on the cluster (a check not logged when refused)."""
        ctx = self.ctx
        if ctx.authorize_cluster(AclOperation.DELETE, log_if_denied=False):
            return set(names), set(names)
        return (
            ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, names),
            ctx.authorized_names(AclOperation.DELETE, ResourceType.TOPIC, names),
        )

    async def delete(self, topic_id: bytes, topic: Topic) -> None:
        try:
            self.quota.record(len(topic.partitions), now_ms())
            await self.ctx.services.topics.delete(topic.name)
        except KafkaError as exc:
            self.answer(topic.name, topic_id, *error_fields(exc))
        else:
            self.answer(topic.name, topic_id, ErrorCode.NONE)
