#!/usr/bin/env python3
"""The import graph of the ``kpybroker`` package: cycles, layers, file sizes.

    python scripts/import_graph.py            # summary: cycles, largest files, upward imports
    python scripts/import_graph.py --edges    # every import, one per line

Imports are read from the source with ``ast`` (nothing is imported): module
level, inside functions, and under ``TYPE_CHECKING``, since each of them
ties one module to another. ``tests/unit/test_architecture.py`` uses
:func:`graph` and :data:`LAYERS` to hold the layering in place.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kpybroker"
#: Generated codecs: large by design, and imports nothing but the codec runtime.
GENERATED = "kpybroker.protocol.messages"
LARGE_FILE_LINES = 600

#: The layers, bottom first: a module may import from its own layer and the ones below.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("protocol", ("kpybroker.protocol",)),
    ("log", ("kpybroker.log",)),
    ("config", ("kpybroker.config",)),
    ("metadata", ("kpybroker.metadata",)),
    ("security", ("kpybroker.security", "kpybroker.quotas")),
    ("cluster", ("kpybroker.cluster", "kpybroker.topic_admin", "kpybroker.producer_ids")),
    (
        "coordinator",
        (
            "kpybroker.coordinator",
            "kpybroker.transaction_coordinator",
            "kpybroker.share_coordinator",
            "kpybroker.share_partitions",
        ),
    ),
    ("metrics", ("kpybroker.metrics",)),
    ("apis", ("kpybroker.apis",)),
    ("server", ("kpybroker.server",)),
    ("console", ("kpybroker.console",)),
    ("broker", ("kpybroker.broker",)),
    (
        "entry points",
        ("kpybroker.cli", "kpybroker.__main__", "kpybroker.tools", "kpybroker.testing"),
    ),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imported(tree: ast.AST, module: str, is_package: bool) -> Iterable[str]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def graph() -> dict[str, set[str]]:
    """module -> the kpybroker modules it imports (``from a import b`` counts a.b if a module)."""
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = {
            t for t in _imported(tree, name, path.name == "__init__.py") if t in known and t != name
        }
        edges[name] = targets
    return edges


def layer_of(module: str) -> int | None:
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(f"{p}.") for p in prefixes):
            return index
    return None


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports from a lower layer to a higher one."""
    found = []
    for source, targets in edges.items():
        low = layer_of(source)
        for target in targets:
            high = layer_of(target)
            if low is not None and high is not None and high > low:
                found.append((source, target))
    return sorted(found)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(10_000)

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found, key=len, reverse=True)


def sizes() -> dict[str, int]:
    """Lines of each hand-written module."""
    return {
        name: len(path.read_text().splitlines())
        for name, path in modules().items()
        if not name.startswith(GENERATED)
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="print every import")
    args = parser.parse_args()
    edges = graph()
    if args.edges:
        for source in sorted(edges):
            for target in sorted(edges[source]):
                print(f"{source} -> {target}")
        return 0
    found = cycles(edges)
    print(f"modules: {len(edges)}, imports: {sum(map(len, edges.values()))}")
    print(f"cycles: {len(found)}" + "".join(f"\n  {len(c)} modules: {', '.join(c)}" for c in found))
    lines = sizes()
    large = sorted(((n, m) for m, n in lines.items() if n > LARGE_FILE_LINES), reverse=True)
    top = max(lines.items(), key=lambda item: item[1])
    print(f"largest file: {top[0]} ({top[1]} lines; generated codecs left out)")
    print(f"files over {LARGE_FILE_LINES} lines: {len(large)}")
    for count, name in large:
        print(f"  {name}: {count}")
    ups = upward(edges)
    print(f"imports against the layers: {len(ups)}")
    for source, target in ups:
        print(f"  {source} -> {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
