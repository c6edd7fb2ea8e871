"""Kafka's own performance tools, run as Kafka's scripts run them, and their output parsed.

* ``ProducerPerformance`` (``kafka-producer-perf-test.sh``): the final summary line;
  its latency is from ``send()`` to the acknowledgement, per record. With a
  transactional id it commits a transaction every ``--transaction-duration-ms``.
* ``ConsumerPerformance`` (``kafka-consumer-perf-test.sh``): the CSV line; the
  ``fetch.*`` columns exclude the group join, so they measure the broker's fetch path.
* ``EndToEndLatency`` (``kafka-e2e-latency.sh``): one record at a time, produce
  (acks as given) then consume it; percentiles in whole milliseconds, as it prints them.

Client settings beyond the bootstrap address (a secured listener's, read_committed) reach the
producer and consumer tools in a properties file, as an operator passes them.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchlib.plan import TOOL_HEAP, TOOL_JVM_OPTIONS
from tests.helpers.client_properties import write_properties
from tests.helpers.java import java_command
from tests.helpers.process import run_tool

PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
END_TO_END_LATENCY = "org.apache.kafka.tools.EndToEndLatency"

#: Every ConsumerPerformance run reads in a new group named with this prefix.
GROUP_PREFIX = "bench-"

_NUMBER = r"([\d.]+)"
PRODUCER_SUMMARY = re.compile(
    rf"(\d+) records sent, {_NUMBER} records/sec \({_NUMBER} MB/sec\), {_NUMBER} ms avg latency, "
    rf"{_NUMBER} ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)
E2E_AVERAGE = re.compile(rf"Avg latency: {_NUMBER} ms")
E2E_PERCENTILES = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")


class ToolError(RuntimeError):
    """A tool failed, or did not print what it prints on success."""


def run_perf_tool(lib: Path, main_class: str, args: list[str], timeout: float) -> str:
    """Run one tool to completion; return its stdout (ToolError on failure)."""
    command = java_command(
        lib, main_class, args, heap=TOOL_HEAP, log_level="WARN", jvm_options=TOOL_JVM_OPTIONS
    )
    result = run_tool(command, timeout=timeout)
    if result.returncode != 0:
        raise ToolError(f"{main_class} failed\n{result.describe()}")
    return result.stdout


@contextmanager
def properties_file(option: str, settings: Mapping[str, str]) -> Iterator[list[str]]:
    """``[option, <file>]`` naming a temporary file of ``settings`` while the block runs;
    no arguments when there are no settings."""
    if not settings:
        yield []
        return
    with tempfile.TemporaryDirectory(prefix="bench-client-") as tmp:
        yield [option, str(write_properties(Path(tmp) / "client.properties", settings))]


@dataclass(frozen=True)
class ProducerResult:
    records: int
    records_per_s: float
    mb_per_s: float
    avg_latency_ms: float
    p99_latency_ms: float


def producer_performance(
    lib: Path,
    bootstrap: str,
    topic: str,
    records: int,
    record_size: int,
    timeout: float,
    transaction_duration_ms: int | None = None,
    producer_config: Mapping[str, str] | None = None,
) -> ProducerResult:
    """acks=all, unthrottled, every other producer setting at its default; with
    ``transaction_duration_ms``, transactional (a new transactional id per run).
    ``producer_config`` goes to the tool in a ``--producer.config`` file."""
    transactions = (
        []
        if transaction_duration_ms is None
        else [
            "--transactional-id", f"bench-{uuid.uuid4().hex[:12]}",
            "--transaction-duration-ms", str(transaction_duration_ms),
        ]
    )  # fmt: skip
    with properties_file("--producer.config", producer_config or {}) as config:
        out = run_perf_tool(
            lib,
            PRODUCER_PERFORMANCE,
            [
                "--topic", topic,
                "--num-records", str(records),
                "--record-size", str(record_size),
                "--throughput", "-1",
                *transactions,
                *config,
                "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
            ],
            timeout,
        )  # fmt: skip
    m = PRODUCER_SUMMARY.search(out)
    if m is None or int(m.group(1)) != records:
        raise ToolError(f"no summary for {records} records in ProducerPerformance output:\n{out}")
    return ProducerResult(
        records=int(m.group(1)),
        records_per_s=float(m.group(2)),
        mb_per_s=float(m.group(3)),
        avg_latency_ms=float(m.group(4)),
        p99_latency_ms=float(m.group(8)),
    )


@dataclass(frozen=True)
class ConsumerResult:
    records: int
    fetch_mb_per_s: float
    fetch_records_per_s: float
    rebalance_ms: float


def consumer_performance(
    lib: Path,
    bootstrap: str,
    topic: str,
    records: int,
    timeout: float,
    consumer_config: Mapping[str, str] | None = None,
) -> ConsumerResult:
    """Read ``records`` from the beginning in a new group; ToolError unless all arrive.
    ``consumer_config`` goes to the tool in a ``--consumer.config`` file."""
    with properties_file("--consumer.config", consumer_config or {}) as config:
        out = run_perf_tool(
            lib,
            CONSUMER_PERFORMANCE,
            [
                "--bootstrap-server", bootstrap,
                "--topic", topic,
                "--messages", str(records),
                "--group", f"{GROUP_PREFIX}{uuid.uuid4().hex[:12]}",
                "--timeout", "60000",
                *config,
            ],
            timeout,
        )  # fmt: skip
    lines = [line for line in out.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if header is None or header + 1 >= len(lines):
        raise ToolError(f"no result line in ConsumerPerformance output:\n{out}")
    names = [n.strip() for n in lines[header].split(",")]
    values = dict(zip(names, (v.strip() for v in lines[header + 1].split(",")), strict=False))
    consumed = int(values["data.consumed.in.nMsg"])
    if consumed != records:
        raise ToolError(f"ConsumerPerformance read {consumed} of {records} records:\n{out}")
    return ConsumerResult(
        records=consumed,
        fetch_mb_per_s=float(values["fetch.MB.sec"]),
        fetch_records_per_s=float(values["fetch.nMsg.sec"]),
        rebalance_ms=float(values["rebalance.time.ms"]),
    )


@dataclass(frozen=True)
class EndToEndResult:
    avg_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float


def end_to_end_latency(
    lib: Path, bootstrap: str, topic: str, records: int, record_size: int, timeout: float
) -> EndToEndResult:
    """Kafka's EndToEndLatency with acks=all."""
    out = run_perf_tool(
        lib, END_TO_END_LATENCY, [bootstrap, topic, str(records), "all", str(record_size)], timeout
    )
    avg, pct = E2E_AVERAGE.search(out), E2E_PERCENTILES.search(out)
    if avg is None or pct is None:
        raise ToolError(f"no latency summary in EndToEndLatency output:\n{out}")
    return EndToEndResult(
        avg_ms=float(avg.group(1)),
        p50_ms=float(pct.group(1)),
        p99_ms=float(pct.group(2)),
        p999_ms=float(pct.group(3)),
    )
