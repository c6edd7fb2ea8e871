"""The accounting behind queued.max.requests, queued.max.request.bytes and the pipelining
limit (the frame decoder asks before it commits memory, the budget answers), and what a
client that does not read its answers holds."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from kpybroker.config import BrokerConfig, ConfigError
from kpybroker.log.open_files import OpenFiles
from kpybroker.log.partition_log import FileSlice, ReadResult
from kpybroker.protocol.framing import FrameDecoder
from kpybroker.server.connection import FILE_CHUNK, KafkaConnection, ListenerSettings
from kpybroker.server.request_budget import ConnectionAccount, RequestBudget


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


class Recorder:
    """An admission that says yes or no on demand and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[int] = []
        self.answer = True

    def admit(self, size: int) -> bool:
        self.asked.append(size)
        return self.answer


class Client:
    """A connection's side of the budget, as its decoder uses it: a frame refused is
    offered again when the budget wakes the connection."""

    def __init__(self, budget: RequestBudget) -> None:
        self.account: ConnectionAccount = budget.account(self.wake)
        self.refused: int | None = None
        self.admitted: list[int] = []

    def offer(self, size: int) -> bool:
        if self.account.admit(size):
            self.admitted.append(size)
            return True
        self.refused = size
        return False

    def wake(self) -> None:
        if self.refused is not None:
            size, self.refused = self.refused, None
            self.offer(size)


def test_a_refused_frame_stays_in_the_scratch_until_resumed() -> None:
    admission = Recorder()
    decoder = FrameDecoder(1000, admission)
    assert decoder.feed(frame(b"a")) == [b"a"]
    admission.answer = False
    assert decoder.feed(frame(b"bc") + frame(b"d")) == []
    assert decoder.blocked and decoder.buffered == 11
    assert decoder.resume() == []  # still refused
    admission.answer = True
    assert decoder.resume() == [b"bc", b"d"]
    assert not decoder.blocked and decoder.buffered == 0
    assert admission.asked == [1, 2, 2, 2, 1]


def test_a_trickled_frame_holds_only_the_scratch_whatever_size_it_announced() -> None:
    admission = Recorder()
    decoder = FrameDecoder(100 << 20, admission)
    stream = frame(bytes(50 << 20))[: FrameDecoder.SCRATCH_SIZE - 1]
    for i in range(0, len(stream), 1000):
        assert decoder.feed(stream[i : i + 1000]) == []
    # Nothing allocated nor admitted: the bytes so far sit in the scratch.
    assert admission.asked == [] and len(decoder.get_buffer()) == 1
    assert decoder.feed(b"\x00") == []
    # The scratch is full of it: now it gets its own buffer, admitted at its full size.
    assert admission.asked == [50 << 20] and len(decoder.get_buffer()) > 1


def test_a_large_frame_refused_waits_in_the_full_scratch() -> None:
    admission = Recorder()
    admission.answer = False
    decoder = FrameDecoder(1 << 20, admission)
    body = bytes(range(256)) * 400
    assert decoder.feed(frame(body)[: FrameDecoder.SCRATCH_SIZE]) == []
    assert decoder.blocked and len(decoder.get_buffer()) == 0
    admission.answer = True
    assert decoder.resume() == []
    rest = frame(body)[FrameDecoder.SCRATCH_SIZE :]
    assert decoder.feed(rest) == [body]


def test_a_connection_reads_its_next_frame_only_once_the_last_is_answered() -> None:
    budget = RequestBudget(max_requests=500, max_bytes=-1)
    client = Client(budget)
    assert client.offer(10)
    assert not client.offer(20)  # the pipelining limit: not queued broker-wide
    assert budget.queued_requests == 1 and budget.queued_bytes == 10
    client.account.started()  # taken up: still nothing read ahead, as in Kafka
    assert client.admitted == [10]
    assert budget.queued_requests == 0
    client.account.finished(10)
    assert budget.queued_bytes == 0
    client.account.answered()  # its answer is written: the next comes in
    assert client.admitted == [10, 20]
    assert budget.queued_requests == 1 and budget.queued_bytes == 20


def test_a_client_that_never_reads_its_answers_holds_no_request() -> None:
    budget = RequestBudget(max_requests=1, max_bytes=100)
    stuck, other = Client(budget), Client(budget)
    assert stuck.offer(60)
    stuck.account.started()
    stuck.account.finished(60)  # handled; its answer waits for the client to read
    assert not stuck.offer(60)
    assert (budget.queued_requests, budget.queued_bytes) == (0, 0)
    assert other.offer(100)  # the broker's whole budget is still there for the others


