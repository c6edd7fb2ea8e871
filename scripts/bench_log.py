#!/usr/bin/env python3
"""Benchmarks of the log's life: crash recovery, compaction, the durable flush policy, housekeeping.

    python scripts/bench_log.py                      # all three, default sizes
    python scripts/bench_log.py recovery --mb 1024   # one of them, bigger
    python scripts/bench_log.py cleaner --mb 128 --keys 20000
    python scripts/bench_log.py durable --records 200000
    python scripts/bench_log.py housekeeping --partitions 100000

``recovery``: a log is written with nothing flushed and no recovery point, the
process "crashes" (descriptors dropped, nothing closed), and the time to reopen
it (every batch CRC-checked, indexes rebuilt, producer state replayed) is
reported per GB. The data is still in the page cache unless ``--drop-caches``
(root; affects the whole machine) is given.

``cleaner``: one compaction round over a log of mostly superseded records, in
MB of log read per second, and the longest the event loop waited meanwhile
(the round runs in the cleaner's thread while a ticker runs on the loop).

``durable``: records/s with ``log.flush.interval.messages=1`` (an fsync before
every acknowledgement) against the default (flushing left to the OS), end to
end through a broker and librdkafka (acks=all), and for the log alone.

``housekeeping``: the periodic work of a log manager holding many partitions (one
record each, made on tmpfs where there is one: creating a log costs four fsyncs), every
task due at once, a step at a time as the broker's event loop runs it: the steps, the
longest and the total. Between steps the broker serves other requests.

A benchmark, not a test: it checks only what the numbers need to mean anything.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from bench_throughput import create_topic, produce  # noqa: E402

from kpybroker.log.log_cleaner import LogCleaner  # noqa: E402
from kpybroker.log.log_config import CleanerConfig, LogConfig  # noqa: E402
from kpybroker.log.log_manager import LogManager  # noqa: E402
from kpybroker.log.partition_log import PartitionLog, wall_clock_ms  # noqa: E402
from kpybroker.protocol.records import NewRecord, build_batch  # noqa: E402
from tests.helpers.brokers import launcher  # noqa: E402

MB = 1024 * 1024
RECORDS_PER_BATCH = 100
VALUE_SIZE = 100


@contextmanager
def scratch_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kpybroker-bench-log-") as name:
        yield Path(name)


def batches(count: int, key_space: int, first_key: int = 0) -> list[bytearray]:
    """``count`` batches of ``RECORDS_PER_BATCH`` records with keys cycling through
    ``key_space`` keys and random (incompressible) values."""
    out = []
    key = first_key
    for _ in range(count):
        records = []
        for _ in range(RECORDS_PER_BATCH):
            records.append(NewRecord(b"key-%08d" % (key % key_space), os.urandom(VALUE_SIZE)))
            key += 1
        out.append(bytearray(build_batch(records)))
    return out


def fill(log: PartitionLog, pool: list[bytearray], total_bytes: int) -> int:
    """Append batches from ``pool`` in turn until the log holds ``total_bytes``."""
    i = 0
    while log.size < total_bytes:
        log.append(bytearray(pool[i % len(pool)]), 0)
        i += 1
    log.update_high_watermark(log.log_end_offset)
    return log.size


def bench_recovery(mb: int, drop_caches: bool) -> None:
    with scratch_dir() as directory:
        config = LogConfig(retention_ms=-1)
        log = PartitionLog(directory / "bench-0", config)
        size = fill(log, batches(64, 10**9), mb * MB)
        end = log.log_end_offset
        log.release_descriptors()  # the crash: nothing closed, flushed or checkpointed
        if drop_caches:
            os.sync()
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
        started = time.perf_counter()
        recovered = PartitionLog(directory / "bench-0", config, recovery_point=0)
        elapsed = time.perf_counter() - started
        assert recovered.log_end_offset == end, "recovery lost data"
        recovered.release_descriptors()
    cache = "cold" if drop_caches else "warm"
    print(
        f"recovery   {size / MB:8.0f} MB unflushed in {elapsed:6.2f} s -> "
        f"{elapsed / (size / (1024 * MB)):6.2f} s per GB ({size / MB / elapsed:.0f} MB/s, "
        f"{cache} page cache)"
    )


def bench_cleaner(mb: int, keys: int) -> None:
    with scratch_dir() as directory:
        config = LogConfig(
            segment_bytes=64 * MB,
            cleanup_policy=("compact",),
            retention_ms=-1,
            min_cleanable_dirty_ratio=0.01,
        )
        log = PartitionLog(directory / "bench-0", config)
        pool = batches(max(1, keys // RECORDS_PER_BATCH), keys)
        size = fill(log, pool, mb * MB)
        log.roll()
        fill(log, pool[:1], log.size + 1)  # an active segment, never cleaned
        cleaner = LogCleaner(
            CleanerConfig(), [directory], lambda: [(("bench", 0), log, directory)], wall_clock_ms
        )

        async def clean_beside_a_ticker() -> tuple[float, float]:
            longest = 0.0
            task = asyncio.create_task(cleaner.clean_filthiest())
            started = time.perf_counter()
            while not task.done():
                tick = time.perf_counter()
                await asyncio.sleep(0.001)
                longest = max(longest, time.perf_counter() - tick - 0.001)
            assert await task, "nothing was cleaned"
            return time.perf_counter() - started, longest

        elapsed, longest_wait = asyncio.run(clean_beside_a_ticker())
        stats = cleaner.last_stats
        assert stats is not None
        cleaner.shutdown()
        after = log.size
        log.release_descriptors()
    print(
        f"cleaner    {size / MB:8.0f} MB, {keys} keys: {stats.processed_mb_per_second:6.1f} MB/s "
        f"of log processed ({elapsed:.2f} s wall: map {stats.map_seconds:.2f} s, rewrite "
        f"{stats.clean_seconds:.2f} s); {size / MB:.0f} MB -> {after / MB:.1f} MB; "
        f"the event loop waited at most {longest_wait * 1000:.1f} ms"
    )


def log_append_rate(config: LogConfig, count: int) -> float:
    with scratch_dir() as directory:
        log = PartitionLog(directory / "bench-0", config)
        pool = batches(16, 10**9)
        started = time.perf_counter()
        for i in range(count):
            log.append(bytearray(pool[i % len(pool)]), 0)
        elapsed = time.perf_counter() - started
        log.release_descriptors()
    return count * RECORDS_PER_BATCH / elapsed


def broker_produce_rate(overrides: dict[str, object], records: int) -> float:
    with scratch_dir() as directory, launcher(directory) as brokers:
        broker = brokers(overrides)
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        create_topic(broker.bootstrap, topic, 6)
        return records / produce(broker.bootstrap, topic, records, VALUE_SIZE, 5)


def bench_durable(records: int, log_batches: int) -> None:
    rates: dict[str, tuple[float, float]] = {}
    for label, overrides, config in (
        ("default", {}, LogConfig(retention_ms=-1)),
        (
            "durable",
            {"log.flush.interval.messages": 1},
            LogConfig(retention_ms=-1, flush_interval_messages=1),
        ),
    ):
        rates[label] = (
            broker_produce_rate(overrides, records),
            log_append_rate(config, log_batches),
        )
    for i, where in enumerate(("broker (librdkafka, acks=all)", "log alone (100-record batches)")):
        default, durable = rates["default"][i], rates["durable"][i]
        print(
            f"durable    {where:<32} default {default:>10,.0f} rec/s, durable "
            f"{durable:>10,.0f} rec/s -> ratio {durable / default:.2f}"
        )


def bench_housekeeping(partitions: int) -> None:
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(
        prefix="kpybroker-bench-log-", dir=shm if shm.is_dir() else None
    ) as name:
        logs = LogManager([Path(name)], broker_id=0, cluster_id="bench-housekeeping")
        record = build_batch([NewRecord(None, os.urandom(VALUE_SIZE))])
        start = time.perf_counter()
        for index in range(partitions):
            partition_log = logs.get_or_create(f"t{index // 10_000}", index % 10_000, None)
            partition_log.append(bytearray(record), 0)
            partition_log.update_high_watermark(partition_log.log_end_offset)
        print(f"housekeeping: {partitions} logs made in {time.perf_counter() - start:.1f} s")
        gc.collect()
        gc.freeze()  # as the broker does once its logs are loaded (heap_freezer)
        steps = []
        start = last = time.perf_counter()
        for _ in logs.periodic_steps(now_ms=2**62):  # every task due
            now = time.perf_counter()
            steps.append(now - last)
            last = now
        steps.sort()
        longest, p99 = steps[-1] * 1e3, steps[len(steps) * 99 // 100] * 1e3
        print(
            f"  every task due: {len(steps)} steps, {(last - start) * 1e3:.0f} ms in all; "
            f"longest step {longest:.1f} ms, p99 {p99:.1f} ms"
        )
        logs.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "which", nargs="*", choices=["recovery", "cleaner", "durable", "housekeeping"]
    )
    parser.add_argument("--mb", type=int, help="log size for recovery (256) and cleaner (64)")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys for cleaner")
    parser.add_argument("--records", type=int, default=1_000_000, help="records for durable")
    parser.add_argument("--log-batches", type=int, default=2_000, help="batches for durable")
    parser.add_argument("--partitions", type=int, default=100_000, help="for housekeeping")
    parser.add_argument("--drop-caches", action="store_true", help="cold-cache recovery (root)")
    args = parser.parse_args()
    runs: dict[str, Callable[[], None]] = {
        "recovery": lambda: bench_recovery(args.mb or 256, args.drop_caches),
        "cleaner": lambda: bench_cleaner(args.mb or 64, args.keys),
        "durable": lambda: bench_durable(args.records, args.log_batches),
        "housekeeping": lambda: bench_housekeeping(args.partitions),
    }
    for name in args.which or runs:
        runs[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
