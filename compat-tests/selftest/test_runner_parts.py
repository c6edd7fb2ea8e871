"""The runner's judging, parsing and reporting, on made-up results."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat.cli import failure_details
from compat.expectations import Entry, Expectations
from compat.report import render
from compat.results import RanTest, SuiteResult, Verdict, parse_junit
from compat.suite import Suite
from suites.differential.allowlist import Allowed, Difference, compare, judge

PYTEST_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="test.integration.test_admin" name="test_ok" time="0.5"/>
<testcase classname="test.integration.test_admin" name="test_acls" time="0.1">
  <failure message="IncompatibleBrokerVersion">trace</failure></testcase>
<testcase classname="test.integration.test_admin" name="test_old" time="0">
  <skipped message="Requires KAFKA_VERSION &lt; 0.10.1"/></testcase>
<testcase classname="test.integration.test_admin" name="test_ok" time="0.2">
  <error message="teardown failed"/></testcase>
</testsuite></testsuites>"""

NODE_JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="kafkajs" tests="1">
<testcase name="producer sends" time="0.04" classname="test"/>
</testsuite></testsuites>"""


def test_parse_junit_names_tests_by_module_or_describe_block(tmp_path: Path) -> None:
    (tmp_path / "pytest.xml").write_text(PYTEST_JUNIT)
    (tmp_path / "node.xml").write_text(NODE_JUNIT)
    cases = {c.id: c for c in parse_junit(tmp_path / "pytest.xml")}
    assert set(cases) == {"test_admin::test_ok", "test_admin::test_acls", "test_admin::test_old"}
    # A test that passed its call but failed in teardown counts once, as failed.
    assert cases["test_admin::test_ok"].outcome == "failed"
    assert cases["test_admin::test_old"].outcome == "skipped"
    [node] = parse_junit(tmp_path / "node.xml")
    assert node.id == "kafkajs::producer sends" and node.outcome == "passed"


@pytest.mark.parametrize(
    ("outcome", "listed_as", "status"),
    [
        ("passed", None, "passed"),
        ("failed", None, "failed"),
        ("failed", "failure", "known-failure"),
        ("passed", "failure", "unexpected-pass"),
        ("skipped", None, "unexpected-skip"),
        ("skipped", "skip", "expected-skip"),
    ],
)
def test_judging_is_strict_both_ways(outcome: str, listed_as: str | None, status: str) -> None:
    entry = Entry(test="mod::test_*", reason="because")
    expectations = Expectations(
        known_failures=[entry] if listed_as == "failure" else [],
        expected_skips=[entry] if listed_as == "skip" else [],
    )
    verdict = expectations.judge(RanTest("mod::test_x", outcome, 0.1))
    assert verdict.status == status
    assert verdict.reason == ("because" if listed_as and status != "failed" else "")


def test_stale_entries_and_timeouts() -> None:
    expectations = Expectations(
        known_failures=[Entry("a::*", "r", timeout=10), Entry("gone::test", "r")]
    )
    assert expectations.stale(["a::one"]) == ["gone::test (listed in ?)"]
    assert expectations.timeouts() == {"a::*": 10}
    assert expectations.without_known_failures().known_failures == []


def test_allowlist_explains_exact_differences_and_flags_stale_entries() -> None:
    kafka = {"v3/Fetch(1)": "4-18", "v3/EndTxn(26)": "0-5", "same": 1}
    kpy = {"v3/Fetch(1)": "4-17", "same": 1, "extra": True}
    diffs = compare("api", kafka, kpy, "<absent>")
    assert diffs == [
        Difference("api", "v3/Fetch(1)", "4-18", "4-17"),
        Difference("api", "v3/EndTxn(26)", "0-5", "<absent>"),
        Difference("api", "extra", "<absent>", True),
    ]
    allowed = [
        Allowed("api", "v3/Fetch(1)", "r", kafka="4-18", kpybroker="4-17"),
        Allowed("api", "v3/*Txn*", "r", kpybroker="<absent>"),
        Allowed("api", "v3/Produce(0)", "r"),  # differs no more: stale
        Allowed("other", "extra", "r"),  # another scenario's entry
    ]
    unexplained, stale = judge("api", diffs, allowed)
    assert [d.path for d in unexplained] == ["extra"]
    assert [a.path for a in stale] == ["v3/Produce(0)"]


class _Fake(Suite):
    name = "fake"
    title = "Fake suite"
    what = "nothing"

    def install(self) -> dict[str, str]:
        return {}

    def command(self, ctx):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def test_report_has_a_row_per_suite_with_counts_and_reasons() -> None:
    result = SuiteResult(
        suite="fake", title="Fake suite", target="kpybroker", command="compat-tests/run fake",
        status="passed", started="2026-01-02T03:04:05+00:00", commit="abc123",
        versions={"fake": "1.0"}, what="nothing", durations_s={"total": 12.0},
    )  # fmt: skip
    expectations = Expectations(known_failures=[Entry("m::t", "not built yet")])
    result.tests = [
        expectations.judge(RanTest("m::t", "failed", 1)),
        expectations.judge(RanTest("m::u", "passed", 1)),
    ]
    text = render([_Fake()], {"fake": result}, "2026-01-02 03:05 UTC")
    assert "Generated 2026-01-02 03:05 UTC" in text
    row = "| Fake suite | fake 1.0 | nothing | 1/2 passed, 1 known failures | pass | 12 s |"
    assert row in text
    assert "`compat-tests/run fake`" in text
    assert "- `m::t`: not built yet" in text


def test_failure_details_keep_the_exception_and_the_end_of_its_traceback() -> None:
    trace = "\n".join(["KafkaTimeoutError: 30 s", *(f"frame {n}" for n in range(40)), "E  raise"])
    result = SuiteResult(suite="kafka-python", title="", target="kpybroker", command="")
    result.tests = [
        Verdict(id="t::slow", outcome="failed", status="failed", duration_s=1, message=trace),
        Verdict(id="t::ok", outcome="passed", status="passed", duration_s=1),
    ]
    lines = failure_details([result], max_lines=5)
    assert lines[0] == "--- kafka-python: t::slow"
    assert lines[1].strip() == "KafkaTimeoutError: 30 s"
    assert lines[-1].strip() == "E  raise"
    assert len(lines) == 1 + 2 + 1 + 3


def test_failure_details_show_the_end_of_a_broker_that_did_not_start() -> None:
    output = "\n".join(f"log line {n}" for n in range(100))
    result = SuiteResult(suite="aiokafka", title="", target="kpybroker", command="")
    result.problems = [f"BrokerStartError: did not become ready\n--- its output ---\n{output}"]
    lines = failure_details([result], max_lines=5)
    assert lines[0] == "--- aiokafka: BrokerStartError: did not become ready"
    assert [line.strip() for line in lines[1:]] == [f"log line {n}" for n in range(85, 100)]
