"""Raw-socket Kafka protocol for hostile-input tests.

Frames are ``int32 size`` + payload. Well-formed requests are built with
kafka-python's protocol classes (Kafka's own JSON schemas); malformed ones by
hand.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

API_VERSIONS_KEY = 18
CRC_OFFSET = 17  # record batch v2: crc (uint32) at byte 17


def frame(payload: bytes) -> bytes:
    """``int32 size`` + payload."""
    return struct.pack(">i", len(payload)) + payload


def request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str = "hostile",
    *,
    flexible: bool,
) -> bytes:
    """Request header v1 (``flexible=False``) or v2 (adds empty tagged fields)."""
    cid = client_id.encode()
    header = struct.pack(">hhih", api_key, api_version, correlation_id, len(cid)) + cid
    return header + (b"\x00" if flexible else b"")


class ConnectionClosed(Exception):
    """The broker closed the connection (EOF or reset)."""


class RawConnection:
    """A plain TCP connection to a broker, for sending anything at all."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.timeout = timeout
        self._correlation_id = 0

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close our end."""
        self.sock.close()

    def send(self, data: bytes) -> None:
        """Write raw bytes."""
        self.sock.sendall(data)

    def next_correlation_id(self) -> int:
        """A fresh correlation id for this connection."""
        self._correlation_id += 1
        return self._correlation_id

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            try:
                chunk = self.sock.recv(min(n, 1 << 20))
            except ConnectionResetError as exc:
                raise ConnectionClosed("connection reset") from exc
            if not chunk:
                raise ConnectionClosed("EOF")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        """One response frame's payload (ConnectionClosed on EOF; socket.timeout if none)."""
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def request(self, request: ApiMessage) -> Any:
        """Send a kafka-python request object and decode its response (same version)."""
        correlation_id = self.next_correlation_id()
        request.with_header(correlation_id=correlation_id, client_id="hostile")
        self.send(request.encode(header=True, framed=True))
        response_class = response_class_for(request)
        data = self.recv_frame()
        response = response_class.decode(data, version=request.API_VERSION, header=True)
        got = response.header.correlation_id
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return response

    def expect_closed(self, timeout: float = 10.0) -> str:
        """Assert the broker closes the connection within ``timeout`` s without answering.

        Returns how it ended ("EOF" or "reset").
        """
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return "reset"
        except TimeoutError:
            raise AssertionError(f"the broker kept the connection open for {timeout} s") from None
        assert not data, f"expected the connection closed, got {len(data)} bytes: {data[:64]!r}"
        return "EOF"

    def drain_until_closed(self, timeout: float = 10.0) -> None:
        """Read and discard until the broker closes the connection (AssertionError on timeout)."""
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if not self.sock.recv(65536):
                    return
            except ConnectionResetError:
                return
            except TimeoutError:
                raise AssertionError(f"connection still open after {timeout} s") from None
            if time.monotonic() > deadline:
                raise AssertionError(f"connection still sending after {timeout} s")


def response_class_for(request: ApiMessage) -> type[ApiMessage]:
    """The response class matching a request object."""
    responses: dict[type[ApiMessage], type[ApiMessage]] = {
        ApiVersionsRequest: ApiVersionsResponse,
        ProduceRequest: ProduceResponse,
    }
    return responses[type(request)[None]]


def record_batch(values: list[bytes], *, timestamp_ms: int | None = None) -> bytearray:
    """A valid uncompressed record batch v2 (no producer id) holding ``values`` (key None)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=sum(len(v) for v in values) + 1024,
    )
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=ts, key=None, value=value, headers=[])
    return bytearray(builder.build())


def with_bad_crc(batch: bytearray) -> bytearray:
    """A copy of ``batch`` whose stored CRC no longer matches its contents."""
    bad = bytearray(batch)
    bad[CRC_OFFSET] ^= 0xFF
    return bad


def produce_request(
    topic: str, partition: int, batch: bytes, *, version: int = 7, acks: int = -1
) -> ApiMessage:
    """A Produce request carrying one batch for one partition."""
    topic_data = ProduceRequest.TopicProduceData
    partition_data = topic_data.PartitionProduceData
    return ProduceRequest[version](
        transactional_id=None,
        acks=acks,
        timeout_ms=10000,
        topic_data=[
            topic_data(
                name=topic, partition_data=[partition_data(index=partition, records=bytes(batch))]
            )
        ],
    )


def produce_error(response: Any) -> tuple[int, int]:
    """(error_code, base_offset) of the single partition in a Produce response."""
    [topic] = response.responses
    [part] = topic.partition_responses
    return part.error_code, part.base_offset


def parse_api_versions_v0(payload: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """Decode an ApiVersions v0 response by hand: (correlation id, error, {key: (min, max)}).

    Asserts the payload has no bytes beyond the v0 layout.
    """
    correlation_id, error, count = struct.unpack_from(">ihi", payload, 0)
    pos = 10
    ranges = {}
    for _ in range(count):
        key, low, high = struct.unpack_from(">hhh", payload, pos)
        ranges[key] = (low, high)
        pos += 6
    assert pos == len(payload), f"{len(payload) - pos} bytes after the v0 body: {payload[pos:]!r}"
    return correlation_id, error, ranges
