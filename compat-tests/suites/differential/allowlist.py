"""Differences between Apache Kafka and kpybroker that are known and explained.

``allowlist.toml`` beside this file lists them::

    [[difference]]
    scenario = "api_versions_ranges"        # a scenario's name
    path = "v3/AddPartitionsToTxn(24)"      # fnmatch pattern
    kafka = "0-5"                           # optional: the value Kafka must show
    kpybroker = "<absent>"                  # optional: the value kpybroker must show
    reason = "transactions are not implemented"
    kind = "missing-feature"                # by-design, missing-feature, broker-bug, harness

A difference fails its scenario unless an entry matches it. An entry that
matches nothing in a scenario it names is *stale* and fails that scenario
too, so the list shrinks as kpybroker catches up.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALLOWLIST_PATH = Path(__file__).with_name("allowlist.toml")
#: Why a difference is allowed: kpybroker chose it, has not built it yet, gets
#: it wrong (to be fixed: listed so CI stays green meanwhile), or the two
#: brokers were set up differently (KRaft-only settings of the reference).
KINDS = ("by-design", "missing-feature", "broker-bug", "harness")
_ANY = object()


@dataclass(frozen=True)
class Difference:
    scenario: str
    path: str
    kafka: Any
    kpybroker: Any

    def describe(self) -> str:
        return f"{self.path}: Kafka {self.kafka!r}, kpybroker {self.kpybroker!r}"


@dataclass(frozen=True)
class Allowed:
    scenario: str
    path: str
    reason: str
    kind: str = "by-design"
    kafka: Any = _ANY
    kpybroker: Any = _ANY

    def matches(self, diff: Difference) -> bool:
        return (
            diff.scenario == self.scenario
            and fnmatch.fnmatchcase(diff.path, self.path)
            and (self.kafka is _ANY or self.kafka == diff.kafka)
            and (self.kpybroker is _ANY or self.kpybroker == diff.kpybroker)
        )

    def describe(self) -> str:
        values = ""
        if self.kafka is not _ANY or self.kpybroker is not _ANY:
            kafka = "any" if self.kafka is _ANY else repr(self.kafka)
            kpy = "any" if self.kpybroker is _ANY else repr(self.kpybroker)
            values = f" (Kafka {kafka}, kpybroker {kpy})"
        return f"`{self.scenario}` `{self.path}`{values} ({self.kind}): {self.reason}"


def load(path: Path = ALLOWLIST_PATH) -> list[Allowed]:
    if not path.exists():
        return []
    entries = []
    for item in tomllib.loads(path.read_text()).get("difference", []):
        if not str(item.get("reason", "")).strip():
            raise ValueError(f"{path}: {item} has no reason")
        if item.get("kind", "by-design") not in KINDS:
            raise ValueError(f"{path}: {item}: kind must be one of {KINDS}")
        entries.append(Allowed(**item))
    return entries


def compare(
    scenario: str, kafka: dict[str, Any], kpy: dict[str, Any], absent: str
) -> list[Difference]:
    """Every path whose value differs, in Kafka's order then kpybroker's extra paths."""
    paths = list(kafka) + [p for p in kpy if p not in kafka]
    return [
        Difference(scenario, path, kafka.get(path, absent), kpy.get(path, absent))
        for path in paths
        if kafka.get(path, absent) != kpy.get(path, absent)
    ]


def judge(
    scenario: str, diffs: list[Difference], allowed: list[Allowed]
) -> tuple[list[Difference], list[Allowed]]:
    """(differences no entry allows, entries for this scenario that allowed nothing)."""
    used: set[int] = set()
    unexplained = []
    for diff in diffs:
        index = next((i for i, a in enumerate(allowed) if a.matches(diff)), None)
        if index is None:
            unexplained.append(diff)
        else:
            used.add(index)
    stale = [a for i, a in enumerate(allowed) if a.scenario == scenario and i not in used]
    return unexplained, stale
