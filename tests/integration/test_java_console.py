"""Apache Kafka's own Java tools against the broker.

TopicCommand creates, lists, describes and deletes topics (Admin API:
CreateTopics, Metadata, DescribeConfigs, DeleteTopics); the console producer
(Java client, idempotent by default) writes keyed lines under each
compression codec and the console consumer reads them back exactly.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.helpers.brokers import ManagedBroker
from tests.helpers.clients import CODECS
from tests.helpers.java import CONSOLE_CONSUMER, CONSOLE_PRODUCER, TOPIC_COMMAND
from tests.helpers.process import ToolResult, ToolRunner

pytestmark = pytest.mark.timeout(180)


def topics(java_tool: ToolRunner, bootstrap: str, *args: str) -> ToolResult:
    """``TopicCommand --bootstrap-server <bootstrap> args...``."""
    return java_tool(TOPIC_COMMAND, "--bootstrap-server", bootstrap, *args)


def listed_topics(java_tool: ToolRunner, bootstrap: str) -> list[str]:
    """Topic names from ``TopicCommand --list``."""
    return topics(java_tool, bootstrap, "--list").check().stdout.split()


def test_topic_command_lifecycle(module_broker: ManagedBroker, java_tool: ToolRunner) -> None:
    """--create, --list, --describe, a duplicate --create, --delete."""
    bootstrap, topic = module_broker.bootstrap, "java-topic-command"
    created = topics(
        java_tool, bootstrap, "--create", "--topic", topic, "--partitions", "3",
        "--replication-factor", "1", "--config", "max.message.bytes=200000",
    ).check()  # fmt: skip
    assert f"Created topic {topic}." in created.stdout, created.describe()
    assert topic in listed_topics(java_tool, bootstrap)

    described = topics(java_tool, bootstrap, "--describe", "--topic", topic).check()
    text = described.stdout
    assert re.search(rf"^Topic: {topic}\s.*PartitionCount: 3\s+ReplicationFactor: 1", text, re.M), (
        described.describe()
    )
    assert "max.message.bytes=200000" in text, described.describe()
    rows = re.findall(
        rf"^\s+Topic: {topic}\s+Partition: (\d+)\s+Leader: (\d+)\s+Replicas: (\d+)\s+Isr: (\d+)",
        text,
        re.M,
    )
    assert sorted(int(r[0]) for r in rows) == [0, 1, 2], described.describe()
    assert all(r[1] == r[2] == r[3] for r in rows), described.describe()

    again = topics(
        java_tool, bootstrap, "--create", "--topic", topic, "--partitions", "1",
        "--replication-factor", "1",
    )  # fmt: skip
    assert again.returncode != 0 and "already exists" in again.stdout, again.describe()

    topics(java_tool, bootstrap, "--delete", "--topic", topic).check()
    deadline = time.monotonic() + 30
    while topic in listed_topics(java_tool, bootstrap):
        assert time.monotonic() < deadline, f"{topic} still listed 30 s after --delete"
        time.sleep(0.5)
    gone = topics(java_tool, bootstrap, "--describe", "--topic", topic)
    assert gone.returncode != 0 and "does not exist" in gone.stdout, gone.describe()


@pytest.mark.parametrize("codec", CODECS)
def test_console_producer_then_consumer(
    module_broker: ManagedBroker, java_tool: ToolRunner, codec: str
) -> None:
    """1,000 keyed lines through the Java console producer come back exactly, in order."""
    bootstrap, topic, count = module_broker.bootstrap, f"java-console-{codec}", 1000
    topics(
        java_tool, bootstrap, "--create", "--topic", topic, "--partitions", "1",
        "--replication-factor", "1",
    ).check()  # fmt: skip
    pairs = [(f"key{i}", f"value {i}: {'ü' * (i % 7)}{'x' * (i % 300)}") for i in range(count)]
    produced = java_tool(
        CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
        "--compression-codec", codec, "--reader-property", "parse.key=true",
        "--reader-property", "key.separator=\t",
        input="".join(f"{k}\t{v}\n" for k, v in pairs),
    ).check()  # fmt: skip
    assert "ERROR" not in produced.stderr, produced.describe()

    consumed = java_tool(
        CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic,
        "--partition", "0", "--offset", "earliest", "--max-messages", str(count),
        "--timeout-ms", "60000", "--formatter-property", "print.key=true",
        "--formatter-property", "print.offset=true", "--formatter-property", "key.separator=\t",
    ).check()  # fmt: skip
    expected = [f"Offset:{i}\t{k}\t{v}" for i, (k, v) in enumerate(pairs)]
    lines = consumed.stdout.splitlines()
    assert len(lines) == count, consumed.describe()
    mismatches = [(i, a, b) for i, (a, b) in enumerate(zip(lines, expected, strict=True)) if a != b]
    assert not mismatches, f"first mismatches (line, got, expected): {mismatches[:3]}"
    assert f"Processed a total of {count} messages" in consumed.stderr, consumed.describe()
