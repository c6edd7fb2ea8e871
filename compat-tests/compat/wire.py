"""A raw Kafka connection built on kpybroker's generated codecs.

For suites that must see the wire itself rather than a client's view of it:
the differential suite (error codes and fields exactly as a broker sends
them) and the kcat suite (whether kcat really compressed a batch). Requests
are the generated classes of ``kpybroker/protocol/messages``, framed by
``kpybroker.protocol.framing.encode_request`` and read back by
``decode_response``; a request any client could send, encoded the way
kpybroker's own decoder expects, so a schema mistake would show up as a
difference against Kafka too.
"""

from __future__ import annotations

import socket
import struct
from types import TracebackType
from typing import Any

from kpybroker.protocol.framing import decode_response, encode_request
from kpybroker.protocol.messages import fetch as fetch_msgs
from kpybroker.protocol.records import BatchHeader, iter_batches


class ConnectionClosed(Exception):
    """The broker closed the connection instead of answering."""


class KafkaConnection:
    """One TCP connection; requests are answered in order, one at a time."""

    def __init__(
        self, bootstrap: str, *, client_id: str = "kpybroker-compat", timeout: float = 30.0
    ) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.client_id = client_id
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation_id = 0

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def _recv_exact(self, size: int) -> bytes:
        chunks = []
        while size:
            try:
                chunk = self.sock.recv(min(size, 1 << 20))
            except ConnectionResetError as exc:
                raise ConnectionClosed("connection reset") from exc
            if not chunk:
                raise ConnectionClosed("EOF")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        """One response frame (without its size prefix)."""
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def send(self, request: Any, version: int) -> None:
        """Send ``request`` without waiting; :meth:`receive` reads its response later.

        For requests a broker holds back (a JoinGroup waiting for the rest of
        its group) while the test does something else on another connection.
        """
        self._correlation_id += 1
        self.send_frame(encode_request(request, version, self._correlation_id, self.client_id))

    def receive(self, request: Any, version: int) -> Any:
        """The response to the request last sent (one request in flight at a time)."""
        correlation_id, response = decode_response(self.recv_frame(), request, version)
        if correlation_id != self._correlation_id:
            raise AssertionError(f"correlation id {correlation_id}, sent {self._correlation_id}")
        return response

    def request(self, request: Any, version: int) -> Any:
        """Send ``request`` at ``version`` and return the decoded response."""
        self.send(request, version)
        return self.receive(request, version)


def fetch_batches(
    bootstrap: str, topic: str, partition: int, offset: int = 0, max_bytes: int = 8 << 20
) -> list[BatchHeader]:
    """The headers of the record batches stored in one partition, from ``offset`` (Fetch v11)."""
    request = fetch_msgs.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            fetch_msgs.FetchTopic(
                topic=topic,
                partitions=[
                    fetch_msgs.FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    with KafkaConnection(bootstrap) as conn:
        response = conn.request(request, 11)
    [topic_response] = response.responses
    [data] = topic_response.partitions
    if data.error_code:
        raise AssertionError(f"Fetch {topic}-{partition}: error {data.error_code}")
    return [header for _, header in iter_batches(bytes(data.records or b""))]
