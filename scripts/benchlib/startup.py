"""Workload 14: start-up, from exec to the first answered ApiVersions, cold and warm.

Test fixtures start kpybroker hundreds of times, so its start-up is a figure of its own:
each broker is started again and again, with an empty data directory and with
``StartupPlan.partitions`` partitions on disk (created, then the broker stopped cleanly),
and each start is timed by ``Measured``'s probe (spawn to the first ApiVersions answer).

*Cold* is the first start after installation: kpybroker with an empty bytecode cache, so
it compiles every module it imports, as each start does under ``PYTHONDONTWRITEBYTECODE``;
Kafka's JVM has no such cache of Kafka's own (the JDK's class-data archive is always
there), so its cold start is simply its first start in the round. Neither drops the OS
page cache: that needs root, and would slow everything else on the machine. *Warm* starts
follow, each with the bytecode cached and the files in the page cache.

Run alone: ``scripts/bench --only startup`` (with ``--rounds N``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchlib.brokers import BrokerFactory, CachedBytecode, Measured, create_topics
from benchlib.plan import StartupPlan
from benchlib.results import Better, Metric, Results

W14 = "14 start-up"

#: Partitions per topic of the populated case (its topics are named ``startup-<n>``).
PARTITIONS_PER_TOPIC = 100

#: kpybroker's goal for a warm start with an empty data directory (issue 17).
EMPTY_WARM_LIMIT_S = 0.150


def case_name(partitions: int) -> str:
    return "empty data directory" if partitions == 0 else f"{partitions:,} partitions"


def metrics(partitions: int, temperature: str) -> tuple[Metric, Metric]:
    """The figures of one case: the time to the first answer, whose target is the ratio to
    Kafka (for a warm start with an empty directory, ``EMPTY_WARM_LIMIT_S``), and the
    broker's CPU time by then, which a busy machine disturbs less (no target)."""
    limit = EMPTY_WARM_LIMIT_S if (partitions, temperature) == (0, "warm") else None
    case = f"{case_name(partitions)}, {temperature}"
    return (
        Metric(W14, case, "exec to first ApiVersions answer", "s", Better.LOWER,
               ratio_target=limit is None, limit=limit),
        Metric(W14, case, "broker CPU until answered", "s", Better.LOWER),
    )  # fmt: skip


def timed_start(broker: Measured, cold: bool) -> tuple[float, float]:
    """Start ``broker``, stop it cleanly once it answered; return its start-up seconds, and
    the CPU seconds it used meanwhile (read just after the answer).

    A cold start of kpybroker runs with a bytecode cache of its own, empty (Kafka has none).
    """
    if not (cold and isinstance(broker, CachedBytecode)):
        return _start_and_stop(broker)
    cached = broker.pycache
    with tempfile.TemporaryDirectory(prefix="kpybroker-cold-pycache-") as empty:
        broker.pycache = Path(empty)
        try:
            return _start_and_stop(broker)
        finally:
            broker.pycache = cached


def _start_and_stop(broker: Measured) -> tuple[float, float]:
    broker.start()
    try:
        return broker.startup_seconds(), broker.cpu_seconds()
    finally:
        broker.stop()


def populate(broker: Measured, partitions: int) -> None:
    """Start ``broker``, create ``partitions`` partitions, stop it cleanly."""
    topics, rest = divmod(partitions, PARTITIONS_PER_TOPIC)
    sizes = {f"startup-{i}": PARTITIONS_PER_TOPIC for i in range(topics)}
    if rest:
        sizes[f"startup-{topics}"] = rest
    broker.start()
    try:
        create_topics(broker.bootstrap, sizes, timeout=600)
    finally:
        broker.stop()


def run(plan: StartupPlan, make: BrokerFactory, workdir: Path, results: Results) -> None:
    """Every case against the brokers ``make`` builds: a cold start, then the warm ones.

    With an empty data directory every start is a new broker in a new directory (a broker
    writes its metadata at its first start); the populated case restarts one broker.
    """
    for index in range(plan.warm_starts + 1):
        fresh = make(workdir / f"empty-{index}")
        figures = timed_start(fresh, cold=index == 0)
        record(results, metrics(0, temperature(index)), fresh.label, figures)
    populated = make(workdir / "populated")
    populate(populated, plan.partitions)
    for index in range(plan.warm_starts + 1):
        figures = timed_start(populated, cold=index == 0)
        record(results, metrics(plan.partitions, temperature(index)), populated.label, figures)


def record(
    results: Results, metrics: tuple[Metric, Metric], broker: str, figures: tuple[float, float]
) -> None:
    """One start's figures, as samples of the case's metrics."""
    for metric, value in zip(metrics, figures, strict=True):
        results.add(metric, broker, value)


def temperature(start: int) -> str:
    """The first start of a case is the cold one."""
    return "cold" if start == 0 else "warm"
