"""``scripts/bench``: run the rounds, print the ratios, write docs/performance.md.

scripts/bench                  # the full plan: every workload, 3 rounds (~1 hour)
scripts/bench --quick          # every step with small counts (~1-2 min); for CI's smoke
scripts/bench --rounds 5 --output /tmp/perf
scripts/bench --only transactions   # just workloads 6 and 7 (output: a temporary directory)
scripts/bench --only security       # just workloads 8 and 9, over TLS and SASL_SSL
scripts/bench --only groups         # just workload 10: a 50-member group, both protocols
scripts/bench --only share          # just workload 11: 4 share consumers on one partition
scripts/bench --only startup        # workloads 5 (startup, idle RSS) and 12 (start-up, cold
                                    # and warm, empty and with 1,000 partitions)
scripts/bench --only replicated     # just workload 15: three brokers of each, RF 3
scripts/bench --only recovery       # just workload 16: kill -9 with 10 GB unflushed, restart
scripts/bench --only compaction     # just workload 17: the cleaner on 2 GB, 10% unique keys
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import platform
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import confluent_kafka
import uvloop

import kpybroker
from benchlib import compaction, profiling, recovery, replicated, report, startup
from benchlib.brokers import (
    BenchKafka,
    BenchKpyBroker,
    BrokerFactory,
    Measured,
    SecureBenchKafka,
    SecureBenchKpyBroker,
    compile_kpybroker,
    kafka_version,
)
from benchlib.clusters import KafkaCluster, KpyCluster
from benchlib.compaction import W17
from benchlib.plan import FULL, QUICK, Plan
from benchlib.procstat import describe_machine
from benchlib.recovery import W16
from benchlib.results import KAFKA, KPYBROKER, Results
from benchlib.startup import W14
from benchlib.workloads import (
    ALL_WORKLOADS,
    OWN_BROKERS,
    SECURED_WORKLOADS,
    SELECTIONS,
    STARTUP,
    W5,
    W15,
    WARM_UP,
    Step,
    Workloads,
)
from tests.helpers.java import fetch_kafka_lib, java_executable
from tests.helpers.process import REPO_ROOT
from tests.helpers.secure_broker import Credentials

DEFAULT_OUTPUT = REPO_ROOT / "docs"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/bench",
        description="kpybroker and Apache Kafka side by side: the same workloads and clients, "
        "alternating, medians over rounds; prints kpybroker/Kafka ratios and writes "
        "performance.md with its chart.",
    )
    parser.add_argument("--quick", action="store_true", help="small counts, one round")
    parser.add_argument("--rounds", type=positive, help="rounds (default: 3, or 1 with --quick)")
    parser.add_argument(
        "--output",
        type=Path,
        help="directory for performance.md and performance.png (default: docs/, or a "
        "temporary directory with --quick or --only, so such a run never replaces the "
        "real figures)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=sorted(SELECTIONS),
        metavar="WORKLOAD",
        help="run only these workloads (both brokers still start, and warm up): "
        + ", ".join(f"{key} ({' and '.join(names)})" for key, names in SELECTIONS.items()),
    )
    parser.add_argument("--no-chart", action="store_true", help="skip the PNG (no matplotlib)")
    parser.add_argument(
        "--no-profile", action="store_true", help="do not profile the targets kpybroker misses"
    )
    return parser.parse_args(argv)


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def in_turn(brokers: list[Measured], step_index: int) -> list[Measured]:
    """The brokers in the order this step visits them: flipped every other step (ABBA)."""
    return brokers if step_index % 2 == 0 else brokers[::-1]


def run_round(
    number: int, plan: Plan, workloads: Workloads, lib: Path, workdir: Path, results: Results
) -> list[Measured]:
    """The plaintext workloads, then the secured ones, then start-up, then the replicated
    clusters, then recovery and compaction: each part starts both brokers afresh (a part
    none of whose workloads is selected does not run).

    Returns the brokers (stopped), whose command lines the doc shows.
    """
    where = f"round {number + 1}/{plan.rounds}"
    brokers: list[Measured] = []
    if workloads.selected - OWN_BROKERS:
        brokers += run_plaintext(where, number, workloads, lib, workdir / "plaintext", results)
    if workloads.selected & SECURED_WORKLOADS:
        brokers += run_secured(where, number, workloads, lib, workdir / "secured", results)
    if W14 in workloads.selected:
        run_startup(where, number, plan, lib, workdir / "startup", results)
    if W15 in workloads.selected:
        brokers += run_replicated(where, number, plan, lib, workdir / "replicated", results)
    if W16 in workloads.selected:
        brokers += run_each_broker(
            where,
            number,
            lib,
            W16,
            lambda make, label: recovery.run(
                plan.recovery, make, lib, workdir / "recovery" / label, results
            ),
        )
    if W17 in workloads.selected:
        brokers += run_each_broker(
            where,
            number,
            lib,
            W17,
            lambda make, label: compaction.run(
                plan.compaction, make, workdir / "compaction" / label, results
            ),
        )
    return brokers


def run_steps(where: str, brokers: list[Measured], steps: list[Step], results: Results) -> None:
    """Every step against each broker, the order flipping from step to step."""
    for index, step in enumerate(steps):
        for broker in in_turn(brokers, index):
            progress(f"{where} {broker.label}: {step.workload} {step.case}")
            step.run(broker, results)


def run_plaintext(
    where: str, number: int, workloads: Workloads, lib: Path, workdir: Path, results: Results
) -> list[Measured]:
    """Start both brokers afresh, run every step against each in turn, then scale, then stop."""
    brokers: list[Measured] = [BenchKafka(workdir / "kafka", lib), BenchKpyBroker(workdir / "kpy")]
    brokers = in_turn(brokers, number)
    steps = workloads.steps()
    try:
        for broker in brokers:
            progress(f"{where} {broker.label}: {STARTUP}")
            workloads.startup(broker, results if STARTUP in workloads.selected else Results())
        run_steps(where, brokers, steps, results)
        for broker in in_turn(brokers, len(steps)) if W5 in workloads.selected else []:
            progress(f"{where} {broker.label}: 5 scale {workloads.scale_case}")
            workloads.scale(broker, results)
            broker.kill()  # its data is thrown away: no need for a clean shutdown
    finally:
        for broker in brokers:
            broker.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return brokers


def run_secured(
    where: str, number: int, workloads: Workloads, lib: Path, workdir: Path, results: Results
) -> list[Measured]:
    """Start both brokers afresh with the security settings (one CA and key material for
    both), run workloads 8 and 9 against each in turn, then stop them."""
    credentials = Credentials(workdir / "credentials")
    brokers: list[Measured] = [
        SecureBenchKafka(workdir / "kafka", lib, credentials),
        SecureBenchKpyBroker(workdir / "kpy", credentials),
    ]
    brokers = in_turn(brokers, number)
    try:
        for broker in brokers:
            progress(f"{where} {broker.label}: starting with the security settings")
            broker.start()
        run_steps(where, brokers, workloads.secured_steps(credentials), results)
    finally:
        for broker in brokers:
            broker.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return brokers


def broker_kinds(number: int, lib: Path) -> list[tuple[str, BrokerFactory]]:
    """Both brokers' factories, for workloads that start brokers of their own: the first
    flips from round to round."""
    kinds: list[tuple[str, BrokerFactory]] = [
        (KAFKA, functools.partial(BenchKafka, lib=lib)),
        (KPYBROKER, BenchKpyBroker),
    ]
    return kinds if number % 2 == 0 else kinds[::-1]


def run_startup(
    where: str, number: int, plan: Plan, lib: Path, workdir: Path, results: Results
) -> None:
    """Workload 14 against each broker in turn."""
    try:
        for label, make in broker_kinds(number, lib):
            progress(f"{where} {label}: {W14}")
            startup.run(plan.startup, make, workdir / label, results)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_each_broker(
    where: str,
    number: int,
    lib: Path,
    workload: str,
    run: Callable[[BrokerFactory, str], Measured],
) -> list[Measured]:
    """A workload that starts a broker of its own (``run(factory, its label)``) against each
    broker in turn; returns them (stopped)."""
    brokers: list[Measured] = []
    for label, make in broker_kinds(number, lib):
        progress(f"{where} {label}: {workload}")
        brokers.append(run(make, label))
    return brokers


def run_replicated(
    where: str, number: int, plan: Plan, lib: Path, workdir: Path, results: Results
) -> list[Measured]:
    """Workload 15 against each broker's three-node cluster in turn (the first flips from
    round to round); one cluster runs at a time. Returns their nodes (stopped)."""
    kinds: list[tuple[str, replicated.ClusterFactory]] = [
        (KAFKA, functools.partial(KafkaCluster, lib=lib)),
        (KPYBROKER, KpyCluster),
    ]
    nodes: list[Measured] = []
    for label, make in kinds if number % 2 == 0 else kinds[::-1]:
        progress(f"{where} {label}: {W15}")
        nodes += replicated.run(plan.replicated, make, lib, workdir / label, results)
    return nodes


def profile_misses(
    workloads: Workloads, results: Results, workdir: Path
) -> list[profiling.Profile]:
    """Re-run each workload whose ratio target kpybroker missed, under py-spy (not those
    that failed on kpybroker: there is nothing to profile)."""
    missed = {
        (r.metric.workload, r.metric.case)
        for r in results.missed()
        if r.metric.ratio_target and r.kpybroker is not None
    }
    steps = workloads.steps()
    wanted = [step for step in steps if (step.workload, step.case) in missed]
    if not wanted:
        return []
    broker = BenchKpyBroker(workdir / "profiled")
    scratch = Results()
    done: set[Step] = set()
    profiles = []
    try:
        broker.start()
        for step in steps:
            if step.workload == WARM_UP:
                step.run(broker, scratch)
                done.add(step)  # some are prerequisites too (they create topics)
        for step in wanted:
            if step.prerequisite is not None and step.prerequisite not in done:
                step.prerequisite.run(broker, scratch)
                done.add(step.prerequisite)
            progress(f"profiling kpybroker: {step.workload} {step.case}")
            raw = workdir / f"profile-{len(profiles)}.txt"
            with profiling.recording(broker.pid, raw):
                started = time.monotonic()
                step.run(broker, scratch)
                seconds = time.monotonic() - started
            done.add(step)
            profiles.append(profiling.summarize(raw, f"{step.workload}, {step.case}", seconds))
    finally:
        broker.kill()
    return profiles


def run_info(
    plan: Plan,
    argv: Sequence[str],
    started: datetime.datetime,
    clock: float,
    lib: Path,
    brokers: list[Measured],
) -> report.RunInfo:
    """What the doc says about this run: command, machine, versions, Kafka's JVM flags."""
    kafka = next(b for b in brokers if b.label == KAFKA)
    return report.RunInfo(
        plan=plan,
        command=shlex.join(["scripts/bench", *argv]),
        started=started,
        minutes=(time.monotonic() - clock) / 60,
        machine=describe_machine(java_executable()),
        kpybroker_version=f"kpybroker {kpybroker.__version__} on Python "
        f"{platform.python_version()}, uvloop {uvloop.__version__}",
        kafka_version=f"Apache Kafka {kafka_version(lib)}",
        client_versions=[
            f"confluent-kafka {confluent_kafka.__version__} "
            f"(librdkafka {confluent_kafka.libversion()[0]})",
        ],
        kafka_jvm=[arg for arg in kafka.argv if arg.startswith(("-XX", "-Xms"))],
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.rounds:
        plan = dataclasses.replace(plan, rounds=args.rounds)
    output = args.output or (
        Path(tempfile.mkdtemp(prefix="kpybroker-bench-"))
        if args.quick or args.only
        else DEFAULT_OUTPUT
    )
    selected = (
        frozenset(name for key in args.only for name in SELECTIONS[key])
        if args.only
        else ALL_WORKLOADS
    )
    lib = fetch_kafka_lib()
    compile_kpybroker()
    started, clock = datetime.datetime.now(datetime.UTC), time.monotonic()
    results = Results()
    workloads = Workloads(plan, lib, selected)
    profiles: list[profiling.Profile] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kpybroker-bench-") as tmp:
        work = Path(tmp)
        for number in range(plan.rounds):
            brokers = run_round(number, plan, workloads, lib, work / f"round-{number}", results)
        print(report.text_table(results.rows()), flush=True)
        if results.failures:
            print(f"\n{report.failure_text(results.failures)}", flush=True)
        if args.no_profile:
            notes.append("Missed targets were not profiled (`--no-profile`).")
        elif profiling.py_spy() is None:
            notes.append(
                "Missed targets were not profiled: py-spy is not installed "
                "(`pip install -e '.[bench]'`)."
            )
        else:
            profiles = profile_misses(workloads, results, work)
    startup_missed = any(row.metric.workload in (STARTUP, W14) for row in results.missed())
    imports = profiling.import_profile(REPO_ROOT) if startup_missed else None
    output.mkdir(parents=True, exist_ok=True)
    chart = None if args.no_chart else output / report.CHART_NAME
    if chart is not None:
        report.write_chart(results.rows(), chart, f"kpybroker vs Apache Kafka, {plan.name} plan")
    doc = output / "performance.md"
    info = run_info(plan, argv, started, clock, lib, brokers)
    report.write_doc(doc, info, results, profiles, imports, chart, notes)
    progress(f"wrote {doc}" + (f" and {chart}" if chart else ""))
    return 0
