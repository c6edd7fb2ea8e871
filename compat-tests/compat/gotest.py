"""Go tests to JUnit XML: run a ``go tool test2json`` command, echo its output, write the XML.

    python3 -m compat.gotest --junit results/franz-go/junit.xml --suite franz_go -- \\
        go tool test2json -t -p franz_go ./franz_go.test -test.v=test2json

``go test -json`` and ``test2json`` print one JSON event per line (``run``,
``output``, ``pass``, ``fail``, ``skip``, each naming its test, subtests as
``TestX/sub``). Each test becomes a ``<testcase classname=SUITE name=TEST>``,
so the runner names it ``SUITE::TEST`` (``franz_go::TestProduceConsume/gzip``).
A test with subtests is reported through them alone, unless it failed while
they all passed (a failure of its own, before or after them). A test still
running when the stream ends (the binary crashed or was killed) is failed,
and so is the whole run, as ``SUITE::(test binary)``, when the command
exited non-zero without any failing test (it did not build, TestMain failed).
The XML is rewritten after every finished test, so a run cut short by the
runner's timeout still leaves the verdicts of the tests that finished.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: The id of the pseudo-test that stands for the binary itself.
BINARY = "(test binary)"


@dataclass
class GoTest:
    name: str
    outcome: str = ""  # "", passed, failed, skipped
    elapsed: float = 0.0
    output: list[str] = field(default_factory=list)

    def message(self, limit: int = 3000) -> str:
        """The test's own output, less the runner's framing lines, last part first kept."""
        lines = [
            line
            for line in self.output
            if not line.lstrip().startswith(("=== RUN", "=== PAUSE", "=== CONT", "=== NAME"))
        ]
        text = "".join(lines).strip()
        return text[-limit:]


class GoTestStream:
    """The state of a ``test2json`` stream: every test seen, in the order they started."""

    def __init__(self) -> None:
        self.tests: dict[str, GoTest] = {}
        self.loose_output: list[str] = []  # output outside any test (build errors, panics, PASS)

    def feed(self, line: str) -> str | None:
        """Take one line; return the text to echo (output events as they are, else None)."""
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            # Not an event (test2json passes through what it cannot frame).
            self.loose_output.append(line if line.endswith("\n") else line + "\n")
            return line if line.endswith("\n") else line + "\n"
        if not isinstance(event, dict):
            return None
        action, name = event.get("Action"), event.get("Test")
        if action == "output":
            text = str(event.get("Output", ""))
            if name:
                self._test(name).output.append(text)
            else:
                self.loose_output.append(text)
            return text
        if not name:
            return None
        test = self._test(name)
        if action in ("pass", "fail", "skip"):
            test.outcome = {"pass": "passed", "fail": "failed", "skip": "skipped"}[action]
            test.elapsed = float(event.get("Elapsed") or 0.0)
        return None

    def _test(self, name: str) -> GoTest:
        if name not in self.tests:
            self.tests[name] = GoTest(name)
        return self.tests[name]

    def cases(self, *, finished: bool, exit_code: int | None = None) -> list[GoTest]:
        """The tests to report: leaves, and parents that failed on their own.

        With ``finished``, tests that never ended are failed, and a non-zero
        ``exit_code`` without a failing test adds the binary as a failure.
        """
        chosen: list[GoTest] = []
        for name, test in self.tests.items():
            outcome = test.outcome
            if not outcome:
                if not finished:
                    continue
                outcome = "failed"
                test = GoTest(name, outcome, test.elapsed, [*test.output, "(did not finish)\n"])
            children = [t for n, t in self.tests.items() if n.startswith(name + "/")]
            if children and (
                outcome != "failed" or any(c.outcome in ("failed", "") for c in children)
            ):
                continue
            chosen.append(GoTest(name, outcome, test.elapsed, test.output))
        if finished and exit_code and not any(t.outcome == "failed" for t in chosen):
            chosen.append(GoTest(BINARY, "failed", 0.0, [f"exit status {exit_code}\n"]))
            chosen[-1].output[:0] = self.loose_output[-60:]
        return chosen


def junit_xml(suite: str, cases: Iterable[GoTest]) -> bytes:
    """A JUnit document of ``cases``, named so that the runner's ids are ``suite::name``."""
    cases = list(cases)
    root = ET.Element("testsuites")
    element = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(cases)),
        failures=str(sum(c.outcome == "failed" for c in cases)),
        skipped=str(sum(c.outcome == "skipped" for c in cases)),
    )
    for case in cases:
        tc = ET.SubElement(
            element, "testcase", classname=suite, name=case.name, time=f"{case.elapsed:.3f}"
        )
        if case.outcome in ("failed", "skipped"):
            message = case.message()
            child = ET.SubElement(
                tc, "failure" if case.outcome == "failed" else "skipped", message=message[:500]
            )
            child.text = message
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def run(command: list[str], junit: Path, suite: str) -> int:
    """Run ``command`` (a test2json invocation), echo its output, keep ``junit`` up to date."""
    stream = GoTestStream()
    junit.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        echo = stream.feed(line)
        if echo is not None:
            sys.stdout.write(echo)
            sys.stdout.flush()
        if '"Action":"pass"' in line or '"Action":"fail"' in line or '"Action":"skip"' in line:
            junit.write_bytes(junit_xml(suite, stream.cases(finished=False)))
    code = proc.wait()
    junit.write_bytes(junit_xml(suite, stream.cases(finished=True, exit_code=code)))
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m compat.gotest", description=__doc__)
    parser.add_argument("--junit", type=Path, required=True, help="where to write JUnit XML")
    parser.add_argument("--suite", required=True, help="the group in test ids (SUITE::TestName)")
    parser.add_argument("command", nargs="+", help="the test2json command, after --")
    args = parser.parse_args(argv)
    return run(args.command, args.junit, args.suite)


if __name__ == "__main__":
    sys.exit(main())
