"""One kpybroker container as docs/container.md runs it: configured by KAFKA_* variables,
its data on a volume, used from the host, stopped cleanly, started again on the same volume;
and refusing a misspelt variable."""

from __future__ import annotations

import socket
import subprocess
import uuid

from containercheck.clients import consume_all, create_topic, produce
from containercheck.containers import remove, stop_cleanly, wait_healthy
from containercheck.engine import CheckFailed, run
from containercheck.images import KPYBROKER_IMAGE
from containercheck.summary import Summary

TOPIC = "container-check"
DATA_DIR = "/var/lib/kpybroker/data"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
MISSPELT_VARIABLE = "KAFKA_NUM_PARTITION"
MISSPELT_MESSAGE = f"{MISSPELT_VARIABLE} sets num.partition, which is not a broker config"
#: The entrypoint's exit code for a configuration it refuses.
CONFIG_ERROR_EXIT_CODE = 2


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def check_single_container(records: int, summary: Summary) -> None:
    name = f"kpybroker-check-{uuid.uuid4().hex[:8]}"
    volume = f"{name}-data"
    port = free_loopback_port()
    bootstrap = f"127.0.0.1:{port}"
    start_command = [
        "docker", "run", "-d", "--name", name,
        "-p", f"127.0.0.1:{port}:{port}",
        "-v", f"{volume}:{DATA_DIR}",
        "-e", f"KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://{bootstrap}",
        "-e", "KAFKA_NUM_PARTITIONS=3",
        KPYBROKER_IMAGE,
    ]  # fmt: skip
    numbers = range(records)
    try:
        run(start_command)
        summary.add("single: healthy after", f"{wait_healthy(name):.0f} s")
        create_topic(bootstrap, TOPIC, partitions=3, replicas=1, configs={})
        seconds = produce(bootstrap, TOPIC, numbers)
        summary.add("single: produced", f"{records} records (acks=all) in {seconds:.1f} s")
        seconds = consume_all(bootstrap, TOPIC, numbers)
        summary.add("single: consumed", f"{records} records in {seconds:.1f} s")
        stopped = stop_cleanly(name)
        check_clean_shutdown_marker(volume)
        summary.add(
            "single: docker stop",
            f"{stopped.seconds:.1f} s, exit code 0, '{CLEAN_SHUTDOWN_MARKER}' in the volume",
        )
        remove(name)
        run(start_command)
        healthy = wait_healthy(name)
        consume_all(bootstrap, TOPIC, numbers)
        summary.add(
            "single: new container, same volume",
            f"healthy after {healthy:.0f} s, all {records} records read back",
        )
        stop_cleanly(name)
        summary.add("single: misspelt variable", check_misspelt_variable())
    finally:
        remove(name)
        subprocess.run(["docker", "volume", "rm", "-f", volume], capture_output=True)


def check_clean_shutdown_marker(volume: str) -> None:
    """The broker wrote Kafka's clean-shutdown marker, so the next start skips recovery."""
    run_ls = ["docker", "run", "--rm", "-v", f"{volume}:{DATA_DIR}", "--entrypoint", "ls"]
    listing = run([*run_ls, KPYBROKER_IMAGE, "-a", DATA_DIR]).stdout.split()
    if CLEAN_SHUTDOWN_MARKER not in listing:
        raise CheckFailed(f"no {CLEAN_SHUTDOWN_MARKER} in the volume after docker stop: {listing}")


def check_misspelt_variable() -> str:
    result = run(
        ["docker", "run", "--rm", "-e", f"{MISSPELT_VARIABLE}=3", KPYBROKER_IMAGE],
        allowed_codes=range(256),
    )
    if result.returncode != CONFIG_ERROR_EXIT_CODE or MISSPELT_MESSAGE not in result.stderr:
        raise CheckFailed(
            f"{MISSPELT_VARIABLE}=3: exit code {result.returncode}, expected "
            f"{CONFIG_ERROR_EXIT_CODE} with '{MISSPELT_MESSAGE}'; stderr:\n{result.stderr}"
        )
    return f"{MISSPELT_VARIABLE}=3 stopped it with exit code 2 and the message"
