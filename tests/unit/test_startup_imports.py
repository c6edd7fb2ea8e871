"""A broker without TLS or a JWKS endpoint does not load the libraries only they need.

``cryptography`` (key stores, certificates) and PyJWT with its HTTP client (JWKS) cost about
14 MB of memory and 30 ms of startup; the modules that use them import them where they are
used, and this test keeps a module-level import from creeping back in.
"""

from __future__ import annotations

import subprocess
import sys

SECURITY_ONLY = ("cryptography", "jwt", "urllib.request", "http.client")


def test_starting_the_broker_loads_no_tls_or_jwks_library() -> None:
    probe = (
        "import sys, kpybroker.cli; "
        f"print(' '.join(m for m in {SECURITY_ONLY!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == []
