"""The leader epoch cache (Kafka's LeaderEpochFileCache semantics)."""

from kpybroker.log.leader_epoch import LeaderEpochCache


def cache_with(tmp_path, *entries) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_entries_persist_and_reload(tmp_path) -> None:
    cache_with(tmp_path, (0, 0), (0, 5), (2, 10), (-1, 12))
    assert LeaderEpochCache(tmp_path).entries == [(0, 0), (2, 10)]


def test_a_lower_epoch_or_offset_replaces_conflicting_entries(tmp_path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10), (5, 20))
    cache.assign(4, 15)
    assert cache.entries == [(1, 0), (3, 10), (4, 15)]
    cache.assign(6, 12)
    assert cache.entries == [(1, 0), (3, 10), (6, 12)]


def test_end_offset_for(tmp_path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10), (5, 20))
    assert cache.end_offset_for(5, 33) == (5, 33)
    assert cache.end_offset_for(3, 33) == (3, 20)
    assert cache.end_offset_for(4, 33) == (3, 20)
    assert cache.end_offset_for(0, 33) == (0, 0)
    assert cache.end_offset_for(6, 33) == (-1, -1)
    assert cache.end_offset_for(-1, 33) == (-1, -1)


def test_truncation_from_either_end(tmp_path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10), (5, 20))
    cache.truncate_from_start(12)
    assert cache.entries == [(3, 12), (5, 20)]
    cache.truncate_from_start(5)
    assert cache.entries == [(3, 12), (5, 20)]
    cache.truncate_from_end(20)
    assert cache.entries == [(3, 12)]
    assert LeaderEpochCache(tmp_path).entries == [(3, 12)]
    assert [cache.epoch_for_offset(o) for o in (0, 12, 99)] == [-1, 3, 3]


def test_a_corrupt_checkpoint_starts_empty(tmp_path) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n1 0\n")
    assert LeaderEpochCache(tmp_path).entries == []


def test_loading_fits_the_cache_to_the_log_without_rewriting_the_file(tmp_path) -> None:
    """An empty partition's epoch starts at its end: loading drops that entry and becoming
    leader again assigns it; neither rewrites the file (start-up cost two fsyncs each)."""
    cache_with(tmp_path, (1, 0), (3, 10), (5, 20))
    checkpoint = tmp_path / "leader-epoch-checkpoint"
    written = checkpoint.stat().st_ino
    loaded = LeaderEpochCache(tmp_path)
    loaded.fit_to_log(log_start_offset=0, log_end_offset=20)
    assert loaded.entries == [(1, 0), (3, 10)]
    assert LeaderEpochCache(tmp_path).entries == [(1, 0), (3, 10), (5, 20)]
    loaded.assign(5, 20)
    assert checkpoint.stat().st_ino == written
    loaded.assign(6, 25)
    assert checkpoint.stat().st_ino != written
    assert LeaderEpochCache(tmp_path).entries == [(1, 0), (3, 10), (5, 20), (6, 25)]
