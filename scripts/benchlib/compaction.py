"""Workload 17: compaction, the log cleaner's MB/s and other clients' produce p99 meanwhile.

Each broker of the workload's kind (its own) gets one partition of ``records`` keyed
records of ``record_size`` bytes, ``unique_keys`` distinct keys in turn (10% unique in
the full plan), in segments of ``segment_bytes``. The topic is written with
``cleanup.policy=delete``, so nothing is cleaned while it fills; then the policy is
altered to ``compact`` (IncrementalAlterConfigs), and the cleaner, which both brokers
run with ``log.cleaner.backoff.ms`` lowered to 1 s, finds every closed segment dirty.

Meanwhile ``probe_clients`` producers each send one 100 B record per request (acks=1) to
another topic, one request in flight each, from the alteration until the broker logs
its cleaning round's figures. Recorded: the cleaner's MB/s, which each broker reports
itself when a round ends (bytes of log read over the round's seconds: Kafka's
``LogCleaner`` statistics, which kpybroker's cleaner logs in the same terms), and the
probe's p50 and p99 over the cleaning.

Run alone: ``scripts/bench --only compaction`` (with ``--rounds N``).
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from benchlib import small_requests
from benchlib.brokers import BrokerFactory, Measured, create_topics
from benchlib.plan import CompactionPlan, format_size
from benchlib.results import Better, Metric, Results

W17 = "17 compaction"
TOPIC = "compacted"
PROBE_TOPIC = "compaction-probe"
#: Both brokers: the cleaner looks for dirty logs every second (Kafka's default is 15 s,
#: which would only add waiting to the probe's window).
CLEANER_SETTINGS = {"log.cleaner.backoff.ms": "1000"}
#: Seconds the cleaner may take to report its round.
CLEANING_TIMEOUT_S = 1800.0

#: The statistics line of a cleaning round: Kafka's ``LogCleaner`` (``… MB of log
#: processed in … seconds (… MB/sec)``) and kpybroker's (``… MB of log processed in … s``).
ROUND = re.compile(r"([\d,.]+) MB of log processed in ([\d,.]+) s")


def case_name(plan: CompactionPlan) -> str:
    size = plan.records * plan.record_size
    share = plan.unique_keys / plan.records
    return f"{size / 1e9:.3g} GB, {share:.0%} unique keys"


def metrics(plan: CompactionPlan) -> tuple[Metric, Metric, Metric]:
    case = case_name(plan)
    return (
        Metric(W17, case, "cleaner throughput", "MB/s", Better.HIGHER, ratio_target=True),
        Metric(W17, case, "produce p50 while cleaning", "ms", Better.LOWER),
        Metric(W17, case, "produce p99 while cleaning", "ms", Better.LOWER, ratio_target=True),
    )  # fmt: skip


def fill(bootstrap: str, plan: CompactionPlan) -> None:
    """Write the keyed records (acks=1, batched) and wait until all are acknowledged."""
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "log_level": 0,
        }
    )
    keys = [b"key-%09d" % k for k in range(plan.unique_keys)]
    value = bytes(plan.record_size - len(keys[0]))
    for index in range(plan.records):
        while True:
            try:
                producer.produce(TOPIC, value, keys[index % plan.unique_keys], 0, on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(600) or failures:
        raise RuntimeError(f"filling {TOPIC}: {len(failures)} failed, e.g. {failures[:1]}")


def start_compacting(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        TOPIC,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(60)


def cleaned_rounds(output: str) -> list[tuple[float, float]]:
    """(MB read, seconds) of every cleaning round the broker's output reports."""
    return [
        (float(mb.replace(",", "")), float(s.replace(",", ""))) for mb, s in ROUND.findall(output)
    ]


def probe_while_cleaning(broker: Measured) -> small_requests.Latencies:
    """One request at a time to the probe topic, from now until a cleaning round is
    reported in the broker's output."""
    stop = threading.Event()
    found: list[small_requests.Latencies] = []

    def probe() -> None:
        found.append(small_requests.produce_until(broker.bootstrap, PROBE_TOPIC, stop))

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    deadline = time.monotonic() + CLEANING_TIMEOUT_S
    try:
        while not cleaned_rounds(broker.log_text()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{broker.label} reported no cleaning round")
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(60)
    return found[0]


def run(plan: CompactionPlan, make: BrokerFactory, workdir: Path, results: Results) -> Measured:
    """Fill, compact and measure on a broker ``make`` builds (returned, stopped); its data is
    deleted afterwards."""
    broker = make(workdir)
    broker.overrides.update(CLEANER_SETTINGS)
    try:
        broker.start()
        create_topics(broker.bootstrap, {PROBE_TOPIC: 1})
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        config = {"cleanup.policy": "delete", "segment.bytes": str(plan.segment_bytes)}
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1, config=config)]).values():
            future.result(60)
        fill(broker.bootstrap, plan)
        start_compacting(broker.bootstrap)
        latencies = probe_while_cleaning(broker)
        rounds = cleaned_rounds(broker.log_text())
    finally:
        broker.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    mb_per_s = sum(mb for mb, _ in rounds) / max(sum(s for _, s in rounds), 1e-3)
    cleaner, p50, p99 = metrics(plan)
    results.add(cleaner, broker.label, mb_per_s)
    results.add(p50, broker.label, latencies.percentile(0.5) * 1000)
    results.add(p99, broker.label, latencies.percentile(0.99) * 1000)
    return broker


def method_line(plan: CompactionPlan) -> str:
    """Workload 17's part of the doc's method."""
    return (
        "- Workload 17 (compaction): after the others, each broker in turn (the first "
        "alternating from round to round), started afresh with "
        f"`{', '.join(f'{k}={v}' for k, v in CLEANER_SETTINGS.items())}`. confluent-kafka "
        f"writes one partition with {plan.records:,} records of "
        f"{format_size(plan.record_size)} over {plan.unique_keys:,} keys in turn, in "
        f"segments of {format_size(plan.segment_bytes)}, under `cleanup.policy=delete`; "
        "the policy is then altered to `compact`. From then until the broker logs the "
        "figures of its cleaning round, a producer sends one 100 B record per request "
        "(acks=1) to another topic and times each; the cleaner's MB/s is what the broker "
        "reports for the round (bytes of log read over the round's seconds; Kafka's "
        "`LogCleaner` statistics)."
    )
