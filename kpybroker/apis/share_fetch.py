"""ShareFetch (key 78) and ShareAcknowledge (key 79): reading a partition as a queue (KIP-932).

A share consumer fetches from the leaders of the partitions its share group
assigned it, in a share session (``share_partitions.share_sessions``):
epoch 0 opens it with the partitions to fetch, later requests add and forget
partitions, epoch -1 closes it and releases what the member still holds.
Every fetch reads all of the session's partitions. Acknowledgements of
records acquired earlier ride on a ShareFetch, or come alone in a
ShareAcknowledge; each is answered once persisted.

Served only while share groups are on (``support.features.share_groups_enabled``), else
UNSUPPORTED_VERSION, as Kafka answers with ``share.version`` 0.

Versions: both APIs start at 1 (Kafka 4.1's stable form: ``max_records`` and
``batch_size``); 2 adds the renew acknowledgement type (4) with
``is_renew_ack``, and ShareAcknowledge's ``acquisition_lock_timeout_ms``.

Authorization, as Kafka's request handler: READ on the group (the whole
request refused with GROUP_AUTHORIZATION_FAILED), READ on each topic
(TOPIC_AUTHORIZATION_FAILED for its partitions); an unknown topic ID is
UNKNOWN_TOPIC_ID.

The answer carries a session's partitions only where there is something to
say (records, an error, an acknowledgement's result), except the first,
which answers every partition it names, as Kafka's ShareSessionContext does.
Records are the partition's whole batches that hold acquired records, never
decoded; ``acquired_records`` says which offsets the consumer owns.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kpybroker.apis.share_group import valid_member_id
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.features import share_groups_enabled
from kpybroker.apis.support.leadership import HINTED_ERRORS, leader_endpoints
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode, default_message
from kpybroker.protocol.messages import share_acknowledge, share_fetch
from kpybroker.protocol.messages.share_acknowledge import (
    PartitionData as AckPartitionData,
)
from kpybroker.protocol.messages.share_acknowledge import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from kpybroker.protocol.messages.share_fetch import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from kpybroker.security.acls.model import AclOperation, ResourceType
from kpybroker.share_coordinator.persister import ShareKey
from kpybroker.share_partitions.share_partition import Refusal
from kpybroker.share_partitions.share_partition_manager import Ack
from kpybroker.share_partitions.share_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    SessionError,
    SessionKey,
    SessionPartition,
)

RENEW_FROM = 2
#: ShareFetch v2's ``share_acquire_mode``: never more than ``max_records`` (0: whole batches).
RECORD_LIMIT_MODE = 1


#: Partitions answered with an error before anything is read or acknowledged.
Refusals = dict[SessionPartition, ErrorCode]


def refusals(ctx: RequestContext, partitions: Iterable[SessionPartition]) -> Refusals:
    """UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED or UNKNOWN_TOPIC_OR_PARTITION per partition."""
    refused: Refusals = {}
    replicas = ctx.services.replicas
    allowed: dict[str, bool] = {}
    for tp in partitions:
        name = replicas.topic_name(tp.topic_id)
        if name is None:
            refused[tp] = ErrorCode.UNKNOWN_TOPIC_ID
            continue
        if name not in allowed:
            allowed[name] = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name)
        if not allowed[name]:
            refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not replicas.knows(name, tp.partition):
            refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return refused


def acks_of(topics: Iterable[Any]) -> dict[SessionPartition, list[Ack]]:
    """The acknowledgement batches of a request, per partition."""
    acks: dict[SessionPartition, list[Ack]] = {}
    for topic in topics:
        for p in topic.partitions:
            if p.acknowledgement_batches:
                acks.setdefault(SessionPartition(topic.topic_id, p.partition_index), []).extend(
                    Ack(b.first_offset, b.last_offset, b.acknowledge_types)
                    for b in p.acknowledgement_batches
                )
    return acks


async def acknowledge_all(
    ctx: RequestContext,
    group_id: str,
    member_id: str,
    acks: dict[SessionPartition, list[Ack]],
    refused: Refusals,
    renew: bool,
) -> dict[SessionPartition, Refusal | None]:
    """Each partition's acknowledgements applied: None, or why they were refused."""
    shares = ctx.services.share_partitions
    results: dict[SessionPartition, Refusal | None] = {}
    for tp, batches in acks.items():
        if tp in refused:
            results[tp] = Refusal(refused[tp])
            continue
        name = ctx.services.replicas.topic_name(tp.topic_id)
        assert name is not None
        key = ShareKey(group_id, tp.topic_id, tp.partition)
        results[tp] = await shares.acknowledge(member_id, key, name, batches, renew)
    return results


