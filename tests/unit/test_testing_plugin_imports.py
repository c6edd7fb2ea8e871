"""kpybroker's pytest plugin loads into every pytest run where kpybroker is installed: its
import must not pull in the broker, confluent-kafka or asyncio, which the fixtures load
when they first start a broker."""

from __future__ import annotations

import subprocess
import sys

LOADED_ON_FIRST_BROKER = ("kpybroker.broker", "kpybroker.cli", "confluent_kafka", "asyncio")


def test_importing_the_plugin_loads_no_broker_client_or_event_loop() -> None:
    probe = (
        "import sys, pytest, kpybroker.testing.pytest_plugin; "
        f"print(' '.join(m for m in {LOADED_ON_FIRST_BROKER!r} if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == []
