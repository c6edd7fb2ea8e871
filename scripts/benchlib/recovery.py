"""Workload 16: recovery, from a kill -9 with unflushed data to every partition served.

Each broker of the workload's kind (its own, like workload 14's) gets one topic of
``RecoveryPlan.partitions`` partitions, filled by ProducerPerformance (acks=all) with
``records`` records of ``record_size`` bytes. Neither broker fsyncs them: both keep
Kafka's defaults (``log.flush.interval.messages`` and ``log.flush.interval.ms`` unset),
and every partition stays in its first segment, so its recovery point stays at 0. The
broker is then killed with SIGKILL, and started again: it finds no clean-shutdown
marker and must check every batch after each partition's recovery point.

The restart is timed from spawning the process to the first ApiVersions answer, and to
every partition answering ListOffsets (latest) with the end offset it had before the
kill: the point at which every acknowledged record is served again, which a
ListOffsets client asks every 50 ms. A lower end offset anywhere fails the workload
(an acknowledged record lost).

Run alone: ``scripts/bench --only recovery`` (with ``--rounds N``).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from benchlib import javatools
from benchlib.brokers import BrokerFactory, Measured, create_topics
from benchlib.plan import RecoveryPlan, format_size
from benchlib.results import Better, Metric, Results
from kpybroker.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from tests.helpers.groups_wire import Wire

W16 = "16 recovery"
TOPIC = "recovery"
#: Seconds a restart may take to serve every partition again.
RECOVERY_TIMEOUT_S = 1800.0
#: Seconds the filling ProducerPerformance run may take.
FILL_TIMEOUT_S = 1800.0
#: The ListOffsets version of Kafka 4's clients.
LIST_OFFSETS_VERSION = 9
#: Seconds between ListOffsets polls while the restarted broker recovers.
POLL_INTERVAL_S = 0.05


EndOffsets = dict[int, int]


def case_name(plan: RecoveryPlan) -> str:
    size = plan.records * plan.record_size
    return f"{plan.partitions:,} partitions, {size / 1e9:.3g} GB unflushed"


def metrics(plan: RecoveryPlan) -> tuple[Metric, Metric, Metric]:
    """Time to every partition served (the issue's ratio target), time to the first
    ApiVersions answer, and the broker's CPU time until served (no targets)."""
    case = case_name(plan)
    return (
        Metric(W16, case, "kill -9 to every partition served", "s", Better.LOWER,
               ratio_target=True),
        Metric(W16, case, "exec to first ApiVersions answer", "s", Better.LOWER),
        Metric(W16, case, "broker CPU until served", "s", Better.LOWER),
    )  # fmt: skip


def end_offsets(wire: Wire, partitions: int) -> EndOffsets | None:
    """Every partition's end offset, or None while any of them answers an error."""
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=TOPIC,
                partitions=[
                    ListOffsetsPartition(partition_index=p, timestamp=-1) for p in range(partitions)
                ],
            )
        ],
    )
    answered = wire.call(request, LIST_OFFSETS_VERSION).topics[0].partitions
    if any(p.error_code for p in answered):
        return None
    return {p.partition_index: p.offset for p in answered}


def wait_served(broker: Measured, partitions: int) -> EndOffsets:
    """Every partition's end offset, once ``broker`` answers ListOffsets for all of them."""
    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    with Wire(broker.bootstrap, client_id="recovery-bench") as wire:
        while (offsets := end_offsets(wire, partitions)) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{broker.label}: partitions not served after a restart")
            time.sleep(POLL_INTERVAL_S)
    return offsets


def fill(broker: Measured, plan: RecoveryPlan, lib: Path) -> EndOffsets:
    """Create the topic, write the records, and return the end offsets acknowledged.

    A few records may fail (Kafka 4.4 once stalled for 100 s under the 10 GB and dropped 45
    of 10,000,000 on its delivery timeout): what is measured is the recovery of the records
    acknowledged, which the end offsets read afterwards say."""
    create_topics(broker.bootstrap, {TOPIC: plan.partitions}, timeout=600)
    javatools.producer_performance(
        lib,
        broker.bootstrap,
        TOPIC,
        plan.records,
        plan.record_size,
        timeout=FILL_TIMEOUT_S,
        all_acknowledged=False,
    )
    return wait_served(broker, plan.partitions)


def crash_and_recover(broker: Measured, acknowledged: EndOffsets) -> tuple[float, float, float]:
    """SIGKILL ``broker``, start it again; seconds to every partition served, to the first
    ApiVersions answer, and the CPU seconds used by then."""
    broker.kill()
    broker.start_timeout = RECOVERY_TIMEOUT_S
    broker.start()
    served = wait_served(broker, len(acknowledged))
    served_after = time.monotonic() - broker.spawned_at
    cpu = broker.cpu_seconds()
    lost = {p: (end, served[p]) for p, end in acknowledged.items() if served[p] < end}
    if lost:
        raise RuntimeError(
            f"{broker.label} lost acknowledged records in a restart: "
            f"{len(lost)} partitions end lower, e.g. {next(iter(lost.items()))}"
        )
    return served_after, broker.startup_seconds(), cpu


def run(
    plan: RecoveryPlan, make: BrokerFactory, lib: Path, workdir: Path, results: Results
) -> Measured:
    """One crash and restart of a broker ``make`` builds (returned, stopped); its data is
    deleted afterwards."""
    broker = make(workdir)
    try:
        broker.start()
        acknowledged = fill(broker, plan, lib)
        figures = crash_and_recover(broker, acknowledged)
    finally:
        broker.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    for metric, value in zip(metrics(plan), figures, strict=True):
        results.add(metric, broker.label, value)
    return broker


def method_line(plan: RecoveryPlan) -> str:
    """Workload 16's part of the doc's method."""
    return (
        "- Workload 16 (recovery): after the others, each broker in turn (the first "
        "alternating from round to round), started afresh with a topic of "
        f"{plan.partitions:,} partitions, written by ProducerPerformance (acks=all, "
        f"{plan.records:,} records of {format_size(plan.record_size)}); neither broker "
        "fsyncs them (Kafka's defaults) and each partition stays in its first segment. The "
        "broker is then killed with SIGKILL and started again; the time runs from spawning "
        "it to every partition answering ListOffsets (asked every 50 ms) with the end "
        "offset acknowledged before the kill (a lower one fails the run). The page cache "
        "is not dropped: this is a process crash, not a power cut."
    )
