#!/usr/bin/env python3
"""Small requests against kpybroker alone: workload 12's producers, for A/B runs.

    python scripts/bench_requests.py                      # 200 clients, acks=1, 15 s
    python scripts/bench_requests.py --clients 50 --acks all --seconds 30
    python scripts/bench_requests.py --bootstrap host:port   # a running broker

``scripts/bench`` runs workload 12 against kpybroker and Apache Kafka side by side; this
runs the same clients (``benchlib.small_requests``: librdkafka producers, each sending one
100 B record per request and waiting for its answer) against a kpybroker started from the
current directory, so that two checkouts can be compared by running it in each, in turn.
It prints requests/s, request latency percentiles and, for a broker it starts, the
broker's CPU time per request: the figure that per-request work changes, and the one a
busy machine disturbs least.
"""

from __future__ import annotations

import argparse
import contextlib

from bench_throughput import broker_with_topic, measured
from benchlib.small_requests import produce_one_at_a_time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a running broker (default: start kpybroker)")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--acks", default="1", choices=["0", "1", "all"])
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        bootstrap, pid, topic = broker_with_topic(
            stack, args.bootstrap, "requests", args.partitions
        )
        outcome: list[tuple[int, float, list[float]]] = []

        def run() -> float:
            count, elapsed, latencies = produce_one_at_a_time(
                bootstrap, topic, args.partitions, args.clients, args.acks, args.seconds
            )
            outcome.append((count, elapsed, sorted(latencies.values)))
            return elapsed

        _, cpu = measured(pid, run)
        count, elapsed, latencies = outcome[0]

        def ms(fraction: float) -> float:
            return latencies[min(len(latencies) - 1, int(fraction * len(latencies)))] * 1000

        broker = "" if cpu is None else f", broker CPU {cpu / count * 1e6:.0f} us/request"
        print(
            f"{args.clients} clients, acks={args.acks}: {count / elapsed:,.0f} requests/s, "
            f"p50 {ms(0.5):.1f} ms, p99 {ms(0.99):.1f} ms, p99.9 {ms(0.999):.1f} ms{broker}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
