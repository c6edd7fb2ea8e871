"""The printed table, ``docs/performance.md`` and its chart.

Everything in the document comes from the run: the doc is regenerated, never
edited, so its figures and its description of the method cannot drift apart.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchlib import compaction, recovery
from benchlib.javatools import GROUP_PREFIX
from benchlib.librdkafka import FETCH_QUEUE_BACKOFF_MS
from benchlib.plan import (
    GROUP_HEARTBEAT_MS,
    KAFKA_HEAP,
    KAFKA_SETTINGS,
    KPYBROKER_SETTINGS,
    REPLICATED_SETTINGS,
    TOOL_HEAP,
    TOOL_JVM_OPTIONS,
    Plan,
    ReplicatedPlan,
    format_size,
)
from benchlib.procstat import TRACE_INTERVAL_S, Machine
from benchlib.profiling import SAMPLE_RATE, ImportProfile, Profile
from benchlib.rebalance import POLL_PAUSE_S
from benchlib.results import (
    KAFKA,
    KPYBROKER,
    Failure,
    Results,
    Row,
    format_met,
    format_ratio,
    format_value,
)
from benchlib.secured import MECHANISM, TOPIC_PREFIX, USER
from benchlib.variance import miss_note, variance_lines

CHART_NAME = "performance.png"


@dataclass(frozen=True)
class RunInfo:
    """What the doc says about the run itself."""

    plan: Plan
    command: str
    started: datetime.datetime
    minutes: float
    machine: Machine
    kpybroker_version: str
    kafka_version: str
    client_versions: list[str]
    kafka_jvm: list[str]


# -- the terminal table ---------------------------------------------------------


def text_table(rows: Sequence[Row]) -> str:
    header = ("workload", "case", "metric", "kpybroker", "Kafka", "ratio", "target", "")
    lines = [header]
    for row in rows:
        m = row.metric
        lines.append(
            (
                m.workload,
                m.case,
                f"{m.name} ({m.unit})",
                row.value_text(KPYBROKER),
                row.value_text(KAFKA),
                format_ratio(row),
                m.target_text(),
                format_met(row),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    right = {3, 4, 5}
    return "\n".join(
        "  ".join(
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(line)
        ).rstrip()
        for line in lines
    )


# -- the chart --------------------------------------------------------------------


def chart_panels(rows: Sequence[Row]) -> list[tuple[str, list[Row]]]:
    """The issue's targets, and what each broker costs (CPU per MB, memory)."""
    targets = [row for row in rows if row.metric.has_target and row.advantage is not None]
    costs = [
        row
        for row in rows
        if not row.metric.has_target
        and row.advantage is not None
        and (row.metric.unit in ("ms/MB", "MB") or row.metric.name.startswith("Metadata"))
    ]
    return [("Targets (green: met, red: missed)", targets), ("Cost and scale", costs)]


def write_chart(rows: Sequence[Row], path: Path, title: str) -> None:
    """Bars of kpybroker's advantage from 1.0 (log scale): right of 1 = kpybroker better."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    panels = [(name, shown) for name, shown in chart_panels(rows) if shown]
    heights = [len(shown) for _, shown in panels]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(11, 0.5 * sum(heights) + 1.2 * len(panels) + 1),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    colour = {True: "#2e7d32", False: "#c62828", None: "#78909c"}
    for ax, (name, shown) in zip(axes[:, 0], panels, strict=True):
        values = [row.advantage or 1.0 for row in shown]
        positions = list(range(len(shown)))[::-1]
        ax.barh(positions, [v - 1 for v in values], left=1, color=[colour[r.met] for r in shown])
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.axvline(1.0, color="black", linewidth=1)
        labels = [
            f"{r.metric.workload}: {r.metric.name} ({r.metric.unit})\n{r.metric.case}"
            for r in shown
        ]
        ax.set_yticks(positions, labels, fontsize=7)
        low, high = min(*values, 0.5), max(*values, 2.0)
        ax.set_xlim(low / 1.6, high * 1.6)
        ax.set_title(name, fontsize=9)
        for pos, value, row in zip(positions, values, shown, strict=True):
            ax.text(value, pos, f" {value:.2f}x ", va="center", fontsize=7,
                    ha="left" if value >= 1 else "right", color=colour[row.met])  # fmt: skip
    axes[-1, 0].set_xlabel(
        "kpybroker's advantage over Apache Kafka (log scale; right of 1x = kpybroker better):\n"
        "the throughput ratio, or the inverse ratio for latency, CPU and memory"
    )
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- the document -------------------------------------------------------------------


def markdown_table(rows: Sequence[Row]) -> list[str]:
    lines = [
        "| Workload | Case | Metric | kpybroker | Kafka | kpybroker/Kafka | Target |",
        "|---|---|---|--:|--:|--:|---|",
    ]
    for row in rows:
        m = row.metric
        target = f"{m.target_text()} **{format_met(row)}**" if m.has_target else ""
        lines.append(
            f"| {m.workload} | {m.case} | {m.name} ({m.unit}) | {row.value_text(KPYBROKER)} | "
            f"{row.value_text(KAFKA)} | {format_ratio(row)} | {target} |"
        )
    return lines


def with_unit(row: Row, broker: str) -> str:
    """A broker's median with the metric's unit, or 'failed'."""
    text = row.value_text(broker)
    return text if text == "failed" else f"{text} {row.metric.unit}"


#: Characters of a failure's message the terminal and the doc show, from its start (the
#: messages put what matters first).
FAILURE_EXCERPT = 10_000


def failure_text(failures: Sequence[Failure]) -> str:
    """The terminal's account of the failed steps, after the table."""
    return "\n".join(
        f"FAILED: {f.workload}, {f.case}, on {f.broker}:\n{f.message[:FAILURE_EXCERPT]}\n"
        for f in failures
    )


