"""Moving a partition's log between log directories (``kpybroker.log.log_dir_moves``), on
real files: what the moved log keeps, appends during the move, and what a restart makes of
a move a crash interrupted (resumed from its future log's end, recovered; copied again when
the log diverged from it; completed when the swap had begun)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from pathlib import Path

from kpybroker.log import log_dir_moves
from kpybroker.log.log_manager import LogManager
from kpybroker.log.metadata_files import write_partition_metadata
from kpybroker.log.names import delete_dir_name, future_dir_name, special_dir_kind
from kpybroker.log.partition_log import PartitionLog
from kpybroker.protocol.records import NewRecord, build_batch
from tests.helpers.log_builders import SMALL, batch, fill, stored_pairs

CLUSTER = "Qbc2dFl9TyCgSCW8Y9xsPQ"
TOPIC_ID = bytes(range(16))
PRODUCER_ID = 7


def manager(*dirs: Path) -> LogManager:
    return LogManager(list(dirs), broker_id=1, cluster_id=CLUSTER, config_for=lambda _t: SMALL)


def idempotent(log: PartitionLog, sequence: int, epoch: int = 0) -> None:
    """A batch of an idempotent producer, stamped now (older producers expire on load)."""
    log.append(
        batch(
            2,
            producer_id=PRODUCER_ID,
            producer_epoch=0,
            base_sequence=sequence,
            timestamp=time.time_ns() // 1_000_000,
        ),
        epoch,
    )


async def finish(logs: LogManager) -> None:
    """Let the moves in progress run to their end."""
    while logs.moves.moves:
        await asyncio.sleep(0.01)


def state(log: PartitionLog) -> tuple[object, ...]:
    return (
        [s.base_offset for s in log.segments],
        log.epoch_cache.entries,
        log.log_start_offset,
        log.log_end_offset,
        log.high_watermark,
        {pid: (e.producer_epoch, e.last_seq) for pid, e in log.producer_state.producers.items()},
        # What reads can reach: below the log start a move copies nothing (as Kafka's).
        [pair for pair in stored_pairs(log) if pair[0] >= log.log_start_offset],
    )


def test_a_moved_log_keeps_its_segments_epochs_offsets_and_producers(tmp_path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    logs = manager(source, target)
    log = logs.get_or_create("orders", 0, TOPIC_ID)
    assert logs.log_dir_of("orders", 0) == source
    fill(log, 10, epoch=0)
    for sequence in range(0, 20, 2):
        idempotent(log, sequence, epoch=3)
    fill(log, 10, epoch=5)
    log.update_high_watermark(log.log_end_offset - 4)
    log.increment_log_start_offset(5)
    before = state(log)

    async def move() -> None:
        assert logs.move_to("orders", 0, target)
        assert [tp for tp, _, _ in logs.future_logs()] == [("orders", 0)]
        await finish(logs)

    asyncio.run(move())
    assert logs.get("orders", 0) is log  # every holder of the log keeps it
    assert logs.log_dir_of("orders", 0) == target
    assert log.directory == target / "orders-0"
    assert state(log) == before
    assert not (source / "orders-0").exists()
    assert [p.name for p in source.iterdir() if p.is_dir()] == []
    # A retried batch is still recognised, and the log goes on taking appends.
    duplicate = batch(
        2,
        producer_id=PRODUCER_ID,
        producer_epoch=0,
        base_sequence=18,
        timestamp=time.time_ns() // 1_000_000,
    )
    assert log.append(duplicate, 5).duplicate
    fill(log, 1, epoch=5)
    logs.close()

    reopened = manager(source, target)
    moved = reopened.get("orders", 0)
    assert reopened.log_dir_of("orders", 0) == target
    assert stored_pairs(moved) == stored_pairs(log)
    assert (moved.log_start_offset, moved.high_watermark) == (5, before[4])
    reopened.close()


def test_appends_during_a_move_are_in_the_moved_log(tmp_path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    logs = manager(source, target)
    log = logs.get_or_create("orders", 0, TOPIC_ID)
    fill(log, 30)

    async def move_while_appending() -> None:
        logs.move_to("orders", 0, target)
        while logs.moves.moves:
            fill(log, 1)
            await asyncio.sleep(0.001)

    asyncio.run(move_while_appending())
    assert logs.log_dir_of("orders", 0) == target
    expected = stored_pairs(log)
    logs.close()
    reopened = manager(source, target)
    assert stored_pairs(reopened.get("orders", 0)) == expected
    reopened.close()


def test_a_truncation_during_a_move_restarts_the_copy(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(log_dir_moves, "CHUNK_BYTES", 100)  # a batch per step
    source, target = tmp_path / "a", tmp_path / "b"
    logs = manager(source, target)
    log = logs.get_or_create("orders", 0, TOPIC_ID)
    fill(log, 30, epoch=1)

    async def move_and_diverge() -> None:
        logs.move_to("orders", 0, target)
        (_, _, move), *_ = logs.future_logs()
        while move.future.log_end_offset < 30:
            await asyncio.sleep(0.001)
        log.truncate_to(20)  # a follower diverging from its new leader
        fill(log, 5, epoch=2)
        await finish(logs)

    asyncio.run(move_and_diverge())
    assert logs.log_dir_of("orders", 0) == target
    assert log.epoch_cache.entries == [(1, 0), (2, 18)]
    expected = stored_pairs(log)
    logs.close()
    reopened = manager(source, target)
    assert stored_pairs(reopened.get("orders", 0)) == expected
    reopened.close()


def test_a_move_to_where_the_log_is_does_nothing(tmp_path) -> None:
    logs = manager(tmp_path / "a", tmp_path / "b")
    logs.get_or_create("orders", 0, TOPIC_ID)
    assert logs.move_to("orders", 0, tmp_path / "a")
    assert list(logs.future_logs()) == []
    logs.close()


def test_a_partition_not_here_yet_is_created_where_asked(tmp_path) -> None:
    logs = manager(tmp_path / "a", tmp_path / "b")
    assert not logs.move_to("orders", 0, tmp_path / "b")
    logs.get_or_create("orders", 0, TOPIC_ID)
    assert logs.log_dir_of("orders", 0) == tmp_path / "b"
    assert logs.find_log_dir(str(tmp_path / "b")) == tmp_path / "b"
    assert logs.find_log_dir(str(tmp_path / "c")) is None
    logs.close()


def test_deleting_a_partition_stops_its_move(tmp_path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    logs = manager(source, target)
    fill(logs.get_or_create("orders", 0, TOPIC_ID), 30)

    async def move_then_delete() -> None:
        logs.move_to("orders", 0, target)
        await asyncio.sleep(0)
        assert logs.delete_partition("orders", 0)

    asyncio.run(move_then_delete())
    assert list(logs.future_logs()) == []
    assert not [p for p in target.iterdir() if special_dir_kind(p.name) == "future"]
    logs.close()


def crashed_mid_swap(tmp_path: Path, current_renamed: bool) -> tuple[Path, Path, list]:
    """A log in ``a`` fully copied to a future log in ``b``, as a crash during the swap
    leaves it: with the current directory still there, or already renamed ``…-delete``."""
    source, target = tmp_path / "a", tmp_path / "b"
    logs = manager(source, target)
    log = logs.get_or_create("orders", 0, TOPIC_ID)
    fill(log, 20)
    expected = stored_pairs(log)
    logs.close()
    shutil.copytree(source / "orders-0", target / future_dir_name("orders-0"))
    if current_renamed:
        (source / "orders-0").rename(source / delete_dir_name("orders-0"))
    return source, target, expected


def interrupted_move(tmp_path: Path, *, diverge: bool = False) -> tuple[Path, Path, Path]:
    """A log in ``a`` whose move to ``b`` a crash interrupted after 60 offsets (20 batches
    in epoch 0): the future log is the files as they were then, and the current log went on
    with 30 more offsets; with ``diverge``, after being truncated to 30 (a follower meeting
    a new leader) in epoch 1. Returns the two directories and the future log's."""
    source, target = tmp_path / "a", tmp_path / "b"
    logs = manager(source, target)
    log = logs.get_or_create("orders", 0, TOPIC_ID)
    fill(log, 20, epoch=0)
    future_dir = target / future_dir_name("orders-0")
    shutil.copytree(source / "orders-0", future_dir)  # open files: what a crash leaves
    if diverge:
        log.truncate_to(30)
        fill(log, 20, epoch=1)
    else:
        fill(log, 10, epoch=0)
    logs.close()
    return source, target, future_dir


