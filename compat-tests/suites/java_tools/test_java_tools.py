"""Apache Kafka's command-line tools and Java clients, as an operator would use them.

Everything goes through the tools themselves (topics are created with
TopicCommand, offsets read with GetOffsetShell), and each check is on what
the tool prints. The Java producer is idempotent with acks=all by default,
so every produce here also exercises InitProducerId and sequence checks.
"""

from __future__ import annotations

import collections
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.java import run_java
from tests.helpers.process import ToolResult

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # kafka.admin.ConfigCommand before 4.2
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
GET_OFFSET_SHELL = "org.apache.kafka.tools.GetOffsetShell"
API_VERSIONS_COMMAND = "org.apache.kafka.tools.BrokerApiVersionsCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"


@pytest.fixture(scope="session")
def lib() -> Path:
    return Path(os.environ["COMPAT_KAFKA_LIB"])


class Tools:
    """Kafka's tools bound to one broker: ``tools.run(MAIN, *args)`` adds --bootstrap-server."""

    def __init__(self, lib: Path, bootstrap: str) -> None:
        self.lib = lib
        self.bootstrap = bootstrap

    def raw(
        self, main: str, *args: str, input: str | None = None, timeout: float = 120
    ) -> ToolResult:
        return run_java(self.lib, main, list(args), input=input, timeout=timeout)

    def run(
        self, main: str, *args: str, input: str | None = None, timeout: float = 120
    ) -> ToolResult:
        return self.raw(
            main, "--bootstrap-server", self.bootstrap, *args, input=input, timeout=timeout
        )

    def create_topic(self, topic: str, partitions: int, *configs: str) -> None:
        args = ["--create", "--topic", topic, "--partitions", str(partitions)]
        for config in configs:
            args += ["--config", config]
        created = self.run(TOPIC_COMMAND, *args).check()
        assert f"Created topic {topic}." in created.stdout, created.describe()

    def end_offsets(self, topic: str, time: str = "-1") -> dict[int, int]:
        """GetOffsetShell: ``{partition: offset}`` at a time (-1 latest, -2 earliest, -3 max ts)."""
        result = self.run(GET_OFFSET_SHELL, "--topic", topic, "--time", time).check()
        offsets = {}
        for line in result.stdout.split():
            name, partition, offset = line.rsplit(":", 2)
            assert name == topic, result.describe()
            offsets[int(partition)] = int(offset)
        return offsets

    def produce_lines(self, topic: str, lines: list[str], *props: str) -> None:
        args = ["--topic", topic]
        for prop in props:
            args += ["--reader-property", prop]  # --property is deprecated since Kafka 4.2
        produced = self.run(CONSOLE_PRODUCER, *args, input="".join(f"{x}\n" for x in lines))
        produced.check()
        assert "ERROR" not in produced.stderr, produced.describe()


@pytest.fixture
def tools(lib: Path, bootstrap: str) -> Tools:
    return Tools(lib, bootstrap)


def json_events(result: ToolResult) -> Iterator[dict[str, Any]]:
    """The JSON lines a Verifiable* tool printed."""
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            yield json.loads(line)


def test_broker_api_versions_command(tools: Tools) -> None:
    """Every API the Java clients need is usable; no line says UNSUPPORTED for them."""
    text = tools.run(API_VERSIONS_COMMAND).check().stdout
    assert re.search(rf"^{re.escape(tools.bootstrap)} \(id: 0 rack: null", text, re.M), text
    needed = (
        "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
        "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups",
        "ListGroups", "ApiVersions", "CreateTopics", "DeleteTopics", "DeleteRecords",
        "InitProducerId", "OffsetForLeaderEpoch", "DescribeConfigs", "AlterConfigs",
        "CreatePartitions", "DeleteGroups", "IncrementalAlterConfigs", "OffsetDelete",
        "DescribeCluster", "DescribeLogDirs",
    )  # fmt: skip
    for api in needed:
        line = re.search(rf"^\s*{api}\(\d+\): (.*)$", text, re.M)
        assert line, f"{api} missing\n{text}"
        assert "usable:" in line.group(1) and "UNSUPPORTED" not in line.group(1), line.group(0)


