"""The console tools' parsing and output, without a broker."""

from __future__ import annotations

import io

import pytest

from kpybroker.tools.common import ToolError, key_values, print_table, run
from kpybroker.tools.config_command import parse_add_config
from kpybroker.tools.console_producer import LineFormat
from kpybroker.tools.progress import Progress


def test_tables_are_aligned() -> None:
    out = io.StringIO()
    print_table(("TOPIC", "PARTITION"), [("orders", 0), ("a-much-longer-name", None)], out)
    lines = out.getvalue().splitlines()
    assert lines == [
        "TOPIC               PARTITION",
        "orders              0",
        "a-much-longer-name  -",
    ]


def test_line_format_splits_headers_key_and_value() -> None:
    line_format = LineFormat.from_properties(
        {"parse.key": "true", "parse.headers": "true", "key.separator": ":", "null.marker": "~"}
    )
    assert line_format.parse("a:1,b:2\tk:v:w") == (b"k", b"v:w", [("a", b"1"), ("b", b"2")])
    assert line_format.parse("\t~:x") == (None, b"x", [])


def test_a_line_without_its_separator_is_reported() -> None:
    with pytest.raises(ToolError, match="No key separator"):
        LineFormat(parse_key=True).parse("no separator here")


def test_unknown_property_is_reported() -> None:
    with pytest.raises(ToolError, match=r"Unknown --property parse\.keys"):
        LineFormat.from_properties({"parse.keys": "true"})


def test_add_config_keeps_bracketed_lists_whole() -> None:
    assert parse_add_config("retention.ms=5,cleanup.policy=[compact,delete],x=") == {
        "retention.ms": "5",
        "cleanup.policy": "compact,delete",
        "x": "",
    }


def test_key_values_refuses_items_without_equals() -> None:
    assert key_values(["a=b=c"], "config") == {"a": "b=c"}
    with pytest.raises(ToolError, match="'oops' is not of the form name=value"):
        key_values(["oops"], "config")


def test_failures_are_one_sentence_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    def main(_argv: object) -> int:
        raise ToolError("Topic 'x' does not exist.")

    assert run(main, []) == 1
    assert capsys.readouterr().err == "Error: Topic 'x' does not exist.\n"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_reports_each_second_and_a_summary() -> None:
    out, clock = io.StringIO(), FakeClock()
    progress = Progress("sent", report=True, stream=out, clock=clock)
    for _ in range(3000):
        progress.add(1024)
    clock.now += 2.0
    progress.tick()
    for _ in range(1000):
        progress.add(512)
    clock.now += 0.5
    progress.tick()
    clock.now += 0.5
    progress.done()
    assert out.getvalue().splitlines() == [
        "3,000 records sent, 1,500.0 records/sec (1.46 MB/sec); 3,000 records (2.93 MB) in total",
        "1,000 records sent, 2,000.0 records/sec (0.98 MB/sec); 4,000 records (3.42 MB) in total",
        "Total: 4,000 records (3.42 MB) sent in 3.0 s, 1,333.3 records/sec (1.14 MB/sec)",
    ]


def test_without_progress_a_pipe_gets_no_progress_lines() -> None:
    out = io.StringIO()  # not a terminal
    progress = Progress("received", stream=out)
    progress.start()
    progress.add(10)
    progress.done()
    assert out.getvalue() == "" and progress.records == 1 and progress.bytes == 10
