"""ElectLeaders (key 43): ask for preferred or unclean leader elections.

Versions: 0 elects preferred leaders; 1 adds the election type (0 preferred,
1 unclean) and a top-level error code; 2 is flexible. A null partition list means
every partition, and then partitions that need no election are left out, as the
Kafka controller answers.

What is answered is what is true: a partition led by its preferred replica (the
first of its replicas) needs no preferred election, and one with a live leader
needs no unclean one. Moving leadership to another broker is the replication
controller's job; until kpybroker has one, such a request is answered
PREFERRED_LEADER_NOT_AVAILABLE (or ELIGIBLE_LEADERS_NOT_AVAILABLE), saying why.
"""

from __future__ import annotations

from enum import IntEnum

from kpybroker.apis.registry import RequestContext, api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import elect_leaders
from kpybroker.protocol.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kpybroker.topics import Topic

NO_LEADER_MOVES = "kpybroker does not move partition leadership between brokers"


class ElectionType(IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


def elect(
    ctx: RequestContext, name: str, topic: Topic | None, partition: int, election: int
) -> PartitionResult:
    """The outcome for one partition (Kafka's ``ReplicationControlManager.electLeader``)."""
    result = PartitionResult(partition_id=partition, error_message=None)
    state = None if topic is None else topic.partitions.get(partition)
    if state is None:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        result.error_message = (
            f"No such topic as {name}"
            if topic is None
            else f"No such partition as {name}-{partition}"
        )
    elif election == ElectionType.PREFERRED:
        preferred = state.replicas[0] if state.replicas else None
        if state.leader == preferred:
            result.error_code = ErrorCode.ELECTION_NOT_NEEDED
        else:
            result.error_code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            result.error_message = NO_LEADER_MOVES
    elif state.leader in ctx.broker.live_broker_ids():
        result.error_code = ErrorCode.ELECTION_NOT_NEEDED
    else:
        result.error_code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        result.error_message = NO_LEADER_MOVES
    return result


@api(elect_leaders, 0, 2)
async def handle_elect_leaders(
    ctx: RequestContext, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    topics = ctx.broker.topics
    election = request.election_type
    response = ElectLeadersResponse(replica_election_results=[])
    if election not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        response.error_code = ErrorCode.INVALID_REQUEST
        return response
    if request.topic_partitions is None:
        for topic in sorted(topics.all(), key=lambda t: t.name):
            outcomes = [
                elect(ctx, topic.name, topic, p, election) for p in sorted(topic.partitions)
            ]
            needed = [r for r in outcomes if r.error_code != ErrorCode.ELECTION_NOT_NEEDED]
            response.replica_election_results.append(
                ReplicaElectionResult(topic=topic.name, partition_result=needed)
            )
        return response
    for wanted in request.topic_partitions:
        topic = topics.get(wanted.topic)
        response.replica_election_results.append(
            ReplicaElectionResult(
                topic=wanted.topic,
                partition_result=[
                    elect(ctx, wanted.topic, topic, p, election) for p in wanted.partitions
                ],
            )
        )
    return response
