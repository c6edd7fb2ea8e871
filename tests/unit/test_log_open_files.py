"""The bounded cache of the log's open files: the bound, reads that outlive an eviction, and logs
with many more segment files than the cache holds."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from kpybroker.log.open_files import (
    MIN_CAPACITY,
    OPEN_FILES,
    UNLIMITED_CAPACITY,
    OpenFiles,
    capacity_for_limit,
)
from kpybroker.log.partition_log import CopiedSlice, FileSlice
from tests.helpers.log_builders import fill, open_log, records, stored_records


def open_descriptors() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


def files(tmp_path: Path, cache: OpenFiles, count: int) -> list:
    paths = [tmp_path / f"{i}.log" for i in range(count)]
    for i, path in enumerate(paths):
        path.write_bytes(str(i).encode())
    return [cache.file(path, os.O_RDONLY) for path in paths]


def test_half_the_soft_limit_is_kept_for_log_files() -> None:
    assert capacity_for_limit(20_000) == 10_000
    assert capacity_for_limit(256) == 128
    assert capacity_for_limit(10) == MIN_CAPACITY
    assert capacity_for_limit(resource.RLIM_INFINITY) == UNLIMITED_CAPACITY


def test_at_most_capacity_files_are_open_and_the_least_recent_go_first(tmp_path: Path) -> None:
    cache = OpenFiles(capacity=3)
    before = open_descriptors()
    cached = files(tmp_path, cache, 5)
    for file in cached:
        file.open()
        assert len(cache) <= 3
    assert len(open_descriptors() - before) == 3
    cached[2].open()  # now the most recent: 3 and 4 stay, 2 is kept over them by the next open
    cached[0].open()
    assert [f.is_open for f in cached] == [True, False, True, False, True]


def test_the_cache_gives_way_to_sockets_down_to_its_floor(tmp_path: Path, caplog) -> None:
    cache = OpenFiles(capacity=MIN_CAPACITY + 20)
    cached = files(tmp_path, cache, MIN_CAPACITY + 20)
    for file in cached:
        file.open()
    oldest = {cache.cached(file).fd for file in cached[:16]}
    assert cache.give_way(16)
    for fd in oldest:  # closed at once (fstat opens nothing that could take their numbers)
        with pytest.raises(OSError):
            os.fstat(fd)
    assert (cache.capacity, len(cache)) == (MIN_CAPACITY + 4, MIN_CAPACITY + 4)
    assert [f.is_open for f in cached[:17]] == [False] * 16 + [True]  # the least recent went
    assert cache.give_way(16) and cache.capacity == MIN_CAPACITY
    assert not cache.give_way(16)  # at the floor
    assert caplog.text.count("gives way to client connections") == 1


def test_a_read_holding_an_evicted_descriptor_can_still_use_it(tmp_path: Path) -> None:
    cache = OpenFiles(capacity=1)
    first, second = files(tmp_path, cache, 2)
    held = first.open()
    second.open()  # evicts the first from the cache
    assert not first.is_open
    assert held.pread(1, 0) == b"0"  # still the first file: its number was not reused
    fd = held.fd
    del held  # the last reference: the descriptor closes
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_renamed_file_is_reopened_under_its_new_name(tmp_path: Path) -> None:
    cache = OpenFiles(capacity=1)
    first, second = files(tmp_path, cache, 2)
    first.open()
    first.rename(tmp_path / "renamed.log")
    second.open()
    assert first.open().pread(1, 0) == b"0"


def test_sync_of_a_file_not_cached_does_not_push_others_out(tmp_path: Path) -> None:
    cache = OpenFiles(capacity=1)
    first, second = files(tmp_path, cache, 2)
    first.open()
    second.sync(data_only=True)
    assert first.is_open and not second.is_open


def test_a_log_with_more_segment_files_than_the_cache_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(OPEN_FILES, "_capacity", MIN_CAPACITY)
    logs = [open_log(tmp_path / f"t-{i}") for i in range(4)]
    for _ in range(3):
        for log in logs:
            fill(log, 10)  # rolls several segments: far more files than the cache holds
    assert sum(len(log.segments) for log in logs) * 3 > 2 * MIN_CAPACITY
    assert len(OPEN_FILES) <= MIN_CAPACITY
    expected = [stored_records(log) for log in logs]
    reads = [log.read(0, 1 << 20, log.log_end_offset) for log in logs]
    for log in logs:
        log.flush()
    for log, read in zip(logs, reads, strict=True):
        assert records(read)  # each read's file is still readable after the others' opens
        assert read.parts[0].file.source is log.segments[0].log_file
    for log in logs:
        log.close()
    reopened = [open_log(tmp_path / f"t-{i}") for i in range(4)]
    assert [stored_records(log) for log in reopened] == expected
    assert len(OPEN_FILES) <= MIN_CAPACITY


def test_reads_copy_their_bytes_once_reads_in_flight_hold_every_descriptor_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(OPEN_FILES, "_capacity", MIN_CAPACITY)
    logs = [open_log(tmp_path / f"t-{i}") for i in range(3 * MIN_CAPACITY)]
    for log in logs:
        fill(log, 2)
    in_flight = [log.read(0, 1 << 20, log.log_end_offset) for log in logs]  # one fetch, say
    kinds = [type(read.parts[0]) for read in in_flight]
    assert kinds[:MIN_CAPACITY] == [FileSlice] * MIN_CAPACITY
    assert CopiedSlice in kinds
    assert len(OPEN_FILES) <= MIN_CAPACITY + 1
    assert [records(read) for read in in_flight] == [stored_records(log) for log in logs]
