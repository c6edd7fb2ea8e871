"""docs/grafana-kpybroker.json is a dashboard of metrics kpybroker really exposes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kpybroker.metrics.broker_metrics import BrokerMetrics
from kpybroker.metrics.registry import BrokerState, broker_registry
from tests.helpers.metrics_state import (
    FakeConnection,
    FakeController,
    FakeGroups,
    FakeHosted,
    FakeLog,
    FakeLogDirs,
    FakePartition,
    FakeTopology,
    scrape,
)

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-kpybroker.json"
METRIC = re.compile(r"\b(?:kafka|kpybroker)_[a-z0-9_]+")


def expressions(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr":
                yield value
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)


def exposed_names() -> set[str]:
    """Every sample name of a broker's scrape, with something counted in each family."""
    hosted = FakeHosted({("t", 0): FakePartition(high_watermark=9)})
    metrics = BrokerMetrics(lambda: {"t"})
    state = BrokerState(
        hosted=hosted,
        controller=FakeController(),
        topology=FakeTopology({"t": [0]}),
        logs=[(("t", 0), FakeLog(100, 0, 9, [object()]))],
        groups=FakeGroups([("g", "t", 0, 4)]),
        listeners=["PLAINTEXT"],
        connections=[FakeConnection("PLAINTEXT")],
        log_dirs=FakeLogDirs([Path("/d")], [Path("/d")]),
    )
    metrics.topics.produced("t", 9, 100)
    metrics.requests.record("Produce", 11, 1.0)
    metrics.event_loop.lag.observe(0.001)
    return {name for name, _ in scrape(broker_registry(metrics, state))}


def test_every_panel_queries_metrics_kpybroker_exposes() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exposed = exposed_names()
    for panel in dashboard["panels"]:
        queried = list(expressions(panel))
        assert queried, f"panel {panel['title']!r} has no query"
        for expression in queried:
            unknown = set(METRIC.findall(expression)) - exposed
            assert not unknown, f"panel {panel['title']!r} queries unknown {sorted(unknown)}"
