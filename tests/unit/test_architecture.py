"""The package's structure holds: imports go one way, and every API module is a handler.

The layers, bottom first, are listed in ``scripts/import_graph.py``
(``python scripts/import_graph.py`` prints the graph this test reads):
protocol, log, config, metadata, security (and quotas), cluster, coordinator, apis, server, broker,
entry points. A module may import from its own layer and the ones below;
the wire layer imports nothing else of the broker; only the entry points
import the broker, which wires the services together.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from kpybroker.apis import all_apis, handler_modules
from kpybroker.apis.support.api_index import API_INDEX
from kpybroker.apis.support.registry import IndexedApi

ROOT = Path(__file__).resolve().parents[2]


def _import_graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "kpybroker_import_graph", ROOT / "scripts" / "import_graph.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


GRAPH = _import_graph()
EDGES = GRAPH.graph()


def test_no_import_cycles() -> None:
    assert GRAPH.cycles(EDGES) == []


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in EDGES if m != "kpybroker" and GRAPH.layer_of(m) is None]
    assert unplaced == [], "add these modules' package to LAYERS in scripts/import_graph.py"


def test_imports_go_down_the_layers() -> None:
    assert GRAPH.upward(EDGES) == []


def test_the_wire_layer_imports_nothing_else_of_the_broker() -> None:
    outside = {
        (source, target)
        for source, targets in EDGES.items()
        if source.startswith("kpybroker.protocol")
        for target in targets
        if not target.startswith("kpybroker.protocol")
    }
    assert outside == set()


def test_only_the_entry_points_import_the_broker() -> None:
    importers = {m for m, targets in EDGES.items() if "kpybroker.broker" in targets}
    assert importers <= {"kpybroker.cli", "kpybroker.__main__"}


def test_handlers_never_see_the_broker() -> None:
    reaching = {
        m
        for m, targets in EDGES.items()
        if m.startswith(("kpybroker.apis", "kpybroker.server", "kpybroker.coordinator"))
        and "kpybroker.broker" in targets
    }
    assert reaching == set()


def test_every_module_under_apis_registers_a_handler() -> None:
    registering = {spec.handler.__module__.rsplit(".", 1)[1] for spec in all_apis().values()}
    assert set(handler_modules()) == registering


def test_the_api_index_is_what_the_handlers_register() -> None:
    """ApiVersions advertises the index, and dispatch imports the module it names: both
    must be the handlers' own ``@api`` declarations (``python scripts/gen_docs.py``)."""
    registered = {
        key: IndexedApi(
            spec.name,
            spec.handler.__module__.rsplit(".", 1)[1],
            spec.min_version,
            spec.max_version,
            spec.advertised_min,
        )
        for key, spec in all_apis().items()
    }
    assert registered == API_INDEX
