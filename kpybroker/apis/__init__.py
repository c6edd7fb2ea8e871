"""The request handlers: one module per API family, each imported at its first request.

Every module of this package (``support/`` aside, which holds what handlers
share) declares its handlers with ``@api(...)``, so an API is served as soon
as its module exists, with no list to keep by hand. Importing them all cost
half a second of every start, so none is imported until a request needs it:
``load_api`` finds the module in ``support/api_index.py``, which
``scripts/gen_docs.py`` derives from the handlers (and checks, in
``tests/unit/test_docs_fresh.py``), as it does ``docs/apis.md``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from kpybroker.apis.support.api_index import API_INDEX
from kpybroker.apis.support.registry import REGISTRY, ApiSpec


def load_api(key: int) -> ApiSpec | None:
    """The handler of API ``key``, its module imported if it was not yet; None when no
    handler serves the key."""
    indexed = API_INDEX.get(key)
    if indexed is None:
        return None
    importlib.import_module(f"{__name__}.{indexed.module}")
    return REGISTRY[key]


@functools.cache
def handler_modules() -> tuple[str, ...]:
    """The handler modules, by name (``fetch``, ``produce``, ...), found on disk."""
    return tuple(info.name for info in pkgutil.iter_modules(__path__) if not info.ispkg)


def all_apis() -> dict[int, ApiSpec]:
    """Every handler, all modules imported: for the tools and tests that list them."""
    for name in handler_modules():
        importlib.import_module(f"{__name__}.{name}")
    return REGISTRY


__all__ = ["REGISTRY", "all_apis", "handler_modules", "load_api"]
