#!/usr/bin/env python3
"""Check a history of a Kafka workload, in the style of Jepsen's Kafka checker.

A history is a list of events, one JSON object per line in a file (or the
same dicts from Python); every value is ``"<producer>:<sequence>"``, unique
to one send, so that a record can be followed from send to read:

- ``{"op": "ack", "value": v, "partition": p, "offset": o}``: the broker
  acknowledged ``v`` at ``p``/``o``; a negative ``o`` is an acknowledgement
  without an offset (librdkafka reports -1001 for records it knows are written
  because a later batch of the partition was acknowledged: an implicit ack).
  ``{"op": "fail", "value": v}``: it answered with an error (the record may or
  may not have been written).
- ``{"op": "assign", "consumer": c, "partitions": [...]}``: consumer ``c``
  got an assignment; ``{"op": "poll", "consumer": c, "partition": p,
  "offset": o, "value": v}``: it read ``v`` at ``p``/``o``.
- ``{"op": "final", "partition": p, "offset": o, "value": v}``: the record
  at ``p``/``o`` when everything was read back at the end, optionally with
  the ``"producer_id"`` and ``"producer_epoch"`` of the batch holding it.
- ``{"op": "log_start", "partition": p, "offset": o}``: the partition's log
  start offset at the end; records below it were deleted by retention, so
  they are not in the final log and cannot be checked against it.

Violations (any makes the exit status 1):

- lost: acknowledged, but not in the final log;
- duplicated: in the final log more than once, under one producer id and
  epoch (or one unknown): a retry the broker should have recognised;
- misplaced: in the final log elsewhere than its acknowledgement said;
- reordered: a producer's records out of sequence order within a partition;
- offsets backwards: final offsets of a partition not increasing, or a
  consumer reading a partition at an offset not above its previous one
  between two assignments (a rebalance may legitimately rewind it);
- phantom reads: a consumer read a record the final log does not hold there
  (it saw a write that was later undone).

Also counted, not violations: acknowledgements without an offset (checked by
value: the record must be in the final log or have been read), a record in the
final log again under a producer id and epoch none of its earlier copies has
(resent in a new epoch: no broker can recognise it; an idempotent librdkafka
producer that bumps its epoch renumbers records that may already be written,
confluentinc/librdkafka#4953), records written although their send failed
(indeterminate), re-deliveries to consumers (at-least-once), gaps in final
offsets, acknowledged records and reads below the log start offset (expired:
checked against what consumers read there, and counted when none did), and
acknowledged records no consumer read (``--require-consumed`` makes those
violations, expired ones excepted).

Usage: ``scripts/history_check.py HISTORY.jsonl [--require-consumed]``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VIOLATIONS = ("lost", "duplicated", "misplaced", "reordered", "offsets_backwards", "phantom_reads")
NOTES = (
    "acked_without_offset",
    "resent_in_new_epoch",
    "written_after_failure",
    "redelivered",
    "offset_gaps",
    "expired",
    "expired_unread",
    "unconsumed",
)
EXAMPLES = 5

Event = Mapping[str, Any]
Position = tuple[int, int]


@dataclass
class Report:
    """Counts of each kind of anomaly, with a few examples of each."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    acked: int = 0
    failed: int = 0
    final: int = 0
    polled: int = 0
    require_consumed: bool = False

    def add(self, kind: str, example: str) -> None:
        self.counts[kind] += 1
        if len(self.examples[kind]) < EXAMPLES:
            self.examples[kind].append(example)

    @property
    def violations(self) -> dict[str, int]:
        kinds = VIOLATIONS + (("unconsumed",) if self.require_consumed else ())
        return {kind: self.counts[kind] for kind in kinds if self.counts[kind]}

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        lines = [
            f"{self.acked} acknowledged, {self.failed} failed, {self.final} in the final log, "
            f"{self.polled} reads"
        ]
        for kind in VIOLATIONS + NOTES:
            lines.append(f"  {kind}: {self.counts[kind]}")
            lines += [f"    e.g. {example}" for example in self.examples.get(kind, [])]
        lines.append("OK" if self.ok else f"VIOLATIONS: {self.violations}")
        return "\n".join(lines)


def check(events: Iterable[Event], *, require_consumed: bool = False) -> Report:
    """Check a whole history; see the module docstring for what is checked."""
    report = Report(require_consumed=require_consumed)
    by_op: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        by_op[event["op"]].append(event)
        if event["op"] in ("assign", "poll"):
            by_op["consumer"].append(event)  # in history order: assignments reset the checks
    final = _check_final(report, by_op["final"])
    log_start = {event["partition"]: event["offset"] for event in by_op["log_start"]}

    def expired(event: Event) -> bool:
        return 0 <= event["offset"] < log_start.get(event["partition"], 0)

    acks = _drop_expired(report, by_op["ack"], expired)
    _check_expired_reads(report, [e for e in by_op["ack"] if expired(e)], by_op["poll"])
    read_values = {event["value"] for event in by_op["poll"]}
    _check_producers(report, acks, by_op["fail"], final, read_values)
    consumer_events = [e for e in by_op["consumer"] if e["op"] == "assign" or not expired(e)]
    _check_consumers(report, consumer_events, final)
    _check_consumed(report, acks, by_op["poll"], read_values)
    return report


def _drop_expired(
    report: Report, acks: list[Event], expired: Callable[[Event], bool]
) -> list[Event]:
    """The acknowledgements of records still in the log; the others are counted as expired
    (and as acknowledged), since retention deleted them before the final read."""
    kept = []
    for event in acks:
        if expired(event):
            report.acked += 1
            report.add("expired", f"{event['value']} at {(event['partition'], event['offset'])}")
        else:
            kept.append(event)
    return kept