def failure_lines(failures: Sequence[Failure]) -> list[str]:
    """The doc's section on the failed steps (fenced with tildes: the messages quote logs)."""
    lines: list[str] = []
    for f in failures:
        excerpt = f.message[:FAILURE_EXCERPT].replace("~~~", "~ ~ ~")
        lines += [f"### {f.workload}, {f.case}, on {f.broker}", "", "~~~"]
        lines += [*excerpt.splitlines(), "~~~", ""]
    return lines


def cpu_use_note(rows: Sequence[Row], missed: Row) -> str:
    """How busy both brokers were during the missed step, when that was measured."""
    m = missed.metric
    # Workload 4 measures its two phases apart: "<case>, produce" and "<case>, group consume".
    cases = (m.case, f"{m.case}, {m.name.removesuffix(' throughput')}")
    for row in rows:
        r = row.metric
        if (
            r.name == "broker CPU use"
            and r.workload == m.workload
            and r.case in cases
            and row.kpybroker is not None
            and row.kafka is not None
        ):
            return (
                f" Meanwhile kpybroker kept {format_value(row.kpybroker)} cores busy and Kafka "
                f"{format_value(row.kafka)}."
            )
    return ""


def profile_section(profile: Profile) -> list[str]:
    lines = [
        f"### {profile.title}",
        "",
        f"{profile.samples:,} samples at {SAMPLE_RATE} Hz: the broker held the GIL "
        f"{profile.gil_share:.0%} of the {profile.seconds:.1f} s.",
        "",
        "| Layer of the innermost Python frame | Share |",
        "|---|--:|",
    ]
    lines += [f"| {layer} | {share(n, profile.samples)} |" for layer, n in profile.by_layer]
    lines += ["", "| Function (self time) | Share |", "|---|--:|"]
    lines += [f"| `{name}` | {share(n, profile.samples)} |" for name, n in profile.top_self]
    lines += ["", "| Function (including callees) | Share |", "|---|--:|"]
    lines += [f"| `{name}` | {share(n, profile.samples)} |" for name, n in profile.top_inclusive]
    return [*lines, ""]


def import_section(profile: ImportProfile) -> list[str]:
    lines = [
        "### Startup: `python -X importtime -m kpybroker --version`",
        "",
        f"Importing the broker's modules takes {profile.total_ms:.0f} ms of the startup time.",
        "",
        "| Module (including what it imports) | ms |",
        "|---|--:|",
    ]
    lines += [f"| `{name}` | {ms:.1f} |" for name, ms in profile.top_cumulative]
    lines += ["", "| Module (its own code) | ms |", "|---|--:|"]
    lines += [f"| `{name}` | {ms:.1f} |" for name, ms in profile.top_self]
    return [*lines, ""]


def share(count: int, total: int) -> str:
    return f"{100 * count / total:.1f}%" if total else "-"


def settings_lines(settings: dict[str, str]) -> list[str]:
    return [f"  - `{key}={value}`" for key, value in settings.items()]


