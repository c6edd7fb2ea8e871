"""Self-tests of the compat runner: ``python3 -m pytest compat-tests/selftest``.

They need no broker and no download; .ci/run runs them before the suites.
"""

from __future__ import annotations

import sys
from pathlib import Path

# compat-tests/run puts compat-tests/ on the path; so does this, for plain pytest.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