def leader_of(ctx: RequestContext, tp: SessionPartition) -> LeaderIdAndEpoch:
    name = ctx.services.replicas.topic_name(tp.topic_id)
    if name is None:
        return LeaderIdAndEpoch(-1, -1)
    hint = ctx.services.replicas.leader_hint(name, tp.partition)
    return LeaderIdAndEpoch(hint.leader_id, hint.leader_epoch)


def fetch_error(code: ErrorCode, message: str | None = None) -> ShareFetchResponse:
    return ShareFetchResponse(error_code=code, error_message=message)


@api(share_fetch, 1, 2)
async def handle_share_fetch(ctx: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse:
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    if not share_groups_enabled(ctx):
        return fetch_error(ErrorCode.UNSUPPORTED_VERSION)
    # Kafka refuses a null group ID (an empty one is a group like any other) and a member ID
    # that is null, empty or longer than 36 characters.
    if group_id is None or member_id is None or not valid_member_id(member_id):
        return fetch_error(ErrorCode.INVALID_REQUEST)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return fetch_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    acks = acks_of(request.topics)
    if acks and epoch == INITIAL_EPOCH:  # acknowledging needs a session already open
        return fetch_error(ErrorCode.INVALID_REQUEST)
    renew = ctx.api_version >= RENEW_FROM and request.is_renew_ack
    shares = ctx.services.share_partitions
    key = SessionKey(group_id, member_id)
    named = [
        SessionPartition(t.topic_id, p.partition_index)
        for t in request.topics
        for p in t.partitions
    ]
    forgotten = [
        SessionPartition(t.topic_id, index)
        for t in request.forgotten_topics_data
        for index in t.partitions
    ]
    try:
        if epoch == INITIAL_EPOCH:
            session, replaced = shares.sessions.open(key, named, ctx.connection_id)
            if replaced is not None:
                shares.session_ended(replaced)
        elif epoch == FINAL_EPOCH:
            session = shares.sessions.close(key)
        else:
            session = shares.sessions.advance(key, epoch, named, forgotten)
            session.connection_id = ctx.connection_id
    except SessionError as exc:
        return fetch_error(exc.code, exc.message)
    fetching = list(session.partitions) if epoch != FINAL_EPOCH else []
    refused = refusals(ctx, {*fetching, *acks})
    ack_results = await acknowledge_all(ctx, group_id, member_id, acks, refused, renew)
    if epoch == FINAL_EPOCH:
        shares.session_ended(session)
    wanted = [
        (ShareKey(group_id, tp.topic_id, tp.partition), name)
        for tp in fetching
        if tp not in refused and (name := ctx.services.replicas.topic_name(tp.topic_id))
    ]
    fetched = {}
    if wanted:
        fetched = await shares.fetch(
            group_id,
            member_id,
            wanted,
            max_records=request.max_records if request.max_records > 0 else 500,
            max_bytes=request.max_bytes,
            min_bytes=request.min_bytes,
            max_wait_ms=request.max_wait_ms,
            record_limit=request.share_acquire_mode == RECORD_LIMIT_MODE,
            batch_size=request.batch_size,
        )
    answers: dict[SessionPartition, PartitionData] = {}
    hinted: set[int] = set()
    for tp in [*fetching, *(tp for tp in ack_results if tp not in fetching)]:
        pd = PartitionData(partition_index=tp.partition, records=b"")
        code = refused.get(tp)
        got = fetched.get(ShareKey(group_id, tp.topic_id, tp.partition))
        if code is None and got is not None:
            code = got.error
            pd.records = got.records
            pd.acquired_records = [AcquiredRecords(*a) for a in got.acquired]
        pd.error_code = code or ErrorCode.NONE
        refusal = ack_results.get(tp)
        if refusal is not None:
            pd.acknowledge_error_code, pd.acknowledge_error_message = refusal
        if pd.error_code in HINTED_ERRORS:
            pd.current_leader = leader_of(ctx, tp)
            hinted.add(pd.current_leader.leader_id)
        if epoch == INITIAL_EPOCH or pd.error_code or pd.acquired_records or tp in ack_results:
            answers[tp] = pd
    response = ShareFetchResponse(
        error_code=ErrorCode.NONE,
        acquisition_lock_timeout_ms=shares.lock_duration_ms(group_id),
        responses=grouped(answers, ShareFetchableTopicResponse),
    )
    response.node_endpoints = endpoints(ctx, hinted, NodeEndpoint)
    return response


@api(share_acknowledge, 1, 2)
async def handle_share_acknowledge(
    ctx: RequestContext, request: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch

    def refuse(code: ErrorCode, message: str | None = None) -> ShareAcknowledgeResponse:
        return ShareAcknowledgeResponse(error_code=code, error_message=message)

    if not share_groups_enabled(ctx):
        return refuse(ErrorCode.UNSUPPORTED_VERSION)
    if group_id is None or member_id is None or not valid_member_id(member_id):
        return refuse(ErrorCode.INVALID_REQUEST)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return refuse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    acks = acks_of(request.topics)
    renew = ctx.api_version >= RENEW_FROM and request.is_renew_ack
    shares = ctx.services.share_partitions
    key = SessionKey(group_id, member_id)
    try:
        if epoch == INITIAL_EPOCH:  # acknowledging needs a session already open
            return refuse(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        if epoch == FINAL_EPOCH:
            session = shares.sessions.close(key)
        else:
            session = shares.sessions.advance(key, epoch)
            session.connection_id = ctx.connection_id
    except SessionError as exc:
        return refuse(exc.code, exc.message)
    refused = refusals(ctx, acks)
    for tp in acks:  # a partition of no session of the member's here
        if tp not in refused and tp not in session.partitions:
            refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    results = await acknowledge_all(ctx, group_id, member_id, acks, refused, renew)
    if epoch == FINAL_EPOCH:
        shares.session_ended(session)
    answers: dict[SessionPartition, AckPartitionData] = {}
    hinted: set[int] = set()
    for tp, refusal in results.items():
        pd = AckPartitionData(partition_index=tp.partition)
        if refusal is not None:
            pd.error_code, pd.error_message = refusal
            if refusal.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                # Kafka says it here (a ShareFetch's unknown partition has no message).
                pd.error_message = default_message(refusal.error)
        if pd.error_code in HINTED_ERRORS:
            pd.current_leader = leader_of(ctx, tp)
            hinted.add(pd.current_leader.leader_id)
        answers[tp] = pd
    response = ShareAcknowledgeResponse(
        error_code=ErrorCode.NONE, responses=grouped(answers, ShareAcknowledgeTopicResponse)
    )
    if ctx.api_version >= RENEW_FROM:
        response.acquisition_lock_timeout_ms = shares.lock_duration_ms(group_id)
    response.node_endpoints = endpoints(ctx, hinted, share_acknowledge.NodeEndpoint)
    return response


def grouped(answers: dict[SessionPartition, Any], topic_class: Any) -> list[Any]:
    """One topic entry per topic, in the order the partitions were answered."""
    topics: dict[bytes, Any] = {}
    for tp, pd in answers.items():
        if tp.topic_id not in topics:
            topics[tp.topic_id] = topic_class(topic_id=tp.topic_id, partitions=[])
        topics[tp.topic_id].partitions.append(pd)
    return list(topics.values())


def endpoints(ctx: RequestContext, leaders: set[int], endpoint_class: Any) -> list[Any]:
    if not leaders:
        return []
    return [
        endpoint_class(node_id=a.broker_id, host=a.host, port=a.port, rack=a.rack)
        for a in leader_endpoints(ctx, leaders)
    ]
