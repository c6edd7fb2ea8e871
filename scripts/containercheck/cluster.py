"""docker/compose.yaml's cluster: three brokers and ZooKeeper. A topic with three replicas
and min.insync.replicas=2 keeps taking acks=all writes with one broker stopped, and a
consumer group reads every record once the broker is back."""

from __future__ import annotations

import os
import socket
import subprocess
import time

from containercheck.clients import (
    broker_count,
    consume_all,
    create_topic,
    in_sync_replicas,
    produce,
    wait_for_in_sync,
)
from containercheck.containers import stop_cleanly, wait_healthy
from containercheck.engine import CheckFailed, run, wait_for
from containercheck.images import ROOT, BaseImages
from containercheck.summary import Summary

COMPOSE_FILE = ROOT / "docker" / "compose.yaml"
#: Separate from a compose project the user may run from the same file.
PROJECT = "kpybroker-check"
BROKERS = ("kafka1", "kafka2", "kafka3")
#: The EXTERNAL listeners compose.yaml publishes on the host.
HOST_PORTS = (19092, 29092, 39092)
BOOTSTRAP = ",".join(f"localhost:{port}" for port in HOST_PORTS)
STOPPED_BROKER = "kafka2"
TOPIC = "replicated"
GROUP = "container-check"
CLUSTER_TIMEOUT = 120.0


def compose_command(images: BaseImages, *args: str) -> tuple[list[str], dict[str, str]]:
    """A docker-compose command on the check's project, and the variables naming the images."""
    command = ["docker-compose", "-p", PROJECT, "-f", str(COMPOSE_FILE), *args]
    return command, {"PYTHON_IMAGE": images.python, "ZOOKEEPER_IMAGE": images.zookeeper}


def compose(images: BaseImages, *args: str) -> str:
    command, env = compose_command(images, *args)
    return run(command, env=env).stdout


def check_ports_free() -> None:
    for port in HOST_PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("0.0.0.0", port))
            except OSError as error:
                raise CheckFailed(f"compose.yaml publishes port {port}, in use: {error}") from None


def check_cluster(images: BaseImages, records: int, summary: Summary) -> None:
    check_ports_free()
    try:
        start = time.monotonic()
        compose(images, "up", "-d", "--no-build")
        containers = {b: compose(images, "ps", "-q", b).strip() for b in BROKERS}
        for broker in BROKERS:
            wait_healthy(containers[broker])
        wait_for("three brokers in the metadata", lambda: broker_count(BOOTSTRAP) == 3, 60)
        summary.add("compose: up, 3 brokers healthy", f"after {time.monotonic() - start:.0f} s")
        create_topic(BOOTSTRAP, TOPIC, 3, 3, {"min.insync.replicas": "2"})
        wait_for_in_sync(BOOTSTRAP, TOPIC, 3, CLUSTER_TIMEOUT)
        before = range(records)
        seconds = produce(BOOTSTRAP, TOPIC, before)
        summary.add("compose: produced, 3 brokers up", f"{records} records in {seconds:.1f} s")

        print(f"stopping {STOPPED_BROKER}: the clients will log that they cannot reach it")
        stopped = stop_cleanly(containers[STOPPED_BROKER])
        during = range(records, 2 * records)
        seconds = produce(BOOTSTRAP, TOPIC, during)
        isr = in_sync_replicas(BOOTSTRAP, TOPIC)
        summary.add(
            f"compose: produced, {STOPPED_BROKER} stopped",
            f"{records} records in {seconds:.1f} s (stopped cleanly in {stopped.seconds:.1f} s; "
            f"ISR sizes {isr})",
        )

        start = time.monotonic()
        compose(images, "start", STOPPED_BROKER)
        caught_up = wait_for_in_sync(BOOTSTRAP, TOPIC, 3, CLUSTER_TIMEOUT)
        wait_healthy(containers[STOPPED_BROKER])
        summary.add(
            f"compose: {STOPPED_BROKER} started again",
            f"all partitions 3 in sync after {caught_up:.0f} s, "
            f"healthy after {time.monotonic() - start:.0f} s",
        )
        everything = range(2 * records)
        seconds = consume_all(BOOTSTRAP, TOPIC, everything, GROUP)
        summary.add(
            "compose: consumed (group)", f"all {len(everything)} records in {seconds:.1f} s"
        )
    finally:
        command, env = compose_command(images, "down", "--volumes")
        subprocess.run(command, capture_output=True, env={**os.environ, **env})
