"""The console tools' parsing and output, without a broker."""

from __future__ import annotations

import io

import pytest

from kpybroker.tools.common import ToolError, key_values, print_table, run
from kpybroker.tools.config_command import parse_add_config
from kpybroker.tools.console_producer import LineFormat


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
