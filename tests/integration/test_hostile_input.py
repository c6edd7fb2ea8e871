"""Hostile and malformed input on raw sockets.

The broker must survive each case, answer or close the connection the way Kafka
does, and keep serving normal clients on other connections.

Kafka's behaviour (checked against Apache Kafka 4.1): a frame size that is
negative, zero or above ``socket.request.max.bytes`` (100 MiB) closes the
connection at once; an unknown API key, or an unsupported version of any API
but ApiVersions, closes it; ApiVersions with a version it does not know gets an
ApiVersions **v0** response with UNSUPPORTED_VERSION (35) listing only
ApiVersions' own version range, and the connection stays open; a bad batch
CRC is a partition error CORRUPT_MESSAGE (2), a batch above
``message.max.bytes`` is MESSAGE_TOO_LARGE (10), both with base offset -1 and
the connection still usable.
"""

from __future__ import annotations

import os
import random
import socket
import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from tests.helpers.brokers import BrokerFactory, ManagedBroker
from tests.helpers.clients import ConfluentClient, assert_broker_healthy
from tests.helpers.wire import (
    API_VERSIONS_KEY,
    RawConnection,
    frame,
    parse_api_versions_v0,
    produce_error,
    produce_request,
    record_batch,
    request_header,
    with_bad_crc,
)

pytestmark = pytest.mark.timeout(120)

CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_VERSION = 35
TOPIC = "hostile"


def assert_survived(broker: ManagedBroker) -> None:
    """The broker process is alive and a normal client round-trips a record."""
    broker.check_alive()
    assert_broker_healthy(broker.bootstrap)


def test_random_bytes(broker: ManagedBroker) -> None:
    """Random garbage, with and without a plausible length prefix, on 40 connections."""
    rng = random.Random(1234)
    for i in range(40):
        body = rng.randbytes(rng.randint(1, 8192))
        if i % 2:
            # A size that matches the body, so the garbage reaches the request parser.
            body = frame(body)
        with RawConnection(broker.bootstrap) as conn:
            try:
                conn.send(body)
                conn.sock.shutdown(socket.SHUT_WR)
            except OSError:
                continue  # already closed by the broker (EPIPE, ECONNRESET, ENOTCONN): fine
            conn.drain_until_closed(timeout=15)
    assert_survived(broker)


@pytest.mark.parametrize(
    "size",
    [0x7FFF_FFFF, 0x8000_0000, 100 * 1024 * 1024 + 1, 0xFFFF_FFFF, 0],
    ids=["2GiB-1", "2GiB(negative)", "request.max.bytes+1", "-1", "zero"],
)
def test_bad_frame_size_closes_connection(broker: ManagedBroker, size: int) -> None:
    """A frame size the broker will never accept closes the connection without waiting."""
    with RawConnection(broker.bootstrap) as conn:
        conn.send(struct.pack(">I", size) + b"\x00\x12\x00\x00")
        conn.expect_closed(timeout=10)
    assert_survived(broker)


def test_truncated_frames_then_close(broker: ManagedBroker) -> None:
    """Frames cut short (in the size, the header, the body), then the client goes away."""
    request = ApiVersionsRequest[0]()
    request.with_header(correlation_id=1, client_id="hostile")
    whole = request.encode(header=True, framed=True)
    for cut in (2, 4, 7, len(whole) - 1):
        with RawConnection(broker.bootstrap) as conn:
            conn.send(whole[:cut])
    with RawConnection(broker.bootstrap) as conn:
        conn.send(struct.pack(">i", 1000) + os.urandom(10))
    assert_survived(broker)


@pytest.mark.parametrize("version", [7, 9], ids=["produce-v7", "produce-v9-flexible"])
def test_bad_crc_is_corrupt_message(broker: ManagedBroker, version: int) -> None:
    """A batch whose CRC does not match: CORRUPT_MESSAGE, nothing appended, connection kept."""
    ConfluentClient().create_topic(broker.bootstrap, TOPIC, 1)
    batch = record_batch([b"first"])
    with RawConnection(broker.bootstrap) as conn:
        response = conn.request(produce_request(TOPIC, 0, batch, version=version))
        assert produce_error(response) == (0, 0)

        response = conn.request(produce_request(TOPIC, 0, with_bad_crc(batch), version=version))
        assert produce_error(response) == (CORRUPT_MESSAGE, -1)

        # Same connection, still usable; the corrupt batch took no offset.
        response = conn.request(
            produce_request(TOPIC, 0, record_batch([b"second"]), version=version)
        )
        assert produce_error(response) == (0, 1)
    assert_survived(broker)


def test_batch_above_message_max_bytes(broker_factory: BrokerFactory) -> None:
    """A batch larger than message.max.bytes: MESSAGE_TOO_LARGE, connection kept."""
    broker = broker_factory({"message.max.bytes": 65536})
    ConfluentClient().create_topic(broker.bootstrap, TOPIC, 1)
    with RawConnection(broker.bootstrap) as conn:
        big = record_batch([os.urandom(100_000)])
        response = conn.request(produce_request(TOPIC, 0, big))
        assert produce_error(response) == (MESSAGE_TOO_LARGE, -1)

        response = conn.request(produce_request(TOPIC, 0, record_batch([os.urandom(60_000)])))
        assert produce_error(response) == (0, 0)
    assert_survived(broker)


@pytest.mark.parametrize("api_key", [32000, 10000, -1])
def test_unknown_api_key_closes_connection(broker: ManagedBroker, api_key: int) -> None:
    """A request for an API key that does not exist: the broker closes the connection."""
    with RawConnection(broker.bootstrap) as conn:
        conn.send(frame(request_header(api_key, 0, 1, flexible=False) + b"\x00" * 16))
        conn.expect_closed(timeout=10)
    assert_survived(broker)


def test_unsupported_produce_version_closes_connection(broker: ManagedBroker) -> None:
    """Produce v0 (removed in Kafka 4): not ApiVersions, so the connection is closed."""
    with RawConnection(broker.bootstrap) as conn:
        conn.send(frame(request_header(0, 0, 1, flexible=False) + b"\x00" * 16))
        conn.expect_closed(timeout=10)
    assert_survived(broker)


def test_api_versions_from_the_future(broker: ManagedBroker) -> None:
    """ApiVersions v99: a v0 reply, UNSUPPORTED_VERSION, listing ApiVersions' range only."""
    body = b"\x08hostile\x041.0\x00"  # v3+ body: compact strings, empty tagged fields
    with RawConnection(broker.bootstrap) as conn:
        conn.send(frame(request_header(API_VERSIONS_KEY, 99, 4242, flexible=True) + body))
        correlation_id, error, ranges = parse_api_versions_v0(conn.recv_frame())
        assert correlation_id == 4242
        assert error == UNSUPPORTED_VERSION
        assert list(ranges) == [API_VERSIONS_KEY], ranges
        low, high = ranges[API_VERSIONS_KEY]
        assert low == 0 and high >= 3, ranges

        # The client retries with the newest version it shares, on the same connection.
        response = conn.request(
            ApiVersionsRequest[3](client_software_name="hostile", client_software_version="1.0")
        )
        assert response.error_code == 0
        listed = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert listed[API_VERSIONS_KEY] == (low, high)
    assert_survived(broker)
