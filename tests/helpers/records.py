"""Deterministic test records, what clients hand back, and the checks between them.

Record ``i`` of a run goes to partition ``i % partitions``, so partition ``p``
must hold records ``p, p + P, p + 2P, ...`` at offsets ``0, 1, 2, ...``. Keys,
values and headers mix the cases a broker must keep apart: null and empty
keys and values, no headers, repeated header keys, empty header values,
non-ASCII header keys.
"""

from __future__ import annotations

import functools
import random
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

Headers = list[tuple[str, bytes]]

#: Record ``i`` carries the create timestamp BASE_TIMESTAMP_MS + i: an hour before
#: the test run, fixed for the run. Older timestamps would meet the broker's
#: retention (log.retention.hours=168) mid-test; newer than now + 1 h would be
#: refused (log.message.timestamp.after.max.ms).
BASE_TIMESTAMP_MS = (int(time.time()) - 3600) * 1000

_TEXT = b"The quick brown fox jumps over the lazy dog. " * 8
_NOISE = random.Random(20240601).randbytes(4096)

# Compression codec ids in record-batch attributes (bits 0-2).
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass(frozen=True)
class TestRecord:
    """One record as produced."""

    __test__ = False  # not a pytest test class

    index: int
    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


def make_record(i: int, partitions: int) -> TestRecord:
    """Record number ``i``: the same every time."""
    if i % 11 == 5 and i % 7 != 3:  # never both key and value null (kafka-python refuses)
        key = None
    elif i % 13 == 7:
        key = b""
    else:
        key = f"key-{i:08d}".encode()
    if i % 7 == 3:
        value = None
    elif i % 17 == 9:
        value = b""
    else:
        size = (i * 37) % 200
        start = (i * 131) % 4000
        value = f"value-{i:08d}|".encode() + _TEXT[:size] + _NOISE[start : start + i % 24]
    headers: Headers
    match i % 5:
        case 0:
            headers = []
        case 1:
            headers = [("idx", str(i).encode())]
        case 2:
            headers = [("idx", str(i).encode()), ("dup", b"a"), ("dup", b"b")]
        case 3:
            headers = [("empty", b"")]
        case _:
            headers = [("idx", str(i).encode()), ("ключ", "значение".encode())]
    return TestRecord(i, i % partitions, key, value, headers, BASE_TIMESTAMP_MS + i)


@functools.cache
def make_records(count: int, partitions: int) -> tuple[TestRecord, ...]:
    """Records ``0 .. count-1`` (cached: the same tuple for the same arguments)."""
    return tuple(make_record(i, partitions) for i in range(count))


def expected_counts(records: Sequence[TestRecord], partitions: int) -> dict[int, int]:
    """How many of ``records`` each partition gets."""
    counts = dict.fromkeys(range(partitions), 0)
    for record in records:
        counts[record.partition] += 1
    return counts


@dataclass(frozen=True)
class ConsumedRecord:
    """One record as a consumer returned it (client types normalised)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int
    timestamp_type: str  # "create" or "log-append"


@dataclass
class DeliveryReport:
    """What the producer's acknowledgements said: index -> (partition, offset), and errors."""

    acked: dict[int, tuple[int, int]] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)

    def raise_for_errors(self, expected: int) -> None:
        """AssertionError unless exactly ``expected`` records were acknowledged, none failed."""
        if self.errors or len(self.acked) != expected:
            sample = list(self.errors.items())[:5]
            raise AssertionError(
                f"{len(self.acked)} of {expected} records acknowledged, "
                f"{len(self.errors)} failed; first errors: {sample}"
            )


class Problems:
    """Collects check failures, keeping the first few in full and counting the rest."""

    def __init__(self, limit: int = 12) -> None:
        self.limit = limit
        self.items: list[str] = []
        self.count = 0

    def add(self, text: str) -> None:
        """Record one problem."""
        self.count += 1
        if len(self.items) < self.limit:
            self.items.append(text)

    def raise_if_any(self, what: str) -> None:
        """AssertionError listing the problems, if there were any."""
        if self.count:
            more = (
                f"\n... and {self.count - len(self.items)} more" if self.count > self.limit else ""
            )
            raise AssertionError(f"{what}: {self.count} problems\n" + "\n".join(self.items) + more)


def _short(data: bytes | None) -> str:
    if data is None:
        return "None"
    return repr(data[:40]) + (f"...({len(data)} bytes)" if len(data) > 40 else "")


