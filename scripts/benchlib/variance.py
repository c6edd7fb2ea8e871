"""How much the rounds disagreed: each figure's spread, and whether a miss is inside it.

A figure is the median of its rounds, and on a shared 2-core machine the rounds of
one figure can differ by more than the two brokers do. The report says so plainly:
how far each broker's samples spread, and for each missed target whether kpybroker's
best round reached Kafka's worst (a miss inside the noise) or no round did.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from benchlib.results import KAFKA, KPYBROKER, Better, Metric, Results, Row, format_value

#: A spread above this is called out by name in the report.
WIDE = 0.20


def relative_spread(values: Sequence[float]) -> float | None:
    """(largest - smallest) / median; None for fewer than two samples or a zero median."""
    if len(values) < 2:
        return None
    middle = statistics.median(values)
    if not middle:
        return None
    return (max(values) - min(values)) / abs(middle)


@dataclass(frozen=True)
class Spread:
    """One figure's spread between rounds on each broker."""

    metric: Metric
    kpybroker: float
    kafka: float

    @property
    def widest(self) -> float:
        return max(self.kpybroker, self.kafka)


def spreads(results: Results) -> list[Spread]:
    """The figures with two or more samples on both brokers."""
    found = []
    for metric, by_broker in results.samples.items():
        ours, theirs = relative_spread(by_broker[KPYBROKER]), relative_spread(by_broker[KAFKA])
        if ours is not None and theirs is not None:
            found.append(Spread(metric, ours, theirs))
    return found


def miss_note(results: Results, row: Row) -> str:
    """Whether a missed target is inside the rounds' spread, in one sentence."""
    metric = row.metric
    ours = results.samples[metric][KPYBROKER]
    if not ours:
        return ""
    higher = metric.better is Better.HIGHER
    best = max(ours) if higher else min(ours)
    if metric.limit is not None:
        if len(ours) < 2:
            return ""
        reached = best < metric.limit
        return f" Its best round took {format_value(best)} {metric.unit}: " + (
            "inside the rounds' spread." if reached else "every round missed."
        )
    theirs = [value * metric.target_ratio for value in results.samples[metric][KAFKA]]
    if not theirs or max(len(ours), len(theirs)) < 2:
        return ""
    worst = min(theirs) if higher else max(theirs)
    reached = best >= worst if higher else best <= worst
    bound = "Kafka's worst" if metric.target_ratio == 1.0 else "the target at Kafka's worst"
    verdict = "inside the rounds' spread" if reached else "outside the rounds' spread"
    return (
        f" kpybroker's best round ({format_value(best)}) against {bound} "
        f"({format_value(worst)}): {verdict}."
    )


def variance_lines(results: Results) -> list[str]:
    """The report's section on the spread between rounds."""
    found = spreads(results)
    if not found:
        return []
    ours = [s.kpybroker for s in found]
    theirs = [s.kafka for s in found]
    wide_ours = sum(1 for value in ours if value > WIDE)
    wide_theirs = sum(1 for value in theirs if value > WIDE)
    lines = [
        "## Variance between rounds",
        "",
        f"{len(found)} figures have two or more samples on each broker. A figure's spread is "
        "(largest - smallest) / median of its samples. The median spread was "
        f"{statistics.median(ours):.0%} for kpybroker and {statistics.median(theirs):.0%} "
        f"for Kafka. {wide_ours} of kpybroker's figures and {wide_theirs} of Kafka's spread "
        f"by more than {WIDE:.0%}. A ratio closer to 1.0 than the spreads of its two figures "
        "says little on its own; the raw samples are at the end.",
        "",
    ]
    widest = sorted(found, key=lambda s: s.widest, reverse=True)[:8]
    lines += [
        "The widest:",
        "",
        "| Workload | Case | Metric | kpybroker spread | Kafka spread |",
        "|---|---|---|--:|--:|",
        *(
            f"| {s.metric.workload} | {s.metric.case} | {s.metric.name} | "
            f"{s.kpybroker:.0%} | {s.kafka:.0%} |"
            for s in widest
        ),
        "",
    ]
    return lines
