"""Groups through other clients and tools: Kafka's console consumer and kafka-consumer-groups,
kcat's balanced consumer (-G) and aiokafka."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer

from tests.helpers.brokers import ManagedBroker, launcher
from tests.helpers.clients import ConfluentClient
from tests.helpers.groups_wire import BROKER_OVERRIDES, produce
from tests.helpers.java import CONSOLE_CONSUMER
from tests.helpers.process import ToolResult, ToolRunner, wait_until

pytestmark = pytest.mark.timeout(180)

CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedBroker]:
    """One broker for this module's tests (each uses its own topic and group)."""
    with launcher(tmp_path_factory.mktemp("groups-tools")) as brokers:
        yield brokers(BROKER_OVERRIDES)


def groups_tool(java_tool: ToolRunner, broker: ManagedBroker, *args: str) -> ToolResult:
    return java_tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", broker.bootstrap, *args)


def offset_rows(text: str, group: str) -> dict[int, list[str]]:
    """--describe rows by partition: [current, log end, lag, consumer id, host, client id]."""
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 9 and fields[0] == group and fields[2].isdigit():
            rows[int(fields[2])] = fields[3:9]
    return rows


def test_console_consumer_and_consumer_groups_command(
    broker: ManagedBroker, java_tool: ToolRunner
) -> None:
    topic, group = "java-groups", "java-g"
    ConfluentClient().create_topic(broker.bootstrap, topic, 2)
    produce(
        broker.bootstrap, topic, {0: [f"a{i}" for i in range(10)], 1: [f"b{i}" for i in range(10)]}
    )
    read = java_tool(
        CONSOLE_CONSUMER,
        *("--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", group),
        *("--from-beginning", "--max-messages", "20"),
    ).check()
    assert sorted(read.stdout.split()) == sorted(
        [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)]
    )
    produce(broker.bootstrap, topic, {0: ["late-1", "late-2", "late-3"]})

    assert group in groups_tool(java_tool, broker, "--list").check().stdout.split()
    result = groups_tool(java_tool, broker, "--describe", "--group", group).check()
    described = result.stdout
    assert "has no active members" in described + result.stderr
    assert offset_rows(described, group) == {
        0: ["10", "13", "3", "-", "-", "-"],
        1: ["10", "10", "0", "-", "-", "-"],
    }

    # With a live member the rows name it; offsets can then not be reset.
    member = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "live-one"}
    )
    member.subscribe([topic])
    try:
        wait_until(lambda: member.poll(0.1) is not None or len(member.assignment()) == 2, 30, 0)
        live = groups_tool(java_tool, broker, "--describe", "--group", group).check().stdout
        rows = offset_rows(live, group)
        assert {tuple(r[4:]) for r in rows.values()} == {("/127.0.0.1", "live-one")}, live
        state = groups_tool(java_tool, broker, "--describe", "--group", group, "--state").check()
        assert re.search(rf"{group}\s+\S+\s+\(\d+\)\s+range\s+Stable\s+1", state.stdout), (
            state.stdout
        )
        busy = groups_tool(
            java_tool, broker, "--reset-offsets", "--group", group, "--topic", topic,
            "--to-earliest", "--execute",
        )  # fmt: skip
        assert "inactive" in busy.stdout + busy.stderr, busy.describe()
    finally:
        member.close()

    reset = groups_tool(
        java_tool, broker, "--reset-offsets", "--group", group, "--topic", topic,
        "--to-earliest", "--execute",
    ).check()  # fmt: skip
    new_offsets = re.findall(rf"{group}\s+{topic}\s+(\d)\s+(\d+)", reset.stdout)
    assert sorted(new_offsets) == [("0", "0"), ("1", "0")], reset.stdout
    after = offset_rows(
        groups_tool(java_tool, broker, "--describe", "--group", group).check().stdout, group
    )
    assert {p: row[:3] for p, row in after.items()} == {0: ["0", "13", "13"], 1: ["0", "10", "10"]}

    deleted = groups_tool(java_tool, broker, "--delete", "--group", group).check()
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted.stdout
    assert group not in groups_tool(java_tool, broker, "--list").check().stdout.split()
    gone = groups_tool(java_tool, broker, "--describe", "--group", group)
    # DescribeGroups v0-5 describe it as Dead; Kafka 4 (v6, KIP-848 APIs) says GROUP_ID_NOT_FOUND.
    assert re.search(
        rf"Consumer group '{group}' does not exist|Group {group} not found",
        gone.stdout + gone.stderr,
    ), gone.describe()


def test_kcat_balanced_consumer_commits_and_resumes(
    broker: ManagedBroker, kcat: ToolRunner
) -> None:
    topic, group = "kcat-groups", "kcat-g"
    ConfluentClient().create_topic(broker.bootstrap, topic, 3)
    first = {p: [f"first-{p}-{i}" for i in range(5)] for p in range(3)}
    produce(broker.bootstrap, topic, first)
    options = ("-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e")
    got = kcat(*options, "-c", "15", topic).check().stdout.split()
    assert sorted(got) == sorted(v for vs in first.values() for v in vs)
    second = {p: [f"second-{p}"] for p in range(3)}
    produce(broker.bootstrap, topic, second)
    again = kcat(*options, "-c", "3", topic).check().stdout.split()
    assert sorted(again) == sorted(v for vs in second.values() for v in vs)


def test_aiokafka_members_share_a_topic(broker: ManagedBroker) -> None:
    from aiokafka import AIOKafkaConsumer

    topic, group = "aio-groups", "aio-g"
    ConfluentClient().create_topic(broker.bootstrap, topic, 4)
    values = {p: [f"{p}-{i}" for i in range(25)] for p in range(4)}

    async def consume() -> list[list[str]]:
        members = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=broker.bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                heartbeat_interval_ms=300,
            )
            for _ in range(2)
        ]
        for m in members:
            await m.start()
        got: list[list[str]] = [[], []]
        try:
            deadline = time.monotonic() + 30
            while [len(m.assignment()) for m in members] != [2, 2]:
                assert time.monotonic() < deadline, "the two members never split the partitions"
                for m in members:
                    await m.getmany(timeout_ms=100)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, produce, broker.bootstrap, topic, values)
            while sum(map(len, got)) < 100 and time.monotonic() < deadline + 30:
                for i, m in enumerate(members):
                    batch = await m.getmany(timeout_ms=100)
                    got[i] += [r.value.decode() for records in batch.values() for r in records]
        finally:
            for m in members:
                await m.stop()
        return got

    got = asyncio.run(consume())
    assert got[0] and got[1], "both members consumed"
    assert sorted(got[0] + got[1]) == sorted(v for vs in values.values() for v in vs)
