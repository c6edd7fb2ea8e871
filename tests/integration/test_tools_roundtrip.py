"""The console tools installed with the package, each in a round trip against the broker."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.helpers.brokers import ManagedBroker
from tests.helpers.process import ToolResult, run_tool

pytestmark = pytest.mark.timeout(120)


def kpy(module: str, broker: ManagedBroker, *args: str, input: str | None = None) -> ToolResult:
    """Run ``kpybroker.tools.<module>`` (the code behind the kpybroker-* console script)."""
    command = [sys.executable, "-m", f"kpybroker.tools.{module}"]
    return run_tool([*command, "--bootstrap-server", broker.bootstrap, *args], input=input)


def test_topics_tool_lifecycle(module_broker: ManagedBroker) -> None:
    created = kpy(
        "topic_command", module_broker, "--create", "--topic", "tool-topic", "--partitions", "2",
        "--config", "cleanup.policy=compact,delete",
    ).check()  # fmt: skip
    assert created.stdout == "Created topic tool-topic.\n"
    assert "tool-topic" in kpy("topic_command", module_broker, "--list").check().stdout.split()
    kpy(
        "topic_command", module_broker, "--alter", "--topic", "tool-topic", "--partitions", "3"
    ).check()
    described = kpy("topic_command", module_broker, "--describe", "--topic", "tool-topic").check()
    summary, partitions = described.stdout.split("\n\n")
    header, row = summary.splitlines()
    assert header.split() == ["TOPIC", "TOPIC-ID", "PARTITIONS", "REPLICATION-FACTOR", "CONFIGS"]
    assert row.split()[0] == "tool-topic" and row.split()[2:] == [
        "3",
        "1",
        "cleanup.policy=compact,delete",
    ]
    assert header.index("PARTITIONS") == row.index(" 3 ") + 1  # columns line up
    assert [line.split()[1] for line in partitions.splitlines()[1:]] == ["0", "1", "2"]

    again = kpy("topic_command", module_broker, "--create", "--topic", "tool-topic")
    assert again.returncode == 1
    assert (
        again.stderr
        == "Error: Creating topic tool-topic failed: Topic 'tool-topic' already exists.\n"
    )
    shrink = kpy(
        "topic_command", module_broker, "--alter", "--topic", "tool-topic", "--partitions", "1"
    )
    assert shrink.returncode == 1 and "would not be an increase" in shrink.stderr
    kpy("topic_command", module_broker, "--delete", "--topic", "tool-topic").check()
    missing = kpy("topic_command", module_broker, "--describe", "--topic", "tool-topic")
    assert (
        missing.returncode == 1 and missing.stderr == "Error: Topic 'tool-topic' does not exist.\n"
    )


def test_producer_to_consumer_round_trip(module_broker: ManagedBroker, tmp_path: Path) -> None:
    kpy(
        "topic_command", module_broker, "--create", "--topic", "tool-rt", "--partitions", "1"
    ).check()
    lines = [f"h{i}:a,n:{i % 3}\tkey-{i}\tvalue {i} ü" for i in range(300)]
    source = tmp_path / "input.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    kpy("console_producer", module_broker, "--topic", "tool-rt", "--input-file", str(source),
        "--property", "parse.key=true", "--property", "parse.headers=true",
        "--compression-codec", "zstd").check()  # fmt: skip
    kpy("console_producer", module_broker, "--topic", "tool-rt", input="from stdin\n").check()

    consumed = kpy("console_consumer", module_broker, "--topic", "tool-rt", "--from-beginning",
                   "--max-messages", "301", "--timeout-ms", "20000", "--property", "print.key=true",
                   "--property", "print.headers=true").check()  # fmt: skip
    assert consumed.stdout.splitlines() == [*lines, "NO_HEADERS\tnull\tfrom stdin"]
    assert consumed.stderr.strip() == "Processed a total of 301 messages"

    tail = kpy("console_consumer", module_broker, "--topic", "tool-rt", "--partition", "0",
               "--offset", "299", "--max-messages", "2", "--property", "print.offset=true",
               "--property", "print.partition=true", "--property", "print.timestamp=true",
               "--property", "print.value=false").check()  # fmt: skip
    stamps = tail.stdout.splitlines()
    assert [re.sub(r"CreateTime:\d+", "CreateTime:T", s) for s in stamps] == [
        "CreateTime:T\tPartition:0\tOffset:299",
        "CreateTime:T\tPartition:0\tOffset:300",
    ]


def test_configs_tool(module_broker: ManagedBroker) -> None:
    kpy("topic_command", module_broker, "--create", "--topic", "tool-cfg").check()
    entity = ("--entity-type", "topics", "--entity-name", "tool-cfg")
    kpy("config_command", module_broker, "--alter", *entity,
        "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]").check()  # fmt: skip
    dynamic = (
        kpy("config_command", module_broker, "--describe", *entity).check().stdout.splitlines()
    )
    assert dynamic[0] == "Dynamic configs for topic tool-cfg:"
    assert [line.split() for line in dynamic[1:]] == [
        ["NAME", "VALUE", "SOURCE", "SENSITIVE"],
        ["cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG", "false"],
        ["retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG", "false"],
    ]
    everything = kpy("config_command", module_broker, "--describe", "--all", *entity).check()
    assert re.search(
        r"^segment\.bytes\s+1073741824\s+DEFAULT_CONFIG\s+false$", everything.stdout, re.M
    )
    refused = kpy(
        "config_command", module_broker, "--alter", *entity, "--add-config", "retention.ms=soon"
    )
    assert refused.returncode == 1
    assert "Invalid value soon for configuration retention.ms" in refused.stderr


def test_consumer_groups_tool(module_broker: ManagedBroker) -> None:
    kpy("topic_command", module_broker, "--create", "--topic", "tool-groups").check()
    kpy("console_producer", module_broker, "--topic", "tool-groups",
        input="".join(f"{i}\n" for i in range(10))).check()  # fmt: skip
    kpy("console_consumer", module_broker, "--topic", "tool-groups", "--group", "tool-g",
        "--from-beginning", "--max-messages", "4", "--timeout-ms", "20000",
        "--consumer-property", "enable.auto.commit=true",
        "--consumer-property", "auto.commit.interval.ms=100").check()  # fmt: skip
    assert "tool-g" in kpy("consumer_groups", module_broker, "--list").check().stdout.split()
    described = kpy("consumer_groups", module_broker, "--describe", "--group", "tool-g").check()
    row = described.stdout.splitlines()[2].split()
    assert row[:6] == ["tool-g", "tool-groups", "0", row[3], "10", str(10 - int(row[3]))]

    reset = kpy("consumer_groups", module_broker, "--reset-offsets", "--group", "tool-g",
                "--topic", "tool-groups", "--to-earliest", "--execute").check()  # fmt: skip
    assert reset.stdout.splitlines()[1].split() == ["tool-g", "tool-groups", "0", "0"]
    shifted = kpy("consumer_groups", module_broker, "--reset-offsets", "--group", "tool-g",
                  "--topic", "tool-groups", "--shift-by", "3")  # fmt: skip
    assert "dry run" in shifted.check().stdout and " 3" in shifted.stdout.splitlines()[1]
    kpy("consumer_groups", module_broker, "--delete", "--group", "tool-g").check()
    assert "tool-g" not in kpy("consumer_groups", module_broker, "--list").check().stdout.split()


WINDOW_LINE = re.compile(
    r"^[\d,]+ records (sent|received), [\d,.]+ records/sec \([\d,.]+ MB/sec\); "
    r"[\d,]+ records \([\d,.]+ MB\) in total$"
)


def test_progress_reports_throughput_on_stderr(module_broker: ManagedBroker) -> None:
    kpy("topic_command", module_broker, "--create", "--topic", "tool-progress").check()
    values = [f"{i:04d}" for i in range(2000)]  # 2,000 records of 4 bytes: 0.01 MB
    produced = kpy("console_producer", module_broker, "--topic", "tool-progress", "--progress",
                   input="".join(f"{v}\n" for v in values)).check()  # fmt: skip
    *windows, summary = produced.stderr.splitlines()
    assert all(WINDOW_LINE.match(line) for line in windows), windows
    assert re.fullmatch(
        r"Total: 2,000 records \(0\.01 MB\) sent in [\d.]+ s, [\d,.]+ records/sec "
        r"\([\d.]+ MB/sec\)",
        summary,
    )

    consumed = kpy("console_consumer", module_broker, "--topic", "tool-progress",
                   "--from-beginning", "--max-messages", "2000", "--timeout-ms", "20000",
                   "--progress").check()  # fmt: skip
    assert consumed.stdout.splitlines() == values  # the records alone on stdout
    *windows, summary, processed = consumed.stderr.splitlines()
    assert all(WINDOW_LINE.match(line) for line in windows), windows
    assert summary.startswith("Total: 2,000 records (0.01 MB) received in ")
    assert processed == "Processed a total of 2000 messages"
