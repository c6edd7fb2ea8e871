"""The Docker engine the check runs against: the packages it needs, a daemon that answers,
and the one way the other modules run commands (failing with the command's own output)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

#: The commands the check uses, and the Debian package that provides each.
PACKAGE_OF_COMMAND = {
    "docker": "docker.io",
    "dockerd": "docker.io",
    "docker-compose": "docker-compose",
    "debootstrap": "debootstrap",
}
DAEMON_START_TIMEOUT = 60.0
DAEMON_STOP_TIMEOUT = 60.0
#: How many lines of a failed command's output a CheckFailed message carries.
OUTPUT_TAIL_LINES = 25


class CheckFailed(Exception):
    """A step did not do what it should; the message says what, with the evidence."""


def need_root(action: str) -> None:
    """Fail before trying an action that only root may take."""
    if os.geteuid() != 0:
        raise CheckFailed(f"{action} needs root: run scripts/container-check as root")


def tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run(
    command: Sequence[str],
    *,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: Any = None,
    allowed_codes: Sequence[int] = (0,),
) -> subprocess.CompletedProcess[str]:
    """Run a command with its stdout and stderr captured (and appended to ``log`` if given);
    an exit code outside ``allowed_codes`` raises CheckFailed with the output's tail."""
    result = subprocess.run(
        command,
        stdin=stdin,
        capture_output=True,
        text=True,
        env=None if env is None else {**os.environ, **env},
    )
    if log is not None:
        with log.open("a") as file:
            file.write(f"$ {' '.join(command)}\n{result.stdout}{result.stderr}\n")
    if result.returncode not in allowed_codes:
        output = tail(result.stdout + result.stderr)
        raise CheckFailed(f"`{' '.join(command)}` exited with {result.returncode}:\n{output}")
    return result


def wait_for(what: str, ready: Callable[[], bool], timeout: float, interval: float = 1.0) -> float:
    """Poll ``ready`` until it is true; return the seconds that took, or fail after ``timeout``."""
    start = time.monotonic()
    while not ready():
        if time.monotonic() - start > timeout:
            raise CheckFailed(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - start


def install_missing_packages() -> list[str]:
    """apt-get install the packages of the commands that are not on PATH; return their names."""
    missing = sorted({pkg for cmd, pkg in PACKAGE_OF_COMMAND.items() if shutil.which(cmd) is None})
    if missing:
        need_root(f"installing {', '.join(missing)}")
        apt_env = {"DEBIAN_FRONTEND": "noninteractive"}
        run(["apt-get", "update"], env=apt_env)
        run(["apt-get", "install", "-y", "--no-install-recommends", *missing], env=apt_env)
    return missing


def daemon_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


@contextlib.contextmanager
def docker_daemon(log_dir: Path) -> Iterator[bool]:
    """A Docker daemon for the duration of the block; yields whether this check started it.

    A daemon that already answers is used and left running. Otherwise ``dockerd`` runs in
    the background with its log in ``log_dir``, and is stopped (SIGTERM) when the block ends.
    """
    if daemon_answers():
        yield False
        return
    need_root("starting dockerd")
    log_path = log_dir / "dockerd.log"
    with log_path.open("w") as log:
        daemon = subprocess.Popen(
            ["dockerd"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:

        def up() -> bool:
            if daemon.poll() is not None:
                raise CheckFailed(f"dockerd exited with {daemon.returncode}:\n{tail_of(log_path)}")
            return daemon_answers()

        wait_for(f"dockerd to answer (its log: {log_path})", up, DAEMON_START_TIMEOUT)
        yield True
    finally:
        daemon.terminate()
        try:
            daemon.wait(DAEMON_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def tail_of(path: Path) -> str:
    return tail(path.read_text(errors="replace"))


def inspect(kind: str, name: str, template: str = "{{json .}}") -> Any:
    """``docker <kind> inspect`` of a container, image or volume, as JSON."""
    return json.loads(run(["docker", kind, "inspect", "--format", template, name]).stdout)


def exists(kind: str, name: str) -> bool:
    """Whether a container, image or volume of that name exists."""
    command = ["docker", kind, "inspect", name]
    return subprocess.run(command, capture_output=True).returncode == 0


def server_version() -> str:
    return run(["docker", "version", "--format", "{{.Server.Version}}"]).stdout.strip()
