"""Kafka's own performance tools, run as Kafka's scripts run them, and their output parsed.

* ``ProducerPerformance`` (``kafka-producer-perf-test.sh``): the final summary line;
  its latency is from ``send()`` to the acknowledgement, per record. With a
  transactional id it commits a transaction every ``--transaction-duration-ms``.
* ``ConsumerPerformance`` (``kafka-consumer-perf-test.sh``): the CSV line; the
  ``fetch.*`` columns exclude the group join, so they measure the broker's fetch path.
* ``EndToEndLatency`` (``kafka-e2e-latency.sh``): one record at a time, produce
  (acks as given) then consume it; percentiles in whole milliseconds, as it prints them.
* ``ShareConsumerPerformance`` (``kafka-share-consumer-perf-test.sh``): ``--threads``
  share consumers in one share group. Its own figure runs from before they subscribe to
  after the last of them stops (each polls for up to 100 ms more), so it includes the
  share group's join; with ``--show-detailed-stats --reporting-interval 1`` every
  consumer prints a line at each poll that returns records, which gives the time of the
  first and of the last delivery. ``ConfigCommand`` (``kafka-configs.sh``) sets the share
  group's ``share.auto.offset.reset`` first.

Client settings beyond the bootstrap address (a secured listener's, read_committed) reach the
producer and consumer tools in a properties file, as an operator passes them.
"""

from __future__ import annotations

import datetime
import re
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
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
SHARE_CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ShareConsumerPerformance"
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"

#: Every ConsumerPerformance run reads in a new group named with this prefix.
GROUP_PREFIX = "bench-"

_NUMBER = r"([\d.]+)"
PRODUCER_SUMMARY = re.compile(
    rf"(\d+) records sent, {_NUMBER} records/sec \({_NUMBER} MB/sec\), {_NUMBER} ms avg latency, "
    rf"{_NUMBER} ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)
#: ShareConsumerPerformance's default ``--date-format``, as ``strptime`` reads it.
SHARE_DATE_FORMAT = "%Y-%m-%d %H:%M:%S:%f"
_DATE = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3})"
#: start, end, MiB, MiB/s, records/s, records, ms: the share group's summary line, or
#: (``--show-detailed-stats``) one consumer's progress line, which adds its number.
SHARE_SUMMARY = re.compile(
    rf"^{_DATE}, {_DATE}, {_NUMBER}, {_NUMBER}, {_NUMBER}, (\d+), (\d+)$", re.MULTILINE
)
SHARE_PROGRESS = re.compile(
    rf"^{_DATE}, {_DATE}, {_NUMBER}, {_NUMBER}, {_NUMBER}, (\d+), (-?\d+) "
    rf"for share consumer (\d+)$",
    re.MULTILINE,
)
#: ``--show-consumer-stats``: what each consumer read in all.
SHARE_CONSUMER_TOTAL = re.compile(
    rf"^Share consumer (\d+) .*consumption metrics- {_DATE}, {_DATE}, {_NUMBER}, {_NUMBER}, "
    rf"{_NUMBER}, (\d+), (\d+)$",
    re.MULTILINE,
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
    *,
    all_acknowledged: bool = True,
) -> ProducerResult:
    """acks=all, unthrottled, every other producer setting at its default; with
    ``transaction_duration_ms``, transactional (a new transactional id per run).
    ``producer_config`` goes to the tool in a ``--producer.config`` file. Unless
    ``all_acknowledged`` is False, a run in which any record failed is an error; its
    summary then counts only the records acknowledged."""
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
    if m is None or (all_acknowledged and int(m.group(1)) != records):
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


def set_group_config(lib: Path, bootstrap: str, group: str, settings: Mapping[str, str]) -> None:
    """``kafka-configs.sh --entity-type groups --entity-name <group> --alter --add-config``:
    a group's own settings, before its members exist."""
    out = run_perf_tool(
        lib,
        CONFIG_COMMAND,
        [
            "--bootstrap-server", bootstrap,
            "--entity-type", "groups",
            "--entity-name", group,
            "--alter",
            "--add-config", ",".join(f"{key}={value}" for key, value in settings.items()),
        ],
        60.0,
    )  # fmt: skip
    if f"Completed updating config for group {group}" not in out:
        raise ToolError(f"ConfigCommand did not confirm the settings of group {group}:\n{out}")


