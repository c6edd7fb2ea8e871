"""Results: what each test did (read from JUnit XML) and what the suite concluded (JSON).

Every suite's test runner writes JUnit XML (pytest ``--junitxml``, node's
``--test-reporter=junit``), so one parser serves them all. The runner then
judges each test against the suite's expectations and writes one JSON file
per suite under ``compat-tests/results/``; the report card is generated from
those files alone.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: What the test runner said about a test.
RAN_OUTCOMES = ("passed", "failed", "skipped")

#: The verdicts (``Verdict.status``); the first four are fine. "flaky": an unexpected failure
#: that passed when the runner ran it again, against the same broker (the report lists it,
#: with its first failure's message).
OK_STATUSES = ("passed", "known-failure", "expected-skip", "flaky")
BAD_STATUSES = ("failed", "unexpected-pass", "unexpected-skip")


@dataclass
class RanTest:
    """One test as its runner reported it."""

    id: str
    outcome: str  # one of RAN_OUTCOMES
    duration_s: float
    message: str = ""


@dataclass
class Verdict:
    """One test, judged: ``status`` is one of OK_STATUSES or BAD_STATUSES."""

    id: str
    outcome: str
    status: str
    duration_s: float
    message: str = ""
    reason: str = ""  # from the known-failures list, when listed there


@dataclass
class SuiteResult:
    """Everything the report card says about one suite run."""

    suite: str
    title: str
    target: str
    command: str
    status: str = "error"  # passed | failed | error
    started: str = ""
    finished: str = ""
    commit: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    what: str = ""
    durations_s: dict[str, float] = field(default_factory=dict)
    tests: list[Verdict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    broker_log_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    annotations: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """How many tests ended in each status."""
        counts = dict.fromkeys((*OK_STATUSES, *BAD_STATUSES), 0)
        for test in self.tests:
            counts[test.status] = counts.get(test.status, 0) + 1
        counts["total"] = len(self.tests)
        return counts

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["counts"] = self.counts()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SuiteResult:
        data = dict(data)
        data.pop("counts", None)
        data["tests"] = [Verdict(**t) for t in data.get("tests", [])]
        return cls(**data)

    def write(self, path: Path) -> None:
        """Write atomically, so a concurrent report never reads half a file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n")
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> SuiteResult:
        return cls.from_json(json.loads(path.read_text()))


def _text(element: ET.Element) -> str:
    """A failure's message attribute, or its first lines of text."""
    message = element.get("message") or ""
    body = (element.text or "").strip()
    if body and body not in message:
        message = f"{message}\n{body}" if message else body
    return message[:3000]


def test_identifier(suite_name: str, classname: str, name: str) -> str:
    """A test's id: ``<group>::<name>``.

    The group is the module for pytest (``test.integration.test_admin_integration``
    -> ``test_admin_integration``) and the ``describe`` block for node, whose
    JUnit classname is always ``test``. The same function names tests in
    :mod:`compat.pytest_plugin`, so known-failure patterns match both.
    """
    group = classname.rsplit(".", 1)[-1] if classname and classname != "test" else suite_name
    return f"{group}::{name}"


def parse_junit(path: Path) -> list[RanTest]:
    """Every test case in a JUnit XML file (pytest's or node's dialect)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
    cases: list[RanTest] = []
    for suite in suites:
        for case in suite.findall("testcase"):
            outcome, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome, message = "failed", _text(child)
                    break
                if child.tag == "skipped":
                    outcome, message = "skipped", _text(child)
            cases.append(
                RanTest(
                    id=test_identifier(
                        suite.get("name", ""), case.get("classname", ""), case.get("name", "")
                    ),
                    outcome=outcome,
                    duration_s=round(float(case.get("time") or 0), 3),
                    message=message,
                )
            )
    return _merge_duplicates(cases)


def _merge_duplicates(cases: list[RanTest]) -> list[RanTest]:
    """One entry per id: pytest reports a test that fails in teardown twice."""
    merged: dict[str, RanTest] = {}
    for case in cases:
        seen = merged.get(case.id)
        if seen is None:
            merged[case.id] = case
        elif case.outcome == "failed" and seen.outcome != "failed":
            seen.outcome, seen.message = "failed", case.message
    return list(merged.values())
