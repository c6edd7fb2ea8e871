#!/usr/bin/env python3
"""How long kpybroker.testing takes to give a test a broker, and to take it away.

    python scripts/bench_testing_startup.py                  # both modes, 3 brokers each
    python scripts/bench_testing_startup.py --mode inprocess --runs 5

Each run times ``with broker(mode=...) as b:`` from its entry until a raw
ApiVersions request to ``b.bootstrap_servers`` is answered, then the exit of the
block (stop, files removed). An in-process run also says how long the first
import of the broker's modules took: every process pays it once, before its
first in-process broker (a subprocess pays it every time, in the child).

A benchmark, not a test: docs/testing.md quotes its figures.
"""

from __future__ import annotations

import argparse
import socket
import struct
import time

from kpybroker.testing import MODES, broker


def api_versions(bootstrap: str) -> None:
    """Send ApiVersions v0 and wait for its answer."""
    host, port = bootstrap.rsplit(":", 1)
    client_id = b"bench"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        sock.recv(size, socket.MSG_WAITALL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mode", choices=MODES, action="append", dest="modes", help="repeatable; default: both"
    )
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for mode in args.modes or MODES:
        if mode == "inprocess":
            started = time.perf_counter()
            import kpybroker.cli  # noqa: F401  (what the first in-process broker imports)

            print(f"inprocess: first import of the broker {ms(started)}")
        for run in range(args.runs):
            started = time.perf_counter()
            with broker(mode=mode) as kafka:
                api_versions(kafka.bootstrap_servers)
                ready = time.perf_counter()
            print(f"{mode} run {run}: ready and answering {ms(started, ready)}, stop {ms(ready)}")


def ms(start: float, end: float | None = None) -> str:
    return f"{1000 * ((end or time.perf_counter()) - start):.0f} ms"


if __name__ == "__main__":
    main()
