#!/usr/bin/env python3
"""The per-record walks over a batch's records alone, Python and compiled, per record.

    PYTHONPATH=. python3 scripts/bench_record_walks.py [--size 100] [--records 1000]

Times, over the records section of one batch (random values of --size bytes, 8-byte
keys), the framing check of compressed produce (record_framing) and the cleaner's key
scan (records.scan_record_keys' section walk), each in Python and, when the extension
was built, compiled; best of 7 rounds, in nanoseconds per record: the figures
docs/limits.md quotes. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import timeit
from collections.abc import Callable

from kpybroker.protocol import compiled, record_framing
from kpybroker.protocol.records import (
    BATCH_HEADER_SIZE,
    NewRecord,
    build_batch,
    scan_section_keys_python,
)


def per_record_ns(walk: Callable[[], object], records: int) -> float:
    """The best of 7 rounds of ``walk``, in nanoseconds per record."""
    calls = max(1, 200_000 // records)
    return min(timeit.repeat(walk, number=calls, repeat=7)) / calls / records * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--records", type=int, default=1000, help="records in the batch")
    args = parser.parse_args()
    n = args.records
    batch = build_batch([NewRecord(b"%08d" % i, os.urandom(args.size), (), 0) for i in range(n)])
    section = batch[BATCH_HEADER_SIZE:]
    walks = {
        "framing, python": lambda: record_framing.check_framing_python(section, n, 2**31 - 1),
        "scan keys, python": lambda: scan_section_keys_python(section, n, 0),
    }
    if compiled.walks is not None:
        walks["framing, compiled"] = lambda: record_framing.check_framing_compiled(
            section, n, 2**31 - 1
        )
        walks["scan keys, compiled"] = lambda: compiled.walks.scan_keys(section, n, 0)
    for name, walk in walks.items():
        print(f"{name:20} {n} x {args.size} B: {per_record_ns(walk, n):.1f} ns/record")


if __name__ == "__main__":
    main()
