"""Watching a container: its health, its exit, its log."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from containercheck.engine import CheckFailed, inspect, run, tail, wait_for

#: The line kpybroker logs last when SIGTERM ended it and everything was flushed and closed.
CLEAN_SHUTDOWN_LINE = "shut down cleanly"
HEALTHY_TIMEOUT = 180.0
STOP_TIMEOUT = 30


def logs(container: str) -> str:
    result = run(["docker", "logs", container])
    return result.stdout + result.stderr


def wait_healthy(container: str) -> float:
    """Wait for the image's health check to pass; return the seconds since this call. A
    container that exits or turns unhealthy fails the check at once, with its log."""

    def healthy() -> bool:
        state = inspect("container", container, "{{json .State}}")
        health = (state.get("Health") or {}).get("Status")
        if state["Status"] == "exited" or health == "unhealthy":
            status = f"exited with {state['ExitCode']}" if state["Status"] == "exited" else health
            raise CheckFailed(f"container {container} {status}; its log:\n{tail(logs(container))}")
        return health == "healthy"

    return wait_for(f"container {container} to be healthy", healthy, HEALTHY_TIMEOUT)


@dataclass(frozen=True)
class Stopped:
    seconds: float
    exit_code: int


def stop_cleanly(container: str) -> Stopped:
    """``docker stop`` a broker's container (SIGTERM) and check it shut down cleanly: exit
    code 0 and kpybroker's last log line."""
    start = time.monotonic()
    run(["docker", "stop", "-t", str(STOP_TIMEOUT), container])
    seconds = time.monotonic() - start
    exit_code = inspect("container", container, "{{json .State.ExitCode}}")
    log = logs(container)
    if exit_code != 0 or CLEAN_SHUTDOWN_LINE not in (log.splitlines() or [""])[-1]:
        raise CheckFailed(
            f"container {container} exited with {exit_code} after {seconds:.1f} s, "
            f"not cleanly; its log:\n{tail(log)}"
        )
    return Stopped(seconds, exit_code)


def remove(*containers: str) -> None:
    """Remove containers if they exist (cleanup: never fails)."""
    subprocess.run(["docker", "rm", "-f", *containers], capture_output=True)
