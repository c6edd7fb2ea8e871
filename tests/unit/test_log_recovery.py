"""Opening a partition directory: clean restarts, crash recovery, rebuilt indexes."""

import logging
import os

import pytest

from kpybroker.log.log_config import LogConfig
from kpybroker.log.segment import Segment
from tests.helpers.log_builders import (
    SMALL,
    batch,
    fill,
    log_bytes,
    offsets_on_disk,
    open_log,
    records,
)


def crash(log) -> None:
    """Stop without close(): no final time-index entry, no snapshot, nothing fsynced."""
    log.release_descriptors()


def reopen_after_crash(directory, recovery_point=0):
    return open_log(directory, recovery_point=recovery_point)


def test_clean_restart_trusts_the_segments(tmp_path, monkeypatch) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 30)
    end, data = log.log_end_offset, log_bytes(log)
    log.close()

    def no_recovery(*_args):
        raise AssertionError("a cleanly closed log must not be recovered")

    monkeypatch.setattr(Segment, "recover", no_recovery)
    log = open_log(tmp_path / "t-0", clean_shutdown=True, recovery_point=end)
    assert (log.log_end_offset, log.recovery_point, log_bytes(log)) == (end, end, data)
    assert [r.offset for r in records(log.read(end - 3, 100, end))] == [end - 3, end - 2, end - 1]
    assert log.append(batch(3), 0).base_offset == end


def test_torn_tail_is_cut_to_the_last_whole_batch(tmp_path, caplog) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 30)
    active = log.active_segment
    last_batch = active.find_batch(log.log_end_offset - 1)[0]
    path = active.log_path
    crash(log)
    os.truncate(path, last_batch + 30)  # half of the last batch reached the disk

    with caplog.at_level(logging.INFO, logger="kpybroker.log"):
        log = reopen_after_crash(tmp_path / "t-0")
    assert log.log_end_offset == 87
    assert offsets_on_disk(log) == list(range(87))
    assert path.stat().st_size == last_batch
    assert "recovered t-0" in caplog.text and " ms" in caplog.text
    assert log.append(batch(3), 0).base_offset == 87
    assert offsets_on_disk(log) == list(range(90))


def test_a_flipped_byte_cuts_the_log_there_and_drops_later_segments(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 40)
    second = log.segments[1]
    position, header = second.find_batch(second.base_offset + 6)
    names = [s.log_path.name for s in log.segments]
    crash(log)
    data = bytearray(second.log_path.read_bytes())
    data[position + 70] ^= 0x01  # inside the records: the CRC no longer matches
    second.log_path.write_bytes(bytes(data))

    log = reopen_after_crash(tmp_path / "t-0")
    assert log.log_end_offset == header.base_offset
    assert offsets_on_disk(log) == list(range(header.base_offset))
    assert [s.log_path.name for s in log.segments] == names[:2]
    assert not (tmp_path / "t-0" / names[2]).exists()


def test_recovery_starts_at_the_segment_holding_the_recovery_point(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 40)
    first, last = log.segments[0], log.active_segment
    end = log.log_end_offset
    crash(log)
    # Damage below the recovery point is not looked for (those segments were flushed) ...
    data = bytearray(first.log_path.read_bytes())
    data[100] ^= 0x01
    first.log_path.write_bytes(bytes(data))
    # ... while zeros at the end of the active segment (preallocation, a lost write) are cut.
    with open(last.log_path, "ab") as f:
        f.write(bytes(500))
    log = reopen_after_crash(tmp_path / "t-0", recovery_point=last.base_offset)
    assert log.log_end_offset == end
    assert log.active_segment.size == last.size


def test_recovery_neither_flushes_nor_moves_the_recovery_point(tmp_path, monkeypatch) -> None:
    """As Kafka's LogLoader: the recovery point moves only when the log is flushed, so
    a second crash checks the same segments again, and recovery itself fsyncs nothing."""
    log = open_log(tmp_path / "t-0")
    fill(log, 40)
    end, second = log.log_end_offset, log.segments[1].base_offset
    crash(log)
    synced = []
    monkeypatch.setattr(os, "fsync", synced.append)
    monkeypatch.setattr(os, "fdatasync", synced.append)
    log = reopen_after_crash(tmp_path / "t-0", recovery_point=second)
    assert (log.log_end_offset, log.recovery_point, synced) == (end, second, [])


