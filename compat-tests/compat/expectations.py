"""Known failures and expected skips: each suite's explicit list, each entry with its reason.

A suite's ``known-failures.toml`` sits beside its ``suite.py``::

    [[known-failure]]
    test = "test_admin_integration::test_create_describe_delete_acls"   # fnmatch pattern
    reason = "ACL APIs (CreateAcls 30, DescribeAcls 29, DeleteAcls 31) are not implemented"
    kind = "missing-feature"        # or "broker-bug", "client-limitation"
    timeout = 10                    # optional: seconds before the test is cut short

    [[expected-skip]]
    test = "test_consumer_integration::test_kafka_consumer_offsets_for_time_old"
    reason = "only runs against brokers older than 0.10.1"

The lists are strict in both directions so that they stay true: a listed test
that passes is an *unexpected pass* (remove the entry), and an unlisted skip
is an *unexpected skip*, which fails the suite like a failure. On a full run,
an entry that matches no test at all is reported as stale.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from compat.results import RanTest, Verdict

KINDS = ("missing-feature", "broker-bug", "client-limitation")


@dataclass(frozen=True)
class Entry:
    """One listed test pattern with the reason it is listed."""

    test: str
    reason: str
    kind: str = "missing-feature"
    timeout: float | None = None

    def matches(self, test_id: str) -> bool:
        return fnmatch.fnmatchcase(test_id, self.test)


@dataclass
class Expectations:
    """A suite's known failures and expected skips."""

    known_failures: list[Entry] = field(default_factory=list)
    expected_skips: list[Entry] = field(default_factory=list)
    source: Path | None = None

    @classmethod
    def load(cls, path: Path) -> Expectations:
        """Read a known-failures.toml; a missing file means the list is empty."""
        if not path.exists():
            return cls(source=path)
        data = tomllib.loads(path.read_text())
        unknown = set(data) - {"known-failure", "expected-skip"}
        if unknown:
            raise ValueError(f"{path}: unknown tables {sorted(unknown)}")
        failures = [Entry(**item) for item in data.get("known-failure", [])]
        skips = [Entry(**item) for item in data.get("expected-skip", [])]
        for entry in failures + skips:
            if not entry.reason.strip():
                raise ValueError(f"{path}: {entry.test} has no reason")
            if entry.kind not in KINDS:
                raise ValueError(f"{path}: {entry.test}: kind must be one of {KINDS}")
        return cls(failures, skips, path)

    def without_known_failures(self) -> Expectations:
        """For runs against Apache Kafka itself, where every test is expected to pass."""
        return Expectations([], self.expected_skips, self.source)

    def timeouts(self) -> dict[str, float]:
        """``{pattern: seconds}`` for known failures that should be cut short."""
        return {e.test: e.timeout for e in self.known_failures if e.timeout}

    def _find(self, entries: list[Entry], test_id: str) -> Entry | None:
        return next((e for e in entries if e.matches(test_id)), None)

    def judge(self, case: RanTest) -> Verdict:
        """Turn what the runner reported into a verdict against the lists."""
        failure = self._find(self.known_failures, case.id)
        skip = self._find(self.expected_skips, case.id)
        status, reason = case.outcome, ""
        if case.outcome == "failed" and failure:
            status, reason = "known-failure", failure.reason
        elif case.outcome == "passed" and failure:
            status, reason = "unexpected-pass", failure.reason
        elif case.outcome == "skipped":
            status = "expected-skip" if skip else "unexpected-skip"
            reason = skip.reason if skip else ""
        return Verdict(case.id, case.outcome, status, case.duration_s, case.message, reason)

    def stale(self, test_ids: list[str]) -> list[str]:
        """Entries that match none of the tests that ran (only meaningful on a full run)."""
        return [
            f"{entry.test} (listed in {self.source.name if self.source else '?'})"
            for entry in self.known_failures + self.expected_skips
            if not any(entry.matches(t) for t in test_ids)
        ]