def method_lines(info: RunInfo) -> list[str]:
    plan, txn, spec = info.plan, info.plan.txn_produce_case, info.plan.aborted_topic
    share = plan.share_case
    durations = " and ".join(f"{d:,}" for d in plan.txn_durations_ms)
    secured_cases = "; ".join(case.label for case in plan.secured_cases)
    return [
        f"- {plan.rounds} round(s). Each round starts both brokers afresh (empty data "
        "directories), warms both up with an unrecorded ProducerPerformance and "
        f"ConsumerPerformance run ({plan.warmup_records:,} records), then runs every step "
        "against one broker and then the other. The order alternates from step to step and "
        "from round to round (ABBA), so a change in the machine's load during a run falls "
        "on both brokers alike. Only one workload runs at a time.",
        "- Each figure is the median over the rounds; the ratio is kpybroker's median over "
        "Kafka's. The raw samples are at the end.",
        "- Workload 5 (scale) ends each round: the first broker gets its idle connections "
        "and then its partitions, is measured and stopped, then the second.",
        "- Workload 1: `ProducerPerformance --throughput -1 --producer-props acks=all`, every "
        "other producer setting at its default (so idempotence on, batch.size 16 KiB, "
        "linger.ms 5); its latency is per record, from `send()` to the acknowledgement. "
        "MB/s is as the tool prints it (MiB).",
        "- Workload 2: `ConsumerPerformance` in a new group reading the data of workload 1 "
        "back; the figures are its `fetch.MB.sec` and `fetch.nMsg.sec`, which exclude the "
        "group join.",
        "- Workload 3: `EndToEndLatency <broker> e2e <n> all <size>`: one record at a time, "
        "produced then consumed. The tool prints its percentiles in whole milliseconds.",
        "- Workload 4: confluent-kafka produces with `linger.ms` as given and `acks=all` "
        "(values built before the clock starts), then a consumer in a new group (subscribe) "
        f"reads every record, with `fetch.queue.backoff.ms={FETCH_QUEUE_BACKOFF_MS}`: "
        "librdkafka's default (1 s) pauses fetching whenever its local queue is full, and "
        "the figure would measure that timer on either broker. Each value "
        "carries its index: every record is checked for content, and none may be missing "
        "or duplicated. Consumer throughput counts from the first record to the last.",
        "- Workload 5: first the idle connections, each of which sends ApiVersions and then "
        "stays silent; RSS per idle connection is the growth of the broker's RSS while they "
        f"were opened, read {plan.idle_settle_s:g} s after the last, over the connections. "
        "They are closed before the partitions are created: under this machine's limit of "
        "20,000 open files Kafka, which keeps a descriptor per segment, cannot hold both "
        "(it resets connections). The broker is then restarted, so that the memory the "
        "closed connections left in Python's allocator does not hold partitions uncounted. "
        "Partitions are created with the admin client (replication "
        "factor 1), timed until Metadata shows every one with a leader, and then until "
        "every one is served: a ListOffsets to its leader (polled every 50 ms) answers "
        "without error. Only the second has a target: Kafka shows a leader once its "
        "controller has recorded the topic and makes the log afterwards, kpybroker once the "
        "log is made. RSS per "
        "partition is the growth from before the topics were created to "
        f"{plan.idle_settle_s:g} s after they were all served, over the partitions (issue "
        "17's target for both: at most half of Kafka's). Metadata latency is an all-topics "
        f"Metadata v12 request on one connection, {plan.metadata_requests} times after one "
        "unrecorded. The hot partition then gets a ProducerPerformance run as in workload "
        "1; RSS is read after that run. A JVM's RSS grows as its heap is touched, not as "
        "objects are made, so Kafka's figures say what the machine pays, not what each "
        "partition needs.",
        "- Startup: from spawning the process to the first ApiVersions answer (a probe "
        "connects every 5 ms), with an empty data directory. Idle RSS: "
        f"{plan.idle_settle_s:g} s later, no client connected.",
        "- Workload 14 (start-up): after the other workloads, each broker in turn (the first "
        "alternating from round to round) is started and stopped again and again, each start "
        "timed as above: with an empty data directory (a new one each time), and with "
        f"{plan.startup.partitions:,} partitions (created with the admin client, the broker "
        "then stopped cleanly, and restarted). Each case has one cold start, then "
        f"{plan.startup.warm_starts} warm start(s); each start also records the broker's CPU "
        "time until it answered, read from `/proc` just after the answer. Cold is the first "
        "start after installation: kpybroker with an empty bytecode cache, so it compiles "
        "every module it imports (as "
        "each start does under `PYTHONDONTWRITEBYTECODE`); Kafka has no such cache of its own, "
        "so its cold start is its first in the round. The OS page cache is not dropped "
        "(that needs root and slows everything else on the machine).",
        f"- Workload 6: ProducerPerformance as in workload 1 ({txn.label}), with "
        "`--transactional-id <a new id per run> --transaction-duration-ms <d>` for d = "
        f"{durations} ms: the tool sends in a transaction and commits it once d ms have "
        "passed (`commitTransaction` flushes, then waits for EndTxn and its markers), then "
        "begins the next. Records/s includes the commits; latency is per record, as in "
        "workload 1. Before the first of them, both brokers get an unrecorded transactional "
        f"ProducerPerformance and read_committed ConsumerPerformance run "
        f"({plan.txn_warmup_records:,} records), which also creates `__transaction_state`.",
        f"- Workload 7: the topic ({spec.records:,} x {spec.record_size} B, "
        f"{spec.partitions} partitions) is written by confluent-kafka with a "
        f"`transactional.id` (acks=all, linger.ms=5), {spec.per_transaction:,} records per "
        f"transaction, record i to partition i mod {spec.partitions}, so every transaction "
        "leaves a data batch or more and a marker in each partition. One transaction in "
        f"{spec.abort_every} is flushed and then aborted, so its records are in the log as "
        "aborted batches (and in the aborted-transaction index), between committed ones; "
        "the others are committed. The write's throughput is shown, without a target. "
        "Then `ConsumerPerformance --consumer.config <file>`, the file setting "
        "`isolation.level=read_committed`, reads the committed count in a new group "
        "(figures as in workload 2). The step fails unless it reads exactly that many, and "
        "unless a read_committed confluent-kafka consumer, reading every partition to its "
        "end after the clock has stopped, gets each committed record once with its content "
        "and none of the aborted ones (ConsumerPerformance stops at the count it is given, "
        "so it could not see an extra record itself).",
        "- Workloads 8 and 9: after the plaintext workloads, both brokers are started afresh "
        "with, on top of the settings above, those of `docs/secure-server.properties` (through "
        "`tests/helpers/secure_broker.py`: the same for both, with one CA and its P-256 "
        "certificates for both): SASL_PLAINTEXT, SASL_SSL and SSL listeners "
        "beside PLAINTEXT, PKCS12 key and trust stores, client certificates required on SSL "
        "(`listener.name.ssl.ssl.client.auth=required`), SASL PLAIN, SCRAM-SHA-256, "
        "SCRAM-SHA-512 and OAUTHBEARER, and ACLs (`authorizer.class.name="
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer`, "
        f"`allow.everyone.if.no.acl.found=false`). The tools run as `{USER}`, an ordinary "
        "user, so that every request is checked against ACLs: her SCRAM credentials are added "
        "with AlterUserScramCredentials, and PREFIXED ACLs allow her WRITE and READ on topics "
        f"`{TOPIC_PREFIX}*` and READ on groups `{GROUP_PREFIX}*`. Over SSL "
        "(`security.protocol=SSL`, her certificate in a PKCS12 key store) and over SASL_SSL "
        f"(`sasl.mechanism={MECHANISM}`, `sasl.jaas.config` with ScramLoginModule), both "
        "trusting the CA (`ssl.truststore.*`), set in a "
        "`--producer.config` / `--consumer.config` file, ProducerPerformance and "
        f"ConsumerPerformance run as in workloads 1 and 2 ({secured_cases}); the topics are "
        "created on the PLAINTEXT port. Before them, each broker gets an unrecorded run over "
        f"each listener ({plan.secured_warmup_records:,} records). Issue 7's targets are for "
        "the plaintext workloads: these figures have none. Their CPU per MB includes the "
        "tools' TLS handshakes and SASL exchanges (a few connections per run).",
        f"- Workload 10: {plan.group_members} confluent-kafka consumers, all in this one "
        f"process, make a new group on a topic of {plan.group_partitions} partitions (no "
        "records), with the classic protocol or, in groups of their own, the consumer "
        "protocol (`group.protocol=consumer`, KIP-848). Each member keeps the partitions its "
        "`on_assign` and `on_revoke` callbacks gave and took; one loop polls every member in "
        f"turn (`poll(0)`, then a {POLL_PAUSE_S * 1000:g} ms pause), and the group is stable "
        "once every partition is owned by exactly one member and each member owns its even "
        "share. The first figure runs from creating the first member (each subscribes as it "
        "is created) until stable; then one member is closed, which leaves the group, and "
        "the second runs from its `close()` until the others are stable again. Members "
        f"heartbeat every {GROUP_HEARTBEAT_MS} ms with either protocol (a member learns of a "
        "rebalance from its next heartbeat, so each figure is mostly a few of them): the "
        "classic members set `heartbeat.interval.ms` and keep librdkafka's other defaults "
        "(the range assignor, eager: every member gives up all its partitions and rejoins); "
        "the consumer-protocol members get the brokers' `group.consumer.*` settings above and "
        "their default assignor (uniform, incremental: only the partitions that move are "
        "revoked, then assigned), with the target assignment computed as soon as the members "
        "change (`group.consumer.assignment.interval.ms=0`: kpybroker does not batch it; "
        "Kafka 4.4's default, 1 s, would add that wait to its figures). Both brokers first "
        "get one unrecorded group of each "
        f"protocol; then {plan.groups_per_round} group(s) of each protocol per broker and "
        "round, each a raw sample. The broker's CPU time is read as below, over each phase.",
        f"- Workload 11: a topic of one partition gets {share.records:,} records of "
        f"{share.record_size} B from ProducerPerformance as in workload 1, unrecorded: in "
        "the Java producer's 16 KiB batches, about 150 records each, which matters because "
        "a broker hands share consumers whole batches and keeps at most "
        "`group.share.partition.max.record.locks` (2,000) records in flight per partition "
        "(librdkafka's batches of up to 10,000 records would leave one consumer at a time "
        "any). "
        "For each run, a new share group (KIP-932) is given `share.auto.offset.reset=earliest` "
        "(`kafka-configs.sh --entity-type groups --entity-name <group> --alter --add-config`, "
        "Kafka's `ConfigCommand`; a share group starts at the latest offset otherwise), then "
        f"`ShareConsumerPerformance --threads {share.consumers} --num-records "
        f"{share.records} --group <group>` reads the topic: {share.consumers} "
        "KafkaShareConsumers in that group, every one assigned the one partition, each "
        "acquiring batches of records from it (implicit acknowledgement, the default: a "
        "poll accepts what the previous one returned). The tool's own figure (`nMsg.sec`, "
        "shown without a target) runs from before the consumers subscribe until the last "
        "has stopped, so it includes the join and up to 100 ms of the consumers' last "
        "polls; the throughput figures run from the first record delivered to any consumer "
        "to the last delivery, as its progress lines date them (`--show-detailed-stats "
        "--reporting-interval 1`: one line per poll that returns records, in whole "
        "milliseconds), and 'first record after subscribe' is the wait before. Share "
        f"consumers heartbeat every {GROUP_HEARTBEAT_MS} ms and a share group's target "
        "assignment is computed as soon as its members change, on both brokers (the "
        "`group.share.*` settings above; with Kafka 4.4's defaults, 5 s and 1 s, its "
        "consumers got their partition 5 to 7 s after subscribing). Kafka needs nothing "
        "more: Kafka 4.4 formats a new cluster with `share.version=2`. "
        + ("Each broker first gets one unrecorded share-group run. " if plan.share_warmup else "")
        + f"{plan.share_runs_per_round} run(s) per broker and round, each a raw sample. "
        "The run fails unless the tool reads exactly the topic's records: it stops at the "
        "poll that reaches the count, counting all that poll returned, and each record goes "
        "to one consumer, so a count beyond means a record delivered twice. "
        "CPU per MB is over the tool's run, as for workload 2; CPU use is the broker's CPU "
        "time from the first delivery to the last (read every "
        f"{TRACE_INTERVAL_S * 1000:g} ms, interpolated) over that span. A "
        "run that fails (the tool exits with an error, or reads fewer records) is reported "
        "with the end of its output and of the broker's log under Failures, and the bench "
        "goes on.",
        f"- Workload 12: {plan.small_request_clients} confluent-kafka producers in threads of "
        "this one process (librdkafka has one connection per producer), each with "
        "`linger.ms=0` and one 100 B record in flight on its own partition of a "
        f"{plan.small_request_clients}-partition topic: it sends, waits for the "
        "acknowledgement (`flush()`), and sends again. After three unrecorded requests "
        f"each, all run for {plan.small_request_seconds:g} s; requests/s counts the "
        "acknowledgements, a request's latency runs from `produce()` to its acknowledgement, "
        "and CPU per request is the broker's CPU time over the step per request. Run with "
        f"acks=1 and acks=all. Then {plan.small_request_clients} consumers, each assigned its "
        "own partition from its end (no group), long-poll while one producer writes a record "
        f"to every partition each {plan.small_request_tick_s * 1000:g} ms for "
        f"{plan.small_request_seconds:g} s; a delivery's latency runs from the producer's "
        "clock in the value to the consumer's receipt (same process, same clock), and CPU use "
        "is the broker's CPU time over that phase per second. The client threads' cost is the "
        "same against either broker, and on this machine it shares the cores with them.",
        f"- Workload 13: {plan.fanout_records:,} records of 1 KiB on "
        f"{plan.fanout_partitions} partitions, written unrecorded (confluent-kafka, "
        f"`linger.ms=5`), are read by {plan.fanout_groups} new consumer groups at once, one "
        "confluent-kafka consumer each, in threads of this process. The time runs from their "
        "start (joining included) until the last group has read every record; the figure is "
        "the bytes all groups read over that time.",
        *replicated_lines(plan.replicated),
        recovery.method_line(plan.recovery),
        compaction.method_line(plan.compaction),
        "- CPU per MB: the broker process's user + system CPU time (`/proc/<pid>/stat`, "
        "all threads) over the step, per MB (10^6 bytes) of record payload moved. CPU use: "
        "the same CPU time over the seconds the records were moving (as the client timed "
        "them), in cores; well below 1 for both brokers means the clients set the pace.",
    ]


