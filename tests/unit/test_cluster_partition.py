"""A partition's leader side: follower progress, the high watermark, acks=all and the ISR."""

import asyncio

import pytest

from kpybroker.cluster.follower_progress import FollowerProgress
from kpybroker.cluster.isr import lagging_followers
from kpybroker.cluster.partition import Partition, Transition
from kpybroker.metadata.model import PartitionMetadata, PartitionState
from kpybroker.protocol.errors import ErrorCode, KafkaError
from tests.helpers.log_builders import batch, open_log

ME = 1


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def meta(leader: int, epoch: int, isr: tuple[int, ...], replicas=(1, 2, 3)) -> PartitionMetadata:
    return PartitionMetadata(0, replicas, PartitionState(leader, epoch, isr, 1), 0)


def partition(tmp_path, clock: Clock | None = None, min_isr: int = 2) -> Partition:
    return Partition(
        open_log(tmp_path / "t-0"), "t", 0, b"\x01" * 16, ME, min_isr, clock or Clock()
    )


def test_a_single_replica_commits_at_once(tmp_path) -> None:
    p = partition(tmp_path, min_isr=1)
    assert p.apply(meta(ME, 0, (ME,), replicas=(ME,))) is Transition.LEADER
    p.append_as_leader(batch(3), required_acks=-1)
    assert p.high_watermark == p.log.log_end_offset == 3


def test_the_high_watermark_is_the_smallest_log_end_across_the_isr(tmp_path) -> None:
    p = partition(tmp_path)
    p.apply(meta(ME, 0, (1, 2, 3)))
    for _ in range(3):
        p.append_as_leader(batch(2), required_acks=-1)
    assert p.high_watermark == 0  # followers' progress unknown
    p.update_follower(2, 6)
    assert p.high_watermark == 0
    p.update_follower(3, 4)
    assert p.high_watermark == 4
    p.apply(meta(ME, 0, (1, 2)))  # 3 left the ISR
    assert p.high_watermark == 6


def test_acks_all_waits_for_the_high_watermark(tmp_path) -> None:
    async def main() -> None:
        p = partition(tmp_path)
        p.apply(meta(ME, 0, (1, 2)))
        result = p.append_as_leader(batch(2), required_acks=-1)
        waiting = asyncio.ensure_future(p.wait_for_high_watermark(result.last_offset + 1))
        await asyncio.sleep(0)
        assert not waiting.done()
        p.update_follower(2, 1)
        await asyncio.sleep(0)
        assert not waiting.done()
        p.update_follower(2, 2)
        assert await waiting == ErrorCode.NONE
        # Committed, but on fewer replicas than asked for:
        result = p.append_as_leader(batch(1), required_acks=-1)
        waiting = asyncio.ensure_future(p.wait_for_high_watermark(result.last_offset + 1))
        await asyncio.sleep(0)
        p.apply(meta(ME, 0, (1,)))
        assert await waiting == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        # Leadership lost while waiting:
        p.apply(meta(ME, 0, (1, 2)))
        result = p.append_as_leader(batch(1), required_acks=-1)
        waiting = asyncio.ensure_future(p.wait_for_high_watermark(result.last_offset + 1))
        await asyncio.sleep(0)
        assert p.apply(meta(2, 1, (2, 3))) is Transition.FOLLOWER
        assert await waiting == ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(main())


def test_acks_all_is_refused_below_min_insync_replicas(tmp_path) -> None:
    p = partition(tmp_path)
    p.apply(meta(ME, 0, (ME,)))
    with pytest.raises(KafkaError) as exc:
        p.append_as_leader(batch(1), required_acks=-1)
    assert exc.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    p.append_as_leader(batch(1), required_acks=1)
    assert p.high_watermark == 1


def test_a_caught_up_follower_is_proposed_for_the_isr(tmp_path) -> None:
    p = partition(tmp_path)
    proposed = []
    p.on_caught_up = lambda partition, follower: proposed.append(follower)
    p.apply(meta(ME, 0, (1, 2)))
    p.append_as_leader(batch(2), required_acks=1)
    p.update_follower(2, 2)
    p.update_follower(3, 1)
    assert proposed == []  # below the high watermark
    p.update_follower(3, 2)
    assert proposed == [3]
    with pytest.raises(KafkaError):
        p.update_follower(9, 2)  # not a replica


def test_a_new_leader_epoch_starts_at_the_log_end(tmp_path) -> None:
    p = partition(tmp_path)
    p.apply(meta(2, 3, (1, 2)))
    p.log.append(batch(4), 3)  # as if replicated
    assert p.apply(meta(ME, 4, (1, 2))) is Transition.LEADER
    assert p.log.epoch_cache.entries == [(3, 0), (4, 4)]
    assert p.end_offset_for_epoch(3) == (3, 4)
    assert p.apply(meta(ME, 4, (1, 2, 3))) is Transition.NONE  # only the ISR changed
    assert p.apply(meta(ME, 5, (1, 2, 3))) is Transition.LEADER  # re-elected: a new epoch


def test_lagging_followers() -> None:
    progress = FollowerProgress(last_caught_up_ms=0)
    progress.on_fetch(10, 10, now_ms=1_000)  # caught up
    assert not progress.is_lagging(20, 5_000, max_lag_ms=10_000)
    assert progress.is_lagging(20, 12_000, max_lag_ms=10_000)
    progress.on_fetch(20, 25, now_ms=13_000)  # reached the leader's previous end: caught up then
    assert progress.last_caught_up_ms == 1_000 and progress.last_fetch_ms == 13_000
    progress.on_fetch(25, 30, now_ms=14_000)
    assert progress.last_caught_up_ms == 13_000
    assert not progress.is_lagging(30, 20_000, max_lag_ms=10_000)


def test_a_follower_that_stops_fetching_leaves_the_isr(tmp_path) -> None:
    clock = Clock()
    p = partition(tmp_path, clock)
    p.apply(meta(ME, 0, (1, 2, 3)))
    p.append_as_leader(batch(1), required_acks=1)
    p.update_follower(2, 1)
    p.update_follower(3, 1)
    clock.now += 5_000
    p.append_as_leader(batch(1), required_acks=1)
    p.update_follower(2, 2)
    assert lagging_followers(p, clock.now, max_lag_ms=3_000) == [3]
