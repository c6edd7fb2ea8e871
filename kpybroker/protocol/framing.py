"""Frames and headers, sans I/O.

Bytes go in, whole request frames come out; a response object goes in, bytes
(and deferred record sources) come out. Nothing here touches a socket, so the
server, tests and tools all share the same code path.
"""

from __future__ import annotations

import struct
import sys
import threading
from types import ModuleType
from typing import Any, NamedTuple, Protocol

from kpybroker.protocol._codec import (
    I16,
    I32,
    DecodeError,
    read_string,
    read_uvarint,
    skip_tagged_field,
)
from kpybroker.protocol.messages import FLEXIBLE_FROM

_HEADER_FIXED = struct.Struct(">hhi")
API_VERSIONS_KEY = 18


class FrameTooLargeError(DecodeError):
    """A frame announced more bytes than ``socket.request.max.bytes`` allows."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit}")
        self.size = size


class FrameAdmission(Protocol):
    """Who decides whether a frame may take memory (``server.request_budget``)."""

    def admit(self, size: int) -> bool:
        """Whether a frame of ``size`` bytes may be taken in now; if not, the decoder
        keeps its bytes where they are and waits for :meth:`FrameDecoder.resume`."""


_EMPTY = bytearray()
#: The view of a decoder with no large frame in place: one for all (an idle connection's
#: own would cost it 150 bytes).
_NO_FRAME_VIEW = memoryview(b"")
_scratches = threading.local()


def _thread_scratch(size: int) -> tuple[bytearray, memoryview]:
    """This thread's read scratch (each event loop runs on a thread of its own)."""
    scratch = getattr(_scratches, "buffer", None)
    if scratch is None or len(scratch[0]) != size:
        buffer = bytearray(size)
        scratch = _scratches.buffer = (buffer, memoryview(buffer))
    return scratch


class FrameDecoder:
    """Splits a byte stream into length-prefixed frames, receiving large frames in place.

    Kafka's frame is an int32 size followed by that many bytes. Each frame comes
    out as its own ``bytearray``, so that record batches inside it can be stamped
    in place without another copy.

    Bytes come in through ``get_buffer()`` / ``buffer_updated(n)``, the shape of
    ``asyncio.BufferedProtocol``: the socket reads straight into the buffer handed
    out. Frames that fit are read into a scratch buffer, many per read, and copied
    out once each. A frame larger than the scratch gets a buffer of its exact size
    once the scratch is full of it, and the rest of it is read directly there: its
    bytes are copied once, by the kernel. Waiting for a full scratch first means a
    client that trickles a frame in (slowloris) holds nothing but a scratch's worth,
    whatever size it announced. ``feed(data)`` takes bytes already read instead.

    The scratch is one per thread, shared by every decoder on it: an event loop
    calls ``buffer_updated`` right after the ``get_buffer`` it answers, for one
    connection at a time, and the bytes of an unfinished frame are kept by the
    decoder itself (``_pending``) until the next read puts them back in front. So
    an idle connection holds no read buffer at all: 10,000 idle connections would
    otherwise hold 640 MB of scratch.

    Each frame is taken in only when ``admission`` admits it (when its memory is
    committed: copied out of the scratch, or given its own buffer). Until then the
    decoder is ``blocked``: its bytes wait in ``_pending``, the caller stops reading
    and calls :meth:`resume` when admission may succeed.
    """

    SCRATCH_SIZE = 64 * 1024

    def __init__(self, max_frame_size: int, admission: FrameAdmission | None = None) -> None:
        self.max_frame_size = max_frame_size
        self.admission = admission
        #: A frame waits for admission.
        self.blocked = False
        self._scratch, self._scratch_view = _thread_scratch(self.SCRATCH_SIZE)
        self._pending = _EMPTY  # bytes of unfinished frames, between reads
        self._end = 0  # bytes in the scratch during a read (pending ones first)
        self._frame: bytearray | None = None  # a large frame being received in place
        self._frame_view = _NO_FRAME_VIEW
        self._filled = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next bytes of the stream go (never empty unless ``blocked``), valid
        until the ``buffer_updated`` that answers it."""
        if self._frame is not None:
            return self._frame_view[self._filled :]
        pending = self._pending
        self._end = len(pending)
        if pending:
            self._scratch[: self._end] = pending
        return self._scratch_view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        """``nbytes`` were written at the start of the last ``get_buffer()``; return the frames
        now complete. Raises FrameTooLargeError for a size over the limit, or negative."""
        if self._frame is not None:
            self._filled += nbytes
            if self._filled < len(self._frame):
                return []
            frame, self._frame, self._frame_view = self._frame, None, _NO_FRAME_VIEW
            return [frame]
        frames, rest = self._split(self._scratch, self._end + nbytes)
        self._pending = self._scratch[rest : self._end + nbytes] if rest >= 0 else _EMPTY
        return frames

    def resume(self) -> list[bytearray]:
        """Try again the frames that waited for admission; return those now taken in."""
        if self._frame is not None:
            return []
        pending = self._pending
        frames, rest = self._split(pending, len(pending))
        self._pending = pending[rest:] if rest >= 0 else _EMPTY
        return frames

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        """Take bytes already read; return the frames they complete."""
        frames: list[bytearray] = []
        view = memoryview(data)
        while view:
            buf = self.get_buffer()
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            frames += self.buffer_updated(n)
            view = view[n:]
        return frames

    def _admit(self, size: int) -> bool:
        self.blocked = self.admission is not None and not self.admission.admit(size)
        return not self.blocked

    def _split(self, data: bytearray, end: int) -> tuple[list[bytearray], int]:
        """The admitted frames whole in ``data[:end]``, and where the unfinished rest starts
        (-1: nothing is left, or it went to a frame of its own)."""
        frames = []
        start = 0
        self.blocked = False
        while end - start >= 4:
            (size,) = I32.unpack_from(data, start)
            if size < 0 or size > self.max_frame_size:
                raise FrameTooLargeError(size, self.max_frame_size)
            body = start + 4
            if end - body >= size:
                if not self._admit(size):
                    break
                frames.append(data[body : body + size])
                start = body + size
                continue
            if end - start == self.SCRATCH_SIZE and self._admit(size):
                # A scratch full of a frame larger than it: receive the rest in place.
                frame = bytearray(size)
                frame[: end - body] = memoryview(data)[body:end]
                self._frame, self._frame_view, self._filled = frame, memoryview(frame), end - body
                start = end
            break
        return frames, (start if start < end else -1)

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned in a frame."""
        return len(self._pending) + (self._filled if self._frame is not None else 0)


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def request_is_flexible(api_key: int, api_version: int) -> bool:
    flexible_from = FLEXIBLE_FROM.get(api_key)
    return flexible_from is not None and api_version >= flexible_from


