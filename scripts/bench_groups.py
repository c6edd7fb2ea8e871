#!/usr/bin/env python3
"""Consumer-group benchmark: a large group's rebalances, and the fetch path beside it.

    python scripts/bench_groups.py                         # starts its own kpybroker
    python scripts/bench_groups.py --bootstrap host:port   # uses a running broker

1. ``--members`` simulated members (raw protocol, kpybroker's codecs, one
   connection each) join one group subscribed to a ``--partitions`` topic;
   the leader assigns ranges. Reported: the time until the group is Stable
   with every member synced (this includes group.initial.rebalance.delay.ms),
   then the time of a full rebalance of the Stable group (one member rejoins
   with new metadata; the others learn it from their heartbeats).
2. The fetch path: back-to-back Fetch requests (one connection, the same
   ~1 MiB read from page cache each time) for ``--seconds``, before the
   group exists, while it is Stable and heartbeating (every 3 s, Java's
   default), and after it left.
   The coordinator is not on the fetch path; the three medians of
   ``--runs`` runs should differ only by noise (a client library's consume
   loop is far noisier than that, so raw requests are used, from a process
   apart from the simulated members).

This is a benchmark, not a test: it asserts only that the group's
assignment is complete.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import struct
import sys
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from bench_throughput import create_topic, local_broker, produce

from kpybroker.protocol.framing import decode_response, encode_request
from kpybroker.protocol.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
    TopicPartition,
)
from kpybroker.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from kpybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kpybroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kpybroker.protocol.messages.heartbeat import HeartbeatRequest
from kpybroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kpybroker.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from kpybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment

MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS = 79, 27
JAVA_HEARTBEAT_MS = 3000
VERSION_PREFIX = struct.Struct(">h")


class Connection:
    """One broker connection, one request in flight at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation_id = 0
        self.lock = asyncio.Lock()

    @classmethod
    async def open(cls, bootstrap: str) -> Connection:
        host, port = bootstrap.rsplit(":", 1)
        return cls(*await asyncio.open_connection(host, int(port)))

    async def call(self, request: Any, version: int) -> Any:
        async with self.lock:
            self.correlation_id += 1
            self.writer.write(encode_request(request, version, self.correlation_id, "bench"))
            (size,) = struct.unpack(">i", await self.reader.readexactly(4))
            _, response = decode_response(await self.reader.readexactly(size), request, version)
            return response

    def close(self) -> None:
        self.writer.close()


def subscription(topic: str, user_data: bytes) -> bytes:
    message = ConsumerProtocolSubscription(topics=[topic], user_data=user_data)
    return VERSION_PREFIX.pack(0) + message.encode_bytes(0)


def range_assignment(members: list[str], topic: str, partitions: int) -> dict[str, bytes]:
    """Kafka's range assignor for one topic: contiguous blocks, the first members one larger."""
    ordered = sorted(members)
    share, extra = divmod(partitions, len(ordered))
    assignment, start = {}, 0
    for i, member in enumerate(ordered):
        count = share + (1 if i < extra else 0)
        owned = [TopicPartition(topic=topic, partitions=list(range(start, start + count)))]
        message = ConsumerProtocolAssignment(assigned_partitions=owned)
        assignment[member] = VERSION_PREFIX.pack(0) + message.encode_bytes(0)
        start += count
    return assignment


class Group:
    """Simulated members of one group; ``synced`` counts members per generation."""

    def __init__(self, args: argparse.Namespace, bootstrap: str, topic: str) -> None:
        self.args, self.bootstrap, self.topic = args, bootstrap, topic
        self.group = f"bench-group-{uuid.uuid4().hex[:6]}"
        self.synced: dict[int, set[str]] = {}
        self.assignments: dict[str, bytes] = {}
        self.members: list[Member] = []
        self.tasks: list[asyncio.Future] = []
        self.heartbeat_ms = args.heartbeat_ms
        self.stop = asyncio.Event()

    def all_synced(self) -> int | None:
        """The latest generation every member has synced, if any."""
        done = [gen for gen, ids in self.synced.items() if len(ids) == self.args.members]
        return max(done, default=None)

    async def until_synced(self, newer_than: int = 0) -> int:
        while (generation := self.all_synced()) is None or generation <= newer_than:
            for failed in (t for t in self.tasks if t.done()):
                failed.result()  # a member's error ends the run
            await asyncio.sleep(0.005)
        return generation


