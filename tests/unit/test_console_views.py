"""The web console's JSON views, over a fake of the Kafka calls they make.

The fake answers each request type with canned responses built from the real message
classes, as the handlers would; tests/integration/test_console.py runs the real thing.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from kpybroker.config.broker_table import BROKER_CONFIGS
from kpybroker.console.app import console_application
from kpybroker.console.cluster_view import describe_cluster, describe_topics
from kpybroker.console.groups_view import describe_group, list_groups
from kpybroker.console.throughput import ThroughputSampler
from kpybroker.metrics.request_stats import RequestStats
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeResponse,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedTopicPartitions,
    MemberAssignment,
)
from kpybroker.protocol.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
    TopicPartition,
)
from kpybroker.protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from kpybroker.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from kpybroker.protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kpybroker.protocol.messages.list_groups import ListedGroup, ListGroupsResponse
from kpybroker.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kpybroker.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kpybroker.protocol.messages.offset_fetch import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)

#: topic -> partition -> (earliest, latest); partition 2 is led elsewhere.
OFFSETS = {"orders": {0: (0, 10), 1: (5, 30)}}
LED_ELSEWHERE = 2


class FakeKafka:
    """Answers by request class name; records what was asked."""

    def __init__(self, answers: dict[str, Callable[[Any], Any]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, int]] = []

    async def call(self, request: Any, version: int) -> Any:
        name = type(request).__name__
        self.asked.append((name, version))
        return self.answers[name](request)


def list_offsets(request: Any) -> ListOffsetsResponse:
    which = 0 if request.topics[0].partitions[0].timestamp == -2 else 1
    return ListOffsetsResponse(
        topics=[
            ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        offset=OFFSETS[t.name][p.partition_index][which],
                    )
                    if p.partition_index in OFFSETS[t.name]
                    else ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        offset=-1,
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def metadata(request: Any) -> MetadataResponse:
    partitions = [
        MetadataResponsePartition(
            partition_index=i, leader_id=i, replica_nodes=[0, 1, 2], isr_nodes=[0, 1]
        )
        for i in (1, 0, LED_ELSEWHERE)
    ]
    known = {"orders": MetadataResponseTopic(name="orders", topic_id=bytes(range(16)),
                                             partitions=partitions)}  # fmt: skip
    names = ["orders", "gone"] if request.topics is None else [t.name for t in request.topics]
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return MetadataResponse(
        topics=[known.get(n) or MetadataResponseTopic(name=n, error_code=unknown) for n in names]
    )


def log_dirs(request: Any) -> DescribeLogDirsResponse:
    def result(size: int) -> DescribeLogDirsResult:
        partition = DescribeLogDirsPartition(partition_index=0, partition_size=size)
        return DescribeLogDirsResult(
            log_dir="/d", topics=[DescribeLogDirsTopic(name="orders", partitions=[partition])]
        )

    return DescribeLogDirsResponse(results=[result(100), result(23)])


def assignment_bytes(topic: str, partitions: list[int]) -> bytes:
    body = ConsumerProtocolAssignment(
        assigned_partitions=[TopicPartition(topic=topic, partitions=partitions)]
    )
    return struct.pack(">h", 0) + body.encode_bytes(0)


def groups(request: Any) -> ListGroupsResponse:
    return ListGroupsResponse(
        groups=[
            ListedGroup(group_id="new-style", group_type="consumer", group_state="Stable"),
            ListedGroup(group_id="old-style", group_type="classic", group_state="Stable"),
        ]
    )


def describe_classic(request: Any) -> DescribeGroupsResponse:
    member = DescribedGroupMember(
        member_id="m-1",
        client_id="app",
        client_host="/10.0.0.1",
        member_assignment=assignment_bytes("orders", [0, 1]),
    )
    broken = DescribedGroupMember(member_id="m-2", member_assignment=b"\x00\x00\xff")
    return DescribeGroupsResponse(
        groups=[
            DescribedGroup(
                group_id=request.groups[0],
                group_state="Stable",
                protocol_type="consumer",
                protocol_data="range",
                members=[member, broken],
            )
        ]
    )


def describe_consumer(request: Any) -> ConsumerGroupDescribeResponse:
    assigned = MemberAssignment(
        topic_partitions=[DescribedTopicPartitions(topic_name="orders", partitions=[1, 0])]
    )
    member = DescribedConsumerGroupMember(member_id="c-1", client_id="new", assignment=assigned)
    return ConsumerGroupDescribeResponse(
        groups=[
            DescribedConsumerGroup(
                group_id=request.group_ids[0],
                group_state="Stable",
                assignor_name="uniform",
                members=[member],
            )
        ]
    )


def committed(request: Any) -> OffsetFetchResponse:
    partitions = [
        OffsetFetchResponsePartitions(partition_index=0, committed_offset=4),
        OffsetFetchResponsePartitions(partition_index=1, committed_offset=30),
        OffsetFetchResponsePartitions(partition_index=LED_ELSEWHERE, committed_offset=7),
        OffsetFetchResponsePartitions(partition_index=3, committed_offset=-1),
    ]
    group = OffsetFetchResponseGroup(
        group_id=request.groups[0].group_id,
        topics=[OffsetFetchResponseTopics(name="orders", partitions=partitions)],
    )
    return OffsetFetchResponse(groups=[group])


def fake_kafka() -> FakeKafka:
    return FakeKafka(
        {
            "DescribeClusterRequest": lambda r: DescribeClusterResponse(
                cluster_id="c1",
                controller_id=2,
                brokers=[
                    DescribeClusterBroker(broker_id=2, host="b", port=9093),
                    DescribeClusterBroker(broker_id=1, host="a", port=9092, rack="r1"),
                ],
            ),
            "MetadataRequest": metadata,
            "ListOffsetsRequest": list_offsets,
            "DescribeLogDirsRequest": log_dirs,
            "ListGroupsRequest": groups,
            "DescribeGroupsRequest": describe_classic,
            "ConsumerGroupDescribeRequest": describe_consumer,
            "OffsetFetchRequest": committed,
        }
    )


def test_cluster_lists_brokers_by_id_with_the_controller() -> None:
    cluster = asyncio.run(describe_cluster(fake_kafka()))
    assert cluster["controller_id"] == 2
    assert [(b["id"], b["host"], b["port"], b["rack"]) for b in cluster["brokers"]] == [
        (1, "a", 9092, "r1"),
        (2, "b", 9093, None),
    ]


def test_topics_have_partitions_offsets_and_sizes_of_this_broker() -> None:
    (topic,) = asyncio.run(describe_topics(fake_kafka()))  # the unknown one is left out
    assert (topic["name"], topic["partition_count"], topic["replication_factor"]) == (
        "orders",
        3,
        3,
    )
    rows = [
        (p["partition"], p["leader"], p["isr"], p["start_offset"], p["end_offset"], p["size"])
        for p in topic["partitions"]
    ]
    assert rows == [
        (0, 0, [0, 1], 0, 10, 123),  # two log directories' sizes added
        (1, 1, [0, 1], 5, 30, None),
        (2, 2, [0, 1], None, None, None),  # led by another broker: no offsets here
    ]
    assert topic["records"] == 10 + 25
    assert topic["size"] == 123


def test_classic_group_members_assignments_and_lag() -> None:
    group = asyncio.run(describe_group(fake_kafka(), "old-style", "classic"))
    assert [m["assignment"] for m in group["members"]] == [{"orders": [0, 1]}, {}]
    assert [
        (o["partition"], o["committed"], o["end_offset"], o["lag"]) for o in group["offsets"]
    ] == [
        (0, 4, 10, 6),
        (1, 30, 30, 0),
        (LED_ELSEWHERE, 7, None, None),  # no end offset here, so no lag
    ]
    assert group["lag"] == 6


def test_group_list_describes_each_group_by_its_type() -> None:
    kafka = fake_kafka()
    listed = asyncio.run(list_groups(kafka))
    assert [(g["group_id"], g["type"], g["members"], g["lag"]) for g in listed] == [
        ("new-style", "consumer", 1, 6),
        ("old-style", "classic", 2, 6),
    ]
    asked = {name for name, _ in kafka.asked}
    assert {"ConsumerGroupDescribeRequest", "DescribeGroupsRequest"} <= asked


def test_consumer_group_assignment_is_by_topic_name() -> None:
    group = asyncio.run(describe_group(fake_kafka(), "new-style", "consumer"))
    assert group["members"][0]["assignment"] == {"orders": [0, 1]}
    assert group["protocol"] == "uniform"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_throughput_rates_from_totals() -> None:
    readings = iter(
        [
            {"a": (1000, 50_000)},  # the baseline: nothing charted
            {"a": (1100, 60_000), "new": (30, 3000)},  # "new" was created in between
            {"a": (1100, 10_000), "new": (30, 3000)},  # retention shrank "a"
        ]
    )

    async def totals() -> dict[str, tuple[int, int]]:
        return next(readings)

    clock = Clock()
    sampler = ThroughputSampler(totals, clock=clock)

    async def run() -> None:
        for _ in range(3):
            await sampler.sample()
            clock.now += 2.0

    asyncio.run(run())
    first, second = sampler.as_json()["samples"]
    assert first["topics"] == {
        "a": {"records_per_s": 50.0, "bytes_per_s": 5000.0},
        "new": {"records_per_s": 15.0, "bytes_per_s": 1500.0},
    }
    assert (first["records_per_s"], first["seconds"]) == (65.0, 2.0)
    assert second["records_per_s"] == 0 and second["bytes_per_s"] == 0


def test_latency_is_each_intervals_mean() -> None:
    cumulative = iter([{"Produce": (10, 50.0)}, {"Produce": (14, 70.0), "Fetch": (0, 0.0)}])

    class Latency:
        def totals(self) -> dict[str, tuple[int, float]]:
            return next(cumulative)

    async def totals() -> dict[str, tuple[int, int]]:
        return {}

    sampler = ThroughputSampler(totals, Latency(), clock=Clock())

    async def run() -> None:
        await sampler.sample()
        await sampler.sample()

    asyncio.run(run())
    (sample,) = sampler.as_json()["samples"]
    assert sample["latency_ms"] == {"Produce": 5.0}
    assert sampler.as_json()["latency_available"]


async def _http(admin: bool, check: Callable[[TestClient], Any]) -> None:
    async def no_totals() -> dict[str, tuple[int, int]]:
        return {}

    kafka = fake_kafka()
    app = console_application(lambda principal, host: kafka, ThroughputSampler(no_totals), admin)
    async with TestClient(TestServer(app)) as client:
        await check(client)


def test_http_views_and_refusals() -> None:
    async def check(client: TestClient) -> None:
        answer = await client.get("/api/topics/orders")
        assert (await answer.json())["partition_count"] == 3
        assert (await client.get("/api/topics/nowhere")).status == 404
        assert (await client.get("/api/groups/nobody")).status == 404
        assert (await (await client.get("/api/cluster")).json())["admin"] is False
        refused = await client.post("/api/topics", json={"name": "t"})
        assert refused.status == 403
        assert (await client.delete("/api/topics/orders")).status == 403
        page = await client.get("/")
        assert "kpybroker console" in await page.text()
        assert (await client.get("/static/chart.js")).status == 200

    asyncio.run(_http(False, check))


def test_admin_changes_take_same_origin_json_only() -> None:
    async def check(client: TestClient) -> None:
        form = await client.post("/api/topics", data="name=t")
        assert form.status == 415
        elsewhere = await client.post(
            "/api/topics", json={"name": "t"}, headers={"Origin": "http://evil.example"}
        )
        assert elsewhere.status == 403
        bad = await client.post("/api/topics", json={"partitions": 1})
        assert bad.status == 400

    asyncio.run(_http(True, check))


def test_console_is_off_and_on_loopback_by_default() -> None:
    assert BROKER_CONFIGS["console.enable"].default is False
    assert BROKER_CONFIGS["console.admin.enable"].default is False
    assert BROKER_CONFIGS["console.listeners"].default == "http://127.0.0.1:9021"


def test_latency_totals_from_the_request_stats() -> None:
    stats = RequestStats()
    for version, millis in ((11, 4.0), (12, 6.0), (12, 2.0)):
        stats.record("Produce", version, millis)
    stats.record("Fetch", 17, 500.0)
    assert stats.totals() == {"Produce": (3, 12.0), "Fetch": (1, 500.0)}
