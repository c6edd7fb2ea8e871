"""Go's test2json events to JUnit XML (compat.gotest), on made-up streams."""

from __future__ import annotations

import json
from pathlib import Path

from compat.gotest import BINARY, GoTestStream, junit_xml
from compat.results import parse_junit


def _events(*events: dict[str, object]) -> list[str]:
    return [json.dumps({"Package": "franz_go", **e}) + "\n" for e in events]


STREAM = _events(
    {"Action": "start"},
    {"Action": "run", "Test": "TestAdmin"},
    {"Action": "output", "Test": "TestAdmin", "Output": "=== RUN   TestAdmin\n"},
    {"Action": "pass", "Test": "TestAdmin", "Elapsed": 1.5},
    {"Action": "run", "Test": "TestCodecs"},
    {"Action": "run", "Test": "TestCodecs/gzip"},
    {"Action": "pass", "Test": "TestCodecs/gzip", "Elapsed": 0.5},
    {"Action": "run", "Test": "TestCodecs/zstd"},
    {"Action": "output", "Test": "TestCodecs/zstd", "Output": "    x_test.go:9: bad codec\n"},
    {"Action": "fail", "Test": "TestCodecs/zstd", "Elapsed": 0.25},
    {"Action": "fail", "Test": "TestCodecs", "Elapsed": 0.75},
    {"Action": "run", "Test": "TestCleanup"},
    {"Action": "run", "Test": "TestCleanup/inner"},
    {"Action": "pass", "Test": "TestCleanup/inner", "Elapsed": 0.1},
    {"Action": "output", "Test": "TestCleanup", "Output": "    x_test.go:20: leak\n"},
    {"Action": "fail", "Test": "TestCleanup", "Elapsed": 0.2},
    {"Action": "run", "Test": "TestSkipped"},
    {"Action": "skip", "Test": "TestSkipped", "Elapsed": 0},
    {"Action": "run", "Test": "TestHangs"},
    {"Action": "output", "Test": "TestHangs", "Output": "panic: test timed out\n"},
)


def test_leaves_and_parents_that_failed_on_their_own(tmp_path: Path) -> None:
    stream = GoTestStream()
    echoed = [stream.feed(line) for line in STREAM]
    assert "    x_test.go:9: bad codec\n" in echoed
    # While running: only finished tests.
    running = {c.name: c.outcome for c in stream.cases(finished=False)}
    assert "TestHangs" not in running
    cases = stream.cases(finished=True, exit_code=2)
    (tmp_path / "junit.xml").write_bytes(junit_xml("franz_go", cases))
    parsed = {c.id: c for c in parse_junit(tmp_path / "junit.xml")}
    assert {i: c.outcome for i, c in parsed.items()} == {
        "franz_go::TestAdmin": "passed",
        "franz_go::TestCodecs/gzip": "passed",
        "franz_go::TestCodecs/zstd": "failed",  # its parent is not reported
        "franz_go::TestCleanup/inner": "passed",
        "franz_go::TestCleanup": "failed",  # failed while its subtest passed
        "franz_go::TestSkipped": "skipped",
        "franz_go::TestHangs": "failed",  # never finished
    }
    assert "bad codec" in parsed["franz_go::TestCodecs/zstd"].message
    assert "=== RUN" not in parsed["franz_go::TestAdmin"].message
    assert parsed["franz_go::TestAdmin"].duration_s == 1.5


def test_a_binary_that_fails_without_a_test_is_a_failure() -> None:
    stream = GoTestStream()
    for line in _events(
        {"Action": "start"},
        {"Action": "output", "Output": "COMPAT_BOOTSTRAP is not set\n"},
        {"Action": "fail", "Elapsed": 0.01},
    ):
        stream.feed(line)
    [case] = stream.cases(finished=True, exit_code=1)
    assert case.name == BINARY and case.outcome == "failed"
    assert "COMPAT_BOOTSTRAP is not set" in case.message()
    assert stream.cases(finished=True, exit_code=0) == []