def test_topic_command_lifecycle(tools: Tools, topic_name: str) -> None:
    """--create with a config, --list, --describe, --alter --partitions, duplicate, --delete."""
    tools.create_topic(topic_name, 2, "retention.ms=3600000", "max.message.bytes=200000")
    assert topic_name in tools.run(TOPIC_COMMAND, "--list").check().stdout.split()
    described = tools.run(TOPIC_COMMAND, "--describe", "--topic", topic_name).check()
    text = described.stdout
    assert re.search(
        rf"^Topic: {topic_name}\s+TopicId: \S+\s+PartitionCount: 2\s+ReplicationFactor: 1",
        text,
        re.M,
    ), text
    assert "retention.ms=3600000" in text and "max.message.bytes=200000" in text, text

    tools.run(TOPIC_COMMAND, "--alter", "--topic", topic_name, "--partitions", "5").check()
    described = tools.run(TOPIC_COMMAND, "--describe", "--topic", topic_name).check().stdout
    rows = re.findall(r"Partition: (\d+)\s+Leader: 0\s+Replicas: 0\s+Isr: 0", described)
    assert rows == ["0", "1", "2", "3", "4"], described
    shrink = tools.run(TOPIC_COMMAND, "--alter", "--topic", topic_name, "--partitions", "3")
    assert shrink.returncode != 0 and "would not be an increase" in shrink.stdout + shrink.stderr

    again = tools.run(TOPIC_COMMAND, "--create", "--topic", topic_name, "--partitions", "1")
    assert again.returncode != 0 and "already exists" in again.stdout, again.describe()
    tools.run(TOPIC_COMMAND, "--delete", "--topic", topic_name).check()
    gone = tools.run(TOPIC_COMMAND, "--describe", "--topic", topic_name)
    assert gone.returncode != 0 and "does not exist" in gone.stdout + gone.stderr, gone.describe()


def test_config_command_topic_and_broker(tools: Tools, topic_name: str) -> None:
    """ConfigCommand: alter/describe/delete a topic config; describe broker 0 and the defaults."""
    tools.create_topic(topic_name, 1)
    entity = ("--entity-type", "topics", "--entity-name", topic_name)
    altered = tools.run(
        CONFIG_COMMAND,
        "--alter",
        *entity,
        "--add-config",
        "retention.ms=60000,segment.bytes=1048576",
    ).check()
    assert f"Completed updating config for topic {topic_name}." in altered.stdout, (
        altered.describe()
    )
    dynamic = tools.run(CONFIG_COMMAND, "--describe", *entity).check().stdout
    assert "retention.ms=60000" in dynamic and "segment.bytes=1048576" in dynamic, dynamic
    everything = tools.run(CONFIG_COMMAND, "--describe", "--all", *entity).check().stdout
    assert re.search(r"^\s+cleanup\.policy=delete\s", everything, re.M), everything
    assert re.search(r"^\s+retention\.ms=60000 .*DYNAMIC_TOPIC_CONFIG", everything, re.M), (
        everything
    )

    tools.run(CONFIG_COMMAND, "--alter", *entity, "--delete-config", "retention.ms").check()
    after = tools.run(CONFIG_COMMAND, "--describe", *entity).check().stdout
    assert "retention.ms" not in after and "segment.bytes=1048576" in after, after
    refused = tools.run(CONFIG_COMMAND, "--alter", *entity, "--add-config", "retention.ms=soon")
    assert refused.returncode != 0, refused.describe()

    broker = (
        tools.run(
            CONFIG_COMMAND, "--describe", "--all", "--entity-type", "brokers", "--entity-name", "0"
        )
        .check()
        .stdout
    )
    assert "All configs for broker 0 are:" in broker, broker
    assert re.search(r"^\s+log\.retention\.hours=168 ", broker, re.M), broker
    default = ("--entity-type", "brokers", "--entity-default")
    tools.run(CONFIG_COMMAND, "--alter", *default, "--add-config", "log.cleaner.threads=2").check()
    described = tools.run(CONFIG_COMMAND, "--describe", *default).check().stdout
    assert "log.cleaner.threads=2" in described, described
    tools.run(CONFIG_COMMAND, "--alter", *default, "--delete-config", "log.cleaner.threads").check()


def test_console_producer_and_consumer_without_group(tools: Tools, topic_name: str) -> None:
    """Keyed lines (gzip) through ConsoleProducer come back exactly from one partition."""
    tools.create_topic(topic_name, 1)
    pairs = [(f"key-{i}", f"value {i} {'ü' * (i % 5)}") for i in range(300)]
    tools.produce_lines(
        topic_name, [f"{k}\t{v}" for k, v in pairs],
        "parse.key=true", "key.separator=\t", "compression.type=gzip",
    )  # fmt: skip
    consumed = tools.run(
        CONSOLE_CONSUMER, "--topic", topic_name, "--from-beginning", "--max-messages", "300",
        "--timeout-ms", "30000", "--formatter-property", "print.key=true",
        "--formatter-property", "print.offset=true", "--formatter-property", "key.separator=\t",
    ).check()  # fmt: skip
    expected = [f"Offset:{i}\t{k}\t{v}" for i, (k, v) in enumerate(pairs)]
    assert consumed.stdout.splitlines() == expected
    assert "Processed a total of 300 messages" in consumed.stderr, consumed.describe()


