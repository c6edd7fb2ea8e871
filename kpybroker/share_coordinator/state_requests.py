"""One key's share-state request to another broker's share coordinator, and its answer.

The five inter-broker APIs (InitializeShareGroupState 83, ReadShareGroupState
84, WriteShareGroupState 85, DeleteShareGroupState 86,
ReadShareGroupStateSummary 87) batch keys by group and topic; the persister
sends one key per request, so each builder here makes a request of one
partition and each reader takes that partition's result back out as a
``StateAnswer``. An answer without the partition (a coordinator that refused
the request as a whole) is UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    delete_share_group_state,
    initialize_share_group_state,
    read_share_group_state,
    read_share_group_state_summary,
    write_share_group_state,
)
from kpybroker.share_coordinator.persister import PartitionState, ShareKey, StateBatch
from kpybroker.share_coordinator.share_state import StateAnswer

INITIALIZE_VERSION = 0
READ_VERSION = 0
#: Version 1 carries the delivery complete count (KIP-1226).
WRITE_VERSION = 1
DELETE_VERSION = 0
SUMMARY_VERSION = 1
NO_RESULT = StateAnswer(ErrorCode.UNKNOWN_SERVER_ERROR, "The share coordinator answered no result.")


class StateRequest(NamedTuple):
    request: Any
    version: int


def initialize_request(key: ShareKey, state_epoch: int, start_offset: int) -> StateRequest:
    m = initialize_share_group_state
    partition = m.PartitionData(
        partition=key.partition, state_epoch=state_epoch, start_offset=start_offset
    )
    return StateRequest(
        m.InitializeShareGroupStateRequest(
            group_id=key.group_id,
            topics=[m.InitializeStateData(topic_id=key.topic_id, partitions=[partition])],
        ),
        INITIALIZE_VERSION,
    )


def read_request(key: ShareKey, leader_epoch: int) -> StateRequest:
    m = read_share_group_state
    partition = m.PartitionData(partition=key.partition, leader_epoch=leader_epoch)
    return StateRequest(
        m.ReadShareGroupStateRequest(
            group_id=key.group_id,
            topics=[m.ReadStateData(topic_id=key.topic_id, partitions=[partition])],
        ),
        READ_VERSION,
    )


def write_request(key: ShareKey, state: PartitionState) -> StateRequest:
    m = write_share_group_state
    partition = m.PartitionData(
        partition=key.partition,
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        delivery_complete_count=state.delivery_complete_count,
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
    return StateRequest(
        m.WriteShareGroupStateRequest(
            group_id=key.group_id,
            topics=[m.WriteStateData(topic_id=key.topic_id, partitions=[partition])],
        ),
        WRITE_VERSION,
    )


def delete_request(key: ShareKey) -> StateRequest:
    m = delete_share_group_state
    return StateRequest(
        m.DeleteShareGroupStateRequest(
            group_id=key.group_id,
            topics=[
                m.DeleteStateData(
                    topic_id=key.topic_id, partitions=[m.PartitionData(partition=key.partition)]
                )
            ],
        ),
        DELETE_VERSION,
    )


def summary_request(key: ShareKey, leader_epoch: int) -> StateRequest:
    m = read_share_group_state_summary
    partition = m.PartitionData(partition=key.partition, leader_epoch=leader_epoch)
    return StateRequest(
        m.ReadShareGroupStateSummaryRequest(
            group_id=key.group_id,
            topics=[m.ReadStateSummaryData(topic_id=key.topic_id, partitions=[partition])],
        ),
        SUMMARY_VERSION,
    )


def _result(key: ShareKey, response: Any) -> Any | None:
    """The response's result for ``key``'s partition."""
    for topic in response.results:
        if bytes(topic.topic_id) == key.topic_id:
            for result in topic.partitions:
                if result.partition == key.partition:
                    return result
    return None


def _error(result: Any) -> StateAnswer | None:
    if result is None:
        return NO_RESULT
    if result.error_code:
        return StateAnswer(ErrorCode(result.error_code), result.error_message)
    return None


def answer_of(key: ShareKey, response: Any) -> StateAnswer:
    """The answer of an initialize, write or delete."""
    return _error(_result(key, response)) or StateAnswer()


def read_answer(key: ShareKey, leader_epoch: int, response: Any) -> StateAnswer:
    result = _result(key, response)
    refused = _error(result)
    if refused is not None:
        return refused
    batches = tuple(
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in result.state_batches
    )
    return StateAnswer(
        state=PartitionState(result.state_epoch, result.start_offset, leader_epoch, batches)
    )


def summary_answer(key: ShareKey, response: Any) -> StateAnswer:
    result = _result(key, response)
    refused = _error(result)
    if refused is not None:
        return refused
    return StateAnswer(
        state=PartitionState(
            state_epoch=result.state_epoch,
            start_offset=result.start_offset,
            leader_epoch=result.leader_epoch,
            delivery_complete_count=result.delivery_complete_count,
        )
    )
