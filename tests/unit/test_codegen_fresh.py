"""The committed codecs must be exactly what the generator makes of protocol/*.schema."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_codecs_are_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_protocol.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, (
        "generated codecs are stale; run `python scripts/gen_protocol.py`\n" + result.stderr
    )
