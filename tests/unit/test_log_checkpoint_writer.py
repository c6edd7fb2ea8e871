"""The checkpoint thread: writes in order, skips what a file already holds, hands back failures."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from kpybroker.log.checkpoint import read_offset_checkpoint
from kpybroker.log.checkpoint_writer import CheckpointWriter


@pytest.fixture
def writer():
    w = CheckpointWriter()
    yield w
    w.close()


def test_the_last_snapshot_handed_in_is_what_the_file_holds(tmp_path: Path, writer) -> None:
    path = tmp_path / "cp"
    for offset in range(50):
        writer.submit(path, {("t", 0): offset, ("t", 1): 2 * offset})
    writer.drain()
    assert read_offset_checkpoint(path) == {("t", 0): 49, ("t", 1): 98}


def test_a_snapshot_equal_to_the_file_is_not_written_again(tmp_path: Path, writer) -> None:
    path = tmp_path / "cp"
    writer.submit(path, {("t", 0): 7})
    writer.drain()
    os.utime(path, ns=(0, 0))
    writer.submit(path, {("t", 0): 7})
    writer.drain()
    assert path.stat().st_mtime_ns == 0
    writer.submit(path, {("t", 0): 8})
    writer.drain()
    assert read_offset_checkpoint(path) == {("t", 0): 8}


def test_write_now_waits_for_earlier_writes_and_raises(tmp_path: Path, writer) -> None:
    path = tmp_path / "cp"
    writer.submit(path, {("t", 0): 1})
    writer.write_now(path, {("t", 0): 2})
    assert read_offset_checkpoint(path) == {("t", 0): 2}
    with pytest.raises(OSError):
        writer.write_now(tmp_path / "missing" / "cp", {})


def test_a_failed_background_write_is_handed_back(tmp_path: Path, writer) -> None:
    path = tmp_path / "missing" / "cp"
    writer.submit(path, {("t", 0): 1})
    writer.drain()
    [(failed, exc)] = writer.take_failures()
    assert failed == path and exc.errno == errno.ENOENT
    assert writer.take_failures() == []
    (tmp_path / "missing").mkdir()
    writer.submit(tmp_path / "missing" / "other", {("t", 0): 1})
    writer.drain()
    assert not (tmp_path / "missing" / "other").exists()  # nothing more in that directory
