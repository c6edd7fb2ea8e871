"""Workload 15: three brokers on this machine, replication factor 3, ``min.insync.replicas`` 2.

Each cluster (``clusters``: kpybroker on ZooKeeper, Kafka in KRaft mode) is started afresh,
runs every step, and is thrown away; then the other, the first alternating from round to
round. The steps:

* ProducerPerformance with acks=all (as workload 1) on topics of 6 partitions, whose leaders
  are spread over the three brokers;
* EndToEndLatency with acks=all (as workload 3) on a topic of one partition, at each size;
* a follower's catch-up: on a topic of two partitions, led by the other two brokers, the
  follower is stopped (SIGTERM; a controlled shutdown takes it out of the ISR at once),
  and once it is out of both ISRs, confluent-kafka writes ``catch_up`` with acks=all (the
  two others are enough for ``min.insync.replicas``; no JVM to start for it); then the
  follower is started again, and the time runs until a Metadata answer from a leader lists
  it in the ISR of both partitions, polled every 100 ms. That time includes the follower's
  start-up, which is recorded apart (spawn to its first ApiVersions answer, as workload 5's);
* partition creation: many topics of replication factor 3 (placed by the controller), in
  as few CreateTopics requests as Kafka's bounds allow, timed until every partition is
  served: its leader answers ListOffsets and the first broker lists all three replicas in
  its ISR (``partition_creation``; the answers themselves come at different points).

CPU figures are the three brokers' CPU time together, with ZooKeeper's for kpybroker (it
holds the metadata that Kafka's controllers hold inside its nodes).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from benchlib import javatools, librdkafka, partition_creation
from benchlib.brokers import Measured
from benchlib.clusters import BenchCluster, isr_by_partition
from benchlib.plan import ProduceCase, ReplicatedPlan, format_size
from benchlib.results import Better, Metric, Results
from benchlib.workloads import SERVED, TOOL_TIMEOUT_S, W15, record_producer

#: An unstarted cluster of the workload's kind in the given directory.
ClusterFactory = Callable[[Path], BenchCluster]

#: The topics' setting; the brokers' default is the same (``REPLICATED_SETTINGS``).
TOPIC_CONFIG = {"min.insync.replicas": "2"}

#: Seconds between ISR polls: the resolution of the catch-up figure.
ISR_POLL_S = 0.1
#: Seconds an ISR may take to change: a new topic's to fill, a stopped follower's to drop it.
ISR_TIMEOUT_S = 120.0
#: Seconds a restarted follower may take to be back in every ISR (1 GB to copy).
CATCH_UP_TIMEOUT_S = TOOL_TIMEOUT_S

REPLICATION = "RF 3, min.insync.replicas 2, acks=all"


def produce_case(case: ProduceCase) -> str:
    return f"{case.label}, {REPLICATION}"


def e2e_case(records: int, size: int) -> str:
    return f"{records:,} x {format_size(size)}, 1 partition, {REPLICATION}"


def catch_up_case(case: ProduceCase) -> str:
    mb = case.megabytes
    size = f"{mb / 1000:g} GB" if mb >= 1000 else f"{mb:g} MB"
    return (
        f"follower catch-up: {size} ({case.records:,} x {format_size(case.record_size)}) "
        f"produced while it is stopped, {case.partitions} partitions"
    )


def create_topic(cluster: BenchCluster, topic: str, assignment: list[list[int]]) -> None:
    """Create ``topic`` with these replicas per partition (the first the preferred leader),
    and wait until every partition has all of them in its ISR."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    new = NewTopic(topic, len(assignment), replica_assignment=assignment, config=TOPIC_CONFIG)
    for future in admin.create_topics([new], operation_timeout=60).values():
        future.result(ISR_TIMEOUT_S)
    wanted = {i: frozenset(replicas) for i, replicas in enumerate(assignment)}
    source = cluster.nodes[assignment[0][0]].bootstrap
    wait_for_isr(source, topic, lambda isr: isr == wanted, f"{topic}'s replicas in sync")


def spread(partitions: int, ids: list[int]) -> list[list[int]]:
    """Replicas on every broker, the preferred leaders in turn: as Kafka assigns them."""
    return [ids[i % len(ids) :] + ids[: i % len(ids)] for i in range(partitions)]


def wait_for_isr(
    bootstrap: str,
    topic: str,
    condition: Callable[[dict[int, frozenset[int]]], bool],
    what: str,
    timeout: float = ISR_TIMEOUT_S,
) -> float:
    """Poll the ISRs every ``ISR_POLL_S`` until ``condition`` holds; the monotonic time it
    first did."""
    deadline = time.monotonic() + timeout
    while True:
        now = time.monotonic()
        try:
            if condition(isr_by_partition(bootstrap, topic)):
                return now
        except (OSError, ValueError):
            pass  # a broker between states; the next poll asks again
        if now > deadline:
            raise TimeoutError(f"no {what} within {timeout:g} s")
        time.sleep(ISR_POLL_S)