def replicated_lines(plan: ReplicatedPlan) -> list[str]:
    """Workload 15's part of the method."""
    produce = "; ".join(case.label for case in plan.produce_cases)
    sizes = " and ".join(format_size(size) for size in plan.e2e_record_sizes)
    warm_up = (
        f"; each first gets an unrecorded ProducerPerformance run ({plan.warmup_records:,} x "
        "100 B, 6 partitions)"
        if plan.warmup_records
        else ""
    )
    return [
        "- Workload 15 (replicated): after the others, each broker's three-node cluster in "
        "turn (the first alternating from round to round), started afresh and thrown away "
        f"after its steps{warm_up}: three kpybrokers on one ZooKeeper, and three "
        "Apache Kafka nodes in KRaft mode, each broker and controller, all three voters "
        "(`controller.quorum.voters`), formatted with one cluster id, each with the heap "
        "above. Both run with "
        f"{', '.join(f'`{k}={v}`' for k, v in REPLICATED_SETTINGS.items())}; the topics have "
        "replication factor 3 and `min.insync.replicas=2`, their preferred leaders spread "
        f"over the three brokers. ProducerPerformance as in workload 1, acks=all ({produce}); "
        f"EndToEndLatency as in workload 3, acks=all, {plan.e2e_records:,} records of "
        f"{sizes} on one partition. Follower catch-up: on a topic of "
        f"{plan.catch_up.partitions} partitions led by two of the brokers, the third (a "
        "follower of both) is stopped with SIGTERM; once a Metadata answer from a leader no "
        "longer lists it in any ISR, confluent-kafka writes "
        f"{plan.catch_up.records:,} records of {format_size(plan.catch_up.record_size)} "
        "(acks=all, `linger.ms=5`; the two others satisfy `min.insync.replicas`); then the "
        "follower is "
        "started again, and the figure runs from spawning it until a Metadata answer lists "
        "it in the ISR of every partition, polled every 100 ms. Its start-up (spawn to its "
        "first ApiVersions answer, as in workload 5) is within that, and shown apart. Then "
        f"{plan.creation_topics * plan.creation_partitions_per_topic:,} partitions in "
        f"{plan.creation_topics} topics of replication factor 3, placed by the controller, "
        "are created in as few CreateTopics requests as Kafka's bound of 10,000 metadata "
        "records per request allows, one after the other; the figure runs from the first "
        "request until every partition is served, as in workload 5, and the first broker's "
        "Metadata lists all three replicas in its ISR. CPU figures are the three brokers' "
        "CPU time together, with ZooKeeper's for kpybroker (it holds what Kafka's "
        "controllers hold inside its nodes).",
    ]


