"""Damaged segment files are detected at start, cut back to the last valid batch, and logged.

After a SIGKILL the broker scans every segment past its recovery point (the
recovery-point checkpoint is written only once an hour here, so that is the
whole log). A segment truncated inside a batch, or a batch with a flipped
byte, ends the valid log there: the rest of that segment and every later
segment go, the broker says so, and the next record produced gets the offset
right after the last valid batch. Positions come from a seeded generator.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from kpybroker.protocol.records import iter_batches
from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.log_life import (
    consume_all,
    create_topic,
    offsets_of,
    partition_dir,
    produce_each,
    valid_prefix_end,
)

TOPIC = "damaged"
ROUNDS = 3
HEADER_CRC_START = 21  # a batch's CRC covers bytes 21.. (attributes to the last record)


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> ManagedBroker:
    return broker_factory({"log.flush.offset.checkpoint.interval.ms": 3_600_000})


def seeded() -> random.Random:
    return random.Random(int(os.environ.get("KPYBROKER_CRASH_SEED", "20250602")))


def segments(broker: ManagedBroker) -> list[Path]:
    return sorted(partition_dir(broker, TOPIC).glob("*.log"))


def batch_spans(path: Path) -> list[tuple[int, int]]:
    """``(start, end)`` byte range of each batch in a segment file."""
    return [(pos, pos + header.size) for pos, header in iter_batches(path.read_bytes())]


def truncate_inside_a_batch(rng: random.Random, path: Path) -> str:
    start, end = rng.choice(batch_spans(path))
    position = rng.randrange(start + 1, end)  # never on a boundary: that would be a valid file
    os.truncate(path, position)
    return f"truncated {path.name} at byte {position}"


def flip_a_byte_inside_a_batch(rng: random.Random, path: Path) -> str:
    start, end = rng.choice(batch_spans(path))
    position = rng.randrange(start + HEADER_CRC_START, end)
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))
    return f"flipped byte {position} of {path.name}"


def values(first: int, count: int, rng: random.Random) -> list[tuple[bytes, bytes]]:
    return [(b"k%d" % i, b"x" * rng.randrange(1, 300)) for i in range(first, first + count)]


def damage_and_restart(broker: ManagedBroker, damage: Callable[[random.Random, Path], str]) -> None:
    rng = seeded()
    create_topic(broker.bootstrap, TOPIC, {"segment.bytes": 4096})
    produced: dict[int, bytes] = {}
    end = 0
    for _ in range(ROUNDS):
        batch = values(end, 60, rng)
        for offset, (_, value) in zip(
            produce_each(broker.bootstrap, TOPIC, batch), batch, strict=True
        ):
            produced[offset] = value
        broker.kill()
        files = segments(broker)
        what = damage(rng, rng.choice(files))
        end = valid_prefix_end(files)
        output_before = len(broker.log_text())
        broker.start()
        restart_log = broker.log_text()[output_before:]
        assert "truncating the segment" in restart_log, f"{what}: not reported\n{restart_log}"
        # The next record lands right after the last valid batch ...
        assert produce_each(broker.bootstrap, TOPIC, [(b"marker", b"m")]) == [end], what
        produced[end] = b"m"
        # ... and everything before it is intact and contiguous.
        stored = consume_all(broker.bootstrap, TOPIC)
        assert offsets_of(stored) == list(range(end + 1)), what
        assert [value for _, (_, value) in stored] == [produced[o] for o in range(end + 1)], what
        end += 1


def test_a_segment_truncated_inside_a_batch_is_cut_to_the_last_whole_batch(broker) -> None:
    damage_and_restart(broker, truncate_inside_a_batch)


def test_a_batch_with_a_flipped_byte_is_cut_off_with_everything_after_it(broker) -> None:
    damage_and_restart(broker, flip_a_byte_inside_a_batch)


def test_lost_and_garbled_indexes_are_rebuilt_from_the_log(broker) -> None:
    create_topic(broker.bootstrap, TOPIC, {"segment.bytes": 4096, "index.interval.bytes": 100})
    produce_each(broker.bootstrap, TOPIC, values(0, 80, seeded()))
    before = consume_all(broker.bootstrap, TOPIC)
    broker.stop()  # a clean shutdown: segments are trusted, indexes only sanity-checked
    first, second = segments(broker)[:2]
    first.with_suffix(".index").unlink()
    second.with_suffix(".index").write_bytes(b"\x00\x00\x00\x05" * 3)  # torn, out of order
    output_before = len(broker.log_text())
    broker.start()
    assert "rebuilding the indexes" in broker.log_text()[output_before:]
    assert consume_all(broker.bootstrap, TOPIC) == before