def group_rows(tools: Tools, group: str) -> dict[int, tuple[int, int, int]]:
    """ConsumerGroupCommand --describe: ``{partition: (current, log end, lag)}``."""
    text = tools.run(GROUP_COMMAND, "--describe", "--group", group).check().stdout
    rows = {}
    for match in re.finditer(
        rf"^{re.escape(group)}\s+\S+\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", text, re.M
    ):
        partition, current, end, lag = map(int, match.groups())
        rows[partition] = (current, end, lag)
    assert rows, text
    return rows


def test_console_consumer_in_a_group_commits_and_resumes(tools: Tools, topic_name: str) -> None:
    """--group: the first run commits what it read; the next run reads only what came after."""
    tools.create_topic(topic_name, 2)
    tools.produce_lines(topic_name, [f"first-{i}" for i in range(40)])
    group = f"{topic_name}-console"
    consume = ("--topic", topic_name, "--group", group, "--timeout-ms", "30000")
    first = tools.run(
        CONSOLE_CONSUMER, *consume, "--from-beginning", "--max-messages", "40"
    ).check()
    assert sorted(first.stdout.split()) == sorted(f"first-{i}" for i in range(40)), first.describe()
    assert {p: row[2] for p, row in group_rows(tools, group).items()} == {0: 0, 1: 0}

    tools.produce_lines(topic_name, [f"second-{i}" for i in range(6)])
    second = tools.run(CONSOLE_CONSUMER, *consume, "--max-messages", "6").check()
    assert sorted(second.stdout.split()) == sorted(f"second-{i}" for i in range(6))
    assert sum(row[0] for row in group_rows(tools, group).values()) == 46


def test_consumer_group_command(tools: Tools, topic_name: str) -> None:
    """--list, --describe --state/--members, --reset-offsets, --delete-offsets, --delete."""
    tools.create_topic(topic_name, 2)
    tools.produce_lines(topic_name, [f"line-{i}" for i in range(20)])
    group = f"{topic_name}-admin"
    tools.run(
        CONSOLE_CONSUMER, "--topic", topic_name, "--group", group, "--from-beginning",
        "--max-messages", "20", "--timeout-ms", "30000",
    ).check()  # fmt: skip
    assert group in tools.run(GROUP_COMMAND, "--list").check().stdout.split()
    state = tools.run(GROUP_COMMAND, "--describe", "--group", group, "--state").check().stdout
    assert re.search(rf"^{re.escape(group)}\s+.*\s+Empty\s+0\s*$", state, re.M), state
    members = tools.run(GROUP_COMMAND, "--describe", "--group", group, "--members")
    members.check()
    assert "has no active members" in members.stdout + members.stderr, members.describe()

    reset = tools.run(
        GROUP_COMMAND, "--reset-offsets", "--group", group, "--topic", topic_name,
        "--to-earliest", "--execute",
    ).check()  # fmt: skip
    assert re.search(
        rf"{re.escape(group)}\s+{re.escape(topic_name)}\s+0\s+0\s*$", reset.stdout, re.M
    ), reset.stdout
    assert {p: row[0] for p, row in group_rows(tools, group).items()} == {0: 0, 1: 0}
    # The console producer's sticky partitioner may fill one partition only: use the fuller.
    ends = tools.end_offsets(topic_name)
    fuller = max(ends, key=lambda p: ends[p])
    tools.run(
        GROUP_COMMAND, "--reset-offsets", "--group", group, "--topic", f"{topic_name}:{fuller}",
        "--to-offset", "3", "--execute",
    ).check()  # fmt: skip
    assert group_rows(tools, group)[fuller][0] == 3

    deleted = tools.run(
        GROUP_COMMAND, "--delete-offsets", "--group", group, "--topic", f"{topic_name}:0"
    ).check()
    assert re.search(rf"{re.escape(topic_name)}\s+0\s+Successful", deleted.stdout), deleted.stdout
    gone = tools.run(GROUP_COMMAND, "--delete", "--group", group).check()
    assert f"Deletion of requested consumer groups ('{group}') was successful." in gone.stdout, (
        gone.stdout
    )
    assert group not in tools.run(GROUP_COMMAND, "--list").check().stdout.split()


