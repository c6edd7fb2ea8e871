"""Resource limits on a real broker: memory held by requests in flight, by clients that
never read their responses and by clients that trickle their requests in stays bounded,
and a well-behaved client is answered all along.

Memory is the broker process's resident set (``/proc/<pid>/status``): its peak
(``VmHWM``, reset through ``clear_refs`` before each scenario) against what it held
before. The bounds are the limits the scenario is about plus a fixed slack for the
rest of the process (allocator, buffers of small responses); the same scenarios
without the limits go over them by hundreds of megabytes.
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from kafka.protocol.metadata import ApiVersionsRequest

from kpybroker.protocol.framing import FrameDecoder, encode_request
from kpybroker.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from kpybroker.server.connection import FILE_CHUNK
from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.clients import ConfluentClient
from tests.helpers.process import wait_until
from tests.helpers.records import expected_counts, make_records
from tests.helpers.wire import RawConnection, produce_error, produce_request, record_batch

MB = 1 << 20
#: What a process needs besides the memory a scenario is about.
SLACK = 40 * MB


def memory_kb(broker: ManagedBroker, field: str) -> int:
    assert broker.process is not None
    with open(f"/proc/{broker.process.pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/<pid>/status")


@contextmanager
def peak_growth(broker: ManagedBroker) -> Iterator[list[int]]:
    """Yields a list that holds, after the block, by how many bytes the broker's resident
    set rose at its peak during the block."""
    assert broker.process is not None
    with open(f"/proc/{broker.process.pid}/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # resets VmHWM to the current resident set
    before = memory_kb(broker, "VmRSS")
    growth: list[int] = []
    yield growth
    growth.append((memory_kb(broker, "VmHWM") - before) * 1024)


class Canary:
    """A client asking ApiVersions again and again on its own connection, in a thread,
    keeping how long each answer took."""

    def __init__(self, bootstrap: str) -> None:
        self.connection = RawConnection(bootstrap, timeout=120)
        self.latencies: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.ask, daemon=True)

    def ask(self) -> None:
        while not self.stop.is_set():
            start = time.perf_counter()
            assert self.connection.request(ApiVersionsRequest[0]()).error_code == 0
            self.latencies.append(time.perf_counter() - start)

    def __enter__(self) -> Canary:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(120)
        self.connection.close()

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def test_requests_in_flight_stay_within_queued_max_request_bytes(
    broker_factory: BrokerFactory,
) -> None:
    """40 clients each send an 8 MB produce request at once; with queued.max.request.bytes
    = 50 MB the broker reads at most that much (plus one request) before handling some, and
    a client asking small things is answered meanwhile."""
    budget, largest = 50 * MB, 9 * MB
    broker = broker_factory(
        {"queued.max.request.bytes": budget, "socket.request.max.bytes": largest}
    )
    request = produce_request("limits", 0, record_batch([bytes(8 * MB)]), acks=1)
    request.with_header(correlation_id=1, client_id="big")
    payload = request.encode(header=True, framed=True)
    with ExitStack() as stack:
        clients = [stack.enter_context(RawConnection(broker.bootstrap, 120)) for _ in range(40)]
        with peak_growth(broker) as growth, Canary(broker.bootstrap) as canary:
            wait_until(lambda: canary.latencies, 60, message="the canary's first answer")
            answered_before = len(canary.latencies)
            senders = [threading.Thread(target=c.send, args=(payload,)) for c in clients]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join(120)
            answered_while_sending = len(canary.latencies) - answered_before
            # Every request was read and handled: each has its answer (too large a batch).
            for client in clients:
                assert client.recv_frame()[:4] == struct.pack(">i", 1)
    print(f"\nbroker memory grew by {growth[0] / MB:.0f} MB")
    assert answered_while_sending > 0
    assert growth[0] < budget + largest + SLACK, f"grew by {growth[0] / MB:.0f} MB"


def test_the_tightest_limits_serve_pipelining_clients_in_order(
    broker_factory: BrokerFactory,
) -> None:
    """queued.max.requests = 1 and queued.max.request.bytes = socket.request.max.bytes (the
    least Kafka accepts): 20 clients pipelining 50 requests each all get every answer, in
    order, and a real producer and consumer work as ever."""
    broker = broker_factory(
        {
            "queued.max.requests": 1,
            "queued.max.request.bytes": 2 * MB,
            "socket.request.max.bytes": 2 * MB,
        }
    )
    clients = [RawConnection(broker.bootstrap, 60) for _ in range(20)]
    try:
        for client in clients:
            requests = b""
            for correlation_id in range(50):
                request = ApiVersionsRequest[0]()
                request.with_header(correlation_id=correlation_id, client_id="pipelining")
                requests += request.encode(header=True, framed=True)
            client.send(requests)
        for client in clients:
            answered = [struct.unpack(">i", client.recv_frame()[:4])[0] for _ in range(50)]
            assert answered == list(range(50))
    finally:
        for client in clients:
            client.close()
    driver = ConfluentClient()
    driver.create_topic(broker.bootstrap, "tight", 2)
    records = make_records(500, 2)
    driver.produce(broker.bootstrap, "tight", records)
    consumed = driver.consume(broker.bootstrap, "tight", expected_counts(records, 2))
    for partition, got in consumed.items():
        assert [r.value for r in got] == [r.value for r in records if r.partition == partition]


def fetch_frame(topic: str, correlation_id: int) -> bytes:
    """A Fetch v11 of all of partition 0 of ``topic`` from offset 0, no waiting."""
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=50 * MB,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=10 * MB)
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return encode_request(request, 11, correlation_id, "slow-reader")


def slow_reader(bootstrap: str) -> RawConnection:
    """A connection whose client takes in little at a time (a small receive buffer, set
    before connecting so that the window is small), like a client that is behind: what
    it does not read stays with the broker rather than in the kernel's buffers."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(60)
    sock.connect((host, int(port)))
    connection = RawConnection.__new__(RawConnection)
    connection.sock, connection.timeout, connection._correlation_id = sock, 60, 0
    return connection