def peek_api(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """Read (api_key, api_version, correlation_id), which every header version starts with."""
    try:
        return _HEADER_FIXED.unpack_from(frame, 0)
    except struct.error:
        raise DecodeError("frame shorter than a request header") from None


def parse_request_header(frame: bytes | bytearray | memoryview) -> RequestHeader:
    """Parse header v1 or v2, chosen by whether the API version is flexible.

    ``client_id`` keeps its int16 length even in header v2, so that any broker
    can read it; only v2 adds a tagged-field section after it.
    """
    api_key, api_version, correlation_id = peek_api(frame)
    client_id, pos = read_string(frame, 8)
    if request_is_flexible(api_key, api_version):
        count, pos = read_uvarint(frame, pos)
        for _ in range(count):
            _, pos = read_uvarint(frame, pos)
            pos = skip_tagged_field(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """Response header v0, or v1 (with an empty tag section) for flexible versions.

    ApiVersions always answers with header v0, whatever its version (KIP-511):
    a client that does not yet know the broker's versions must be able to read it.
    """
    if api_key != API_VERSIONS_KEY and request_is_flexible(api_key, api_version):
        return I32.pack(correlation_id) + b"\x00"
    return I32.pack(correlation_id)


def frame_response(header: bytes, body_parts: list[Any]) -> list[Any]:
    """Prefix the size to a response made of buffers and deferred record sources."""
    size = len(header) + sum(len(p) for p in body_parts)
    return [I32.pack(size) + header, *body_parts]


def encode_request(
    request: Any, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """Encode a whole request frame; used by tests, tools and the replica fetcher."""
    api_key = schema_of(request).API_KEY
    header = bytearray(_HEADER_FIXED.pack(api_key, api_version, correlation_id))
    if client_id is None:
        header += b"\xff\xff"
    else:
        data = client_id.encode()
        header += I16.pack(len(data)) + data
    if request_is_flexible(api_key, api_version):
        header.append(0)
    body = request.encode_bytes(api_version)
    return I32.pack(len(header) + len(body)) + bytes(header) + body


def decode_response(frame: bytes | bytearray | memoryview, request: Any, api_version: int) -> Any:
    """Decode a response frame (without its size prefix) to the request's response class.

    Returns ``(correlation_id, response)``.
    """
    module = schema_of(request)
    api_key = module.API_KEY
    (correlation_id,) = I32.unpack_from(frame, 0)
    pos = 4
    if api_key != API_VERSIONS_KEY and request_is_flexible(api_key, api_version):
        count, pos = read_uvarint(frame, pos)
        for _ in range(count):
            _, pos = read_uvarint(frame, pos)
            pos = skip_tagged_field(frame, pos)
    response_cls = getattr(module, module.NAME + "Response")
    response, _ = response_cls.decode(frame, pos, api_version)
    return correlation_id, response


def schema_of(request: Any) -> ModuleType:
    """The generated module of ``request``'s class: its API key, name and classes."""
    return sys.modules[type(request).__module__]