def contents(partition_dir: Path) -> tuple[list, list[tuple[int, int]]]:
    """The records and leader epochs of a stopped broker's partition directory."""
    log = PartitionLog(partition_dir, SMALL, clean_shutdown=True)
    try:
        return stored_pairs(log), log.epoch_cache.entries
    finally:
        log.close()


def reopen_and_finish(source: Path, target: Path) -> tuple[int, list]:
    """Restart on the two directories: the future log's end as loaded, and the partition's
    records once the resumed move is done (in ``target``, with nothing left in ``source``)."""

    async def restart() -> tuple[int, list]:
        logs = manager(source, target)
        ((_, _, move),) = logs.future_logs()
        loaded_end = move.future.log_end_offset
        await finish(logs)
        assert logs.log_dir_of("orders", 0) == target
        moved = stored_pairs(logs.get("orders", 0))
        logs.close()
        return loaded_end, moved

    loaded_end, moved = asyncio.run(restart())
    assert [p.name for p in source.iterdir() if p.is_dir()] == []
    assert [p.name for p in target.iterdir() if p.is_dir()] == ["orders-0"]
    return loaded_end, moved


def test_a_restart_resumes_an_unfinished_move_from_its_end(tmp_path, caplog) -> None:
    source, target, _ = interrupted_move(tmp_path)
    expected, _ = contents(source / "orders-0")
    caplog.set_level(logging.INFO, logger=log_dir_moves.__name__)
    assert reopen_and_finish(source, target) == (60, expected)
    assert "orders-0: resuming the move to" in caplog.text
    assert f"{target} from offset 60" in caplog.text