class Member:
    def __init__(self, group: Group, index: int) -> None:
        self.group, self.index = group, index
        self.member_id = ""
        self.generation = -1
        self.user_data = b""
        self.connection: Connection | None = None

    async def run(self) -> None:
        self.connection = await Connection.open(self.group.bootstrap)
        await self.join()  # (one broker, which is the coordinator: no lookup)
        while not self.group.stop.is_set():
            await asyncio.sleep(self.group.heartbeat_ms / 1000)
            request = HeartbeatRequest(self.group.group, self.generation, self.member_id)
            if (await self.connection.call(request, 4)).error_code == REBALANCE_IN_PROGRESS:
                await self.join()

    async def join(self) -> None:
        g = self.group
        while True:
            metadata = subscription(g.topic, self.user_data)
            request = JoinGroupRequest(
                group_id=g.group,
                session_timeout_ms=30_000,
                rebalance_timeout_ms=60_000,
                member_id=self.member_id,
                protocol_type="consumer",
                protocols=[JoinGroupRequestProtocol(name="range", metadata=metadata)],
            )
            joined = await self.connection.call(request, 7)
            if joined.error_code == MEMBER_ID_REQUIRED:
                self.member_id = joined.member_id
                continue
            assert joined.error_code == 0, joined
            assignments = []
            if joined.leader == self.member_id:
                ids = [m.member_id for m in joined.members]
                plan = range_assignment(ids, g.topic, g.args.partitions)
                assignments = [SyncGroupRequestAssignment(m, a) for m, a in plan.items()]
            sync = SyncGroupRequest(
                group_id=g.group,
                generation_id=joined.generation_id,
                member_id=self.member_id,
                protocol_type="consumer",
                protocol_name=joined.protocol_name,
                assignments=assignments,
            )
            synced = await self.connection.call(sync, 5)
            if synced.error_code == REBALANCE_IN_PROGRESS:
                continue
            assert synced.error_code == 0, synced
            self.generation = joined.generation_id
            g.assignments[self.member_id] = synced.assignment
            g.synced.setdefault(self.generation, set()).add(self.member_id)
            return

    async def leave(self) -> None:
        request = LeaveGroupRequest(self.group.group, members=[MemberIdentity(self.member_id)])
        await self.connection.call(request, 4)
        self.connection.close()


def check_assignment(group: Group) -> None:
    owned: list[int] = []
    for data in group.assignments.values():
        assignment, _ = ConsumerProtocolAssignment.decode(data, VERSION_PREFIX.size, 0)
        owned += [p for tp in assignment.assigned_partitions for p in tp.partitions]
    assert sorted(owned) == list(range(group.args.partitions)), "incomplete or overlapping"


class Simulation:
    """Runs the members on an event loop of their own, beside the blocking consume runs."""

    def __init__(self, group: Group) -> None:
        self.group = group
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Any, timeout: float = 300) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    async def start_members(self) -> float:
        g = self.group
        started = time.perf_counter()
        g.members = [Member(g, i) for i in range(g.args.members)]
        g.tasks = [asyncio.ensure_future(m.run()) for m in g.members]
        await g.until_synced()
        return time.perf_counter() - started

    async def rebalance(self) -> float:
        g = self.group
        before = g.all_synced() or 0
        started = time.perf_counter()
        trigger = g.members[-1]
        trigger.user_data = b"new metadata"
        await trigger.join()
        await g.until_synced(newer_than=before)
        return time.perf_counter() - started

    async def finish(self) -> None:
        self.group.stop.set()
        await asyncio.gather(*self.group.tasks, return_exceptions=True)
        await asyncio.gather(*(m.leave() for m in self.group.members))


