"""A follower's log: the leader's batches appended byte for byte, and truncation by epochs."""

import pytest

from kpybroker.cluster.replica_fetcher import truncation_point
from kpybroker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from kpybroker.protocol.errors import ErrorCode, KafkaError
from tests.helpers.log_builders import batch, fill, log_bytes, open_log


def leader_with_epochs(tmp_path, name: str, epochs: list[tuple[int, int]]):
    """A log with ``batches`` batches of 3 records at each ``(epoch, batches)``."""
    plog = open_log(tmp_path / name)
    for epoch, batches in epochs:
        fill(plog, batches, epoch=epoch)
    return plog


def copy(leader, follower) -> int:
    """Fetch as a follower does, from its log end (a read stops at a segment's end)."""
    copied = 0
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, 1 << 30, leader.log_end_offset)
        copied += follower.append_as_follower(data.read_bytes())
    return copied


def test_batches_are_copied_byte_for_byte(tmp_path) -> None:
    leader = leader_with_epochs(tmp_path, "leader-0", [(0, 5), (3, 8)])
    pid = batch(2, producer_id=42, producer_epoch=0, base_sequence=0)
    leader.append(pid, 3)
    follower = open_log(tmp_path / "follower-0")
    assert copy(leader, follower) == len(log_bytes(leader))
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.epoch_cache.entries == leader.epoch_cache.entries == [(0, 0), (3, 15)]
    # The producer state came along: a retry is a duplicate on the follower too.
    retry = batch(2, producer_id=42, producer_epoch=0, base_sequence=0)
    assert follower.append(retry, 4).duplicate


def test_resent_batches_are_skipped_and_a_partial_one_left_for_later(tmp_path) -> None:
    leader = leader_with_epochs(tmp_path, "leader-0", [(0, 4)])
    follower = open_log(tmp_path / "follower-0")
    data = leader.read(0, 1 << 30, leader.log_end_offset).read_bytes()
    assert follower.append_as_follower(data[:-5]) == len(data) // 4 * 3
    assert follower.log_end_offset == 9
    assert follower.append_as_follower(data) == len(data) // 4
    assert log_bytes(follower) == log_bytes(leader)


def test_a_corrupt_or_straddling_batch_is_refused(tmp_path) -> None:
    leader = leader_with_epochs(tmp_path, "leader-0", [(0, 2)])
    follower = open_log(tmp_path / "follower-0")
    data = bytearray(leader.read(0, 1 << 30, leader.log_end_offset).read_bytes())
    data[-1] ^= 0xFF
    with pytest.raises(KafkaError) as exc:
        follower.append_as_follower(data)
    assert exc.value.code == ErrorCode.CORRUPT_MESSAGE
    assert follower.log_end_offset == 3  # the intact first batch stayed
    follower.truncate_to(1)  # inside the first batch: it goes whole
    follower.append_as_follower(leader.read(0, 1 << 30, 3).read_bytes())
    follower.truncate_fully_and_start_at(1)
    with pytest.raises(KafkaError) as exc:
        follower.append_as_follower(leader.read(0, 1 << 30, 3).read_bytes())
    assert exc.value.code == ErrorCode.CORRUPT_MESSAGE


def test_a_divergent_tail_of_the_same_epoch_goes(tmp_path) -> None:
    follower = leader_with_epochs(tmp_path, "f-0", [(0, 2), (1, 3)])  # epoch 1 at 6..14
    assert truncation_point(follower, 1, 12) == (12, True)
    assert truncation_point(follower, 1, 20) == (15, True)  # never past its own end


def test_an_epoch_unknown_to_the_leader_takes_two_rounds(tmp_path) -> None:
    # Follower: epoch 0 at 0..8, then epoch 2 (as a leader nobody followed) at 9..14.
    follower = leader_with_epochs(tmp_path, "f-0", [(0, 3), (2, 2)])
    # Its leader had epoch 0 up to 8 only, then epoch 1 from 8 on. Asked about epoch 2, it
    # answers with its largest epoch below: 1, ending where its epoch 3 begins.
    target, done = truncation_point(follower, 1, 12)
    assert (target, done) == (9, False)  # the end of the follower's epoch 0
    follower.truncate_to(target)
    assert follower.leader_epoch == 0
    assert truncation_point(follower, 0, 8) == (8, True)


def test_undefined_answers(tmp_path) -> None:
    follower = leader_with_epochs(tmp_path, "f-0", [(0, 3)])
    follower.update_high_watermark(4)
    assert truncation_point(follower, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET) == (4, True)
    assert truncation_point(follower, UNDEFINED_EPOCH, 6) == (6, True)


def test_an_empty_epoch_at_the_log_end_is_dropped(tmp_path) -> None:
    """A broker made leader that appended nothing before it was replaced keeps an epoch
    entry at its log end; truncating at the log end drops it (else it would ask about
    that epoch forever)."""
    plog = leader_with_epochs(tmp_path, "f-0", [(0, 2)])
    plog.maybe_assign_epoch_start_offset(4, plog.log_end_offset)
    assert plog.leader_epoch == 4
    assert not plog.truncate_to(plog.log_end_offset)
    assert plog.epoch_cache.entries == [(0, 0)]