def test_queued_max_requests_holds_back_new_frames_until_one_is_taken_up() -> None:
    budget = RequestBudget(max_requests=2, max_bytes=-1)
    a, b, c = Client(budget), Client(budget), Client(budget)
    assert a.offer(1) and b.offer(1)
    assert not c.offer(1)
    a.account.started()
    assert c.admitted == [1] and budget.queued_requests == 2


def test_queued_max_request_bytes_admits_while_under_and_may_go_over_by_one_frame() -> None:
    budget = RequestBudget(max_requests=500, max_bytes=100)
    a, b, c = Client(budget), Client(budget), Client(budget)
    assert a.offer(99)
    assert b.offer(100)  # under the budget when asked: Kafka's pool does the same
    assert budget.queued_bytes == 199
    assert not c.offer(1)
    a.account.started()
    a.account.finished(99)
    assert c.admitted == []  # frames taken up still hold their bytes: 100 of 100
    b.account.started()
    b.account.finished(100)
    assert c.admitted == [1]


def test_connections_refused_are_admitted_in_the_order_they_were_refused() -> None:
    budget = RequestBudget(max_requests=1, max_bytes=-1)
    hog, first, second = Client(budget), Client(budget), Client(budget)
    assert hog.offer(1)
    assert not first.offer(1) and not second.offer(1)
    hog.account.started()
    assert first.admitted == [1] and second.admitted == []
    hog.account.answered()
    assert not hog.offer(1)  # the hog's next frame queues behind the second
    first.account.started()
    assert second.admitted == [1] and hog.admitted == [1]
    second.account.started()
    assert hog.admitted == [1, 1]


def test_a_closed_connection_frees_what_it_held_and_leaves_the_line() -> None:
    budget = RequestBudget(max_requests=1, max_bytes=1000)
    gone, leaving, after = Client(budget), Client(budget), Client(budget)
    assert gone.offer(600)
    assert not leaving.offer(1) and not after.offer(2)
    leaving.account.close()
    gone.account.close()
    assert leaving.admitted == [] and after.admitted == [2]
    assert budget.queued_requests == 1 and budget.queued_bytes == 2
    gone.account.finished(600)  # a handler finishing after the close changes nothing
    assert budget.queued_bytes == 2


def test_queued_max_request_bytes_must_hold_the_largest_request() -> None:
    """KafkaConfig.validateValues: a budget smaller than one request could admit nothing."""
    largest = {"socket.request.max.bytes": "1000"}
    for unlimited in ("-1", "0"):
        BrokerConfig({**largest, "queued.max.request.bytes": unlimited})
    BrokerConfig({**largest, "queued.max.request.bytes": "1000"})
    with pytest.raises(ConfigError, match="must be larger or equal to"):
        BrokerConfig({**largest, "queued.max.request.bytes": "999"})


class FullBufferTransport:
    """A transport whose buffer is over its high-water mark after every write, until the
    test lets the client catch up: the writes made, as a slow reader's connection sees."""

    def __init__(self, connection: KafkaConnection) -> None:
        self.connection = connection
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.connection.pause_writing()

    def writelines(self, buffers: list[bytes]) -> None:
        self.write(b"".join(buffers))

    def get_write_buffer_size(self) -> int:
        return 1


def test_a_slow_reader_gets_a_file_range_a_chunk_at_a_time_even_after_its_file_is_evicted(
    tmp_path: Path,
) -> None:
    """Only FILE_CHUNK of a Fetch's records is in memory per write, and the range stays
    readable once the cache of open files has let go of its segment's file."""
    data = os.urandom(2 * FILE_CHUNK + 1000)
    path, other = tmp_path / "segment.log", tmp_path / "other.log"
    path.write_bytes(data)
    other.write_bytes(b"x")
    files = OpenFiles(capacity=1)
    connection = KafkaConnection(None, set(), ListenerSettings("L", 100))  # type: ignore[arg-type]
    transport = connection.transport = FullBufferTransport(connection)  # type: ignore[assignment]

    async def client_reads_slowly() -> None:
        records = ReadResult(
            (FileSlice(files.file(path, os.O_RDONLY).open(), 0, len(data)),), 0, 0, 0
        )
        writing = asyncio.create_task(connection.write_parts([b"header", records]))
        del records
        await asyncio.sleep(0)
        assert transport.writes == [b"header"]  # and the range waits for room
        files.file(other, os.O_RDONLY).open()  # the segment's file leaves the cache
        while not writing.done():
            connection.resume_writing()
            await asyncio.sleep(0)

    asyncio.run(client_reads_slowly())
    assert [len(w) for w in transport.writes] == [6, FILE_CHUNK, FILE_CHUNK, 1000]
    assert b"".join(transport.writes[1:]) == data
