"""Issue 7's workloads as steps, each run against one broker and recorded as metrics.

A :class:`Step` runs one client workload against one broker and records its
figures, including the broker's CPU time over the step divided by the
megabytes of payload it moved. The rounds (``cli``) run every step against
both brokers in turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from benchlib import javatools, librdkafka, scale
from benchlib.brokers import Measured, create_topics
from benchlib.plan import Plan, ProduceCase, format_size
from benchlib.results import Better, Metric, Results

T = TypeVar("T")

#: Seconds any one client run may take.
TOOL_TIMEOUT_S = 900.0

WARM_UP = "warm-up"
W1 = "1 ProducerPerformance"
W2 = "2 ConsumerPerformance"
W3 = "3 EndToEndLatency"
W4 = "4 confluent-kafka"
W5 = "5 scale"
STARTUP = "5 startup"
W6 = "6 ProducerPerformance, transactional"
W7 = "7 ConsumerPerformance, read_committed"

#: ``--only``'s names for the workloads: what each selects.
SELECTIONS: dict[str, tuple[str, ...]] = {
    "startup": (STARTUP,),
    "produce-consume": (W1, W2),
    "e2e": (W3,),
    "librdkafka": (W4,),
    "scale": (W5,),
    "transactions": (W6, W7),
}
ALL_WORKLOADS: frozenset[str] = frozenset(w for ws in SELECTIONS.values() for w in ws)

#: What workload 7's ConsumerPerformance reads with (its ``--consumer.config``).
READ_COMMITTED = {"isolation.level": "read_committed"}

MB = 1e6


def with_cpu(broker: Measured, action: Callable[[], T]) -> tuple[T, float]:
    """Run ``action``; return its result and the broker's CPU seconds meanwhile."""
    before = broker.cpu_seconds()
    result = action()
    return result, broker.cpu_seconds() - before


def record_cpu(
    results: Results,
    workload: str,
    case: str,
    broker: str,
    cpu_seconds: float,
    active_seconds: float,
    megabytes: float,
) -> None:
    """CPU per MB moved (what the work costs), and cores busy while records moved (how close
    to its limit the broker ran: far below 1 means the clients set the pace)."""
    results.add(
        Metric(workload, case, "broker CPU per MB", "ms/MB", Better.LOWER),
        broker,
        cpu_seconds * 1000 / megabytes,
    )
    results.add(
        Metric(workload, case, "broker CPU use", "cores", Better.LOWER),
        broker,
        cpu_seconds / active_seconds,
    )


@dataclass(frozen=True)
class Step:
    """One workload run; ``prerequisite`` must have run on the broker first (it makes the data)."""

    workload: str
    case: str
    run: Callable[[Measured, Results], None]
    prerequisite: Step | None = None


