#!/usr/bin/env python3
"""The walk over a compressed batch's records (record_framing.check_framing) alone, per record.

    PYTHONPATH=. python3 scripts/bench_framing.py [--size 100] [--records 1000]

Times the Python walk and, when the extension was built, the compiled one over the
records section of one batch (random values of --size bytes, 8-byte keys), best of
several rounds, and prints nanoseconds per record: the figure docs/limits.md quotes.
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import timeit

from kpybroker.protocol import record_framing
from kpybroker.protocol.records import BATCH_HEADER_SIZE, NewRecord, build_batch


def per_record_ns(walk: record_framing.Walk, section: bytes, records: int) -> float:
    """The best of 7 rounds of walking ``section``, in nanoseconds per record."""
    calls = max(1, 200_000 // records)
    best = min(timeit.repeat(lambda: walk(section, records, 2**31 - 1), number=calls, repeat=7))
    return best / calls / records * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--records", type=int, default=1000, help="records in the batch")
    args = parser.parse_args()
    batch = build_batch(
        [NewRecord(b"%08d" % i, os.urandom(args.size), (), 0) for i in range(args.records)]
    )
    section = batch[BATCH_HEADER_SIZE:]
    walks = {"python": record_framing.check_framing_python}
    if record_framing.well_framed is not None:
        walks["compiled"] = record_framing.check_framing_compiled
    for name, walk in walks.items():
        ns = per_record_ns(walk, section, args.records)
        print(f"{name:8} {args.records} x {args.size} B: {ns:.1f} ns/record")


if __name__ == "__main__":
    main()