def test_lost_and_damaged_index_files_are_rebuilt(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 30)
    end = log.log_end_offset
    log.close()
    expected = [
        (s.offset_index.path.read_bytes(), s.time_index.path.read_bytes()) for s in log.segments
    ]
    assert len(expected) == 3
    log.segments[0].offset_index.path.unlink()
    log.segments[1].time_index.path.write_bytes(b"\x00" * 13)  # torn
    log.segments[2].offset_index.path.write_bytes((1).to_bytes(4, "big") * 2 * 3)  # out of order

    log = open_log(tmp_path / "t-0", clean_shutdown=True, recovery_point=end)
    for offset in range(end):
        got = records(log.read(offset, 1, end))
        assert got[0].offset <= offset <= got[-1].offset
    rebuilt = [
        (s.offset_index.path.read_bytes(), s.time_index.path.read_bytes()) for s in log.segments
    ]
    assert rebuilt == expected


def test_leftover_files_are_removed(tmp_path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, 3)
    log.close()
    leftovers = [
        "00000000000000000042.index",
        "00000000000000000000.log.deleted",
        "partition.metadata.tmp",
    ]
    for name in leftovers:
        (directory / name).write_bytes(b"x")
    open_log(directory, clean_shutdown=True, recovery_point=9)
    assert not any((directory / name).exists() for name in leftovers)


def test_the_leader_epoch_cache_is_relearnt_from_recovered_batches(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 5, epoch=2)
    fill(log, 5, epoch=5)
    crash(log)
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink()
    log = reopen_after_crash(tmp_path / "t-0")
    assert log.epoch_cache.entries == [(2, 0), (5, 15)]


def test_epochs_past_the_recovered_end_are_dropped(tmp_path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 5, epoch=2)
    fill(log, 1, epoch=5)
    path = log.active_segment.log_path
    crash(log)
    os.truncate(path, path.stat().st_size - 1)
    log = reopen_after_crash(tmp_path / "t-0")
    assert log.log_end_offset == 15
    assert log.epoch_cache.entries == [(2, 0)]


def test_an_empty_directory_becomes_an_empty_log(tmp_path) -> None:
    log = open_log(tmp_path / "t-0", log_start_offset=50)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert log.active_segment.log_path.name == f"{50:020d}.log"


def test_a_directory_made_now_is_not_looked_into(tmp_path, monkeypatch) -> None:
    """Nothing can be in a directory the log makes itself: no listing of it, no index
    read back (making 10,000 partitions listed each new directory seven times)."""
    listed = []
    for name in ("listdir", "scandir"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda path=".", real=real: listed.append(path) or real(path))
    log = open_log(tmp_path / "t-0")
    assert listed == []
    monkeypatch.undo()
    fill(log, 30)
    end, data = log.log_end_offset, log_bytes(log)
    crash(log)
    log = reopen_after_crash(tmp_path / "t-0")
    assert (log.log_end_offset, log_bytes(log)) == (end, data)
    assert log.active_segment.offset_index.entries > 0


@pytest.mark.parametrize("clean", [True, False])
def test_restart_keeps_high_watermark_within_the_log(tmp_path, clean) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 4)
    log.close()
    log = open_log(
        tmp_path / "t-0", SMALL, clean_shutdown=clean, recovery_point=12, high_watermark=99
    )
    assert log.high_watermark == 12


def test_batches_are_read_whole_across_chunks_and_larger_than_a_chunk(tmp_path) -> None:
    """Recovery reads a segment in chunks into one reused buffer: a batch that straddles
    two chunks, or is larger than a chunk, still comes whole (and valid until the next)."""
    log = open_log(tmp_path / "t-0", LogConfig())
    for size in (100, 700, 30, 2000, 5):
        log.append(batch(3, value=bytes(size)), 0)
    segment = log.active_segment
    stored = segment.log_path.read_bytes()
    walked = [
        (position, header.size, bytes(data))
        for position, header, data in segment.batches(0, chunk_size=512)
    ]
    assert [stored[p : p + size] for p, size, _ in walked] == [data for _, _, data in walked]
    assert sum(size for _, size, _ in walked) == len(stored) == segment.size
