"""Samples per round, their medians, the kpybroker/Kafka ratios and the issue's targets.

Every figure is a :class:`Metric`; each round adds one sample per broker. The
ratio is always kpybroker's median over Kafka's, so 2.0 means twice Kafka's
throughput, or twice its latency. ``advantage`` turns that into "how many times
better kpybroker is" whichever way the metric points, for the chart.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from enum import Enum

KPYBROKER = "kpybroker"
KAFKA = "kafka"


class Better(Enum):
    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True)
class Metric:
    """One reported figure.

    ``ratio_target``: the issue's target is on the ratio (>= 1.0 for
    throughput, <= 1.0 for latency; ``target_ratio`` instead of 1.0 where the
    issue asks more, as <= 0.5 for memory). ``limit``: the target is an absolute
    upper bound on kpybroker's value (startup time, idle RSS).
    """

    workload: str
    case: str
    name: str
    unit: str
    better: Better
    ratio_target: bool = False
    limit: float | None = None
    target_ratio: float = 1.0

    @property
    def has_target(self) -> bool:
        return self.ratio_target or self.limit is not None

    def target_text(self) -> str:
        if self.ratio_target:
            sign = ">=" if self.better is Better.HIGHER else "<="
            return f"{sign} {self.target_ratio:.1f}x"
        if self.limit is not None:
            return f"< {format_value(self.limit)} {self.unit}"
        return ""


@dataclass(frozen=True)
class Failure:
    """A step that could not run against one broker in one round (only steps that allow it:
    workload 11, while kpybroker's share groups are new); ``message`` says why."""

    workload: str
    case: str
    broker: str
    message: str

    @property
    def summary(self) -> str:
        """The first line of the message."""
        return self.message.strip().splitlines()[0] if self.message.strip() else "failed"


@dataclass(frozen=True)
class Row:
    """One line of the results table; ``failed``: the brokers on which its step failed in a
    round (a failed round adds no sample)."""

    metric: Metric
    kpybroker: float | None
    kafka: float | None
    samples: int
    failed: frozenset[str] = frozenset()

    def value_text(self, broker: str) -> str:
        """A broker's median, or 'failed' when its step failed in every round."""
        value = self.kpybroker if broker == KPYBROKER else self.kafka
        if value is None and broker in self.failed:
            return "failed"
        return format_value(value)

    @property
    def ratio(self) -> float | None:
        if self.kpybroker is None or not self.kafka:
            return None
        return self.kpybroker / self.kafka

    @property
    def advantage(self) -> float | None:
        """kpybroker's lead over Kafka, > 1 when kpybroker is better (higher throughput, lower
        latency or cost); None when a median is zero or missing."""
        ratio = self.ratio
        if not ratio:
            return None
        return ratio if self.metric.better is Better.HIGHER else 1 / ratio

    @property
    def met(self) -> bool | None:
        """Whether kpybroker meets the metric's target; None when it has none. A step that
        failed on kpybroker in every round misses its targets."""
        metric, value = self.metric, self.kpybroker
        if not metric.has_target:
            return None
        if value is None:
            return False if KPYBROKER in self.failed else None
        if metric.limit is not None:
            return value < metric.limit
        if self.kafka is None:
            return None
        bound = self.kafka * metric.target_ratio
        if metric.better is Better.HIGHER:
            return value >= bound
        return value <= bound  # also when both are 0 ms (latency under the tool's 1 ms grain)


class Results:
    """Samples by metric and broker, in the order metrics were first recorded."""

    def __init__(self) -> None:
        self.samples: dict[Metric, dict[str, list[float]]] = defaultdict(
            lambda: {KPYBROKER: [], KAFKA: []}
        )
        self.failures: list[Failure] = []

    def add(self, metric: Metric, broker: str, value: float) -> None:
        self.samples[metric][broker].append(value)

    def fail(self, workload: str, case: str, broker: str, message: str) -> None:
        self.failures.append(Failure(workload, case, broker, message))

    def failed_brokers(self, workload: str, case: str) -> frozenset[str]:
        return frozenset(
            f.broker for f in self.failures if (f.workload, f.case) == (workload, case)
        )

    def rows(self) -> list[Row]:
        return [
            Row(
                metric,
                median_or_none(by_broker[KPYBROKER]),
                median_or_none(by_broker[KAFKA]),
                min(len(by_broker[KPYBROKER]), len(by_broker[KAFKA])),
                self.failed_brokers(metric.workload, metric.case),
            )
            for metric, by_broker in self.samples.items()
        ]

    def missed(self) -> list[Row]:
        return [row for row in self.rows() if row.met is False]


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def format_value(value: float | None) -> str:
    """Three significant figures, thousands separated; '-' for no value."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def format_ratio(row: Row) -> str:
    ratio = row.ratio
    if ratio is None:
        return "both 0" if row.kpybroker == row.kafka == 0 else "-"
    return f"{ratio:.2f}x"


def format_met(row: Row) -> str:
    return {True: "met", False: "MISSED", None: ""}[row.met]
