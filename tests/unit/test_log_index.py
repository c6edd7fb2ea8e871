"""The sparse offset and time indexes: lookups, on-disk layout, damage detection."""

import errno
import os
import struct

import pytest

from kpybroker.log.index import OffsetIndex
from kpybroker.log.time_index import TimeIndex

BASE = 1000


class Rebuilds:
    """Counts ``on_corrupt`` calls, standing in for the segment's index rebuild."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def offset_index(tmp_path, max_entries=100) -> tuple[OffsetIndex, Rebuilds]:
    rebuilds = Rebuilds()
    return OffsetIndex(tmp_path / "x.index", BASE, max_entries, rebuilds), rebuilds


def test_entries_are_big_endian_relative_offset_and_position(tmp_path) -> None:
    index, _ = offset_index(tmp_path)
    index.append(BASE + 5, 0)
    index.append(BASE + 9, 300)
    assert index.path.read_bytes() == struct.pack(">iiii", 5, 0, 9, 300)


def test_lookup_finds_greatest_entry_at_or_below(tmp_path) -> None:
    index, _ = offset_index(tmp_path)
    for rel, pos in [(4, 100), (9, 250), (15, 400)]:
        index.append(BASE + rel, pos)
    expected = {
        0: (BASE, 0),
        3: (BASE, 0),
        4: (BASE + 4, 100),
        8: (BASE + 4, 100),
        9: (BASE + 9, 250),
    }
    expected |= {20: (BASE + 15, 400)}
    for rel, entry in expected.items():
        assert index.lookup(BASE + rel) == entry
    assert index.lookup_position(260) == (BASE + 9, 250)
    assert index.lookup_position(99) == (BASE, 0)


def test_reloaded_index_matches_and_truncates(tmp_path) -> None:
    index, _ = offset_index(tmp_path)
    for rel in range(1, 11):
        index.append(BASE + rel * 2, rel * 100)
    index.unload()
    assert index.lookup(BASE + 7) == (BASE + 6, 300)
    index.truncate_to(BASE + 6)
    assert index.entries == 2 and index.last_offset == BASE + 4
    assert index.path.stat().st_size == 16


def test_entries_added_in_bulk_are_written_once_at_the_end(tmp_path, monkeypatch) -> None:
    index, _ = offset_index(tmp_path)
    index.append(BASE + 1, 0)
    writes = []
    real_write = os.write
    monkeypatch.setattr(
        os, "write", lambda fd, data: writes.append(len(data)) or real_write(fd, data)
    )
    with index.writing_in_bulk():
        for rel in range(2, 6):
            index.append(BASE + rel, rel * 100)
        assert index.path.stat().st_size == 8 and index.lookup(BASE + 5) == (BASE + 5, 500)
    assert writes == [32]
    index.unload()
    assert [index.lookup(BASE + rel)[1] for rel in range(1, 6)] == [0, 200, 300, 400, 500]


def test_a_failed_bulk_write_leaves_file_and_memory_as_before(tmp_path, monkeypatch) -> None:
    index, _ = offset_index(tmp_path)
    index.append(BASE + 1, 0)

    def disk_full(_fd, _data):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError), index.writing_in_bulk():
        index.append(BASE + 2, 100)
        monkeypatch.setattr(os, "write", disk_full)
    assert index.entries == 1 and index.path.stat().st_size == 8


def test_offsets_must_increase_and_fit_int32(tmp_path) -> None:
    index, _ = offset_index(tmp_path, max_entries=2)
    index.append(BASE + 1, 0)
    with pytest.raises(ValueError):
        index.append(BASE + 1, 10)
    index.append(BASE + 2, 10)
    assert index.is_full()
    assert index.can_append_offset(BASE + 2**31 - 1)
    assert not index.can_append_offset(BASE + 2**31)
    assert not index.can_append_offset(BASE - 1)


@pytest.mark.parametrize(
    "content",
    [struct.pack(">ii", 1, 0) + b"\x00\x00", struct.pack(">iiii", 5, 100, 3, 200), bytes(32)],
    ids=["torn", "out-of-order", "preallocated-zeros"],
)
def test_damaged_index_is_reported_for_rebuild(tmp_path, content) -> None:
    (tmp_path / "x.index").write_bytes(content)
    index, rebuilds = offset_index(tmp_path)
    assert index.lookup(BASE + 50) == (BASE, 0)
    assert rebuilds.count == 1
    assert index.path.stat().st_size == 0


def test_time_index_appends_only_growing_timestamps(tmp_path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", BASE, 10, Rebuilds())
    assert index.last_entry == (-1, BASE)
    index.maybe_append(100, BASE + 1)
    index.maybe_append(100, BASE + 3)  # not larger: skipped
    index.maybe_append(250, BASE + 7)
    assert index.path.read_bytes() == struct.pack(">qiqi", 100, 1, 250, 7)
    assert index.lookup(99) == (-1, BASE)
    assert index.lookup(100) == (100, BASE + 1)
    assert index.lookup(249) == (100, BASE + 1)
    assert index.lookup(10**12) == (250, BASE + 7)
    with pytest.raises(ValueError):
        index.maybe_append(300, BASE + 2)
    index.truncate_to(BASE + 7)
    assert index.last_entry == (100, BASE + 1)


def test_time_index_keeps_its_last_slot_for_the_roll_entry(tmp_path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", BASE, 3, Rebuilds())
    index.maybe_append(1, BASE)
    index.maybe_append(2, BASE + 1)
    assert index.is_full()
    with pytest.raises(ValueError):
        index.maybe_append(3, BASE + 2)
    index.maybe_append(3, BASE + 2, skip_full_check=True)
    assert index.entries == 3


def test_last_entry_is_read_without_loading_the_index(tmp_path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", BASE, 10, Rebuilds())
    index.maybe_append(5, BASE + 2)
    index.unload()
    assert index.last_entry == (5, BASE + 2)
    assert index._keys is None
