"""``compat-tests/run``: run compatibility suites and regenerate the report card.

    compat-tests/run                       # every suite, then docs/compatibility.md
    compat-tests/run kcat kafkajs          # some suites (their rows are refreshed)
    compat-tests/run kafka-python -k acls  # some tests of one suite
    compat-tests/run java-tools --target kafka   # the suite against Apache Kafka itself
    compat-tests/run --list                # suite names and what they run
    compat-tests/run --report-only         # regenerate the report from the last results

Exit status 0 when every suite run passed (known failures allowed), 1 otherwise.
``--target kafka`` checks a suite's own correctness: every test should pass
against the real thing, known failures included; its results are kept under
``compat-tests/results/against-kafka/`` and never reach the report.
"""

from __future__ import annotations

import argparse
import sys
import time

from compat.registry import all_suites
from compat.report import write_report
from compat.results import SuiteResult
from compat.runner import run_suite


def parse_args(argv: list[str] | None, names: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="compat-tests/run",
        description="Run third-party clients, tools and test suites against a fresh kpybroker.",
    )
    parser.add_argument("suites", nargs="*", metavar="SUITE", help=f"any of: {', '.join(names)}")
    parser.add_argument(
        "-k",
        dest="selection",
        help="run only matching tests (pytest's -k expression; for kafkajs a test-name regex, "
        "for franz-go a `go test -run` regex)",
    )
    parser.add_argument(
        "--target",
        choices=("kpybroker", "kafka"),
        default="kpybroker",
        help="the broker under test (kafka: validate the suites against Apache Kafka)",
    )
    parser.add_argument("--list", action="store_true", help="list the suites and exit")
    parser.add_argument("--report-only", action="store_true", help="only regenerate the report")
    parser.add_argument("--no-report", action="store_true", help="do not touch the report")
    parser.add_argument("-q", "--quiet", action="store_true", help="do not echo test output")
    args = parser.parse_args(argv)
    unknown = [s for s in args.suites if s not in names]
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    if args.selection and len(args.suites) != 1:
        parser.error("-k needs exactly one suite")
    return args


def summary_line(result: SuiteResult) -> str:
    counts = result.counts()
    bad = counts["failed"] + counts["unexpected-pass"] + counts["unexpected-skip"]
    text = (
        f"{result.status.upper():6} {result.suite:14} {counts['passed']:4} passed "
        f"{counts['known-failure']:3} known {counts['expected-skip']:3} skipped {bad:3} failing  "
        f"{result.durations_s.get('total', 0):6.0f} s"
    )
    if counts["flaky"]:
        text += f" ({counts['flaky']} flaky)"
    for problem in result.problems:
        text += f"\n       problem: {problem.splitlines()[0][:300]}"
    for test in result.tests:
        if test.status in ("failed", "unexpected-pass", "unexpected-skip", "flaky"):
            text += f"\n       {test.status}: {test.id}"
    return text


def failure_details(results: list[SuiteResult], max_lines: int = 12) -> list[str]:
    """The first lines of each failing (or flaky) test's message, and the end of each
    suite problem that says more than one line (a broker that did not start: its
    output), for a CI log that keeps only its tail."""
    lines = []
    for result in results:
        for problem in result.problems:
            more = problem.strip().splitlines()
            if len(more) > 1:
                lines.append(f"--- {result.suite}: {more[0][:240]}")
                lines.extend(f"    {line[:240]}" for line in more[1:][-3 * max_lines :])
        for test in result.tests:
            if test.status in ("failed", "flaky") and test.message:
                lines.append(f"--- {result.suite}: {test.id}")
                message = test.message.strip().splitlines()
                if len(message) > max_lines:  # the exception's line, then the traceback's end
                    message = [*message[:2], "...", *message[2 - max_lines :]]
                lines.extend(f"    {line[:240]}" for line in message)
    return lines


def main(argv: list[str] | None = None) -> int:
    suites = all_suites()
    by_name = {s.name: s for s in suites}
    args = parse_args(argv, list(by_name))
    if args.list:
        for suite in suites:
            print(f"{suite.name:14} {suite.what}")
        return 0
    if args.report_only:
        print(f"wrote {write_report(suites)}")
        return 0

    chosen = [by_name[n] for n in args.suites] if args.suites else suites
    started = time.monotonic()
    results = []
    for suite in chosen:
        print(f"=== {suite.name}: {suite.title}", flush=True)
        result = run_suite(suite, target=args.target, selection=args.selection, echo=not args.quiet)
        results.append(result)
        print(summary_line(result), flush=True)

    if args.target == "kpybroker" and not args.no_report and not args.selection:
        print(f"wrote {write_report(suites)}")
    elapsed = time.monotonic() - started
    print(f"\n=== compat summary ({elapsed:.0f} s, target {args.target})")
    for result in results:
        print(summary_line(result))
    passed = sum(r.counts()["passed"] for r in results)
    known = sum(r.counts()["known-failure"] for r in results)
    skipped = sum(r.counts()["expected-skip"] for r in results)
    failing = sum(
        r.counts()["failed"] + r.counts()["unexpected-pass"] + r.counts()["unexpected-skip"]
        for r in results
    )
    broken = [r.suite for r in results if r.status != "passed"]
    print(f"({known} known failures and {skipped} listed skips, with reasons in the report)")
    flaky = sum(r.counts()["flaky"] for r in results)
    if flaky:
        print(f"({flaky} flaky: failed, then passed when run again; listed in the report)")
    if broken:
        print(f"failed suites: {', '.join(broken)}")
    for line in failure_details(results):
        print(line)
    # The plain closing line CI reads; failing counts tests and broken suites' problems.
    failing += sum(
        1
        for r in results
        if r.status != "passed"
        and not any(t.status in ("failed", "unexpected-pass", "unexpected-skip") for t in r.tests)
    )
    print(f"compat: {passed} passed, {failing} failed")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
