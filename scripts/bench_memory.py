#!/usr/bin/env python3
"""Workload 5's memory figures against kpybroker alone, for A/B runs between checkouts.

    PYTHONPATH=. python3 scripts/bench_memory.py   # 10,000 connections, 100 x 100 partitions
    PYTHONPATH=. python3 scripts/bench_memory.py --connections 5000 --topics 10

``scripts/bench`` measures these beside Apache Kafka (workload 5); this measures them the
same way against a kpybroker started from this checkout with the bench's settings, so that
two checkouts can be compared by running each one's copy in turn. Memory figures do not
depend on how busy the machine is, unlike the timings of the other benches.

- RSS per idle connection: the growth of the broker's RSS while the connections are
  opened (each sends ApiVersions, reads the answer and stays silent), read
  ``IDLE_SETTLE_S`` after the last one, over the connections. They are then closed.
- RSS per partition: in a new process (the memory the closed connections left in the
  allocator would hold many partitions uncounted), the growth from before the topics are
  created (with the admin client, plus the one-partition topic ``hot`` as in workload 5)
  to ``IDLE_SETTLE_S`` after Metadata shows every partition with a leader, over the
  partitions.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from benchlib.brokers import BenchKpyBroker, create_topics
from benchlib.scale import idle_connections

#: Seconds between the last connection or partition and the RSS reading (workload 5's).
IDLE_SETTLE_S = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(
        resource.RLIMIT_NOFILE, (max(soft, min(hard, args.connections + 1000)), hard)
    )
    with tempfile.TemporaryDirectory(prefix="kpybroker-memory-") as data:
        broker = BenchKpyBroker(Path(data) / "broker")
        broker.start()
        try:
            before = broker.rss_bytes()
            with idle_connections(broker.host, broker.port, args.connections):
                time.sleep(IDLE_SETTLE_S)
                grown = broker.rss_bytes() - before
            each = grown / args.connections / 1000
            print(f"{args.connections:,} idle connections: {each:.2f} kB each")
            broker.stop()
            broker.start()  # a new process: see workload 5's ``scale``
            partitions = args.topics * args.partitions + 1
            topics = {f"scale-{i}": args.partitions for i in range(args.topics)}
            before = broker.rss_bytes()
            create_topics(broker.bootstrap, {**topics, "hot": 1}, timeout=1800)
            time.sleep(IDLE_SETTLE_S)
            grown = broker.rss_bytes() - before
            print(f"{partitions:,} partitions: {grown / partitions / 1000:.2f} kB each")
        finally:
            broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