def unread_bytes(sock: socket.socket) -> bool:
    """Whether the broker has sent something this client has not read."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def test_slow_readers_and_slowloris_cost_bounded_memory_and_others_are_answered(
    broker_factory: BrokerFactory,
) -> None:
    """200 clients trickle in a request announcing 8 MB, a byte a second, and 50 pipeline
    20 Fetch requests of 10 MB each and never read; the broker's memory grows by little more
    than their scratch and write buffers, and a client asking ApiVersions keeps being
    answered (its latencies are printed: run with -s)."""
    broker = broker_factory()
    ConfluentClient().create_topic(broker.bootstrap, "big", 1)
    with RawConnection(broker.bootstrap) as producer:
        for _ in range(10):
            batch = record_batch([bytes(1_000_000)])
            assert produce_error(producer.request(produce_request("big", 0, batch)))[0] == 0
    fetches = b"".join(fetch_frame("big", i) for i in range(20))
    trickle = struct.pack(">i", 8 * MB) + bytes(2)
    with ExitStack() as stack:
        with peak_growth(broker) as growth, Canary(broker.bootstrap) as canary:
            slowloris = [
                stack.enter_context(RawConnection(broker.bootstrap)).sock for _ in range(200)
            ]
            readers = [stack.enter_context(slow_reader(broker.bootstrap)) for _ in range(50)]
            for reader in readers:
                reader.send(fetches)
            for byte in range(len(trickle)):
                for sock in slowloris:
                    sock.sendall(trickle[byte : byte + 1])
                time.sleep(0.5)
            wait_until(lambda: all(unread_bytes(r.sock) for r in readers), 60, message="answers")
            answered = len(canary.latencies)
        print(
            f"\nbroker memory grew by {growth[0] / MB:.0f} MB; canary: {answered} ApiVersions "
            f"answered, p50 {canary.percentile(0.5) * 1000:.1f} ms, "
            f"p99 {canary.percentile(0.99) * 1000:.1f} ms"
        )
        assert answered > 0
        per_client = FrameDecoder.SCRATCH_SIZE + 64 * 1024
        bound = 200 * per_client + 50 * (per_client + FILE_CHUNK) + SLACK
        assert growth[0] < bound, f"grew by {growth[0] / MB:.0f} MB (bound {bound / MB:.0f} MB)"
        # Nobody was closed: the trickling clients are still connected, unanswered, and a
        # slow reader gets its answers, in order, once it reads.
        assert not any(unread_bytes(s) for s in slowloris)
        assert readers[0].recv_frame()[:4] == struct.pack(">i", 0)
