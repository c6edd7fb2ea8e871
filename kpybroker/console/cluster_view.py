"""The console's view of the cluster and its topics, as JSON-ready dicts.

Brokers and the controller come from DescribeCluster; topics, partitions, leaders,
replicas and ISR from Metadata; offsets from ListOffsets (earliest and latest, as
``kafka-get-offsets`` asks) and sizes from DescribeLogDirs. Offsets and sizes are
this broker's: a partition it does not lead has no offsets here (``None``), and one it
holds no replica of has no size.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kpybroker.console.kafka_calls import KafkaCalls
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.describe_cluster import DescribeClusterRequest
from kpybroker.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kpybroker.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kpybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic

DESCRIBE_CLUSTER_VERSION = 1
METADATA_VERSION = 12
LIST_OFFSETS_VERSION = 9
DESCRIBE_LOG_DIRS_VERSION = 4
EARLIEST, LATEST = -2, -1
CONSUMER_REPLICA_ID = -1

TopicPartition = tuple[str, int]


def error_name(code: int) -> str | None:
    return None if code == 0 else ErrorCode(code).name


async def describe_cluster(kafka: KafkaCalls) -> dict[str, Any]:
    answer = await kafka.call(DescribeClusterRequest(), DESCRIBE_CLUSTER_VERSION)
    return {
        "error": error_name(answer.error_code),
        "cluster_id": answer.cluster_id,
        "controller_id": answer.controller_id,
        "brokers": [
            {"id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in sorted(answer.brokers, key=lambda b: b.broker_id)
        ],
    }


async def list_offsets(
    kafka: KafkaCalls, partitions: dict[str, list[int]], timestamp: int
) -> dict[TopicPartition, int]:
    """Each partition's earliest or latest offset, for the partitions this broker leads."""
    if not partitions:
        return {}
    request = ListOffsetsRequest(
        replica_id=CONSUMER_REPLICA_ID,
        topics=[
            ListOffsetsTopic(
                name=name,
                partitions=[
                    ListOffsetsPartition(partition_index=i, timestamp=timestamp) for i in indexes
                ],
            )
            for name, indexes in partitions.items()
        ],
    )
    answer = await kafka.call(request, LIST_OFFSETS_VERSION)
    return {
        (t.name, p.partition_index): p.offset
        for t in answer.topics
        for p in t.partitions
        if p.error_code == 0
    }


async def partition_sizes(kafka: KafkaCalls) -> dict[TopicPartition, int]:
    """Bytes on disk of each partition this broker holds, over all its log directories."""
    answer = await kafka.call(DescribeLogDirsRequest(topics=None), DESCRIBE_LOG_DIRS_VERSION)
    sizes: dict[TopicPartition, int] = defaultdict(int)
    for result in answer.results:
        for topic in result.topics:
            for p in topic.partitions:
                sizes[topic.name, p.partition_index] += p.partition_size
    return sizes


async def topic_names(kafka: KafkaCalls) -> set[str]:
    """The topics the caller may describe: Metadata lists no others."""
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    metadata = await kafka.call(request, METADATA_VERSION)
    return {t.name for t in metadata.topics if t.error_code == 0}


async def describe_topics(kafka: KafkaCalls, names: list[str] | None = None) -> list[dict]:
    """Topics (all, or those named) with each partition's placement, offsets and size."""
    request = MetadataRequest(
        topics=None if names is None else [MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=False,
    )
    metadata = await kafka.call(request, METADATA_VERSION)
    known = [t for t in metadata.topics if t.error_code == 0]
    indexes = {t.name: [p.partition_index for p in t.partitions] for t in known}
    earliest = await list_offsets(kafka, indexes, EARLIEST)
    latest = await list_offsets(kafka, indexes, LATEST)
    sizes = await partition_sizes(kafka)
    topics = []
    for topic in sorted(known, key=lambda t: t.name):
        partitions = [
            {
                "partition": p.partition_index,
                "leader": p.leader_id,
                "leader_epoch": p.leader_epoch,
                "replicas": p.replica_nodes,
                "isr": p.isr_nodes,
                "offline": p.offline_replicas,
                "error": error_name(p.error_code),
                "start_offset": earliest.get((topic.name, p.partition_index)),
                "end_offset": latest.get((topic.name, p.partition_index)),
                "size": sizes.get((topic.name, p.partition_index)),
            }
            for p in sorted(topic.partitions, key=lambda p: p.partition_index)
        ]
        topics.append(
            {
                "name": topic.name,
                "topic_id": topic.topic_id.hex(),
                "internal": topic.is_internal,
                "partition_count": len(partitions),
                "replication_factor": max((len(p["replicas"]) for p in partitions), default=0),
                "records": _total(
                    p["end_offset"] - p["start_offset"]
                    for p in partitions
                    if p["end_offset"] is not None and p["start_offset"] is not None
                ),
                "size": _total(p["size"] for p in partitions if p["size"] is not None),
                "partitions": partitions,
            }
        )
    return topics


def _total(values: Any) -> int:
    return sum(values, 0)