def test_get_offset_shell(tools: Tools, topic_name: str) -> None:
    """Latest, earliest and max-timestamp offsets per partition."""
    tools.create_topic(topic_name, 3)
    lines = [f"k{i % 3}\tv{i}" for i in range(30)]
    tools.produce_lines(topic_name, lines, "parse.key=true", "key.separator=\t")
    latest = tools.end_offsets(topic_name)
    assert sorted(latest) == [0, 1, 2] and sum(latest.values()) == 30, latest
    assert tools.end_offsets(topic_name, "-2") == {0: 0, 1: 0, 2: 0}
    max_ts = tools.end_offsets(topic_name, "-3")
    assert all(0 <= max_ts[p] < latest[p] for p in latest if latest[p]), (max_ts, latest)


def test_verifiable_producer_and_consumer_every_ack_consumed_once(
    tools: Tools, topic_name: str, tmp_path: Path
) -> None:
    """VerifiableProducer (acks=all, idempotent) then VerifiableConsumer in a group.

    Every value the producer saw acknowledged is consumed exactly once, at the
    offset the acknowledgement named, and the consumer's commits succeed.
    """
    tools.create_topic(topic_name, 3)
    config = tmp_path / "producer.properties"
    # The tool defaults to retries=0, which idempotence refuses.
    config.write_text(
        "enable.idempotence=true\nacks=all\nretries=2147483647\n"
        "max.in.flight.requests.per.connection=5\nlinger.ms=5\n"
    )
    produced = tools.run(
        VERIFIABLE_PRODUCER, "--topic", topic_name, "--max-messages", "3000", "--acks", "-1",
        "--producer.config", str(config), timeout=120,
    ).check()  # fmt: skip
    events = list(json_events(produced))
    acked = {
        e["value"]: (e["partition"], e["offset"])
        for e in events
        if e["name"] == "producer_send_success"
    }
    errors = [e for e in events if e["name"] == "producer_send_error"]
    assert not errors, errors[:3]
    assert len(acked) == 3000, f"{len(acked)} acknowledged"

    consumed = tools.run(
        VERIFIABLE_CONSUMER, "--topic", topic_name, "--group-id", f"{topic_name}-verify",
        "--max-messages", "3000", "--verbose", "--reset-policy", "earliest", timeout=120,
    ).check()  # fmt: skip
    events = list(json_events(consumed))
    records = [e for e in events if e["name"] == "record_data"]
    counts = collections.Counter(r["value"] for r in records)
    duplicates = [v for v, n in counts.items() if n > 1]
    assert not duplicates, f"consumed more than once: {duplicates[:10]}"
    missing = set(acked) - set(counts)
    assert not missing, (
        f"{len(missing)} acknowledged values never consumed, e.g. {sorted(missing)[:10]}"
    )
    misplaced = [r for r in records if acked.get(r["value"]) != (r["partition"], r["offset"])]
    assert not misplaced, f"consumed elsewhere than acknowledged: {misplaced[:3]}"
    commits = [e for e in events if e["name"] == "offsets_committed"]
    assert commits and all(c["success"] for c in commits), commits[-3:]


def test_producer_and_consumer_performance_counts(tools: Tools, topic_name: str) -> None:
    """ProducerPerformance writes exactly N records; ConsumerPerformance reads exactly N back."""
    tools.create_topic(topic_name, 2)
    count = 30000
    produced = tools.raw(
        PRODUCER_PERFORMANCE, "--topic", topic_name, "--num-records", str(count),
        "--record-size", "200", "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={tools.bootstrap}", "acks=all",
        "compression.type=lz4", timeout=150,
    ).check()  # fmt: skip
    assert re.search(rf"^{count} records sent,", produced.stdout, re.M), produced.describe()
    assert sum(tools.end_offsets(topic_name).values()) == count

    consumed = tools.run(
        CONSUMER_PERFORMANCE, "--topic", topic_name, "--messages", str(count),
        "--timeout", "60000", timeout=150,
    ).check()  # fmt: skip
    header, *rows = [line for line in consumed.stdout.splitlines() if "," in line]
    columns = [c.strip() for c in header.split(",")]
    values = dict(zip(columns, (v.strip() for v in rows[-1].split(",")), strict=True))
    assert int(values["data.consumed.in.nMsg"]) == count, consumed.stdout
