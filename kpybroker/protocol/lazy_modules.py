"""A mapping from API key to its generated message module that imports each module at its
first lookup.

The message classes of all APIs are 60-odd modules; a broker that has just started
needs a few of them, so ``messages.SCHEMAS`` imports the rest when they are asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType


class LazyModules(Mapping[int, ModuleType]):
    """``key -> module`` for the modules of ``package`` named in ``names``."""

    def __init__(self, package: str, names: Mapping[int, str]) -> None:
        self._package = package
        self._names = names

    def __getitem__(self, key: int) -> ModuleType:
        return importlib.import_module(f"{self._package}.{self._names[key]}")

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[int]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