def test_a_torn_future_log_is_cut_at_its_last_whole_batch_and_resumed(tmp_path, caplog) -> None:
    source, target, future_dir = interrupted_move(tmp_path)
    with max(future_dir.glob("*.log")).open("ab") as torn:  # the write a crash interrupted
        torn.write(bytes(batch(3))[:40])
    expected, _ = contents(source / "orders-0")
    caplog.set_level(logging.INFO, logger=log_dir_moves.__name__)
    assert reopen_and_finish(source, target) == (60, expected)
    assert f"{target} from offset 60" in caplog.text


def test_a_future_log_the_current_log_diverged_from_is_copied_again(tmp_path, caplog) -> None:
    source, target, _ = interrupted_move(tmp_path, diverge=True)
    expected, epochs = contents(source / "orders-0")
    caplog.set_level(logging.INFO, logger=log_dir_moves.__name__)
    assert reopen_and_finish(source, target) == (60, expected)
    assert "orders-0: restarting the move to" in caplog.text
    assert contents(target / "orders-0") == (expected, epochs)
    assert epochs == [(0, 0), (1, 30)]


def test_a_future_log_of_another_topic_id_is_removed_at_start(tmp_path, caplog) -> None:
    source, target, future_dir = interrupted_move(tmp_path)
    write_partition_metadata(future_dir, bytes(range(1, 17)))  # another incarnation of the topic
    expected, _ = contents(source / "orders-0")

    async def restart() -> None:
        logs = manager(source, target)
        assert list(logs.future_logs()) == []
        assert logs.log_dir_of("orders", 0) == source
        assert stored_pairs(logs.get("orders", 0)) == expected
        logs.close()

    caplog.set_level(logging.WARNING, logger=LogManager.__module__)
    asyncio.run(restart())
    assert "a future log that cannot be loaded" in caplog.text
    assert [p.name for p in target.iterdir() if p.is_dir()] == []


def test_a_restart_completes_a_swap_the_crash_interrupted(tmp_path) -> None:
    source, target, expected = crashed_mid_swap(tmp_path, current_renamed=True)
    logs = manager(source, target)
    assert logs.log_dir_of("orders", 0) == target
    assert stored_pairs(logs.get("orders", 0)) == expected
    assert [p.name for p in source.iterdir() if p.is_dir()] == []
    logs.close()


def test_a_move_back_before_the_end_stops_the_move(tmp_path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    logs = manager(source, target)
    log = logs.get_or_create("orders", 0, TOPIC_ID)
    fill(log, 30)
    hook = log.before_truncation

    async def there_and_back() -> None:
        logs.move_to("orders", 0, target)
        assert log.before_truncation is not hook  # the move watches for truncations
        logs.move_to("orders", 0, source)

    asyncio.run(there_and_back())
    assert list(logs.future_logs()) == []
    assert log.before_truncation is hook
    assert logs.log_dir_of("orders", 0) == source
    assert [p.name for p in target.iterdir() if p.is_dir()] == []
    logs.close()


def test_a_moved_log_keeps_its_aborted_and_open_transactions(tmp_path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    logs = manager(source, target)
    log = logs.get_or_create("orders", 0, TOPIC_ID)
    log.append(transactional(1), 0)  # 0-1
    log.append(transactional(2), 0)  # 2-3
    log.append_txn_marker(1, 0, 0, False, 0)  # 4: producer 1 aborts
    log.append(transactional(3), 0)  # 5-6, left open
    log.update_high_watermark(log.log_end_offset)
    aborted = [s.txn_index.entries for s in log.segments]
    lso = log.last_stable_offset

    async def move() -> None:
        logs.move_to("orders", 0, target)
        await finish(logs)

    asyncio.run(move())
    assert logs.log_dir_of("orders", 0) == target
    assert [s.txn_index.entries for s in log.segments] == aborted
    assert log.last_stable_offset == lso == 2
    log.append_txn_marker(2, 0, 0, True, 0)  # the open transactions end on the moved log
    log.append_txn_marker(3, 0, 0, True, 0)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.log_end_offset
    logs.close()


def transactional(producer_id: int) -> bytearray:
    now = time.time_ns() // 1_000_000
    return bytearray(
        build_batch(
            [NewRecord(None, b"v", (), now)] * 2,
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
            timestamp=now,
        )
    )