def run(plan: ReplicatedPlan, make: ClusterFactory, lib: Path, workdir: Path,
        results: Results) -> list[Measured]:  # fmt: skip
    """Start a cluster, run every step against it, throw it away; its nodes, whose command
    lines the doc shows."""
    cluster = make(workdir)
    try:
        cluster.start()
        if plan.warmup_records:
            warm_up(cluster, plan.warmup_records, lib)
        for index, case in enumerate(plan.produce_cases):
            produce(cluster, case, f"replicated-{index}", lib, results)
        for size in plan.e2e_record_sizes:
            end_to_end(cluster, plan.e2e_records, size, lib, results)
        catch_up(cluster, plan.catch_up, results)
        create_partitions(cluster, plan, results)
    finally:
        cluster.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return list(cluster.nodes.values())


def warm_up(cluster: BenchCluster, records: int, lib: Path) -> None:
    """Unrecorded, as the other workloads' warm-up: the JVMs compile their hot paths, and
    the followers' fetches settle, before any measured step."""
    topic = "replicated-warm-up"
    create_topic(cluster, topic, spread(6, list(cluster.nodes)))
    javatools.producer_performance(lib, cluster.bootstrap, topic, records, 100, TOOL_TIMEOUT_S)


def produce(
    cluster: BenchCluster, case: ProduceCase, topic: str, lib: Path, results: Results
) -> None:
    create_topic(cluster, topic, spread(case.partitions, list(cluster.nodes)))
    before = cluster.cpu_seconds()
    result = javatools.producer_performance(
        lib, cluster.bootstrap, topic, case.records, case.record_size, TOOL_TIMEOUT_S
    )
    cpu = cluster.cpu_seconds() - before
    record_producer(results, W15, produce_case(case), cluster.label, case, result, cpu, True)


def end_to_end(cluster: BenchCluster, records: int, size: int, lib: Path,
               results: Results) -> None:  # fmt: skip
    topic = f"replicated-e2e-{size}"
    create_topic(cluster, topic, spread(1, list(cluster.nodes)))
    result = javatools.end_to_end_latency(
        lib, cluster.bootstrap, topic, records, size, TOOL_TIMEOUT_S
    )
    case = e2e_case(records, size)
    for name, value, target in (
        ("end-to-end p50 latency", result.p50_ms, False),
        ("end-to-end p99 latency", result.p99_ms, True),
    ):
        metric = Metric(W15, case, name, "ms", Better.LOWER, ratio_target=target)
        results.add(metric, cluster.label, value)


def catch_up(cluster: BenchCluster, case: ProduceCase, results: Results) -> None:
    """Stop a follower, produce ``case`` without it, start it; record how long until it is
    back in the ISR of every partition, and its start-up within that."""
    *leaders, follower_id = cluster.nodes
    topic = "replicated-catch-up"
    assignment = [[leaders[i % 2], leaders[1 - i % 2], follower_id] for i in range(case.partitions)]
    create_topic(cluster, topic, assignment)
    source, follower = cluster.nodes[leaders[0]].bootstrap, cluster.nodes[follower_id]
    follower.stop()
    wait_for_isr(
        source, topic, lambda isr: all(follower_id not in s for s in isr.values()),
        f"ISR without the stopped follower {follower_id}",
    )  # fmt: skip
    librdkafka.produce(cluster.bootstrap, topic, case.records, case.record_size, linger_ms=5)
    failure: list[BaseException] = []

    def start() -> None:
        try:
            follower.start()
        except BaseException as exc:  # reported below, in this thread
            failure.append(exc)

    started = time.monotonic()
    starting = threading.Thread(target=start, daemon=True)
    starting.start()
    back = wait_for_isr(
        source, topic, lambda isr: all(follower_id in s for s in isr.values()),
        f"follower {follower_id} back in every ISR", CATCH_UP_TIMEOUT_S,
    )  # fmt: skip
    starting.join(follower.start_timeout)
    if failure:
        raise failure[0]
    name = catch_up_case(case)
    for metric, value in (
        (Metric(W15, name, "start to back in every ISR", "s", Better.LOWER), back - started),
        (Metric(W15, name, "of which start-up to first answer", "s", Better.LOWER),
         follower.startup_seconds()),
    ):  # fmt: skip
        results.add(metric, cluster.label, value)


def create_partitions(cluster: BenchCluster, plan: ReplicatedPlan, results: Results) -> None:
    """Create ``plan``'s topics of replication factor 3; record how long until every
    partition is served, and the brokers' CPU time meanwhile."""
    count, each = plan.creation_topics, plan.creation_partitions_per_topic
    sizes = {f"replicated-creation-{i}": each for i in range(count)}
    probed = next(iter(cluster.nodes.values())).bootstrap
    before = cluster.cpu_seconds()
    seconds = partition_creation.create_until_served(
        cluster.bootstrap, probed, sizes, len(cluster.nodes), TOPIC_CONFIG
    )
    cpu = cluster.cpu_seconds() - before
    case = f"{count * each:,} partitions in {count} topics, RF 3"
    for metric, value in (
        (Metric(W15, case, SERVED, "s", Better.LOWER, ratio_target=True), seconds),
        (Metric(W15, case, "brokers' CPU time, creating them", "s", Better.LOWER), cpu),
    ):
        results.add(metric, cluster.label, value)
