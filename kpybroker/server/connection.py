"""One client connection: TLS, SASL, framing, strictly ordered answers, back-pressure.

Requests on a connection are handled one after another and answered in the
order they arrived, as Kafka does (the Java client pairs each response with
its oldest in-flight request). Reading pauses while a frame waits to be
handled or the broker's request budget is spent (``request_budget``: the
pipelining limit, ``queued.max.requests``, ``queued.max.request.bytes``), and
handling pauses while the socket's write buffer is full.

On an SSL or SASL_SSL listener the TLS handshake comes first (``tls``: the
connection sees clear text only); the client certificate, if any, gives the
principal. On a SASL listener the frames go to the connection's
:class:`SaslAuthenticator` until it is done (before that no handler sees a
request), and a failed attempt is answered and closed only after
``connection.failed.authentication.delay.ms``.

A client over a quota gets its answer at once, with the throttle time in it,
and then nothing more is read from its connection until that time has passed
(KIP-219: Kafka mutes the channel; the client holds back too).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kpybroker.apis.api_versions import answer_before_authentication
from kpybroker.apis.support.context import Services
from kpybroker.log.partition_log import FileSlice
from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.framing import FrameDecoder, FrameTooLargeError
from kpybroker.security.listener_security import PLAINTEXT, ListenerSecurity
from kpybroker.security.principal import ANONYMOUS, KafkaPrincipal
from kpybroker.server.connection_gate import ConnectionGate
from kpybroker.server.dispatch import MALFORMED, CloseConnection, answer
from kpybroker.server.request_budget import RequestBudget
from kpybroker.server.sasl_authenticator import AuthFailure, SaslAuthenticator
from kpybroker.server.single_waiter_event import SingleWaiterEvent

log = logging.getLogger(__name__)

#: The most of a file range read into memory at a time for a client that is behind.
FILE_CHUNK = 256 * 1024


def unlimited_budget() -> RequestBudget:
    return RequestBudget(max_requests=2**31 - 1, max_bytes=-1)


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    """What every connection of one listener shares."""

    name: str
    #: ``socket.request.max.bytes``.
    max_request_size: int
    security: ListenerSecurity = PLAINTEXT
    #: The broker's connection limits (None: unlimited).
    gate: ConnectionGate | None = None
    #: The broker's limits on requests read and not yet handled (shared by its listeners).
    budget: RequestBudget = field(default_factory=unlimited_budget)


def printable(text: str) -> str:
    """``text`` with control characters escaped: a failure's reason may quote what a client
    sent, and a client must not be able to write lines of its own into the log."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(
        self, services: Services, open_connections: set, settings: ListenerSettings
    ) -> None:
        self.services = services
        self.open_connections = open_connections  # the listener's, closed on shutdown
        self.listener = settings.name
        self.security = security = settings.security
        self.gate = settings.gate
        self.max_request_size = max_request_size = settings.max_request_size
        #: When a request last came or an answer last went (the gate closes the least
        #: recent first; so does ``connections.max.idle.ms``).
        self.last_active = time.monotonic()
        self.principal: KafkaPrincipal = ANONYMOUS
        self.authenticator: SaslAuthenticator | None = None
        if security.sasl is not None:
            self.authenticator = SaslAuthenticator(security.sasl, self.answer_api_versions)
            max_request_size = security.sasl.max_receive_size
        self.account = settings.budget.account(self.frames_admissible)
        self.decoder = FrameDecoder(max_request_size, self.account)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        #: Kafka's connection id (local and remote address): what a share session is tied to.
        self.connection_id = "?"
        #: Frames read and not yet handled, oldest first (a list: a few at most, and an
        #: empty deque would cost each idle connection 760 bytes).
        self.pending: list[bytearray] = []
        self.wakeup = SingleWaiterEvent()
        self.can_write = SingleWaiterEvent(is_set=True)
        #: Why reading is paused (a frame waiting for admission, a throttle, a failed
        #: authentication).
        self.read_holds: set[str] = set()
        #: The client half-closed while a frame waited for admission.
        self.eof_pending = False
        self.closed = False
        self.task: asyncio.Task | None = None
        self.sock_fd = -1

    # asyncio.Protocol -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        local = transport.get_extra_info("sockname")
        self.connection_id = f"{local[0]}:{local[1]}-{self.peer}" if local else self.peer
        sock = transport.get_extra_info("socket")
        self.open_connections.add(self)
        if self.security.tls is None:
            self.sock_fd = sock.fileno() if sock is not None else -1
        elif not self.tls_principal():
            return
        if self.gate is None:
            self.admitted()
        else:
            self.gate.arrived(self)

    def admitted(self) -> None:
        """The connection limits let it in: serve it."""
        if not self.closed:
            self.task = asyncio.get_running_loop().create_task(self.serve())

    def get_buffer(self, sizehint: int) -> memoryview:
        """The event loop reads the socket straight into the decoder's buffers."""
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.take_frames(lambda: self.decoder.buffer_updated(nbytes))

    def frames_admissible(self) -> None:
        """The request budget may admit the frame the decoder holds back: try it."""
        if self.decoder.blocked and not self.closed:
            self.take_frames(self.decoder.resume)

    def take_frames(self, decode: Callable[[], list[bytearray]]) -> None:
        """Queue the frames ``decode()`` returns; read on only if none was refused."""
        try:
            frames = decode()
        except FrameTooLargeError as exc:
            if self.authenticator is not None and not self.authenticator.complete:
                # Kafka fails the SASL attempt (logged, answered after the delay).
                self.pending.append(
                    AuthFailure(  # type: ignore[arg-type]
                        "Failing SASL authentication due to invalid receive size"
                    )
                )
                self.wakeup.set()
                self.hold_reading("failed")
                return
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        if frames:
            self.last_active = time.monotonic()
            self.pending.extend(frames)
            self.wakeup.set()
        if self.decoder.blocked:
            if "admission" not in self.read_holds:
                self.hold_reading("admission")
        elif "admission" in self.read_holds:
            self.release_reading("admission")
            if self.eof_pending:
                self.end_of_requests()

    def eof_received(self) -> bool:
        """The client half-closed: answer what was already received, then close. (A TLS
        connection cannot stay half open: the TLS layer closes it whatever this says.)"""
        if self.decoder.blocked:
            self.eof_pending = True
        else:
            self.end_of_requests()
        return self.security.tls is None

    def end_of_requests(self) -> None:
        self.pending.append(None)  # type: ignore[arg-type]
        self.wakeup.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.account.close()
        self.open_connections.discard(self)
        # A share consumer gone with its connection holds no records any more (Kafka 4.1+).
        self.services.share_partitions.connection_closed(self.connection_id)
        if self.gate is not None:
            self.gate.left(self)
        self.can_write.set()
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    # request loop ---------------------------------------------------------

    @property
    def client_host(self) -> str:
        return self.peer.rsplit(":", 1)[0]

    async def serve(self) -> None:
        try:
            while not self.closed:
                if not self.pending:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                if not await self.answer_next():
                    break
        except AuthFailure as exc:
            await self.fail_authentication(exc)
            return
        except DecodeError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except MALFORMED as exc:
            log.warning("closing connection from %s: malformed request: %s", self.peer, exc)
        except asyncio.CancelledError:
            return
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.peer)
        self.close()

    async def answer_next(self) -> bool:
        """Handle and answer the oldest frame; False at the end of the client's requests.

        The frame and its answer are dropped on return, so a connection waiting for
        its next request holds neither (40 idle connections would otherwise keep
        their last 8 MB produce requests: 320 MB outside the request budget).
        """
        frame = self.pending.pop(0)
        if frame is None:
            return False
        if isinstance(frame, AuthFailure):
            raise frame
        self.account.started()
        try:
            answered = await self.handle(frame)
        finally:
            self.account.finished(len(frame))
        throttle_ms = 0
        if answered is not None and not self.closed:
            parts, response = answered
            await self.send(parts)
            throttle_ms = getattr(response, "throttle_time_ms", 0)
        self.account.answered()
        if throttle_ms > 0:
            await self.mute(throttle_ms)
        return True

    async def handle(self, frame: bytearray) -> tuple[list[Any], Any] | None:
        """The answer to one frame (None: no answer, as for acks=0 or a SASL step)."""
        if self.authenticator is not None and not await self.authenticated(frame):
            return None
        return await answer(
            frame,
            self.services,
            self.client_host,
            self.listener,
            self.principal,
            self.connection_id,
        )

    async def send(self, parts: list[Any]) -> None:
        if not self.can_write.is_set():
            await self.can_write.wait()
        if not self.closed:
            await self.write_parts(parts)

    async def mute(self, throttle_ms: int) -> None:
        """Read and answer nothing for ``throttle_ms`` (a quota's throttle)."""
        self.hold_reading("throttled")
        try:
            await asyncio.sleep(throttle_ms / 1000)
        finally:
            self.release_reading("throttled")

    def hold_reading(self, reason: str) -> None:
        if not self.read_holds and self.transport is not None and not self.closed:
            self.transport.pause_reading()
        self.read_holds.add(reason)

    def release_reading(self, reason: str) -> None:
        self.read_holds.discard(reason)
        if not self.read_holds and self.transport is not None and not self.closed:
            self.transport.resume_reading()

    # security -------------------------------------------------------------

    def tls_principal(self) -> bool:
        """After the TLS handshake: the principal of the client's certificate. False (logged,
        closed) when the mapping rules have no name for it, as Kafka closes the connection."""
        ssl_object = self.transport.get_extra_info("ssl_object")
        certificate = ssl_object.getpeercert(binary_form=True) if ssl_object else None
        try:
            principal = self.security.certificate_principal(certificate)
        except ValueError as exc:
            log.info("Failed authentication with %s (%s)", self.peer, printable(str(exc)))
            self.close()
            return False
        if self.authenticator is None:
            self.principal = principal
        return True

    async def authenticated(self, frame: bytearray) -> bool:
        """Whether ``frame`` is for a handler: False when the SASL exchange took it.

        Raises ``AuthFailure`` for a failed attempt, and ``CloseConnection`` for a
        request on a session past its lifetime (KIP-368: Kafka closes those).
        """
        authenticator = self.authenticator
        assert authenticator is not None
        now = time.monotonic()
        if authenticator.complete:
            if authenticator.wants_reauthentication(frame, now):
                authenticator.begin_reauthentication(now)
            elif authenticator.session_expired(now):
                raise CloseConnection("its SASL session expired without re-authentication")
            else:
                return True
        parts = await authenticator.receive(frame)
        await self.send(parts)
        if authenticator.complete:
            assert authenticator.principal is not None
            self.principal = authenticator.principal
            self.decoder.max_frame_size = self.max_request_size
        return False

    async def answer_api_versions(self, frame: bytearray) -> tuple[list[Any], bool]:
        """ApiVersions before authentication, answered as after it (Kafka's
        ``apiVersionSupplier``) but without the check of the cluster and node it names
        (v5); succeeded unless it carries an error."""
        answered = await answer(
            frame,
            self.services,
            self.client_host,
            self.listener,
            handler=answer_before_authentication,
        )
        assert answered is not None
        parts, response = answered
        return parts, response is not None and response.error_code == 0

    async def fail_authentication(self, failure: AuthFailure) -> None:
        """Log once, wait ``connection.failed.authentication.delay.ms``, answer, close."""
        log.info("Failed authentication with %s (%s)", self.peer, printable(str(failure)))
        self.hold_reading("failed")
        await asyncio.sleep(self.security.failed_authentication_delay_ms / 1000)
        if failure.answer is not None and not self.closed:
            await self.write_parts(failure.answer)
        self.close()

    # writing --------------------------------------------------------------

    async def write_parts(self, parts: list[Any]) -> None:
        """Write a response: each run of buffers with one ``writelines`` (one ``writev``
        under uvloop), file ranges (a log read's ``parts``) with sendfile.

        sendfile is used only while the transport has nothing buffered, so that
        bytes written straight to the socket cannot overtake queued ones; the rest
        of a range goes through the transport as ordinary copies, ``FILE_CHUNK`` at
        a time and only while the write buffer is under its high-water mark: a
        client that does not read its responses holds at most that much of a
        Fetch's records, whatever their size. This works the same with uvloop,
        which has no ``loop.sendfile``.
        """
        self.last_active = time.monotonic()
        run: list[Any] = []
        for part in parts:
            if isinstance(part, bytes | bytearray | memoryview):
                if part:
                    run.append(part)
                continue
            for piece in part.parts:
                if isinstance(piece, FileSlice):
                    self.write_buffers(run)
                    run = []
                    # ``piece`` holds its file open until this returns, however slowly
                    # the client reads (open_files closes it with its last reference).
                    await self.send_file_range(piece.fd, piece.position, piece.length)
                else:
                    run.append(piece.read())  # copied: the log was short of descriptors
        self.write_buffers(run)

    def write_buffers(self, buffers: list[Any]) -> None:
        if buffers and not self.closed:
            self.transport.writelines(buffers)

    async def send_file_range(self, fd: int, position: int, length: int) -> None:
        """Send a range of a segment file (whose slice the caller holds, and with it the
        descriptor, however long the client takes)."""
        transport = self.transport
        while length > 0 and not self.closed:
            if not self.can_write.is_set():
                await self.can_write.wait()
                continue
            if self.sock_fd >= 0 and transport.get_write_buffer_size() == 0:
                try:
                    sent = os.sendfile(self.sock_fd, fd, position, length)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except (BrokenPipeError, ConnectionResetError):
                    self.close()  # the client went away mid-response: an ordinary disconnect
                    return
                position, length = position + sent, length - sent
            if length > 0:
                chunk = min(length, FILE_CHUNK)
                transport.write(os.pread(fd, chunk, position))
                position, length = position + chunk, length - chunk

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
