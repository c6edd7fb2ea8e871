"""The request handlers: one module per API family, found and imported here.

Every module of this package (``support/`` aside, which holds what handlers
share) declares its handlers with ``@api(...)``; importing the package
imports them all, so an API is served and advertised as soon as its module
exists, with no list to keep by hand. ``docs/apis.md`` maps every API key
to its module and versions; ``tests/unit/test_architecture.py`` checks that
each module here registers a handler.
"""

import importlib
import pkgutil

from kpybroker.apis.support.registry import REGISTRY

#: The handler modules, by name (``fetch``, ``produce``, ...).
HANDLER_MODULES = tuple(info.name for info in pkgutil.iter_modules(__path__) if not info.ispkg)
for _name in HANDLER_MODULES:
    importlib.import_module(f"{__name__}.{_name}")

__all__ = ["HANDLER_MODULES", "REGISTRY"]
