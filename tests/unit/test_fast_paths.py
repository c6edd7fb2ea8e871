"""The request path's fast paths (issue 7): each is named, and checked here against the
slow way it replaces.

* ``FrameDecoder``: a large frame is received in place, in a buffer of its own;
* ``KafkaConnection.write_parts``: one ``writelines`` per run of buffers, sendfile for file ranges;
* ``Partition.acks_outcome``: acks=all on a partition without followers needs no wait.
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

from kpybroker.cluster.partition import Transition
from kpybroker.log.open_files import OpenFiles
from kpybroker.log.partition_log import FileSlice, ReadResult
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.framing import FrameDecoder
from kpybroker.server.connection import KafkaConnection, ListenerSettings
from tests.helpers.log_builders import batch
from tests.unit.test_cluster_partition import ME, meta, partition


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def receive(decoder: FrameDecoder, stream: bytes, read_size: int) -> list[bytearray]:
    """Deliver ``stream`` as a socket would: at most ``read_size`` bytes per read, each
    written into the buffer the decoder hands out."""
    frames: list[bytearray] = []
    while stream:
        buf = decoder.get_buffer(-1)
        n = min(len(buf), len(stream), read_size)
        buf[:n] = stream[:n]
        stream = stream[n:]
        frames += decoder.buffer_updated(n)
    return frames


def test_a_large_frame_is_read_straight_into_its_own_buffer() -> None:
    decoder = FrameDecoder(1 << 20)
    body = os.urandom(100_000)
    head = frame(body)[: FrameDecoder.SCRATCH_SIZE]
    buf = decoder.get_buffer(-1)
    buf[: len(head)] = head
    assert decoder.buffer_updated(len(head)) == []
    # Once the scratch is full of it, the socket writes into the frame itself: exactly the
    # bytes still missing.
    rest = decoder.get_buffer(-1)
    assert len(rest) == len(body) - (len(head) - 4)
    rest[:] = body[len(head) - 4 :]
    (done,) = decoder.buffer_updated(len(rest))
    assert done == body and rest.obj is done
    assert decoder.buffered == 0


def test_small_and_large_frames_interleaved_over_any_read_size() -> None:
    bodies = [b"a", os.urandom(FrameDecoder.SCRATCH_SIZE - 4), b"", os.urandom(70_000), b"bc"]
    stream = b"".join(frame(b) for b in bodies)
    for read_size in (1, 3, 4096, 65_536, len(stream)):
        assert receive(FrameDecoder(1 << 20), stream, read_size) == bodies


def test_feed_takes_bytes_already_read() -> None:
    bodies = [os.urandom(50_000), b"xyz"]
    decoder = FrameDecoder(1 << 20)
    stream = b"".join(frame(b) for b in bodies)
    assert decoder.feed(stream[:10]) + decoder.feed(stream[10:]) == bodies


class RecordingTransport:
    """The transport calls ``write_parts`` makes, and an empty write buffer."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def writelines(self, buffers: list[Any]) -> None:
        self.calls.append(("writelines", [bytes(b) for b in buffers]))

    def write(self, data: bytes) -> None:
        self.calls.append(("write", bytes(data)))

    def get_write_buffer_size(self) -> int:
        return 0


def test_a_response_is_one_writelines_per_run_of_buffers_and_sendfile_between(
    tmp_path: Path,
) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(b"0123456789")
    segment_file = OpenFiles(capacity=1).file(path, os.O_RDONLY)
    ours, theirs = socket.socketpair()
    try:
        conn = KafkaConnection(
            services=None, open_connections=set(), settings=ListenerSettings("L", 100)
        )
        conn.transport = RecordingTransport()  # type: ignore[assignment]
        conn.sock_fd = ours.fileno()
        records = ReadResult((FileSlice(segment_file.open(), 2, 5),), 0, 0, 0)
        asyncio.run(conn.write_parts([b"size+header", bytearray(b"body"), b"", records, b"tail"]))
        assert conn.transport.calls == [  # type: ignore[attr-defined]
            ("writelines", [b"size+header", b"body"]),
            ("writelines", [b"tail"]),
        ]
        assert theirs.recv(100) == b"23456"  # sent by sendfile, between the two runs
    finally:
        segment_file.close()
        ours.close()
        theirs.close()


def test_acks_all_without_followers_is_answered_without_waiting(tmp_path: Path) -> None:
    p = partition(tmp_path, min_isr=1)
    assert p.apply(meta(ME, 0, (ME,), replicas=(ME,))) is Transition.LEADER
    result = p.append_as_leader(batch(3), required_acks=-1)
    assert p.acks_outcome(result.last_offset + 1) == ErrorCode.NONE


def test_acks_all_with_followers_must_wait(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.apply(meta(ME, 0, (1, 2)))
    result = p.append_as_leader(batch(2), required_acks=-1)
    assert p.acks_outcome(result.last_offset + 1) is None
    p.update_follower(2, result.last_offset + 1)
    assert p.acks_outcome(result.last_offset + 1) == ErrorCode.NONE
    p.apply(meta(2, 1, (2, 3)))
    assert p.acks_outcome(result.last_offset + 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