def verify_roundtrip(
    records: Sequence[TestRecord],
    partitions: int,
    consumed: Mapping[int, Sequence[ConsumedRecord]],
    report: DeliveryReport | None = None,
) -> None:
    """Check that every partition holds exactly its records, in order, at offsets 0, 1, ...

    Compares key, value, headers (order included) and create timestamp of each
    record, and, given the producer's ``report``, the acknowledged offsets.
    """
    problems = Problems()
    by_partition: dict[int, list[TestRecord]] = {p: [] for p in range(partitions)}
    for record in records:
        by_partition[record.partition].append(record)
    for p, want in by_partition.items():
        got = list(consumed.get(p, ()))
        if len(got) != len(want):
            problems.add(f"partition {p}: consumed {len(got)} records, produced {len(want)}")
        offsets = [c.offset for c in got]
        if offsets != list(range(len(got))):
            gaps = [(a, b) for a, b in zip([-1, *offsets], offsets, strict=False) if b != a + 1][:5]
            problems.add(f"partition {p}: offsets not contiguous from 0; first breaks {gaps}")
        for k, (exp, act) in enumerate(zip(want, got, strict=False)):
            where = f"partition {p} offset {act.offset} (record {exp.index})"
            if act.key != exp.key:
                problems.add(f"{where}: key {_short(act.key)} != {_short(exp.key)}")
            if act.value != exp.value:
                problems.add(f"{where}: value {_short(act.value)} != {_short(exp.value)}")
            if act.headers != exp.headers:
                problems.add(f"{where}: headers {act.headers!r} != {exp.headers!r}")
            if act.timestamp_ms != exp.timestamp_ms or act.timestamp_type != "create":
                problems.add(
                    f"{where}: timestamp {act.timestamp_type} {act.timestamp_ms} "
                    f"!= create {exp.timestamp_ms}"
                )
            if report is not None and report.acked.get(exp.index) != (p, k):
                problems.add(f"{where}: acknowledged at {report.acked.get(exp.index)}")
    problems.raise_if_any("round trip")


def segment_batch_codecs(log_dir: Path, topic: str, partition: int) -> set[int]:
    """Compression codec ids of the record batches in a partition's ``.log`` segments.

    Reads Kafka's on-disk layout (``<log_dir>/<topic>-<partition>/*.log``, record
    batches v2: batchLength at byte 8, attributes at byte 21).
    """
    codecs: set[int] = set()
    for segment in sorted((log_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            if length <= 0:
                break
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            codecs.add(attributes & 7)
            pos += 12 + length
    return codecs


def verify_acknowledged_survive(
    partitions: int,
    consumed: Mapping[int, Sequence[ConsumedRecord]],
    report: DeliveryReport,
    *,
    exactly_once: bool,
) -> int:
    """Check a log written through broker crashes; return the number of duplicates.

    Every acknowledged record is at the partition and offset its acknowledgement
    named; each partition's offsets are contiguous from 0; every stored record
    is one of ours (identified by its timestamp), intact, in its partition.
    With ``exactly_once`` (idempotent producer) no record is stored twice and
    each partition is in produce order.
    """
    problems = Problems()
    seen: dict[int, int] = {}
    duplicates = 0
    for p in range(partitions):
        got = list(consumed.get(p, ()))
        offsets = [c.offset for c in got]
        if offsets != list(range(len(got))):
            problems.add(f"partition {p}: offsets not contiguous from 0: {offsets[:3]}...")
        previous = -1
        for c in got:
            index = c.timestamp_ms - BASE_TIMESTAMP_MS
            if not 0 <= index < 10**9:
                problems.add(f"partition {p} offset {c.offset}: foreign timestamp {c.timestamp_ms}")
                continue
            want = make_record(index, partitions)
            if (c.partition, c.key, c.value, c.headers) != (
                want.partition,
                want.key,
                want.value,
                want.headers,
            ):
                problems.add(f"partition {p} offset {c.offset}: not intact record {index}: {c}")
            if index in seen:
                duplicates += 1
                if exactly_once:
                    problems.add(f"record {index} stored twice: offsets {seen[index]}, {c.offset}")
            seen[index] = c.offset
            if exactly_once and index < previous:
                problems.add(f"partition {p} offset {c.offset}: record {index} after {previous}")
            previous = max(previous, index)
    for index, (p, offset) in sorted(report.acked.items()):
        got = consumed.get(p, ())
        if offset >= len(got):
            problems.add(f"record {index} acknowledged at {p}/{offset}: beyond the log's end")
        elif got[offset].timestamp_ms - BASE_TIMESTAMP_MS != index:
            found = got[offset].timestamp_ms - BASE_TIMESTAMP_MS
            problems.add(f"record {index} acknowledged at {p}/{offset}, which holds record {found}")
    problems.raise_if_any("after crashes")
    return duplicates