@dataclass(frozen=True)
class ShareConsumerResult:
    """A ShareConsumerPerformance run: what it read, its own figure (with the join), and the
    span from the first delivery to any consumer to the last."""

    records: int
    mib: float
    tool_records_per_s: float
    #: When the consumers started, and the first and last deliveries to any of them
    #: (seconds since the epoch, in the tool's whole milliseconds).
    started_at: float
    first_delivery_at: float
    last_delivery_at: float
    records_by_consumer: tuple[int, ...]

    @property
    def first_record_s(self) -> float:
        return self.first_delivery_at - self.started_at

    @property
    def consume_s(self) -> float:
        return max(self.last_delivery_at - self.first_delivery_at, 0.001)

    @property
    def records_per_s(self) -> float:
        return self.records / self.consume_s

    @property
    def mib_per_s(self) -> float:
        return self.mib / self.consume_s


def _share_time(text: str) -> float:
    """Seconds since the epoch of one of ShareConsumerPerformance's dates (local time)."""
    return datetime.datetime.strptime(text, SHARE_DATE_FORMAT).timestamp()


def run_share_tool(
    lib: Path,
    bootstrap: str,
    topic: str,
    records: int,
    consumers: int,
    group: str,
    timeout: float,
    record_timeout_ms: int,
    options: Sequence[str] = (),
) -> tuple[str, tuple[str, ...]]:
    """ShareConsumerPerformance: its output and the fields of its summary line.

    ``record_timeout_ms`` (``--timeout``) bounds the whole read, not only the wait between
    records: the tool interrupts its consumers that much (plus 100 ms) after they start,
    and fails. A consumer without records for that long stops, and the tool then exits 0
    with a warning and the count so far."""
    out = run_perf_tool(
        lib,
        SHARE_CONSUMER_PERFORMANCE,
        [
            "--bootstrap-server", bootstrap,
            "--topic", topic,
            "--num-records", str(records),
            "--group", group,
            "--threads", str(consumers),
            "--timeout", str(record_timeout_ms),
            "--show-consumer-stats",
            *options,
        ],
        timeout,
    )  # fmt: skip
    summaries = SHARE_SUMMARY.findall(out)
    if not summaries:
        raise ToolError(f"no summary line in ShareConsumerPerformance output:\n{out[-6000:]}")
    return out, summaries[-1]


def share_consumer_performance(
    lib: Path,
    bootstrap: str,
    topic: str,
    records: int,
    consumers: int,
    group: str,
    timeout: float,
    record_timeout_ms: int = 60_000,
) -> ShareConsumerResult:
    """``consumers`` share consumers in ``group`` (whose settings are the caller's) read
    ``records``, the whole topic; ToolError unless they read exactly that many.

    The tool stops once the count is reached, counting every record of the polls that reach
    it: each record goes to one consumer, so a count past the topic's records means the
    broker delivered some twice (a record's acquisition lock, 30 s, never expires here)."""
    out, summary = run_share_tool(
        lib, bootstrap, topic, records, consumers, group, timeout, record_timeout_ms,
        ["--show-detailed-stats", "--reporting-interval", "1"],
    )  # fmt: skip
    start, _end, mib, _mib_per_s, tool_rate, read, _ms = summary
    if int(read) != records:
        what = "some more than once" if int(read) > records else "timed out"
        raise ToolError(
            f"ShareConsumerPerformance read {int(read):,} records of the topic's {records:,} "
            f"({what}; by consumer: {records_by_consumer(out, consumers)}):\n{out[-6000:]}"
        )
    first: dict[str, float] = {}
    last = 0.0
    for _since, at, *_figures, _count, _ms, consumer in SHARE_PROGRESS.findall(out):
        when = _share_time(at)
        first.setdefault(consumer, when)
        last = max(last, when)
    if not first:
        raise ToolError(f"no progress lines in ShareConsumerPerformance output:\n{out[-6000:]}")
    return ShareConsumerResult(
        records=int(read),
        mib=float(mib),
        tool_records_per_s=float(tool_rate),
        started_at=_share_time(start),
        first_delivery_at=min(first.values()),
        last_delivery_at=last,
        records_by_consumer=records_by_consumer(out, consumers),
    )


def records_by_consumer(out: str, consumers: int) -> tuple[int, ...]:
    """What each consumer read, from ``--show-consumer-stats``."""
    totals = {m[0]: int(m[-2]) for m in SHARE_CONSUMER_TOTAL.findall(out)}
    return tuple(totals.get(str(n), 0) for n in range(1, consumers + 1))
