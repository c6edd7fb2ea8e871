"""Run-wide: the longest test files first, and why a test that passed on its rerun
failed the first time.

The README's command splits the test files over two pytest-xdist workers in the order
they are collected. A file that takes minutes (the soak, the benchmark's smoke run)
collected near the end would run alone after the others: ``starts_first`` moves it
ahead, so it overlaps them.

``--reruns 1`` (pyproject.toml) runs a failed test once more. The plugin lists a
rerun by name only; the first failure is printed here, so that an intermittent
failure in CI can be diagnosed from the log without having to reproduce it.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``starts_first`` ahead of the rest, each group in collection order."""
    items.sort(key=lambda item: item.get_closest_marker("starts_first") is None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    reruns = terminalreporter.stats.get("rerun", [])
    if not reruns:
        return
    terminalreporter.section("first failures of rerun tests")
    for report in reruns:
        terminalreporter.write_sep("_", f"{report.nodeid} ({report.when})")
        terminalreporter.write_line(str(report.longrepr))
        for name, content in report.sections:
            terminalreporter.write_sep("-", name)
            terminalreporter.write_line(content[-5000:])