async def fetch_rate(bootstrap: str, topic: str, partitions: int, seconds: float) -> float:
    """Fetch requests per second, each reading every partition from offset 0 (up to 256 KiB)."""
    connection = await Connection.open(bootstrap)
    request = FetchRequest(
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 18)
                    for p in range(partitions)
                ],
            )
        ],
    )
    count = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        response = await connection.call(request, 11)
        assert any(p.records for p in response.responses[0].partitions), "no records fetched"
        count += 1
    connection.close()
    return count / (time.perf_counter() - started)


def fetch_rates(args: argparse.Namespace, bootstrap: str, topic: str) -> list[float]:
    """``--runs`` runs, each in a process of its own (not sharing the members' GIL)."""
    with ProcessPoolExecutor(max_workers=1) as pool:
        return [
            pool.submit(run_fetch, bootstrap, topic, args.fetch_partitions, args.seconds).result()
            for _ in range(args.runs)
        ]


async def find_coordinator(bootstrap: str) -> None:
    connection = await Connection.open(bootstrap)
    found = await connection.call(FindCoordinatorRequest(key="bench"), 3)
    assert found.error_code == 0, found
    connection.close()


def run_fetch(bootstrap: str, topic: str, partitions: int, seconds: float) -> float:
    return asyncio.run(fetch_rate(bootstrap, topic, partitions, seconds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a running broker (default: start kpybroker)")
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--heartbeat-ms", type=int, default=500, help="while rebalancing")
    parser.add_argument("--records", type=int, default=100_000, help="in the fetched topic")
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--fetch-partitions", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=2.0, help="per fetch run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or stack.enter_context(local_broker()).bootstrap
        suffix = uuid.uuid4().hex[:6]
        group_topic, fetch_topic = f"bench-grp-{suffix}", f"bench-fetch-{suffix}"
        create_topic(bootstrap, group_topic, args.partitions)
        create_topic(bootstrap, fetch_topic, args.fetch_partitions)
        produce(bootstrap, fetch_topic, args.records, args.size, linger_ms=5)
        print(f"broker {bootstrap}; {args.members} members, {args.partitions} partitions")

        # __consumer_offsets (50 more partitions to look after) exists in every phase.
        asyncio.run(find_coordinator(bootstrap))
        fetch = {"before the group": fetch_rates(args, bootstrap, fetch_topic)}
        sim = Simulation(Group(args, bootstrap, group_topic))
        first = sim.run(sim.start_members())
        check_assignment(sim.group)
        print(f"first Stable generation (all joined and synced): {first * 1000:8.0f} ms")
        again = sim.run(sim.rebalance())
        check_assignment(sim.group)
        print(
            f"rebalance of the Stable group:                   {again * 1000:8.0f} ms "
            f"(members learn of it by heartbeat, every {args.heartbeat_ms} ms)"
        )
        # Then the members heartbeat as often as Java's consumer does by default.
        sim.group.heartbeat_ms = JAVA_HEARTBEAT_MS
        fetch["group Stable"] = fetch_rates(args, bootstrap, fetch_topic)
        sim.run(sim.finish())
        fetch["after it left"] = fetch_rates(args, bootstrap, fetch_topic)
        without = statistics.median(fetch["before the group"] + fetch["after it left"])
        print(f"fetch requests/s, {args.runs} runs of {args.seconds:g} s each:")
        for label, rates in fetch.items():
            rate = statistics.median(rates)
            print(
                f"  {label:<17} median {rate:7.0f} ({rate / without - 1:+6.1%} of the median "
                f"without group), spread {min(rates):.0f}-{max(rates):.0f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
