"""Tests of the embedded backend's persistence (its store contract is in test_metadata_store)."""

from __future__ import annotations

import asyncio
import errno
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from kpybroker.metadata.builtin import (
    SNAPSHOT_FILE,
    TEMP_FILE,
    BuiltinEnsemble,
    BuiltinMetadataStore,
    SnapshotCorruptError,
)
from kpybroker.metadata.store import ConnectionLossError, EventType, WatchedEvent
from tests.helpers.metadata_backends import Recorder
from tests.helpers.waiting import eventually


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 120))


def count_writes(ensemble: BuiltinEnsemble) -> list[int]:
    """Record the zxid of each snapshot the ensemble writes."""
    written: list[int] = []
    write = ensemble._write_snapshot

    def counting(zxid: int, count: int, body: bytes) -> None:
        write(zxid, count, body)
        written.append(zxid)

    ensemble._write_snapshot = counting  # type: ignore[method-assign]
    return written


def test_owned_store_persists_across_reopen(tmp_path: Path) -> None:
    async def main() -> None:
        async with BuiltinMetadataStore(tmp_path / "meta") as store:
            await store.create("/config/topics/t", b'{"version":1}', make_parents=True)
            await store.create("/brokers/ids/0", b"{}", ephemeral=True, make_parents=True)
        assert sorted(p.name for p in (tmp_path / "meta").iterdir()) == [SNAPSHOT_FILE]
        async with BuiltinMetadataStore(tmp_path / "meta") as store:
            assert (await store.get("/config/topics/t"))[0] == b'{"version":1}'
            assert await store.get_children("/brokers/ids") == []

    run(main)


def test_left_over_temp_file_is_discarded(tmp_path: Path) -> None:
    async def main() -> None:
        async with BuiltinMetadataStore(tmp_path) as store:
            await store.create("/kept", b"durable")
        # A crash mid-write leaves a temp file that never replaced the snapshot.
        (tmp_path / TEMP_FILE).write_bytes(b"half a snapsh")
        async with BuiltinMetadataStore(tmp_path) as store:
            assert (await store.get("/kept"))[0] == b"durable"
            assert not (tmp_path / TEMP_FILE).exists()
            await store.create("/more")
        async with BuiltinMetadataStore(tmp_path) as store:
            assert await store.exists("/more") is not None

    run(main)


def test_temp_file_without_snapshot_starts_empty(tmp_path: Path) -> None:
    async def main() -> None:
        (tmp_path / TEMP_FILE).write_bytes(b"the very first write crashed")
        async with BuiltinMetadataStore(tmp_path) as store:
            assert await store.get_children("/") == []

    run(main)


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic"])
def test_corrupt_snapshot_refuses_to_start(tmp_path: Path, damage: str) -> None:
    async def write() -> None:
        async with BuiltinMetadataStore(tmp_path) as store:
            await store.create("/a", b"x" * 100)

    async def reopen() -> None:
        await BuiltinMetadataStore(tmp_path).start()

    run(write)
    snapshot = tmp_path / SNAPSHOT_FILE
    raw = bytearray(snapshot.read_bytes())
    if damage == "truncate":
        del raw[-10:]
    elif damage == "flip":
        raw[-5] ^= 0xFF
    else:
        raw[0] ^= 0xFF
    snapshot.write_bytes(bytes(raw))
    with pytest.raises(SnapshotCorruptError):
        run(reopen)


def test_concurrent_creates_share_snapshot_writes(tmp_path: Path) -> None:
    """10,000 partition state nodes created at once cost a few snapshots, not 10,000."""

    async def main() -> None:
        ensemble = BuiltinEnsemble(tmp_path)
        await ensemble.start()
        store = BuiltinMetadataStore(ensemble=ensemble)
        await store.start()
        await store.create("/brokers/topics/big/partitions", make_parents=True)
        written = count_writes(ensemble)
        started = time.monotonic()
        await asyncio.gather(
            *(
                store.create(
                    f"/brokers/topics/big/partitions/{p}/state",
                    b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}',
                    make_parents=True,
                )
                for p in range(10_000)
            )
        )
        elapsed = time.monotonic() - started
        assert len(written) <= 3, written
        assert elapsed < 10, elapsed
        await ensemble.stop()
        async with BuiltinMetadataStore(tmp_path) as reopened:
            children = await reopened.get_children("/brokers/topics/big/partitions")
            assert len(children) == 10_000

    run(main)


def test_calls_and_events_wait_for_durability(tmp_path: Path) -> None:
    """Nobody sees a change before it is on disk: not the writer, a reader, or a watcher."""

    async def main() -> None:
        ensemble = BuiltinEnsemble(tmp_path)
        await ensemble.start()
        writer = BuiltinMetadataStore(ensemble=ensemble)
        reader = BuiltinMetadataStore(ensemble=ensemble)
        await writer.start()
        await reader.start()
        watch = Recorder()
        await reader.exists("/n", watch)

        disk_may_proceed = threading.Event()
        write = ensemble._write_snapshot

        def slow_write(zxid: int, count: int, body: bytes) -> None:
            disk_may_proceed.wait()
            write(zxid, count, body)

        ensemble._write_snapshot = slow_write  # type: ignore[method-assign]
        create = asyncio.create_task(writer.create("/n", b"v"))
        read = asyncio.create_task(reader.exists("/n"))
        await asyncio.sleep(0.1)
        assert not create.done()
        assert not read.done()
        assert watch.events == []
        disk_may_proceed.set()
        assert await create == "/n"
        assert await read is not None
        await eventually(lambda: watch.events)
        assert watch.events == [WatchedEvent(EventType.CREATED, "/n")]
        assert b"/n" in (tmp_path / SNAPSHOT_FILE).read_bytes()
        await ensemble.stop()

    run(main)


def test_failed_write_makes_the_store_unusable(tmp_path: Path) -> None:
    async def main() -> None:
        store = BuiltinMetadataStore(tmp_path)
        await store.start()
        await store.create("/before")

        def disk_full(zxid: int, count: int, body: bytes) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        store.ensemble._write_snapshot = disk_full  # type: ignore[method-assign]
        with pytest.raises(ConnectionLossError):
            await store.create("/lost")
        with pytest.raises(ConnectionLossError):
            await store.get("/before")
        with pytest.raises(ConnectionLossError):
            await store.close()
        assert not store.ensemble.running
        async with BuiltinMetadataStore(tmp_path) as reopened:
            assert await reopened.exists("/before") is not None
            assert await reopened.exists("/lost") is None

    run(main)


def test_children_listed_as_they_grow_past_a_few_and_shrink_again(tmp_path: Path) -> None:
    """A node keeps a few children in a tuple and more in a set: both read the same,
    across a restart too."""

    async def main() -> None:
        names = [str(i) for i in range(12)]
        async with BuiltinMetadataStore(tmp_path) as store:
            await store.create("/t", b"")
            for count, name in enumerate(names, 1):
                await store.create(f"/t/{name}", b"")
                assert await store.get_children("/t") == sorted(names[:count])
                assert (await store.exists("/t")).num_children == count
            for name in names[3:]:
                await store.delete(f"/t/{name}")
            assert await store.get_children("/t") == sorted(names[:3])
            await store.delete("/t/1")
            assert await store.get_children("/t") == ["0", "2"]
        async with BuiltinMetadataStore(tmp_path) as store:
            assert await store.get_children("/t") == ["0", "2"]
            assert await store.get_children("/t/0") == []

    run(main)
