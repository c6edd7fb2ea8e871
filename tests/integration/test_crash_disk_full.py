"""A full disk: produce fails with KAFKA_STORAGE_ERROR, the broker stays up, nothing is torn.

The log directory is a 2 MiB tmpfs (a loop-mounted ext4 image where tmpfs
cannot be mounted; the test fails, never skips, when neither can be set up).
The broker's metadata store lives elsewhere, so only partition data fills it.
Batches of 40 KiB are produced until the disk is full; every acknowledged one
must then be readable, intact and contiguous. Deleting records frees whole
segments (retention runs every 100 ms, descriptors close at once), after which
produce works again and the broker still shuts down cleanly.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tests.helpers.brokers import BrokerFactory
from tests.helpers.log_life import (
    FAST_LOG_TASKS,
    consume_all,
    create_topic,
    offsets_of,
    wait_until,
)
from tests.helpers.wire import RawConnection, produce_error, produce_request, record_batch

KAFKA_STORAGE_ERROR = 56
SIZE_MB = 2
TOPIC = "full"


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


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


def test_a_full_disk_fails_produce_and_corrupts_nothing(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    with small_filesystem(tmp_path / "small") as kind:
        broker = broker_factory(
            {
                **FAST_LOG_TASKS,
                "log.dirs": tmp_path / "small",
                "metadata.log.dir": tmp_path / "metadata",
            }
        )
        try:
            create_topic(broker.bootstrap, TOPIC, {"segment.bytes": 256 * 1024})
            acked: list[bytes] = []
            storage_errors = 0
            with RawConnection(broker.bootstrap) as conn:
                for i in range(200):
                    value = bytes([i % 251]) * 40_000
                    request = produce_request(TOPIC, 0, record_batch([value]))
                    code, base_offset = produce_error(conn.request(request))
                    if code == KAFKA_STORAGE_ERROR:
                        storage_errors += 1
                        if storage_errors == 5:
                            break
                        continue
                    assert code == 0 and base_offset == len(acked), (code, base_offset)
                    acked.append(value)
            assert storage_errors == 5, f"{kind} of {SIZE_MB} MiB never filled up"
            broker.check_alive()
            assert "Traceback" not in broker.log_text()

            stored = consume_all(broker.bootstrap, TOPIC)
            assert offsets_of(stored) == list(range(len(acked)))
            assert [value for _, (_, value) in stored] == acked

            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            [future] = admin.delete_records([TopicPartition(TOPIC, 0, -1)]).values()
            assert future.result(timeout=30).low_watermark == len(acked)

            def produce_works() -> bool:
                with RawConnection(broker.bootstrap) as conn:
                    request = produce_request(TOPIC, 0, record_batch([b"after"]))
                    return produce_error(conn.request(request))[0] == 0

            wait_until(produce_works, "produce to work again once segments were deleted")
        finally:
            broker.stop()
            time.sleep(0.1)
    assert broker.process is not None and broker.process.returncode == 0
