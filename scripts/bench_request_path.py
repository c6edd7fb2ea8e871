#!/usr/bin/env python3
"""A small request's CPU in process, without sockets: what Python itself costs per request.

    python scripts/bench_request_path.py                    # 20,000 one-record Produce requests
    python scripts/bench_request_path.py --requests 50000 --connections 200
    python scripts/bench_request_path.py --uncounted        # without the metrics' counting

Workload 12 (``scripts/bench``, ``scripts/bench_requests.py``) measures a request's CPU
over real sockets, on a machine whose cores its 200 client threads share with the
broker, so each figure moves with the machine. This runs the same request (Produce v9,
acks=1, one 100 B record, to one of ``--connections`` partitions of a topic) through a
broker started in this process, with no socket and no other process, and prints two
figures, each the process's CPU time over the requests:

- ``answer()``: ``kpybroker.server.dispatch.answer`` on each frame: header and request
  decoded, the handler and the log append run (its ``write`` to the segment included),
  the response encoded and framed;
- the connection path: the same frames handed to ``--connections`` ``KafkaConnection``
  objects as their event loop would (``get_buffer`` / ``buffer_updated``), one frame
  per connection in turn, each answered to a transport that only counts what it is
  given: framing, the connection's task waking, ordering and back-pressure on top of
  ``answer()``.

With ``--uncounted`` both run with request and topic counters that count nothing (the
broker's own ``RequestStats`` and ``BrokerTopicStats`` replaced in the services the
requests see): run with and without it, the difference is what the metrics' counting
costs a request.

The difference between these and the broker's CPU per request over the socket
(``scripts/bench_requests.py``) is what the event loop and the kernel cost, and what
a machine shared with the clients adds.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import uvloop  # noqa: E402

from kpybroker.apis.support.context import Services  # noqa: E402
from kpybroker.broker import Broker  # noqa: E402
from kpybroker.config.broker_config import BrokerConfig  # noqa: E402
from kpybroker.protocol.errors import KafkaError  # noqa: E402
from kpybroker.protocol.framing import encode_request  # noqa: E402
from kpybroker.protocol.messages.create_topics import (  # noqa: E402
    CreatableTopic,
    CreateTopicsRequest,
)
from kpybroker.protocol.messages.produce import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kpybroker.protocol.records import NewRecord, build_batch  # noqa: E402
from kpybroker.server.connection import KafkaConnection, ListenerSettings  # noqa: E402
from kpybroker.server.dispatch import answer  # noqa: E402

TOPIC = "requests"
LISTENER = "PLAINTEXT"


class UncountedRequests:
    """``RequestStats`` that counts nothing."""

    def record(self, request: str, version: int, elapsed_ms: float) -> None:
        pass


class UncountedTopics:
    """``BrokerTopicStats`` that counts nothing (the calls of the Produce path)."""

    def produced(self, topic: str, records: int, size: int) -> None:
        pass

    def produce_errored(self, topic: str, *, failed: bool) -> None:
        pass


class CountingTransport:
    """What a connection needs of its transport; answers are counted, not sent."""

    def __init__(self) -> None:
        self.answers = 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 9092)}.get(
            name, default
        )

    def writelines(self, buffers: list) -> None:
        self.answers += 1

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


def produce_frame(correlation_id: int, partition: int) -> bytes:
    """A size-prefixed Produce v9 frame (acks=1) of one 100 B record, as librdkafka sends."""
    batch = build_batch([NewRecord(None, bytes(100))], timestamp=int(time.time() * 1000))
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=30_000,
        topic_data=[
            TopicProduceData(
                name=TOPIC,
                partition_data=[PartitionProduceData(index=partition, records=batch)],
            )
        ],
    )
    return encode_request(request, 9, correlation_id, "rdkafka")


async def leading(broker: Broker, partitions: int) -> None:
    """Return once the broker leads every partition of the topic."""
    deadline = time.monotonic() + 30
    for index in range(partitions):
        while True:
            try:
                broker.services.replicas.leader_partition(TOPIC, index)
                break
            except KafkaError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)


async def cpu_per_request_of_answer(services: Services, frames: list[bytes]) -> float:
    bodies = [bytearray(frame[4:]) for frame in frames]
    started = time.process_time()
    for body in bodies:
        await answer(body, services, "127.0.0.1", LISTENER, connection_id="bench")
    return (time.process_time() - started) / len(frames)


async def cpu_per_request_of_connections(
    services: Services, frames: list[bytes], connections: int
) -> float:
    settings = ListenerSettings(name=LISTENER, max_request_size=100 * 1024 * 1024)
    served: list[tuple[KafkaConnection, CountingTransport]] = []
    for _ in range(connections):
        connection = KafkaConnection(services, set(), settings)
        transport = CountingTransport()
        connection.connection_made(transport)  # type: ignore[arg-type]
        served.append((connection, transport))
    await asyncio.sleep(0)
    started = time.process_time()
    for first in range(0, len(frames), connections):
        for (connection, _), frame in zip(served, frames[first : first + connections], strict=True):
            connection.get_buffer(-1)[: len(frame)] = frame
            connection.buffer_updated(len(frame))
        while sum(transport.answers for _, transport in served) < first + connections:
            await asyncio.sleep(0)
    elapsed = time.process_time() - started
    for connection, _ in served:
        connection.connection_lost(None)
    return elapsed / len(frames)


async def run(requests: int, connections: int, uncounted: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="kpybroker-request-path-") as data:
        config = BrokerConfig.load(
            None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": f"{data}/logs"}
        )
        broker = Broker(config)
        await broker.start()
        try:
            create = CreateTopicsRequest(
                topics=[
                    CreatableTopic(name=TOPIC, num_partitions=connections, replication_factor=1)
                ],
                timeout_ms=30_000,
            )
            await answer(bytearray(encode_request(create, 7, 0, "bench")[4:]), broker.services,
                         "127.0.0.1", LISTENER)  # fmt: skip
            await leading(broker, connections)
            requests -= requests % connections
            frames = [produce_frame(i, i % connections) for i in range(requests)]
            services = broker.services
            if uncounted:
                services = dataclasses.replace(
                    services, request_stats=UncountedRequests(), topic_stats=UncountedTopics()
                )
            alone = await cpu_per_request_of_answer(services, frames)
            whole = await cpu_per_request_of_connections(services, frames, connections)
        finally:
            await broker.stop()
    counting = ", nothing counted" if uncounted else ""
    print(
        f"{requests:,} one-record Produce requests (acks=1) over {connections} partitions"
        f"{counting}:"
    )
    print(f"  answer():            {alone * 1e6:5.1f} us CPU per request")
    print(f"  the connection path: {whole * 1e6:5.1f} us CPU per request")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument(
        "--uncounted", action="store_true", help="request and topic counters that count nothing"
    )
    args = parser.parse_args()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run(args.requests, args.connections, args.uncounted))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
