"""Issue 7's workloads as steps, each run against one broker and recorded as metrics.

A :class:`Step` runs one client workload against one broker and records its
figures, including the broker's CPU time over the step divided by the
megabytes of payload it moved. The rounds (``cli``) run every step against
both brokers in turn. Workloads 8 and 9 are workloads 1 and 2 over TLS and
SASL_SSL (``secured``), against both brokers restarted with the security settings;
issue 7's targets are for the plaintext workloads, so theirs are figures without targets.
Workload 10 (``rebalance``) times a large consumer group's rebalances with each group
protocol, as its members see them; it has no targets either. Workload 11 reads one
partition with four share consumers of a share group (KIP-932), with Kafka's
ShareConsumerPerformance; it is the one step allowed to fail on a broker (kpybroker's
share groups are new): the failure is recorded and reported, and the run goes on.
Workloads 12 (``small_requests``: many clients with one small request each in flight)
and 13 (``fanout``: one topic read by many groups at once) are issue 17's.
Workload 14 (``startup``) starts brokers of its own, again and again, to time start-up;
workload 15 (``replicated``) starts three-broker clusters of its own, workload 16
(``recovery``) brokers of its own that it kills, and workload 17 (``compaction``) brokers
of its own with a cleaner setting.
"""

from __future__ import annotations

import re
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from benchlib import (
    fanout,
    javatools,
    librdkafka,
    partition_creation,
    procstat,
    rebalance,
    scale,
    small_requests,
)
from benchlib.brokers import Measured, create_topics
from benchlib.compaction import W17
from benchlib.javatools import ConsumerResult, ProducerResult, ShareConsumerResult, ToolError
from benchlib.plan import GROUP_HEARTBEAT_MS, Plan, ProduceCase, ShareCase, format_size
from benchlib.recovery import W16
from benchlib.results import Better, Metric, Results
from benchlib.secured import (
    PLAINTEXT,
    TOPIC_PREFIX,
    Listener,
    authorize_user,
    secured_listeners,
)
from benchlib.startup import W14
from tests.helpers.secure_broker import Credentials

T = TypeVar("T")

#: Seconds any one client run may take.
TOOL_TIMEOUT_S = 900.0

#: Workloads 5 and 15: the time from the first CreateTopics until every new partition is
#: served (``partition_creation``), the one point of creation that is the same in both
#: brokers.
SERVED = "creating the partitions, until every one is served"

WARM_UP = "warm-up"
W1 = "1 ProducerPerformance"
W2 = "2 ConsumerPerformance"
W3 = "3 EndToEndLatency"
W4 = "4 confluent-kafka"
W5 = "5 scale"
STARTUP = "5 startup"
W6 = "6 ProducerPerformance, transactional"
W7 = "7 ConsumerPerformance, read_committed"
W8 = "8 ProducerPerformance, secured"
W9 = "9 ConsumerPerformance, secured"
W10 = "10 consumer group rebalance"
W11 = "11 share-group consume"
W12 = "12 small requests"
W13 = "13 fan-out"
#: Run by ``replicated``, on clusters of its own.
W15 = "15 replicated"

#: ``--only``'s names for the workloads: what each selects.
SELECTIONS: dict[str, tuple[str, ...]] = {
    "startup": (STARTUP, W14),
    "produce-consume": (W1, W2),
    "e2e": (W3,),
    "librdkafka": (W4,),
    "scale": (W5,),
    "transactions": (W6, W7),
    "security": (W8, W9),
    "groups": (W10,),
    "share": (W11,),
    "small-requests": (W12,),
    "fanout": (W13,),
    "replicated": (W15,),
    "recovery": (W16,),
    "compaction": (W17,),
}
ALL_WORKLOADS: frozenset[str] = frozenset(w for ws in SELECTIONS.values() for w in ws)
#: The workloads run against the brokers restarted with the security settings.
SECURED_WORKLOADS: frozenset[str] = frozenset(SELECTIONS["security"])
#: The workloads that start brokers of their own, again and again.
OWN_BROKERS: frozenset[str] = SECURED_WORKLOADS | {W14, W15, W16, W17}