class Workloads:
    """The steps of one round, for one plan, with Kafka's tools from ``lib``."""

    def __init__(self, plan: Plan, lib: Path, selected: frozenset[str] = ALL_WORKLOADS) -> None:
        self.plan = plan
        self.lib = lib
        #: The workloads this run records (``--only``); the others do not run.
        self.selected = selected

    def steps(self) -> list[Step]:
        """Warm-up, then workloads 1 to 4, 6 and 7 as selected, in the order the rounds run
        them (a selected step's prerequisite is always selected with it)."""
        plan, chosen = self.plan, self.selected
        steps = [Step(WARM_UP, "", self.warm_up)] if plan.warmup_records else []
        for index, case in enumerate(plan.produce_cases):
            if W1 in chosen:
                topic = f"perf-{index}"
                produce = Step(W1, case.label, self.producer_step(case, topic))
                steps.append(produce)
                steps.append(Step(W2, case.label, self.consumer_step(case, topic), produce))
        if W3 in chosen:
            steps.append(Step(W3, self.e2e_case, self.end_to_end))
        if W4 in chosen:
            steps.append(Step(W4, self.librdkafka_case, self.librdkafka))
        if W6 in chosen:
            if plan.txn_warmup_records:
                steps.append(Step(WARM_UP, "transactions", self.warm_up_transactions))
            for duration_ms in plan.txn_durations_ms:
                steps.append(
                    Step(W6, self.txn_case(duration_ms), self.txn_producer_step(duration_ms))
                )
            spec = plan.aborted_topic
            write = Step(W7, spec.label, self.write_aborted_topic)
            steps.append(write)
            steps.append(Step(W7, f"{spec.label}, read", self.read_committed, write))
        return steps

    # -- warm-up ------------------------------------------------------------------

    def warm_up(self, broker: Measured, _results: Results) -> None:
        """Produce and consume once, unrecorded, so that no measured step pays for a cold
        start: the JVM compiles its hot paths, and both brokers set up their producer-id
        and group-coordinator state."""
        create_topics(broker.bootstrap, {"warm-up": 6})
        bootstrap, records = broker.bootstrap, self.plan.warmup_records
        javatools.producer_performance(self.lib, bootstrap, "warm-up", records, 100, TOOL_TIMEOUT_S)
        javatools.consumer_performance(self.lib, bootstrap, "warm-up", records, TOOL_TIMEOUT_S)

    def warm_up_transactions(self, broker: Measured, _results: Results) -> None:
        """Once, unrecorded, before the transactional workloads: both brokers create
        ``__transaction_state`` and the JVM compiles the transactional paths (and Kafka's
        read_committed fetch)."""
        create_topics(broker.bootstrap, {"warm-up-txn": 6})
        bootstrap, records = broker.bootstrap, self.plan.txn_warmup_records
        javatools.producer_performance(
            self.lib, bootstrap, "warm-up-txn", records, 100, TOOL_TIMEOUT_S, 100
        )
        javatools.consumer_performance(
            self.lib, bootstrap, "warm-up-txn", records, TOOL_TIMEOUT_S, READ_COMMITTED
        )

    # -- workloads 1 and 2 ----------------------------------------------------------

    def producer_step(self, case: ProduceCase, topic: str) -> Callable[[Measured, Results], None]:
        def run(broker: Measured, results: Results) -> None:
            create_topics(broker.bootstrap, {topic: case.partitions})
            result, cpu = with_cpu(
                broker,
                lambda: javatools.producer_performance(
                    self.lib,
                    broker.bootstrap,
                    topic,
                    case.records,
                    case.record_size,
                    TOOL_TIMEOUT_S,
                ),
            )
            label = broker.label
            results.add(
                Metric(W1, case.label, "throughput", "records/s", Better.HIGHER, ratio_target=True),
                label,
                result.records_per_s,
            )
            results.add(
                Metric(W1, case.label, "throughput", "MB/s", Better.HIGHER),
                label,
                result.mb_per_s,
            )
            results.add(
                Metric(W1, case.label, "avg latency", "ms", Better.LOWER),
                label,
                result.avg_latency_ms,
            )
            results.add(
                Metric(W1, case.label, "p99 latency", "ms", Better.LOWER, ratio_target=True),
                label,
                result.p99_latency_ms,
            )
            active = case.records / result.records_per_s
            record_cpu(results, W1, case.label, label, cpu, active, case.megabytes)

        return run

    def consumer_step(self, case: ProduceCase, topic: str) -> Callable[[Measured, Results], None]:
        def run(broker: Measured, results: Results) -> None:
            result, cpu = with_cpu(
                broker,
                lambda: javatools.consumer_performance(
                    self.lib, broker.bootstrap, topic, case.records, TOOL_TIMEOUT_S
                ),
            )
            label = broker.label
            results.add(
                Metric(
                    W2, case.label, "fetch throughput", "MB/s", Better.HIGHER, ratio_target=True
                ),
                label,
                result.fetch_mb_per_s,
            )
            results.add(
                Metric(W2, case.label, "fetch throughput", "records/s", Better.HIGHER),
                label,
                result.fetch_records_per_s,
            )
            active = case.records / result.fetch_records_per_s
            record_cpu(results, W2, case.label, label, cpu, active, case.megabytes)

        return run

    # -- workload 3 -----------------------------------------------------------------

    @property
    def e2e_case(self) -> str:
        plan = self.plan
        return f"{plan.e2e_records:,} x {format_size(plan.e2e_record_size)}, acks=all"

    def end_to_end(self, broker: Measured, results: Results) -> None:
        create_topics(broker.bootstrap, {"e2e": 1})
        plan = self.plan
        result = javatools.end_to_end_latency(
            self.lib, broker.bootstrap, "e2e", plan.e2e_records, plan.e2e_record_size, 600
        )
        case, label = self.e2e_case, broker.label
        for name, value, target in (
            ("p50 latency", result.p50_ms, False),
            ("p99 latency", result.p99_ms, True),
            ("p99.9 latency", result.p999_ms, False),
            ("avg latency", result.avg_ms, False),
        ):
            results.add(
                Metric(W3, case, name, "ms", Better.LOWER, ratio_target=target), label, value
            )

    # -- workload 4 -----------------------------------------------------------------

    @property
    def librdkafka_case(self) -> str:
        plan = self.plan
        return (
            f"{plan.librdkafka_records:,} x {format_size(plan.librdkafka_record_size)}, "
            f"{plan.librdkafka_partitions} partitions, linger.ms={plan.librdkafka_linger_ms}"
        )

    def librdkafka(self, broker: Measured, results: Results) -> None:
        plan = self.plan
        topic, records, size = "rdkafka", plan.librdkafka_records, plan.librdkafka_record_size
        megabytes = records * size / MB
        create_topics(broker.bootstrap, {topic: plan.librdkafka_partitions})
        produce_s, produce_cpu = with_cpu(
            broker,
            lambda: librdkafka.produce(
                broker.bootstrap, topic, records, size, plan.librdkafka_linger_ms
            ),
        )
        consume_s, consume_cpu = with_cpu(
            broker, lambda: librdkafka.consume_and_verify(broker.bootstrap, topic, records, size)
        )
        case, label = self.librdkafka_case, broker.label
        for phase, seconds, cpu in (
            ("produce", produce_s, produce_cpu),
            ("group consume", consume_s, consume_cpu),
        ):
            results.add(
                Metric(W4, case, f"{phase} throughput", "records/s", Better.HIGHER, True),
                label,
                records / seconds,
            )
            results.add(
                Metric(W4, case, f"{phase} throughput", "MB/s", Better.HIGHER),
                label,
                megabytes / seconds,
            )
            record_cpu(results, W4, f"{case}, {phase}", label, cpu, seconds, megabytes)

    # -- workloads 6 and 7 ---------------------------------------------------------

    def txn_case(self, duration_ms: int) -> str:
        return f"{self.plan.txn_produce_case.label}, --transaction-duration-ms {duration_ms}"

    def txn_producer_step(self, duration_ms: int) -> Callable[[Measured, Results], None]:
        """ProducerPerformance as in workload 1, committing every ``duration_ms``."""
        case, name = self.plan.txn_produce_case, self.txn_case(duration_ms)
        topic = f"txn-{duration_ms}"

        def run(broker: Measured, results: Results) -> None:
            create_topics(broker.bootstrap, {topic: case.partitions})
            result, cpu = with_cpu(
                broker,
                lambda: javatools.producer_performance(
                    self.lib,
                    broker.bootstrap,
                    topic,
                    case.records,
                    case.record_size,
                    TOOL_TIMEOUT_S,
                    duration_ms,
                ),
            )
            label = broker.label
            for metric, value in (
                (Metric(W6, name, "throughput", "records/s", Better.HIGHER, ratio_target=True),
                 result.records_per_s),
                (Metric(W6, name, "throughput", "MB/s", Better.HIGHER), result.mb_per_s),
                (Metric(W6, name, "avg latency", "ms", Better.LOWER), result.avg_latency_ms),
                (Metric(W6, name, "p99 latency", "ms", Better.LOWER, ratio_target=True),
                 result.p99_latency_ms),
            ):  # fmt: skip
                results.add(metric, label, value)
            active = case.records / result.records_per_s
            record_cpu(results, W6, name, label, cpu, active, case.megabytes)

        return run

    def write_aborted_topic(self, broker: Measured, results: Results) -> None:
        """Workload 7's data: confluent-kafka, 9 transactions of 10 committed (informative)."""
        spec = self.plan.aborted_topic
        create_topics(broker.bootstrap, {"txn-aborted": spec.partitions})
        seconds = librdkafka.produce_transactions(broker.bootstrap, "txn-aborted", spec)
        results.add(
            Metric(W7, spec.label, "transactional write (confluent-kafka)", "records/s",
                   Better.HIGHER),
            broker.label,
            spec.records / seconds,
        )  # fmt: skip

    def read_committed(self, broker: Measured, results: Results) -> None:
        """ConsumerPerformance with read_committed over the topic with aborted transactions;
        it must read the committed count, and a read_committed librdkafka consumer (after
        the clock) must find exactly the committed records, none aborted."""
        spec = self.plan.aborted_topic
        name = f"{spec.label}, read"
        result, cpu = with_cpu(
            broker,
            lambda: javatools.consumer_performance(
                self.lib,
                broker.bootstrap,
                "txn-aborted",
                spec.committed,
                TOOL_TIMEOUT_S,
                READ_COMMITTED,
            ),
        )
        librdkafka.read_committed_and_verify(broker.bootstrap, "txn-aborted", spec)
        label = broker.label
        results.add(
            Metric(W7, name, "fetch throughput", "MB/s", Better.HIGHER, ratio_target=True),
            label,
            result.fetch_mb_per_s,
        )
        results.add(
            Metric(W7, name, "fetch throughput", "records/s", Better.HIGHER),
            label,
            result.fetch_records_per_s,
        )
        active = spec.committed / result.fetch_records_per_s
        record_cpu(results, W7, name, label, cpu, active, spec.megabytes)

    # -- workload 5 -----------------------------------------------------------------

    def startup(self, broker: Measured, results: Results) -> None:
        """Start ``broker`` (a fresh data directory); record its startup time and idle RSS."""
        broker.start()
        label = broker.label
        results.add(
            Metric(STARTUP, "empty data directory", "startup to first answer", "s", Better.LOWER,
                   limit=0.5),
            label,
            broker.startup_seconds(),
        )  # fmt: skip
        time.sleep(self.plan.idle_settle_s)
        results.add(
            Metric(STARTUP, "no clients", "idle RSS", "MB", Better.LOWER, limit=60.0),
            label,
            broker.rss_bytes() / MB,
        )

    @property
    def scale_case(self) -> str:
        plan = self.plan
        return (
            f"{plan.scale_partitions:,} partitions in {plan.scale_topics} topics, "
            f"{plan.scale_connections:,} idle connections"
        )

    def scale(self, broker: Measured, results: Results) -> None:
        """Many partitions and idle connections: Metadata latency, one hot partition, RSS."""
        plan, case, label = self.plan, self.scale_case, broker.label
        topics = {f"scale-{i}": plan.scale_partitions_per_topic for i in range(plan.scale_topics)}
        started = time.monotonic()
        create_topics(broker.bootstrap, {**topics, "hot": 1}, timeout=1800)
        results.add(
            Metric(W5, case, "creating the partitions", "s", Better.LOWER),
            label,
            time.monotonic() - started,
        )
        with scale.idle_connections(broker.host, broker.port, plan.scale_connections):
            latencies = sorted(
                scale.metadata_latencies(broker.host, broker.port, plan.metadata_requests)
            )
            hot, cpu = with_cpu(
                broker,
                lambda: javatools.producer_performance(
                    self.lib, broker.bootstrap, "hot", plan.scale_hot_records, 100, TOOL_TIMEOUT_S
                ),
            )
            rss = broker.rss_bytes()
        for name, value in (
            ("Metadata (all topics) median", latencies[len(latencies) // 2]),
            ("Metadata (all topics) max", latencies[-1]),
        ):
            results.add(Metric(W5, case, name, "ms", Better.LOWER), label, value * 1000)
        hot_case = (
            f"{plan.scale_hot_records:,} x 100 B to one hot partition, "
            f"beside the {plan.scale_partitions:,} others"
        )
        results.add(
            Metric(W5, hot_case, "produce throughput", "records/s", Better.HIGHER),
            label,
            hot.records_per_s,
        )
        results.add(
            Metric(W5, hot_case, "produce p99 latency", "ms", Better.LOWER),
            label,
            hot.p99_latency_ms,
        )
        megabytes = plan.scale_hot_records * 100 / MB
        active = plan.scale_hot_records / hot.records_per_s
        record_cpu(results, W5, hot_case, label, cpu, active, megabytes)
        results.add(Metric(W5, case, "broker RSS", "MB", Better.LOWER), label, rss / MB)
