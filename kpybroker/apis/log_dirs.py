"""DescribeLogDirs (key 35): this broker's log directories and the partitions in each.

Versions: 0 is gone in Kafka 4; 1 is the same wire; 2 is flexible; 3 adds a
top-level error code; 4 adds each directory's total and usable bytes; 5 (KIP-1066)
whether each directory is cordoned: named in ``cordoned.log.dirs`` (``*``: all of
them), as the broker's config stands now (a dynamic per-broker change included).
Kafka keeps new partitions out of cordoned directories; kpybroker only reports
them (placement ignores the setting).

A directory taken offline by a disk error (``log_dir_failure``) is listed with
KAFKA_STORAGE_ERROR, no partitions and no sizes, as Kafka lists it.

Sizes are the partitions' real bytes on disk (all segments). The offset lag is
Kafka's ``max(high watermark - log end offset, 0)`` for a current replica (0 on a
leader). A partition being moved to another directory (AlterReplicaLogDirs) is
also listed under the target directory with ``is_future_key`` true, its future
log's size, and as offset lag how far that log is behind the current one.

It needs DESCRIBE on the cluster: a principal without it gets CLUSTER_AUTHORIZATION_FAILED
and no directories, which versions 1-2 (no error field) see as a broker without any.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.config import BrokerConfig
from kpybroker.log.partition_log import PartitionLog
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import describe_log_dirs
from kpybroker.protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kpybroker.security.acls.model import AclOperation


def offset_lag(plog: PartitionLog) -> int:
    return max(plog.high_watermark - plog.log_end_offset, 0)


ALL_DIRS = "*"

#: A partition's entry in a directory, with its topic's name.
DescribeLogDirsPartitionOf = tuple[str, DescribeLogDirsPartition]


def cordoned_dirs(config: BrokerConfig) -> tuple[set[Path], bool]:
    """The directories ``cordoned.log.dirs`` names (resolved), and whether it says all."""
    named = config.get("cordoned.log.dirs") or ()
    return {Path(d).resolve() for d in named if d != ALL_DIRS}, ALL_DIRS in named


def dir_result(
    log_dir: Path, logs: list[DescribeLogDirsPartitionOf], cordoned: bool = False
) -> DescribeLogDirsResult:
    by_topic: dict[str, list[DescribeLogDirsPartition]] = defaultdict(list)
    for topic, partition in sorted(logs, key=lambda item: (item[0], item[1].partition_index)):
        by_topic[topic].append(partition)
    usage = shutil.disk_usage(log_dir)
    return DescribeLogDirsResult(
        log_dir=str(log_dir.resolve()),
        topics=[DescribeLogDirsTopic(name=t, partitions=p) for t, p in by_topic.items()],
        total_bytes=usage.total,
        usable_bytes=usage.free,
        is_cordoned=cordoned,
    )


def offline_dir_result(log_dir: Path) -> DescribeLogDirsResult:
    return DescribeLogDirsResult(
        error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(log_dir.resolve())
    )


@api(describe_log_dirs, 1, 5)
async def handle_describe_log_dirs(
    ctx: RequestContext, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    logs = ctx.services.logs
    wanted = (
        None
        if request.topics is None
        else {(t.topic, p) for t in request.topics for p in t.partitions}
    )
    per_dir: dict[Path, list[DescribeLogDirsPartitionOf]] = {d: [] for d in logs.online_dirs}
    for (topic, index), plog in logs:
        if wanted is None or (topic, index) in wanted:
            per_dir[logs.log_dir_of(topic, index)].append(
                (topic, DescribeLogDirsPartition(index, plog.size, offset_lag(plog)))
            )
    for (topic, index), target, move in logs.future_logs():
        if wanted is None or (topic, index) in wanted:
            per_dir[target].append(
                (
                    topic,
                    DescribeLogDirsPartition(
                        index, move.future.size, move.offset_lag, is_future_key=True
                    ),
                )
            )
    cordoned, all_cordoned = cordoned_dirs(ctx.services.config())
    return DescribeLogDirsResponse(
        results=[
            dir_result(d, per_dir[d], all_cordoned or d.resolve() in cordoned)
            if d in per_dir
            else offline_dir_result(d)
            for d in logs.log_dirs
        ]
    )
