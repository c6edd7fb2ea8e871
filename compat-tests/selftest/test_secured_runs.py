"""What the runner adds for secured suites and suites of several commands, without a broker."""

from __future__ import annotations

from pathlib import Path

from compat.expectations import Entry, Expectations
from compat.results import SuiteResult
from compat.runner import _judge
from compat.security import ClientFiles, SecuredBroker
from compat.suite import RunContext

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="1">
<testcase classname="test.integration.{module}" name="{name}" time="0.5"/>
</testsuite></testsuites>"""


def _result() -> SuiteResult:
    return SuiteResult(suite="fake", title="Fake", target="kpybroker", command="run fake")


def test_the_tests_of_every_command_are_judged_together(tmp_path: Path) -> None:
    first, second = tmp_path / "junit.xml", tmp_path / "junit-secured.xml"
    first.write_text(JUNIT.format(module="test_admin", name="test_acls"))
    second.write_text(JUNIT.format(module="test_sasl", name="test_admin[PLAIN]"))
    result = _result()
    expectations = Expectations(known_failures=[Entry("test_admin::test_acls", "r")])
    _judge(result, [first, second], [], expectations, None)
    assert [(t.id, t.status) for t in result.tests] == [
        ("test_admin::test_acls", "unexpected-pass"),
        ("test_sasl::test_admin[PLAIN]", "passed"),
    ]
    assert result.status == "failed" and result.problems == []


def test_a_command_that_wrote_no_results_fails_the_suite(tmp_path: Path) -> None:
    first = tmp_path / "junit.xml"
    first.write_text(JUNIT.format(module="test_admin", name="test_ok"))
    result = _result()
    _judge(result, [first, tmp_path / "junit-secured.xml"], [], Expectations(), None)
    assert result.problems == ["the test runner wrote no results (junit-secured.xml missing)"]
    assert result.status == "failed"


def test_a_secured_broker_reaches_the_tests_as_json(tmp_path: Path) -> None:
    secured = SecuredBroker(
        listeners={"SASL_SSL": "127.0.0.1:9094"},
        ca_pem="/c/ca.pem",
        truststore="/c/truststore.p12",
        store_password="pw",
        users={"alice": "alice-secret"},
        clients={"alice": ClientFiles("/c/alice.key", "/c/alice.crt", "/c/alice.p12")},
    )
    ctx = RunContext("kpybroker", "127.0.0.1:9092", None, tmp_path, tmp_path / "j.xml", None)
    assert "COMPAT_SECURITY" not in ctx.env()
    ctx.security = secured
    back = SecuredBroker.from_json(ctx.env()["COMPAT_SECURITY"])
    assert back == secured
    assert back.bootstrap_for("SASL_SSL") == "127.0.0.1:9094"
