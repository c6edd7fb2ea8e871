"""Paths held per partition and per segment: read as ``Path``, stored as shared strings."""

from __future__ import annotations

from pathlib import Path

from kpybroker.log.log_config import LogConfig
from kpybroker.log.partition_log import PartitionLog
from kpybroker.log.str_paths import SplitPath, StrPath


class _Holder:
    __slots__ = ("_directory", "_file_directory", "_file_name")

    directory = StrPath()
    file = SplitPath()


def test_paths_read_back_as_they_were_set(tmp_path: Path) -> None:
    holder = _Holder()
    holder.directory = tmp_path / "topic-0"
    holder.file = tmp_path / "topic-0" / "00000000000000000000.log"
    assert holder.directory == tmp_path / "topic-0"
    assert holder.file == tmp_path / "topic-0" / "00000000000000000000.log"
    holder.file = "relative.log"
    assert holder.file == Path("relative.log")
    assert _Holder.file.text(holder) == "relative.log"


def test_equal_paths_are_one_string(tmp_path: Path) -> None:
    first, second = _Holder(), _Holder()
    for holder, topic in ((first, "a-0"), (second, "b-0")):
        holder.directory = f"{tmp_path}/{topic}"  # a new string each time
        holder.file = f"{tmp_path}/{topic}/00000000000000000000.log"
    assert first._file_name is second._file_name
    assert first._file_directory is first._directory
    assert second._file_directory is second._directory


def test_a_partitions_files_share_its_directory_string(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "topic-0", LogConfig())
    try:
        segment = log.segments[-1]
        holders = [
            log,
            log.producer_state,
            log.epoch_cache,
            segment.log_file,
            segment.offset_index.file,
            segment.time_index.file,
            segment.txn_index,
        ]
        directories = {
            id(getattr(holder, slot))
            for holder in holders
            for slot in ("_directory", "_path_directory")
            if hasattr(holder, slot)
        }
        assert len(directories) == 1
    finally:
        log.close()