#: Issue 17's memory target: at most half of Kafka's RSS per partition and per connection.
MEMORY_TARGET_RATIO = 0.5

#: Workload 12 runs its producers with each of these.
SMALL_REQUEST_ACKS = ("1", "all")

#: What workload 7's ConsumerPerformance reads with (its ``--consumer.config``).
READ_COMMITTED = {"isolation.level": "read_committed"}

MB = 1e6

#: Workload 10's topic, shared by all its groups.
GROUP_TOPIC = "groups"

#: Workload 11's topic (one partition), read by every share group of a round, and the
#: prefix of those groups' names (a new group per run).
SHARE_TOPIC = "share"
SHARE_GROUP_PREFIX = "bench-share-"
#: Each share group's own settings, set before its consumers start: a share group starts
#: at the latest offset by default (share consumers have no ``auto.offset.reset``).
SHARE_GROUP_SETTINGS = {"share.auto.offset.reset": "earliest"}
#: What a failure quotes: the end of the tool's account, and the broker's log lines during
#: the run that match ``PROBLEM`` (the last of them), each cut to ``FAILURE_LINE_CHARS``.
FAILURE_TOOL_CHARS = 3000
FAILURE_LOG_LINES = 40
FAILURE_LINE_CHARS = 400
PROBLEM = re.compile(r"\b(WARN|WARNING|ERROR|CRITICAL|FATAL)\b|Traceback|Exception")

#: What a step does against one broker, recording into the results.
StepRun = Callable[[Measured, Results], None]


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


def record_producer(
    results: Results,
    workload: str,
    case: str,
    broker: str,
    spec: ProduceCase,
    result: ProducerResult,
    cpu_seconds: float,
    targets: bool,
) -> None:
    """A ProducerPerformance run's figures; ``targets``: the issue's ratio targets on
    records/s and p99."""
    for metric, value in (
        (Metric(workload, case, "throughput", "records/s", Better.HIGHER, ratio_target=targets),
         result.records_per_s),
        (Metric(workload, case, "throughput", "MB/s", Better.HIGHER), result.mb_per_s),
        (Metric(workload, case, "avg latency", "ms", Better.LOWER), result.avg_latency_ms),
        (Metric(workload, case, "p99 latency", "ms", Better.LOWER, ratio_target=targets),
         result.p99_latency_ms),
    ):  # fmt: skip
        results.add(metric, broker, value)
    active = spec.records / result.records_per_s
    record_cpu(results, workload, case, broker, cpu_seconds, active, spec.megabytes)


def record_consumer(
    results: Results,
    workload: str,
    case: str,
    broker: str,
    megabytes: float,
    result: ConsumerResult,
    cpu_seconds: float,
    targets: bool,
) -> None:
    """A ConsumerPerformance run's figures; ``targets``: the issue's ratio target on MB/s."""
    results.add(
        Metric(workload, case, "fetch throughput", "MB/s", Better.HIGHER, ratio_target=targets),
        broker,
        result.fetch_mb_per_s,
    )
    results.add(
        Metric(workload, case, "fetch throughput", "records/s", Better.HIGHER),
        broker,
        result.fetch_records_per_s,
    )
    active = result.records / result.fetch_records_per_s
    record_cpu(results, workload, case, broker, cpu_seconds, active, megabytes)


def record_share(
    results: Results,
    case: ShareCase,
    broker: str,
    result: ShareConsumerResult,
    cpu_seconds: float,
    consuming_cpu_seconds: float,
) -> None:
    """A ShareConsumerPerformance run's figures: throughput from the first record delivered
    to any consumer to the last (the issue's target: >= 1.0x on records/s), the time to the
    first record, the tool's own figure, which includes that wait, and how many of the
    consumers got records. CPU per MB is over the tool's run, as for ConsumerPerformance; CPU
    use is over the deliveries alone (measured apart: the join, seconds of it on a cold
    Kafka, would not count in their time)."""
    name = case.label
    for metric, value in (
        (Metric(W11, name, "consume throughput", "records/s", Better.HIGHER, ratio_target=True),
         result.records_per_s),
        (Metric(W11, name, "consume throughput", "MB/s", Better.HIGHER), result.mib_per_s),
        (Metric(W11, name, "first record after subscribe", "ms", Better.LOWER),
         result.first_record_s * 1000),
        (Metric(W11, name, "tool's nMsg.sec, with the join", "records/s", Better.HIGHER),
         result.tool_records_per_s),
        (Metric(W11, name, "consumers that got records", "of " + str(case.consumers),
                Better.HIGHER),
         sum(1 for n in result.records_by_consumer if n)),
    ):  # fmt: skip
        results.add(metric, broker, value)
    results.add(
        Metric(W11, name, "broker CPU per MB", "ms/MB", Better.LOWER),
        broker,
        cpu_seconds * 1000 / case.megabytes,
    )
    results.add(
        Metric(W11, name, "broker CPU use", "cores", Better.LOWER),
        broker,
        consuming_cpu_seconds / result.consume_s,
    )


