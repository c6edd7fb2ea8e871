"""ElectLeaders (key 43): ask the controller for preferred or unclean leader elections.

Versions: 0 elects preferred leaders; 1 adds the election type (0 preferred,
1 unclean) and a top-level error code; 2 is flexible. A null partition list means
every partition, and then partitions that need no election are left out, as the
Kafka controller answers.

As in Kafka's ZooKeeper mode the controller decides (admin clients send this
request to the controller named in Metadata); another broker answers
NOT_CONTROLLER, for the whole request from v1 and for each partition in v0.
A partition led by its preferred replica (the first of its replicas) needs no
preferred election, and one with a live leader needs no unclean one.

It needs ALTER on the cluster, checked first as Kafka's controller does: a refusal
gives CLUSTER_AUTHORIZATION_FAILED at the top (v1+) and to every partition asked for,
with the "needs ALTER permission" message (nothing at all for v0 asking for every
partition).
"""

from __future__ import annotations

from enum import IntEnum

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.cluster.controller import NotControllerError
from kpybroker.protocol.errors import ErrorCode, default_message
from kpybroker.protocol.messages import elect_leaders
from kpybroker.protocol.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kpybroker.security.acls.model import AclOperation

TOP_LEVEL_ERROR_FROM = 1


class ElectionType(IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


@api(elect_leaders, 0, 2)
async def handle_elect_leaders(
    ctx: RequestContext, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return refused(ctx, request)
    services = ctx.services
    election = request.election_type
    response = ElectLeadersResponse(replica_election_results=[])
    if election not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        response.error_code = ErrorCode.INVALID_REQUEST
        return response
    everything = request.topic_partitions is None
    if everything:
        wanted = [
            (topic.name, p)
            for topic in sorted(services.topics.all(), key=lambda t: t.name)
            for p in sorted(topic.partitions)
        ]
    else:
        wanted = [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    try:
        outcomes = await services.controller.elect_leaders(
            wanted, unclean=election == ElectionType.UNCLEAN
        )
    except NotControllerError as exc:
        if ctx.api_version >= TOP_LEVEL_ERROR_FROM:
            response.error_code = exc.code
            return response
        outcomes = dict.fromkeys(wanted, exc)
    # Every topic when all were asked for (even with nothing to report), in request order.
    by_topic: dict[str, list[PartitionResult]] = {t: [] for t, _ in wanted} if everything else {}
    for (topic, partition), error in outcomes.items():
        result = PartitionResult(partition_id=partition, error_message=None)
        if error is not None:
            # Kafka's ApiError.message(): the error's own text when it has none of its own.
            result.error_code = error.code
            result.error_message = error.message or default_message(error.code)
        if not (everything and result.error_code == ErrorCode.ELECTION_NOT_NEEDED):
            by_topic.setdefault(topic, []).append(result)
    response.replica_election_results = [
        ReplicaElectionResult(topic=topic, partition_result=results)
        for topic, results in by_topic.items()
    ]
    return response


def refused(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    """Kafka's ``ElectLeadersRequest.getErrorResponse`` for the refusal: the code at the
    top and, with the message, on every partition asked for, in request order."""
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    message = ctx.cluster_denial_message(AclOperation.ALTER)
    return ElectLeadersResponse(
        error_code=code,
        replica_election_results=[
            ReplicaElectionResult(
                topic=topic.topic,
                partition_result=[
                    PartitionResult(partition_id=p, error_code=code, error_message=message)
                    for p in topic.partitions
                ],
            )
            for topic in request.topic_partitions or ()
        ],
    )
