"""One client connection: framing, strictly ordered answers, back-pressure.

Requests on a connection are handled one after another and answered in the
order they arrived, as Kafka does (the Java client pairs each response with
its oldest in-flight request). Reading pauses while too many requests wait,
and handling pauses while the socket's write buffer is full.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from typing import Any

from kpybroker.apis.support.context import Services
from kpybroker.protocol.framing import FrameDecoder, FrameTooLargeError
from kpybroker.server.dispatch import MALFORMED, CloseConnection, dispatch

log = logging.getLogger(__name__)

MAX_QUEUED_REQUESTS = 64


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(
        self, services: Services, open_connections: set, listener: str, max_request_size: int
    ) -> None:
        self.services = services
        self.open_connections = open_connections  # the listener's, closed on shutdown
        self.listener = listener
        self.decoder = FrameDecoder(max_request_size)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.pending: deque[bytearray] = deque()
        self.wakeup = asyncio.Event()
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.reading_paused = False
        self.closed = False
        self.task: asyncio.Task | None = None
        self.sock_fd = -1

    # asyncio.Protocol -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        self.sock_fd = sock.fileno() if sock is not None else -1
        self.open_connections.add(self)
        self.task = asyncio.get_running_loop().create_task(self.serve())

    def get_buffer(self, sizehint: int) -> memoryview:
        """The event loop reads the socket straight into the decoder's buffers."""
        return self.decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self.decoder.buffer_updated(nbytes)
        except FrameTooLargeError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        if frames:
            self.pending.extend(frames)
            self.wakeup.set()
            if len(self.pending) >= MAX_QUEUED_REQUESTS and not self.reading_paused:
                self.reading_paused = True
                self.transport.pause_reading()

    def eof_received(self) -> bool:
        # Answer what was already received, then close (the client half-closed).
        self.pending.append(None)  # type: ignore[arg-type]
        self.wakeup.set()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.open_connections.discard(self)
        self.can_write.set()
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    # request loop ---------------------------------------------------------

    async def serve(self) -> None:
        host = self.peer.rsplit(":", 1)[0]
        try:
            while not self.closed:
                if not self.pending:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                frame = self.pending.popleft()
                if frame is None:
                    break
                if self.reading_paused and len(self.pending) < MAX_QUEUED_REQUESTS // 2:
                    self.reading_paused = False
                    self.transport.resume_reading()
                parts = await dispatch(frame, self.services, host, self.listener)
                if parts is not None and not self.closed:
                    if not self.can_write.is_set():
                        await self.can_write.wait()
                    self.write_parts(parts)
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except MALFORMED as exc:
            log.warning("closing connection from %s: malformed request: %s", self.peer, exc)
        except asyncio.CancelledError:
            return
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.peer)
        self.close()

    def write_parts(self, parts: list[Any]) -> None:
        """Write a response: each run of buffers with one ``writelines`` (one ``writev``
        under uvloop), file ranges (a log read's ``parts``) with sendfile.

        sendfile is used only while the transport has nothing buffered, so that
        bytes written straight to the socket cannot overtake queued ones; any
        rest of a range goes through the transport as an ordinary copy. This works
        the same with uvloop, which has no ``loop.sendfile``.
        """
        run: list[Any] = []
        for part in parts:
            if isinstance(part, bytes | bytearray | memoryview):
                if part:
                    run.append(part)
                continue
            self.write_buffers(run)
            run = []
            for piece in part.parts:
                self.send_file_range(piece.fd, piece.position, piece.length)
        self.write_buffers(run)

    def write_buffers(self, buffers: list[Any]) -> None:
        if buffers and not self.closed:
            self.transport.writelines(buffers)

    def send_file_range(self, fd: int, position: int, length: int) -> None:
        if self.closed:
            return
        sent = 0
        transport = self.transport
        if self.sock_fd >= 0 and transport.get_write_buffer_size() == 0:
            try:
                sent = os.sendfile(self.sock_fd, fd, position, length)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except (BrokenPipeError, ConnectionResetError):
                self.close()  # the client went away mid-response: an ordinary disconnect
                return
        if sent < length:
            transport.write(os.pread(fd, length - sent, position + sent))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