def _check_expired_reads(report: Report, acks: list[Event], polls: list[Event]) -> None:
    """Records retention deleted are checked against what consumers read before: a read at
    an acknowledged position must be the acknowledged value (else it is misplaced); an
    acknowledged record no consumer read before it went is counted (``expired_unread``)."""
    read: dict[Position, set[str]] = defaultdict(set)
    for event in polls:
        read[(event["partition"], event["offset"])].add(event["value"])
    for event in acks:
        position = (event["partition"], event["offset"])
        values = read.get(position)
        if not values:
            report.add("expired_unread", f"{event['value']} at {position}")
        elif values != {event["value"]}:
            report.add(
                "misplaced", f"{event['value']} acknowledged at {position}, read there: {values}"
            )


def _check_final(report: Report, events: list[Event]) -> dict[Position, str]:
    """The final log as {(partition, offset): value}; duplicates, order and offsets."""
    final: dict[Position, str] = {}
    where: dict[str, Position] = {}
    writers: dict[str, list[tuple[int, int] | None]] = {}
    last_offset: dict[int, int] = {}
    last_seq: dict[tuple[int, str], int] = {}
    for event in events:
        partition, offset, value = event["partition"], event["offset"], event["value"]
        report.final += 1
        previous = last_offset.get(partition)
        if previous is not None and offset <= previous:
            report.add("offsets_backwards", f"final p{partition}: {offset} after {previous}")
        elif previous is not None and offset != previous + 1:
            report.add("offset_gaps", f"final p{partition}: {previous} -> {offset}")
        last_offset[partition] = offset
        final[(partition, offset)] = value
        written_by = _writer(event)
        if value in where:
            earlier = writers[value]
            copy = (
                f"{value} at {where[value]} and {(partition, offset)}, written by "
                f"(producer id, epoch) {earlier} and {written_by}"
            )
            if written_by is not None and None not in earlier and written_by not in earlier:
                report.add("resent_in_new_epoch", copy)
                earlier.append(written_by)
                continue  # its place in the producer's order is the re-send's, not the record's
            report.add("duplicated", copy)
        where[value] = (partition, offset)
        writers.setdefault(value, []).append(written_by)
        producer, seq = _parse(value)
        if seq <= last_seq.get((partition, producer), -1):
            report.add("reordered", f"p{partition} offset {offset}: {value} after seq {seq}")
        last_seq[(partition, producer)] = seq
    return final


def _writer(event: Event) -> tuple[int, int] | None:
    """The producer id and epoch that wrote a final record, when the history has them."""
    if "producer_epoch" not in event:
        return None
    return event["producer_id"], event["producer_epoch"]


def _check_producers(
    report: Report,
    acks: list[Event],
    fails: list[Event],
    final: Mapping[Position, str],
    read_values: set[str],
) -> None:
    stored: dict[str, list[Position]] = defaultdict(list)
    for position, value in final.items():
        stored[value].append(position)
    for event in acks:
        report.acked += 1
        value = event["value"]
        acknowledged = (event["partition"], event["offset"])
        positions = stored.get(value)
        if event["offset"] < 0:  # no offset to check: written is all it says
            written = positions is not None or value in read_values
            report.add("acked_without_offset" if written else "lost", f"{value} at {acknowledged}")
        elif positions is None:
            report.add("lost", f"{value} acknowledged at {acknowledged}")
        elif acknowledged not in positions:
            report.add(
                "misplaced", f"{value} acknowledged at {acknowledged}, stored at {positions}"
            )
    acked = {event["value"] for event in acks}
    for event in fails:
        report.failed += 1
        if event["value"] in stored and event["value"] not in acked:
            report.add("written_after_failure", f"{event['value']} at {stored[event['value']]}")


def _check_consumers(report: Report, events: list[Event], final: Mapping[Position, str]) -> None:
    last: dict[tuple[str, int], int] = {}
    for event in events:
        consumer = event["consumer"]
        if event["op"] == "assign":
            for key in [k for k in last if k[0] == consumer]:
                del last[key]
            continue
        report.polled += 1
        partition, offset, value = event["partition"], event["offset"], event["value"]
        position = (partition, offset)
        if final.get(position) != value:
            report.add(
                "phantom_reads",
                f"{consumer} read {value} at {position}: the final log has {final.get(position)}",
            )
        previous = last.get((consumer, partition))
        if previous is not None and offset <= previous:
            report.add("offsets_backwards", f"{consumer} p{partition}: {offset} after {previous}")
        last[(consumer, partition)] = offset


def _check_consumed(
    report: Report, acks: list[Event], polls: list[Event], read_values: set[str]
) -> None:
    """Positions read more than once, and acknowledged records no consumer read (by
    position, or by value when the acknowledgement has no offset; ``read_values`` is the
    set of values in ``polls``)."""
    reads = Counter((event["partition"], event["offset"]) for event in polls)
    for position, count in reads.items():
        if count > 1:
            report.add("redelivered", f"{position} read {count} times")
    for event in acks:
        position = (event["partition"], event["offset"])
        consumed = position in reads if event["offset"] >= 0 else event["value"] in read_values
        if not consumed:
            report.add("unconsumed", f"{event['value']} at {position}")


def _parse(value: str) -> tuple[str, int]:
    producer, _, seq = value.rpartition(":")
    return producer, int(seq)


def read_history(path: Path) -> list[Event]:
    with path.open() as lines:
        return [json.loads(line) for line in lines if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("history", type=Path, help="a JSON-lines history")
    parser.add_argument(
        "--require-consumed",
        action="store_true",
        help="count acknowledged records that no consumer read as violations",
    )
    args = parser.parse_args(argv)
    report = check(read_history(args.history), require_consumed=args.require_consumed)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
