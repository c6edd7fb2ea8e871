"""``scripts/history_check.py`` as a module, for tests (scripts/ is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.helpers.process import REPO_ROOT


def load_history_checker() -> ModuleType:
    path = REPO_ROOT / "scripts" / "history_check.py"
    spec = importlib.util.spec_from_file_location("history_check", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


history_check = load_history_checker()