def share_failure(broker: Measured, error: ToolError, log_mark: int) -> str:
    """A failed workload 11 run, for the report: what went wrong in one line, the end of the
    tool's account, whether the broker still runs, and its warnings and errors (or, without
    any, its last lines) during the run."""
    text = str(error).strip()
    lines = text.splitlines()
    cause = lines[0] if lines else "failed"
    if cause.endswith(" failed"):  # the tool exited with an error: say which
        cause = next((line.strip() for line in lines if "Exception:" in line), cause)
    state = "still running" if broker.is_running else "NOT RUNNING any more"
    logged = broker.log_text()[log_mark:].splitlines()
    problems = [line for line in logged if PROBLEM.search(line)]
    shown = problems[-FAILURE_LOG_LINES:] or logged[-FAILURE_LOG_LINES // 4 :]
    which = "warnings and errors" if problems else "last lines"
    return "\n".join(
        [
            cause,
            f"--- the tool (end of its account) ---\n{text[-FAILURE_TOOL_CHARS:]}",
            f"--- {broker.label} is {state}; its {which} during the run "
            f"({len(shown)} of {len(logged)} lines) ---",
            *(line[:FAILURE_LINE_CHARS] for line in shown),
        ]
    )


def secured_case(listener: Listener, case: ProduceCase) -> str:
    """Workloads 8 and 9's case: the listener, then workload 1's case."""
    return f"{listener.label}, {case.label}"


@dataclass(frozen=True)
class Step:
    """One workload run; ``prerequisite`` must have run on the broker first (it makes the data)."""

    workload: str
    case: str
    run: StepRun
    prerequisite: Step | None = None


class Workloads:
    """The steps of one round, for one plan, with Kafka's tools from ``lib``."""

    def __init__(self, plan: Plan, lib: Path, selected: frozenset[str] = ALL_WORKLOADS) -> None:
        self.plan = plan
        self.lib = lib
        #: The workloads this run records (``--only``); the others do not run.
        self.selected = selected

    def steps(self) -> list[Step]:
        """Warm-up, then workloads 1 to 4, 6, 7 and 10 to 13 as selected, in the order the
        rounds run them (a selected step's prerequisite is always selected with it)."""
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
        if W10 in chosen:
            groups = Step(WARM_UP, "consumer groups", self.warm_up_groups)
            steps.append(groups)
            for protocol in rebalance.PROTOCOLS:
                case = self.group_case(protocol)
                steps.append(Step(W10, case, self.group_step(protocol, case), groups))
        if W11 in chosen:
            preload = Step(WARM_UP, "share groups", self.warm_up_share)
            steps.append(preload)
            steps.append(Step(W11, plan.share_case.label, self.share_step, preload))
        if W12 in chosen:
            for acks in SMALL_REQUEST_ACKS:
                steps.append(Step(W12, self.small_produce_case(acks), self.small_produce(acks)))
            steps.append(Step(W12, self.long_poll_case, self.long_polls))
        if W13 in chosen:
            steps.append(Step(W13, self.fanout_case, self.fanout))
        return steps

    def secured_steps(self, credentials: Credentials) -> list[Step]:
        """Workloads 8 and 9, for the brokers started with the security settings and the key
        material of ``credentials``: the user and her ACLs (with the warm-up), then workloads
        1 and 2's ProducerPerformance and ConsumerPerformance over each secured listener."""
        if not self.selected & SECURED_WORKLOADS:
            return []
        listeners = secured_listeners(credentials)
        steps = [Step(WARM_UP, "secured listeners", self.warm_up_secured(listeners))]
        for listener in listeners:
            for index, case in enumerate(self.plan.secured_cases):
                topic = f"{TOPIC_PREFIX}{listener.name.lower()}-{index}"
                name = secured_case(listener, case)
                produce = Step(W8, name, self.secured_producer_step(listener, case, topic))
                steps.append(produce)
                steps.append(
                    Step(W9, name, self.secured_consumer_step(listener, case, topic), produce)
                )
        return steps

    # -- running the perf tools -----------------------------------------------------

    def run_producer(
        self,
        broker: Measured,
        case: ProduceCase,
        topic: str,
        listener: Listener = PLAINTEXT,
        transaction_duration_ms: int | None = None,
    ) -> tuple[ProducerResult, float]:
        """Create ``topic``, run ProducerPerformance over ``listener``; its result and the
        broker's CPU seconds."""
        create_topics(broker.bootstrap, {topic: case.partitions})
        return with_cpu(
            broker,
            lambda: javatools.producer_performance(
                self.lib,
                listener.bootstrap(broker),
                topic,
                case.records,
                case.record_size,
                TOOL_TIMEOUT_S,
                transaction_duration_ms,
                listener.settings,
            ),
        )

    def run_consumer(
        self,
        broker: Measured,
        topic: str,
        records: int,
        listener: Listener = PLAINTEXT,
        consumer_config: dict[str, str] | None = None,
    ) -> tuple[ConsumerResult, float]:
        """ConsumerPerformance over ``listener``; its result and the broker's CPU seconds."""
        return with_cpu(
            broker,
            lambda: javatools.consumer_performance(
                self.lib,
                listener.bootstrap(broker),
                topic,
                records,
                TOOL_TIMEOUT_S,
                {**listener.settings, **(consumer_config or {})},
            ),
        )

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

    def producer_step(self, case: ProduceCase, topic: str) -> StepRun:
        def run(broker: Measured, results: Results) -> None:
            result, cpu = self.run_producer(broker, case, topic)
            record_producer(results, W1, case.label, broker.label, case, result, cpu, True)

        return run

    def consumer_step(self, case: ProduceCase, topic: str) -> StepRun:
        def run(broker: Measured, results: Results) -> None:
            result, cpu = self.run_consumer(broker, topic, case.records)
            label = broker.label
            record_consumer(results, W2, case.label, label, case.megabytes, result, cpu, True)

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

    def txn_producer_step(self, duration_ms: int) -> StepRun:
        """ProducerPerformance as in workload 1, committing every ``duration_ms``."""
        case, name = self.plan.txn_produce_case, self.txn_case(duration_ms)
        topic = f"txn-{duration_ms}"

        def run(broker: Measured, results: Results) -> None:
            result, cpu = self.run_producer(
                broker, case, topic, transaction_duration_ms=duration_ms
            )
            record_producer(results, W6, name, broker.label, case, result, cpu, True)

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
        result, cpu = self.run_consumer(
            broker, "txn-aborted", spec.committed, consumer_config=READ_COMMITTED
        )
        librdkafka.read_committed_and_verify(broker.bootstrap, "txn-aborted", spec)
        record_consumer(results, W7, name, broker.label, spec.megabytes, result, cpu, True)

    # -- workloads 8 and 9 ---------------------------------------------------------

    def warm_up_secured(self, listeners: tuple[Listener, ...]) -> StepRun:
        """Unrecorded, first on the secured brokers: the user's SCRAM credential and ACLs,
        then (full plan) produce and consume once over each listener, so that no measured
        step pays for compiling the TLS and SASL paths."""

        def run(broker: Measured, _results: Results) -> None:
            authorize_user(broker)
            records = self.plan.secured_warmup_records
            if not records:
                return
            case = ProduceCase(records, 100, 6)
            for listener in listeners:
                topic = f"{TOPIC_PREFIX}warm-up-{listener.name.lower()}"
                self.run_producer(broker, case, topic, listener)
                self.run_consumer(broker, topic, records, listener)

        return run

    def secured_producer_step(self, listener: Listener, case: ProduceCase, topic: str) -> StepRun:
        """Workload 1's ProducerPerformance over ``listener``."""
        name = secured_case(listener, case)

        def run(broker: Measured, results: Results) -> None:
            result, cpu = self.run_producer(broker, case, topic, listener)
            record_producer(results, W8, name, broker.label, case, result, cpu, False)

        return run

    def secured_consumer_step(self, listener: Listener, case: ProduceCase, topic: str) -> StepRun:
        """Workload 2's ConsumerPerformance over ``listener``, reading the producer step's
        topic back."""
        name = secured_case(listener, case)

        def run(broker: Measured, results: Results) -> None:
            result, cpu = self.run_consumer(broker, topic, case.records, listener)
            record_consumer(results, W9, name, broker.label, case.megabytes, result, cpu, False)

        return run

    # -- workload 10 ----------------------------------------------------------------

    def group_case(self, protocol: str) -> str:
        plan = self.plan
        return (
            f"{plan.group_members} members, {plan.group_partitions} partitions, "
            f"{rebalance.PROTOCOL_LABELS[protocol]}"
        )

    def measure_group(self, broker: Measured, protocol: str) -> rebalance.GroupTimes:
        plan = self.plan
        return rebalance.measure(
            broker.bootstrap,
            GROUP_TOPIC,
            protocol,
            plan.group_members,
            plan.group_partitions,
            GROUP_HEARTBEAT_MS,
            broker.cpu_seconds,
        )

    def warm_up_groups(self, broker: Measured, _results: Results) -> None:
        """Unrecorded, before workload 10: its topic, then one group of each protocol, so that
        the first measured group pays neither for creating ``__consumer_offsets`` (when no
        earlier workload has) nor, on Kafka, for compiling the coordinator's paths."""
        create_topics(broker.bootstrap, {GROUP_TOPIC: self.plan.group_partitions})
        for protocol in rebalance.PROTOCOLS:
            self.measure_group(broker, protocol)

    def group_step(self, protocol: str, case: str) -> StepRun:
        """``groups_per_round`` new groups with ``protocol``, one after the other; each group
        is a sample of every figure."""

        def run(broker: Measured, results: Results) -> None:
            for _ in range(self.plan.groups_per_round):
                times = self.measure_group(broker, protocol)
                phases = (("after all join", times.join), ("after one leaves", times.leave))
                for phase, figures in phases:
                    results.add(
                        Metric(W10, case, f"stable {phase}", "ms", Better.LOWER),
                        broker.label,
                        figures.seconds * 1000,
                    )
                for phase, figures in phases:
                    results.add(
                        Metric(W10, case, f"broker CPU until stable {phase}", "ms", Better.LOWER),
                        broker.label,
                        figures.broker_cpu_s * 1000,
                    )

        return run

    # -- workload 11 ----------------------------------------------------------------

    def share_consume(self, broker: Measured) -> tuple[ShareConsumerResult, float, float]:
        """A new share group, starting at the earliest offset, reads workload 11's topic with
        ShareConsumerPerformance. Returns its result, the broker's CPU seconds over the
        tool's run (its JVM's start included; the group's settings are made before), and
        those from the first delivery to the last."""
        case = self.plan.share_case
        group = f"{SHARE_GROUP_PREFIX}{uuid.uuid4().hex[:12]}"
        javatools.set_group_config(self.lib, broker.bootstrap, group, SHARE_GROUP_SETTINGS)
        with procstat.CpuTrace(broker.pid) as trace:
            result, cpu = with_cpu(
                broker,
                lambda: javatools.share_consumer_performance(
                    self.lib,
                    broker.bootstrap,
                    SHARE_TOPIC,
                    case.records,
                    case.consumers,
                    group,
                    TOOL_TIMEOUT_S,
                ),
            )
        return result, cpu, trace.between(result.first_delivery_at, result.last_delivery_at)

    def warm_up_share(self, broker: Measured, _results: Results) -> None:
        """Unrecorded, before workload 11: its topic of one partition, filled by
        ProducerPerformance as in workload 1; then (full plan) one share group reads it, so
        that the measured runs pay for neither creating ``__share_group_state`` nor, on
        Kafka, compiling the share paths. A failure of that run is left to the measured step
        to record.

        The producer's batches matter: a broker hands a share consumer whole batches, and
        keeps at most ``share.partition.max.record.locks`` (2,000) records in flight per
        partition. The Java producer's 16 KiB batches (about 150 records of 100 B) leave
        room for a dozen in flight, shared by the four consumers; librdkafka's (up to 10,000
        records) would leave one, for one consumer at a time."""
        case = self.plan.share_case
        spec = ProduceCase(case.records, case.record_size, 1)
        self.run_producer(broker, spec, SHARE_TOPIC)
        if self.plan.share_warmup:
            try:
                self.share_consume(broker)
            except ToolError as exc:
                first = str(exc).strip().splitlines()[0]
                print(f"share-group warm-up failed on {broker.label}: {first}", file=sys.stderr)

    def share_step(self, broker: Measured, results: Results) -> None:
        """``share_runs_per_round`` new share groups read the topic, one after the other, each
        a sample of every figure. A run that fails (the tool exits with an error, or reads
        other than the topic's records) is recorded as a failure, with the broker's log
        meanwhile, and ends the step."""
        case = self.plan.share_case
        for _ in range(self.plan.share_runs_per_round):
            log_mark = len(broker.log_text())
            try:
                result, cpu, consuming_cpu = self.share_consume(broker)
            except ToolError as exc:
                results.fail(W11, case.label, broker.label, share_failure(broker, exc, log_mark))
                return
            record_share(results, case, broker.label, result, cpu, consuming_cpu)

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
            f"{plan.scale_connections:,} idle connections, then "
            f"{plan.scale_partitions:,} partitions in {plan.scale_topics} topics"
        )

    def scale(self, broker: Measured, results: Results) -> None:
        """Idle connections, then many partitions: RSS per connection and per partition,
        the time until Metadata lists their leaders and until they are served (the one with
        a target: Kafka lists leaders before its logs exist, kpybroker after), Metadata
        latency, one hot partition.

        The connections are closed before the partitions are created: each alone fits a
        limit of 20,000 open files, both at once do not for Kafka, which keeps a descriptor
        per segment (it resets connections beyond the limit). The broker is then restarted,
        so that the partitions are counted in a new process: the memory the closed
        connections left in Python's allocator would otherwise hold many of them uncounted
        (kpybroker's RSS per partition read 2.85 kB after 10,000 connections, 6.1 kB in a
        new process)."""
        plan, label = self.plan, broker.label
        before = broker.rss_bytes()
        with scale.idle_connections(broker.host, broker.port, plan.scale_connections):
            time.sleep(plan.idle_settle_s)
            record_memory(results, f"{plan.scale_connections:,} idle connections",
                          "idle connection", label, broker.rss_bytes() - before,
                          plan.scale_connections)  # fmt: skip
        broker.stop()
        broker.start()
        case = f"{plan.scale_partitions:,} partitions in {plan.scale_topics} topics"
        topics = {f"scale-{i}": plan.scale_partitions_per_topic for i in range(plan.scale_topics)}
        topics["hot"] = 1
        started, before = time.monotonic(), broker.rss_bytes()
        create_topics(broker.bootstrap, topics, timeout=1800)
        results.add(
            Metric(W5, case, "creating the partitions, until each has a leader", "s", Better.LOWER),
            label,
            time.monotonic() - started,
        )
        partition_creation.wait_all_served(broker.bootstrap, topics, 1)
        results.add(
            Metric(W5, case, SERVED, "s", Better.LOWER, ratio_target=True),
            label,
            time.monotonic() - started,
        )
        time.sleep(plan.idle_settle_s)
        record_memory(results, case, "partition", label, broker.rss_bytes() - before,
                      plan.scale_partitions + 1)  # fmt: skip
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

    # -- workload 12 ----------------------------------------------------------------

    def small_produce_case(self, acks: str) -> str:
        return (
            f"{self.plan.small_request_clients} producers, one 100 B record per request, "
            f"linger.ms=0, acks={acks}"
        )

    def small_produce(self, acks: str) -> StepRun:
        def run(broker: Measured, results: Results) -> None:
            plan, case, label = self.plan, self.small_produce_case(acks), broker.label
            topic = f"small-{acks}"
            create_topics(broker.bootstrap, {topic: plan.small_request_clients})
            (requests, seconds, latencies), cpu = with_cpu(
                broker,
                lambda: small_requests.produce_one_at_a_time(
                    broker.bootstrap,
                    topic,
                    plan.small_request_clients,
                    plan.small_request_clients,
                    acks,
                    plan.small_request_seconds,
                ),
            )
            results.add(
                Metric(W12, case, "requests", "requests/s", Better.HIGHER, True),
                label,
                requests / seconds,
            )
            record_percentiles(results, W12, case, "request latency", label, latencies, p99=True)
            results.add(
                Metric(W12, case, "broker CPU per request", "µs", Better.LOWER),
                label,
                cpu * 1e6 / requests,
            )

        return run

    @property
    def long_poll_case(self) -> str:
        plan = self.plan
        return (
            f"{plan.small_request_clients} consumers long-polling their own partition, "
            f"a record to each every {plan.small_request_tick_s * 1000:.0f} ms"
        )

    def long_polls(self, broker: Measured, results: Results) -> None:
        plan, case, label = self.plan, self.long_poll_case, broker.label
        topic = "long-polls"
        create_topics(broker.bootstrap, {topic: plan.small_request_clients})
        latencies, cpu = with_cpu(
            broker,
            lambda: small_requests.long_poll_deliveries(
                broker.bootstrap,
                topic,
                plan.small_request_clients,
                plan.small_request_seconds,
                plan.small_request_tick_s,
            ),
        )
        record_percentiles(results, W12, case, "delivery latency", label, latencies, p99=True)
        results.add(
            Metric(W12, case, "broker CPU use", "cores", Better.LOWER),
            label,
            cpu / (plan.small_request_seconds + 1.0),
        )

    # -- workload 13 ----------------------------------------------------------------

    @property
    def fanout_case(self) -> str:
        plan = self.plan
        return (
            f"{plan.fanout_records:,} x 1 KiB, {plan.fanout_partitions} partitions, "
            f"read by {plan.fanout_groups} groups at once"
        )

    def fanout(self, broker: Measured, results: Results) -> None:
        plan, case, label = self.plan, self.fanout_case, broker.label
        topic, size = "fanout", 1024
        create_topics(broker.bootstrap, {topic: plan.fanout_partitions})
        librdkafka.produce(broker.bootstrap, topic, plan.fanout_records, size, linger_ms=5)
        seconds, cpu = with_cpu(
            broker,
            lambda: fanout.read_in_groups(
                broker.bootstrap, topic, plan.fanout_records, plan.fanout_groups
            ),
        )
        megabytes = plan.fanout_groups * plan.fanout_records * size / MB
        results.add(
            Metric(W13, case, "aggregate fetch throughput", "MB/s", Better.HIGHER, True),
            label,
            megabytes / seconds,
        )
        record_cpu(results, W13, case, label, cpu, seconds, megabytes)


def record_memory(
    results: Results, case: str, unit: str, broker: str, grown_bytes: int, count: int
) -> None:
    """RSS growth per ``unit`` (kB), with issue 17's target of half Kafka's."""
    results.add(
        Metric(W5, case, f"RSS per {unit}", "kB", Better.LOWER, ratio_target=True,
               target_ratio=MEMORY_TARGET_RATIO),
        broker,
        max(grown_bytes, 0) / 1000 / count,
    )  # fmt: skip


def record_percentiles(
    results: Results,
    workload: str,
    case: str,
    what: str,
    broker: str,
    latencies: small_requests.Latencies,
    *,
    p99: bool,
) -> None:
    """p50, p99 (with the issue's ratio target when ``p99``) and p99.9, in ms."""
    for name, fraction in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)):
        results.add(
            Metric(workload, case, f"{what} {name}", "ms", Better.LOWER, p99 and name == "p99"),
            broker,
            latencies.percentile(fraction) * 1000,
        )
