"""A full disk: its log directory goes offline, the broker halts, nothing is torn.

The only log directory is a 2 MiB tmpfs (a loop-mounted ext4 image where tmpfs
cannot be mounted; the test fails, never skips, when neither can be set up).
The broker's metadata store lives elsewhere, so only partition data fills it.
Batches of 40 KiB are produced until the disk is full: the write that meets
ENOSPC takes the directory offline, and with no directory left the broker
halts, as Kafka does (``docs/log-dir-failure.md``). Once the disk has room
again the broker starts, every acknowledged batch is there, intact and
contiguous, and produce works again.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers.brokers import BrokerFactory
from tests.helpers.log_life import consume_all, create_topic, offsets_of
from tests.helpers.wire import (
    ConnectionClosed,
    RawConnection,
    produce_error,
    produce_request,
    record_batch,
)

KAFKA_STORAGE_ERROR = 56
SIZE_MB = 2
TOPIC = "full"


HALTED = "Shutdown broker because all log dirs in"


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


def grow(mountpoint: Path, kind: str) -> None:
    """Give the small filesystem four times the room."""
    if kind == "tmpfs":
        steps = [run("mount", "-o", f"remount,size={4 * SIZE_MB}m", str(mountpoint))]
    else:
        image = mountpoint.with_suffix(".img")
        steps = [
            run("umount", str(mountpoint)),
            run("truncate", "-s", f"{8 * SIZE_MB}M", str(image)),
            run("resize2fs", "-f", str(image)),
            run("mount", "-o", "loop", str(image), str(mountpoint)),
        ]
    for step in steps:
        assert step.returncode == 0, step.stderr


@contextmanager
def small_filesystem(mountpoint: Path) -> Iterator[str]:
    """A ``SIZE_MB`` filesystem mounted at ``mountpoint`` for the duration; yields its kind."""
    mountpoint.mkdir()
    tmpfs = run("mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(mountpoint))
    kind = "tmpfs"
    if tmpfs.returncode != 0:
        image = mountpoint.with_suffix(".img")
        with open(image, "wb") as f:
            f.truncate(SIZE_MB * 2 * 1024 * 1024)
        steps = [
            run("mkfs.ext4", "-q", "-F", "-O", "^has_journal", str(image)),
            run("mount", "-o", "loop", str(image), str(mountpoint)),
        ]
        failed = [s for s in steps if s.returncode != 0]
        if failed:
            pytest.fail(
                "cannot set up a small filesystem: tmpfs: "
                f"{tmpfs.stderr.strip()}; loop device: {failed[0].stderr.strip()}",
                pytrace=False,
            )
        kind = "ext4 on a loop device"
    try:
        yield kind
    finally:
        if run("umount", str(mountpoint)).returncode != 0:
            run("umount", "-l", str(mountpoint))


def test_a_full_disk_halts_the_broker_and_corrupts_nothing(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    with small_filesystem(tmp_path / "small") as kind:
        broker = broker_factory(
            {"log.dirs": tmp_path / "small", "metadata.log.dir": tmp_path / "metadata"}
        )
        try:
            create_topic(broker.bootstrap, TOPIC, {"segment.bytes": 256 * 1024})
            acked: list[bytes] = []
            with RawConnection(broker.bootstrap) as conn:
                for i in range(200):
                    value = bytes([i % 251]) * 40_000
                    request = produce_request(TOPIC, 0, record_batch([value]))
                    try:
                        code, base_offset = produce_error(conn.request(request))
                    except ConnectionClosed:
                        break  # halted before answering
                    if code == KAFKA_STORAGE_ERROR:
                        break
                    assert code == 0 and base_offset == len(acked), (code, base_offset)
                    acked.append(value)
            assert broker.process is not None
            assert broker.process.wait(30) == 1, f"{kind} of {SIZE_MB} MiB never filled up"
            assert HALTED in broker.log_text()

            grow(tmp_path / "small", kind)
            broker.start()
            stored = consume_all(broker.bootstrap, TOPIC)
            assert offsets_of(stored) == list(range(len(acked)))
            assert [value for _, (_, value) in stored] == acked
            with RawConnection(broker.bootstrap) as conn:
                request = produce_request(TOPIC, 0, record_batch([b"after"]))
                assert produce_error(conn.request(request)) == (0, len(acked))
        finally:
            broker.stop()
            time.sleep(0.1)
    assert broker.process is not None and broker.process.returncode == 0
