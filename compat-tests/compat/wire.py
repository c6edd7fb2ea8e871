"""A raw Kafka connection built on kpybroker's generated codecs.

For suites that must see the wire itself rather than a client's view of it:
the differential suite (error codes and fields exactly as a broker sends
them) and the kcat suite (whether kcat really compressed a batch). Requests
are the generated classes of ``kpybroker/protocol/messages``, framed by
``kpybroker.protocol.framing.encode_request`` and read back by
``decode_response``; a request any client could send, encoded the way
kpybroker's own decoder expects, so a schema mistake would show up as a
difference against Kafka too.

A connection may be TLS (``tls=``, an ``ssl.SSLContext`` from
:func:`tls_context`) and may log in with SASL (:meth:`KafkaConnection.authenticate`),
as a client of a secured listener does. The SASL mechanisms' client sides
are kpybroker's own (``PlainSaslClient``, ``ScramSaslClient``), which follow
Kafka's clients, so a connection proves only what the broker answers.
"""

from __future__ import annotations

import socket
import ssl
import struct
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from kpybroker.protocol.framing import decode_response, encode_request
from kpybroker.protocol.messages import fetch as fetch_msgs
from kpybroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kpybroker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kpybroker.protocol.records import BatchHeader, iter_batches
from kpybroker.security.sasl.plain import PlainSaslClient
from kpybroker.security.sasl.scram import ScramSaslClient
from kpybroker.security.sasl.scram_credentials import ScramMechanism


class ConnectionClosed(Exception):
    """The broker closed the connection instead of answering."""


class AuthenticationFailed(Exception):
    """The broker refused a SASL step: its error code and message."""

    def __init__(self, step: str, error_code: int, message: str | None) -> None:
        super().__init__(f"{step}: error {error_code}: {message}")
        self.error_code = error_code
        self.message = message


class SaslClient(Protocol):
    """The client side of a SASL mechanism, as ``kpybroker.security.sasl`` has them."""

    mechanism: str

    def initial_response(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes: ...

    @property
    def is_complete(self) -> bool: ...


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """A fresh client for ``mechanism`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)."""
    if mechanism == "PLAIN":
        return PlainSaslClient(username, password)
    scram = ScramMechanism.for_mechanism_name(mechanism)
    if scram is None:
        raise ValueError(f"no client for SASL mechanism {mechanism}")
    return ScramSaslClient(scram, username, password)


def tls_context(ca_pem: Path, certificate: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    """A client context trusting ``ca_pem``; ``certificate`` is (chain PEM, key PEM) to present."""
    context = ssl.create_default_context(cafile=str(ca_pem))
    if certificate is not None:
        chain, key = certificate
        context.load_cert_chain(str(chain), str(key))
    return context


class KafkaConnection:
    """One TCP connection; requests are answered in order, one at a time."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "kpybroker-compat",
        timeout: float = 30.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.client_id = client_id
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        if tls is not None:
            try:
                self.sock = tls.wrap_socket(self.sock, server_hostname=host)
            except BaseException:
                self.sock.close()
                raise
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
            except (ConnectionResetError, ssl.SSLError) as exc:
                # A TLS alert (a refused client certificate) ends the connection too.
                raise ConnectionClosed(str(exc)) from exc
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
        try:
            self.sock.sendall(frame)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError) as exc:
            raise ConnectionClosed(str(exc)) from exc

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

    def exchange_token(self, token: bytes) -> bytes:
        """After SaslHandshake v0: send a bare SASL token, return the bare answer."""
        self.send_frame(struct.pack(">i", len(token)) + token)
        return self.recv_frame()

    def authenticate(
        self, client: SaslClient, *, handshake_version: int = 1, authenticate_version: int = 2
    ) -> int:
        """Log in with ``client``'s mechanism, as Kafka's clients do; the session lifetime.

        Handshake v0 is followed by bare tokens, v1 by SaslAuthenticate requests
        at ``authenticate_version``. The lifetime (ms, 0 for none) is what the
        last SaslAuthenticate answer said (0 after bare tokens). A refusal
        raises :class:`AuthenticationFailed`.
        """
        handshake = self.request(
            SaslHandshakeRequest(mechanism=client.mechanism), handshake_version
        )
        if handshake.error_code:
            raise AuthenticationFailed(
                "SaslHandshake", handshake.error_code, str(handshake.mechanisms)
            )
        token, lifetime_ms = client.initial_response(), 0
        while True:
            if handshake_version == 0:
                challenge = self.exchange_token(token)
            else:
                answer = self.request(
                    SaslAuthenticateRequest(auth_bytes=token), authenticate_version
                )
                if answer.error_code:
                    raise AuthenticationFailed(
                        "SaslAuthenticate", answer.error_code, answer.error_message
                    )
                challenge = bytes(answer.auth_bytes)
                lifetime_ms = answer.session_lifetime_ms if authenticate_version >= 1 else 0
            if client.is_complete:
                return lifetime_ms
            token = client.evaluate(challenge)
            if client.is_complete:
                return lifetime_ms


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
