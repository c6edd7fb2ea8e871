"""Build kpybroker's container image and check it on a real Docker engine, end to end.

  scripts/container-check                    # everything (as root; several minutes)
  scripts/container-check --only single      # images, then the single-container check
  scripts/container-check --records 5000

Steps: install what is missing of docker.io, docker-compose and debootstrap (apt-get);
start dockerd if no daemon answers (and stop it at the end); build the base images if
absent; build the repository's Dockerfile as kpybroker:latest and print its size; then

  single   one container configured by KAFKA_* variables, port published on loopback:
           healthy, N records produced and read back from the host, `docker stop` shuts it
           down cleanly, a new container on the same volume reads them again, and a
           misspelt KAFKA_ variable stops the container with exit code 2 and the message;
  compose  docker/compose.yaml's three brokers and ZooKeeper: a topic with 3 replicas and
           min.insync.replicas=2 takes N acks=all records, N more with kafka2 stopped, and
           a consumer group reads all 2N after it is back; then `down --volumes`.

Base images: PYTHON_IMAGE and ZOOKEEPER_IMAGE, as the Dockerfile and compose file name them
(pulled if absent). Unset, local stand-ins for the official images are used, built if
absent, for machines that reach no image registry: local/debian-python:3.11-bookworm from
debootstrap (trusting the CAs the host trusts beyond Debian's, e.g. a proxy's, with
PIP_CERT set) and local/zookeeper:3.8 from docker/zookeeper-standin.Dockerfile.

Needs root (apt-get, dockerd, debootstrap), a Debian mirror, the ports 19092, 29092 and
39092 free, and confluent-kafka on the host Python. Not run by CI: too slow, and needing
all that. Prints a summary of the figures; exits 1 if any step failed. Removes the
containers and volumes it created; logs stay in a temporary directory it prints.
"""

from __future__ import annotations

import argparse
import datetime
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import KafkaException

from containercheck.cluster import check_cluster
from containercheck.engine import (
    CheckFailed,
    docker_daemon,
    install_missing_packages,
    server_version,
)
from containercheck.images import KPYBROKER_IMAGE, base_images, build_kpybroker, image_size
from containercheck.single import check_single_container
from containercheck.summary import Summary

DEFAULT_MIRROR = "http://deb.debian.org/debian"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/container-check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--records", type=int, default=2000, help="records per produce step (default 2000)"
    )
    parser.add_argument(
        "--mirror",
        default=os.environ.get("DEBIAN_MIRROR", DEFAULT_MIRROR),
        help=f"Debian mirror for debootstrap (default $DEBIAN_MIRROR or {DEFAULT_MIRROR})",
    )
    parser.add_argument(
        "--only", choices=("single", "compose"), help="run one of the two checks after the build"
    )
    return parser.parse_args(argv)


def run_steps(args: argparse.Namespace, work_dir: Path, summary: Summary) -> None:
    installed = install_missing_packages()
    summary.add("packages installed", ", ".join(installed) or "none (all present)")
    with docker_daemon(work_dir) as started:
        how = "started by this check, stopped at its end" if started else "already running"
        summary.add("docker engine", f"{server_version()}, {how}")
        images = base_images(args.mirror, work_dir)
        summary.add("base images", images.how)
        seconds = build_kpybroker(images.python, work_dir / "kpybroker-build.log")
        size, base = image_size(KPYBROKER_IMAGE) / 1e6, image_size(images.python) / 1e6
        summary.add(
            "kpybroker image",
            f"{KPYBROKER_IMAGE}, {size:.0f} MB ({base:.0f} MB of it the base image), "
            f"built in {seconds:.0f} s",
        )
        if args.only in (None, "single"):
            check_single_container(args.records, summary)
        if args.only in (None, "compose"):
            check_cluster(images, args.records, summary)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    work_dir = Path(tempfile.mkdtemp(prefix="kpybroker-container-check-"))
    summary = Summary()
    start = time.monotonic()
    failure = None
    try:
        run_steps(args, work_dir, summary)
    except (CheckFailed, KafkaException) as error:
        failure = str(error)
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"\ncontainer-check, {today}, {time.monotonic() - start:.0f} s; logs in {work_dir}")
    print(summary.render())
    if failure is not None:
        print(f"FAILED: {failure}")
        return 1
    print("OK")
    return 0
