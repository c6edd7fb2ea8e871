"""docs/apis.md and docs/configs.md must be exactly what scripts/gen_docs.py makes of the code."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_docs_are_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, (
        "generated docs are stale; run `python scripts/gen_docs.py`\n" + result.stderr
    )
