"""The share coordinator's inter-broker APIs (KIP-932): share partitions' state, by key.

Sent by share-partition leaders and group coordinators (their persister) to
the share coordinator of each key (group, topic ID, partition):

- InitializeShareGroupState (83) v0: a new state epoch and start offset;
- ReadShareGroupState (84) v0: the whole state (recording the reader's leader
  epoch, which fences older leaders);
- WriteShareGroupState (85) v0-1: changed batches and the start offset; v1
  adds the delivery complete count (KIP-1226);
- DeleteShareGroupState (86) v0: forget the state;
- ReadShareGroupStateSummary (87) v0-1: the epochs and start offset; v1
  answers the delivery complete count.

Each partition is answered on its own (``share_coordinator.service``), all
at once; results come grouped by topic in the request's order. As in
Kafka's ``ShareCoordinatorService``, a request without a group id, without
topics, or with a topic without partitions (initialize excepted) gets an
empty answer.

Authorization, as Kafka's handlers: CLUSTER_ACTION on the cluster, else
every partition is CLUSTER_AUTHORIZATION_FAILED with its default message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode, default_message
from kpybroker.protocol.messages import (
    delete_share_group_state,
    initialize_share_group_state,
    read_share_group_state,
    read_share_group_state_summary,
    write_share_group_state,
)
from kpybroker.security.acls.model import AclOperation
from kpybroker.share_coordinator.persister import PartitionState, ShareKey, StateBatch
from kpybroker.share_coordinator.share_state import StateAnswer

Answered = list[tuple[bytes, list[tuple[int, StateAnswer]]]]
"""Per topic ID, in the request's order: each partition and its answer."""


def degenerate(request: Any, *, partitions_required: bool) -> bool:
    """Kafka answers these with an empty response (no results at all)."""
    return (
        not request.group_id
        or not request.topics
        or (partitions_required and any(not t.partitions for t in request.topics))
    )


async def answer_each(
    ctx: RequestContext,
    request: Any,
    ask: Callable[[ShareKey, Any], Awaitable[StateAnswer]],
    *,
    partitions_required: bool = True,
) -> Answered:
    """Each partition's answer, asked all at once; every one CLUSTER_AUTHORIZATION_FAILED
    without CLUSTER_ACTION, none for a degenerate request."""
    asked = [(bytes(t.topic_id), p) for t in request.topics for p in t.partitions]
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        answers = [StateAnswer(refused, default_message(refused))] * len(asked)
    elif degenerate(request, partitions_required=partitions_required):
        return []
    else:
        answers = await asyncio.gather(
            *(ask(ShareKey(request.group_id, topic_id, p.partition), p) for topic_id, p in asked)
        )
    by_topic: dict[bytes, list[tuple[int, StateAnswer]]] = {}
    for (topic_id, p), answer in zip(asked, answers, strict=True):
        by_topic.setdefault(topic_id, []).append((p.partition, answer))
    return list(by_topic.items())


def results(
    answered: Answered, result_type: Any, partition: Callable[[int, StateAnswer], Any]
) -> list[Any]:
    """The response's results: one ``result_type`` per topic, each partition's made by
    ``partition`` from its number and answer."""
    return [
        result_type(topic_id=topic_id, partitions=[partition(p, a) for p, a in parts])
        for topic_id, parts in answered
    ]


def error_only(partition_type: Any) -> Callable[[int, StateAnswer], Any]:
    """A partition's result that carries nothing but its error."""
    return lambda partition, answer: partition_type(
        partition=partition, error_code=answer.error, error_message=answer.message
    )


# -- InitializeShareGroupState ------------------------------------------------------------------


@api(initialize_share_group_state, 0, 0)
async def handle_initialize_share_group_state(
    ctx: RequestContext, request: initialize_share_group_state.InitializeShareGroupStateRequest
) -> initialize_share_group_state.InitializeShareGroupStateResponse:
    m = initialize_share_group_state
    service = ctx.services.share_state
    answered = await answer_each(
        ctx,
        request,
        lambda key, p: service.initialize(key, p.state_epoch, p.start_offset),
        partitions_required=False,
    )
    return m.InitializeShareGroupStateResponse(
        results=results(answered, m.InitializeStateResult, error_only(m.PartitionResult))
    )


# -- ReadShareGroupState ------------------------------------------------------------------


@api(read_share_group_state, 0, 0)
async def handle_read_share_group_state(
    ctx: RequestContext, request: read_share_group_state.ReadShareGroupStateRequest
) -> read_share_group_state.ReadShareGroupStateResponse:
    m = read_share_group_state
    service = ctx.services.share_state
    answered = await answer_each(ctx, request, lambda key, p: service.read(key, p.leader_epoch))

    def result(partition: int, answer: StateAnswer) -> Any:
        state = answer.state
        if state is None:
            return error_only(m.PartitionResult)(partition, answer)
        return m.PartitionResult(
            partition=partition,
            state_epoch=state.state_epoch,
            start_offset=state.start_offset,
            state_batches=[
                m.StateBatch(
                    first_offset=b.first_offset,
                    last_offset=b.last_offset,
                    delivery_state=b.delivery_state,
                    delivery_count=b.delivery_count,
                )
                for b in state.batches
            ],
        )

    return m.ReadShareGroupStateResponse(results=results(answered, m.ReadStateResult, result))


# -- WriteShareGroupState ------------------------------------------------------------------


def written_state(p: write_share_group_state.PartitionData) -> PartitionState:
    return PartitionState(
        state_epoch=p.state_epoch,
        start_offset=p.start_offset,
        leader_epoch=p.leader_epoch,
        batches=tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in p.state_batches
        ),
        delivery_complete_count=p.delivery_complete_count,
    )


@api(write_share_group_state, 0, 1)
async def handle_write_share_group_state(
    ctx: RequestContext, request: write_share_group_state.WriteShareGroupStateRequest
) -> write_share_group_state.WriteShareGroupStateResponse:
    m = write_share_group_state
    service = ctx.services.share_state
    answered = await answer_each(ctx, request, lambda key, p: service.write(key, written_state(p)))
    return m.WriteShareGroupStateResponse(
        results=results(answered, m.WriteStateResult, error_only(m.PartitionResult))
    )


# -- DeleteShareGroupState ------------------------------------------------------------------


@api(delete_share_group_state, 0, 0)
async def handle_delete_share_group_state(
    ctx: RequestContext, request: delete_share_group_state.DeleteShareGroupStateRequest
) -> delete_share_group_state.DeleteShareGroupStateResponse:
    m = delete_share_group_state
    service = ctx.services.share_state
    answered = await answer_each(ctx, request, lambda key, p: service.delete(key))
    return m.DeleteShareGroupStateResponse(
        results=results(answered, m.DeleteStateResult, error_only(m.PartitionResult))
    )


# -- ReadShareGroupStateSummary ------------------------------------------------------------------


@api(read_share_group_state_summary, 0, 1)
async def handle_read_share_group_state_summary(
    ctx: RequestContext,
    request: read_share_group_state_summary.ReadShareGroupStateSummaryRequest,
) -> read_share_group_state_summary.ReadShareGroupStateSummaryResponse:
    m = read_share_group_state_summary
    service = ctx.services.share_state
    answered = await answer_each(
        ctx, request, lambda key, p: service.read_summary(key, p.leader_epoch)
    )

    def result(partition: int, answer: StateAnswer) -> Any:
        state = answer.state
        if state is None:
            return error_only(m.PartitionResult)(partition, answer)
        return m.PartitionResult(
            partition=partition,
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count,
        )

    return m.ReadShareGroupStateSummaryResponse(
        results=results(answered, m.ReadStateSummaryResult, result)
    )
