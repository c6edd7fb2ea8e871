"""A compaction interrupted at any step of its swap is completed or undone at restart.

``PartitionLog.replace_segments`` renames the cleaned files ``.cleaned`` ->
``.swap``, deletes the replaced segments, renames ``.swap`` -> final name. A
crash is simulated at each step; the reopened log must hold either the old or
the compacted data of the group, never lose the newest record of a key, keep
its offsets, and leave no temporary file behind.
"""

from __future__ import annotations

import pytest

from kpybroker.log.log_config import CleanerConfig
from kpybroker.log.names import CLEANED_SUFFIX, SWAP_SUFFIX
from kpybroker.log.partition_log import PartitionLog
from kpybroker.log.partition_log import PartitionLog as LogClass
from kpybroker.log.segment import Segment
from tests.helpers.log_builders import records, stored_pairs
from tests.unit.test_log_cleaner import COMPACTED, Compacting, versions


class Crash(Exception):
    """The broker died here."""


def crash_at(monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    if step == "cleaned files written":
        target, name, when = Segment, "change_file_suffixes", CLEANED_SUFFIX
    elif step == "renamed to .swap":
        target, name, when = LogClass, "_retire", None
    else:  # "old segments deleted"
        target, name, when = Segment, "change_file_suffixes", SWAP_SUFFIX
    original = getattr(target, name)

    def crashing(self, *args):
        if when is None or args[0] == when:
            raise Crash(step)
        return original(self, *args)

    monkeypatch.setattr(target, name, crashing)


def newest_per_key(pairs):
    return {key: (offset, value) for offset, key, value in pairs}


@pytest.mark.parametrize("rounds_before", [0, 1], ids=["first round", "merging round"])
@pytest.mark.parametrize(
    "step", ["cleaned files written", "renamed to .swap", "old segments deleted"]
)
def test_an_interrupted_swap_loses_nothing(tmp_path, monkeypatch, step, rounds_before) -> None:
    s = Compacting(tmp_path, COMPACTED, CleanerConfig())
    s.write(*versions(20))
    for _ in range(rounds_before):
        s.clean()
        s.write(*versions(8, keys=2, first=20))
    before = stored_pairs(s.log)
    end = s.log.log_end_offset
    crash_at(monkeypatch, step)
    s.clean()  # the crash surfaces as a failed round
    monkeypatch.undo()
    s.cleaner.shutdown()
    s.log.release_descriptors()

    log = PartitionLog(tmp_path / "t-0", COMPACTED)
    after = stored_pairs(log)
    names = [p.name for p in (tmp_path / "t-0").iterdir()]
    assert not [n for n in names if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))]
    assert set(after) <= set(before)
    assert newest_per_key(after) == newest_per_key(before)
    assert log.log_end_offset == end
    if step == "cleaned files written":
        assert after == before  # the swap never started: the old segments stay
    elif not rounds_before:
        assert after == before[4:]  # completed at restart: records 0-3 were all superseded
    for offset in range(end):  # indexes were rebuilt where needed
        got = records(log.read(offset, 1, end))
        assert got and got[-1].offset >= offset
    log.release_descriptors()


def test_swap_files_of_an_unfinished_split_and_cleaned_files_are_dropped(tmp_path) -> None:
    s = Compacting(tmp_path, COMPACTED, CleanerConfig())
    s.write(*versions(10))
    before = stored_pairs(s.log)
    s.cleaner.shutdown()
    s.log.release_descriptors()
    directory = tmp_path / "t-0"
    (directory / "00000000000000000004.log.cleaned").write_bytes(b"partial")
    (directory / "00000000000000000008.log.swap").write_bytes(b"from a split")
    log = PartitionLog(directory, COMPACTED)
    assert stored_pairs(log) == before
    assert not [p for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    log.release_descriptors()
