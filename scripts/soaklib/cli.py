"""``scripts/soak``: producers, consumers in a group that rebalances, retention and compaction
at work, and a kill -9 every few minutes, for as long as asked; then the verdict.

The verdict (exit status 1 when any fails):

- the history checker finds nothing acknowledged lost, duplicated, misplaced or reordered
  on the retained topic, and every acknowledged record above the log start was consumed;
- every key of the compacted topic still has its last acknowledged value, and the cleaner
  removed records;
- retention deleted segments (the log start moved);
- the broker's output has no ERROR line and no traceback.

Memory and descriptors are sampled every ``--sample-every`` seconds and their slopes
reported, not judged: a slope is a figure for a person to read next to the run's length.
Everything goes to ``--output`` (``report.json``, ``history.jsonl``, ``broker.log``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from soaklib.compacted import KeyedWriter, check_compacted, read_latest
from soaklib.resources import Sample, sample, trends
from tests.helpers.brokers import KpyBroker
from tests.helpers.history import history_check
from tests.helpers.replication_cluster import Workload

RETAINED, COMPACTED = "soak-retained", "soak-compacted"
RETAINED_PARTITIONS, COMPACTED_PARTITIONS = 6, 3
BROKER_SETTINGS = {
    "log.retention.check.interval.ms": 5000,
    "log.cleaner.backoff.ms": 2000,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 3,
}
TOPIC_CONFIGS = {
    RETAINED: {"segment.bytes": "65536", "retention.bytes": "262144"},
    COMPACTED: {
        "cleanup.policy": "compact",
        "segment.bytes": "65536",
        "min.cleanable.dirty.ratio": "0.1",
    },
}
#: Seconds after a (re)start before the broker is sampled: clients reconnecting and logs
#: reopening are growth that is not a leak.
WARM_UP_S = 15
#: What must not appear in the broker's output.
TROUBLE = re.compile(r"\bERROR\b|Traceback \(most recent call last\)")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60, help="length of the run (60)")
    parser.add_argument("--kill-every", type=float, default=180, help="seconds between kills (180)")
    parser.add_argument(
        "--churn-every", type=float, default=45, help="seconds between group changes (45)"
    )
    parser.add_argument(
        "--sample-every", type=float, default=60, help="seconds between samples (60)"
    )
    parser.add_argument("--seed", type=int, default=20261203, help="for the kill times")
    parser.add_argument(
        "--output", type=Path, help="directory for the report (default: a temporary one)"
    )
    return parser.parse_args(argv)


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(RETAINED, RETAINED_PARTITIONS, 1, config=TOPIC_CONFIGS[RETAINED]),
        NewTopic(COMPACTED, COMPACTED_PARTITIONS, 1, config=TOPIC_CONFIGS[COMPACTED]),
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)


class Soak:
    """One run: the broker, its load, the crashes and the samples."""

    def __init__(self, args: argparse.Namespace, output: Path) -> None:
        self.args = args
        self.output = output
        self.rng = random.Random(args.seed)
        self.broker = KpyBroker(output / "broker", BROKER_SETTINGS)
        self.samples: list[Sample] = []
        self.kills = 0
        self.group_changes = 0

    def run(self) -> dict:
        self.broker.start()
        try:
            create_topics(self.broker.bootstrap)
            workload = Workload(self.broker.bootstrap, RETAINED, RETAINED_PARTITIONS).start()
            writer = KeyedWriter(
                self.broker.bootstrap, COMPACTED, COMPACTED_PARTITIONS, keys=200
            ).start()
            self.drive(workload)
            writer.stop()
            history = workload.stop(self.broker, drain_timeout=180)
            latest, stored = read_latest(self.broker.bootstrap, COMPACTED, COMPACTED_PARTITIONS)
        finally:
            self.broker.stop()
            (self.output / "broker.log").write_text(self.broker.log_text())
        return self.verdict(history, writer, latest, stored)

    def drive(self, workload: Workload) -> None:
        """Until the time is up: kill and restart, add or remove a consumer, sample."""
        started = time.monotonic()
        end = started + self.args.minutes * 60
        next_kill = started + self.rng.uniform(0.5, 1.5) * self.args.kill_every
        next_churn = started + self.args.churn_every
        next_sample = restarted = started
        while (now := time.monotonic()) < end:
            if workload.fatal:
                raise AssertionError(f"a client failed fatally: {workload.fatal}")
            if now >= next_sample and now - restarted >= WARM_UP_S:
                assert self.broker.process is not None
                taken = sample(self.broker.process.pid, now - started)
                if taken is not None:
                    self.samples.append(taken)
                next_sample = now + self.args.sample_every
            if now >= next_churn:
                self.change_group(workload)
                next_churn += self.args.churn_every
            if now >= next_kill:
                self.broker.kill()
                time.sleep(self.rng.uniform(0, 1))
                self.broker.start()
                restarted = time.monotonic()
                self.kills += 1
                next_kill = now + self.rng.uniform(0.5, 1.5) * self.args.kill_every
            time.sleep(0.2)

    def change_group(self, workload: Workload) -> None:
        """Alternately add a consumer and remove the oldest: a rebalance either way."""
        if self.group_changes % 2 == 0:
            workload.add_consumer()
        else:
            workload.remove_consumer()
        self.group_changes += 1

    def verdict(self, history: list[dict], writer: KeyedWriter, latest: dict, stored: int) -> dict:
        (self.output / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in history))
        report = history_check.check(history, require_consumed=True)
        log_starts = {e["partition"]: e["offset"] for e in history if e["op"] == "log_start"}
        trouble = [line for line in self.broker.log_text().splitlines() if TROUBLE.search(line)]
        failures = [f"history: {report.violations}"] if not report.ok else []
        failures += check_compacted(writer, latest, stored)
        if not any(log_starts.values()):
            failures.append("retention deleted nothing: every log start is still 0")
        if trouble:
            failures.append(f"{len(trouble)} ERROR or traceback lines, e.g. {trouble[:3]}")
        return {
            "minutes": self.args.minutes,
            "kills": self.kills,
            "group_changes": self.group_changes,
            "retained": {
                "acknowledged": report.acked,
                "failed": report.failed,
                "final": report.final,
                "reads": report.polled,
                "counts": dict(report.counts),
                "log_start_offsets": log_starts,
            },
            "compacted": {"acknowledged": writer.acked, "keys": len(latest), "in_log": stored},
            "trends": trends(self.samples),
            "samples": [asdict(s) for s in self.samples],
            "failures": failures,
            "history_summary": report.summary(),
        }


def print_report(result: dict) -> None:
    mib = 1024 * 1024
    samples = result["samples"]
    print(result["history_summary"])
    print(
        f"{result['minutes']} min, {result['kills']} kill -9, "
        f"{result['group_changes']} group changes; "
        f"retained: {result['retained']['acknowledged']} acknowledged, log starts "
        f"{result['retained']['log_start_offsets']}; compacted: {result['compacted']}"
    )
    if samples:
        rss = [s["rss_bytes"] / mib for s in samples]
        fds = [s["open_fds"] for s in samples]
        print(
            f"RSS {min(rss):.0f}-{max(rss):.0f} MiB, open fds {min(fds)}-{max(fds)} "
            f"over {len(samples)} samples; slopes: {result['trends']}"
        )
    print("OK" if not result["failures"] else "FAILED:\n  " + "\n  ".join(result["failures"]))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    output = args.output or Path(tempfile.mkdtemp(prefix="kpybroker-soak-"))
    output.mkdir(parents=True, exist_ok=True)
    result = Soak(args, output).run()
    (output / "report.json").write_text(json.dumps(result, indent=2))
    print_report(result)
    print(f"report in {output}")
    return 1 if result["failures"] else 0
