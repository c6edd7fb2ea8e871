"""AlterReplicaLogDirs (key 34): move partitions between this broker's log directories.

Versions: 0 is gone in Kafka 4; 1 is the same wire; 2 is flexible. Each
partition gets Kafka's answer (``ReplicaManager.alterReplicaLogDirs``), in this
order: LOG_DIR_NOT_FOUND for a path that is not one of ``log.dirs``;
UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have;
REPLICA_NOT_AVAILABLE for one this broker holds no log of (yet): it is then
created in that directory when it comes; otherwise success, and the move runs
in the background (``kpybroker.log.log_dir_moves``), which DescribeLogDirs
shows as a future replica in the target directory until it is done. A
partition already in the directory is a success with nothing to do (and stops
a move of it elsewhere). A partition named under several directories goes to
the last one, and is answered once.

It needs ALTER on the cluster: a refusal gives every partition
CLUSTER_AUTHORIZATION_FAILED, as Kafka's ``KafkaApis`` answers.
"""

from __future__ import annotations

from collections import defaultdict

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import alter_replica_log_dirs
from kpybroker.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from kpybroker.security.acls.model import AclOperation


@api(alter_replica_log_dirs, 1, 2)
async def handle_alter_replica_log_dirs(
    ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    allowed = ctx.authorize_cluster(AclOperation.ALTER)
    # As Kafka: one destination per partition, the last one named.
    destinations = {
        (topic.name, index): wanted.path
        for wanted in request.dirs
        for topic in wanted.topics
        for index in topic.partitions
    }
    by_topic: dict[str, list[AlterReplicaLogDirPartitionResult]] = defaultdict(list)
    for (topic, index), path in destinations.items():
        error = move(ctx, path, topic, index) if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        by_topic[topic].append(
            AlterReplicaLogDirPartitionResult(partition_index=index, error_code=error)
        )
    return AlterReplicaLogDirsResponse(
        results=[
            AlterReplicaLogDirTopicResult(topic_name=name, partitions=partitions)
            for name, partitions in by_topic.items()
        ]
    )


def move(ctx: RequestContext, path: str, topic: str, index: int) -> ErrorCode:
    """Start moving one partition to ``path``: Kafka's per-partition error, or NONE."""
    logs = ctx.services.logs
    log_dir = logs.find_log_dir(path)
    if log_dir is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    # As Kafka: an offline destination, or a partition whose directory failed here.
    if log_dir not in logs.online_dirs or ctx.services.replicas.is_offline(topic, index):
        return ErrorCode.KAFKA_STORAGE_ERROR
    if not ctx.services.replicas.knows(topic, index):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not logs.move_to(topic, index, log_dir):
        return ErrorCode.REPLICA_NOT_AVAILABLE
    return ErrorCode.NONE