def write_doc(
    path: Path,
    info: RunInfo,
    results: Results,
    profiles: Sequence[Profile],
    imports: ImportProfile | None,
    chart: Path | None,
    notes: Sequence[str],
) -> None:
    rows = results.rows()
    missed = [row for row in rows if row.met is False]
    met = [row for row in rows if row.met is True]
    lines = [
        "# Performance: kpybroker and Apache Kafka side by side",
        "",
        f"Generated by `{info.command}` on {info.started:%Y-%m-%d %H:%M} UTC "
        f"({info.plan.name} plan, {info.plan.rounds} round(s), {info.minutes:.0f} min). "
        "Do not edit this file: run the command again.",
        "",
        "## Summary",
        "",
        f"Targets met: {len(met)} of {len(met) + len(missed)}.",
        "",
    ]
    for row in missed:
        m = row.metric
        lines.append(
            f"- **Missed**: {m.workload}, {m.case}: {m.name} — kpybroker "
            f"{with_unit(row, KPYBROKER)}, Kafka {with_unit(row, KAFKA)} "
            f"({format_ratio(row)}; target {m.target_text()}).{cpu_use_note(rows, row)}"
            f"{miss_note(results, row)}"
        )
    lines += [
        f"- **Failed**: {f.workload}, {f.case}, on {f.broker}: {f.summary} (see Failures)."
        for f in results.failures
    ]
    lines += [*(f"- {note}" for note in notes), ""]
    if missed:
        lines += [
            "What limits the targets missed, and the designs that would lift them, measured "
            "apart from this run: `performance-ceilings.md`.",
            "",
        ]
    lines += ["## Results", "", *markdown_table(rows), ""]
    if results.failures:
        lines += ["## Failures", "", *failure_lines(results.failures)]
    if chart is not None:
        lines += [f"![kpybroker's advantage over Kafka per metric]({chart.name})", ""]
    lines += variance_lines(results)
    if profiles or imports:
        lines += [
            "## Where the time goes (missed targets)",
            "",
            "Each missed workload was run once more against a fresh, warmed-up kpybroker "
            "with `py-spy record --nonblocking --gil --function` attached. The broker's CPU "
            "use in the results says first whether kpybroker was the bottleneck at all: one "
            "core is all its single Python process can use, and well below that the clients "
            "set the pace. "
            "The samples are wall-clock time of the thread holding the GIL: a system call in "
            "which the broker was preempted counts in full (on two cores, sending an answer "
            "wakes the client, which often takes the CPU until it has read it).",
            "",
        ]
        for profile in profiles:
            lines += profile_section(profile)
        if imports is not None:
            lines += import_section(imports)
    lines += ["## Machine", "", *(f"- {line}" for line in info.machine.lines()), ""]
    lines += [
        "## Versions and settings",
        "",
        f"- {info.kpybroker_version}, from cached bytecode (as `pip install` leaves it): "
        "its defaults (Kafka's) plus",
        *settings_lines(KPYBROKER_SETTINGS),
        f"- {info.kafka_version} (Maven Central jars), KRaft combined broker+controller, "
        "the settings of `tests/helpers/reference_kafka.py` with, on top,",
        *settings_lines(KAFKA_SETTINGS),
        f"  - JVM: `-Xmx{KAFKA_HEAP} {' '.join(info.kafka_jvm)}`",
        f"- Kafka's tools: the same jars; JVM `-Xmx{TOOL_HEAP} {' '.join(TOOL_JVM_OPTIONS)}`",
        *(f"- {version}" for version in info.client_versions),
        "",
        "## Method",
        "",
        *method_lines(info),
        "",
        "## Raw samples (one per round, in round order; workload 10: one per group, "
        f"{info.plan.groups_per_round} per round; workload 11: one per share group, "
        f"{info.plan.share_runs_per_round} per round)",
        "",
        "| Workload | Case | Metric | kpybroker | Kafka |",
        "|---|---|---|---|---|",
    ]
    for metric, by_broker in results.samples.items():
        lines.append(
            f"| {metric.workload} | {metric.case} | {metric.name} ({metric.unit}) | "
            f"{', '.join(format_value(v) for v in by_broker[KPYBROKER])} | "
            f"{', '.join(format_value(v) for v in by_broker[KAFKA])} |"
        )
    path.write_text("\n".join(lines) + "\n")
