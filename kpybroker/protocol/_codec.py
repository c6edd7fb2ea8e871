"""Primitive readers and writers shared by the generated message codecs.

The generated modules in ``messages/`` call these for everything that is not a
fixed-width integer (those are unpacked inline). Readers take ``(buf, pos)`` and
return ``(value, new_pos)``; writers append to ``Writer.buf``. Every reader
checks its bounds, so a truncated or hostile buffer raises ``DecodeError``
instead of yielding a short value.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable
from typing import Any

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
U16 = struct.Struct(">H")
F64 = struct.Struct(">d")
BOOL = struct.Struct(">?")

ZERO_UUID = bytes(16)


class DecodeError(ValueError):
    """The bytes do not form a valid message of the announced API and version."""


class UnsupportedVersionError(DecodeError):
    """The message has no codec for the requested version."""


def codec_loader(module: str) -> Callable[[dict[int, Any], int, str], Any]:
    """``load(table, version, name)``: the codec of ``name`` at ``version`` from ``table``,
    once ``module``, which fills the table, is imported; UnsupportedVersionError if none.

    A message module's encoders and decoders are three quarters of its code, so they are in
    a module of their own (``messages/codecs/``), imported at the first encode or decode:
    starting a broker then loads the codecs of the APIs it is asked for, not of all of them.
    """

    def load(table: dict[int, Any], version: int, name: str) -> Any:
        importlib.import_module(module)
        try:
            return table[version]
        except KeyError:
            raise UnsupportedVersionError(f"{name} v{version}") from None

    return load


class Encoded(bytes):
    """A struct value already encoded (by its ``encode_bytes(version)``), for the struct
    fields a schema marks ``cacheable``: the encoder copies it instead of encoding.

    A handler that answers the same thing many times (a Metadata answer's topic,
    unchanged since the last request) keeps these rather than rebuilding objects.
    """

    __slots__ = ()


class Writer:
    """Accumulates an encoding as buffers, with deferred record sources between them.

    A ``records`` value that is not a buffer (for example a file range that the
    server sends with ``sendfile``) cannot be copied into the buffer; it ends the
    current buffer and stands in the part list on its own.
    """

    __slots__ = ("buf", "parts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[Any] = []

    def defer(self, source: Any) -> None:
        self.parts.append(self.buf)
        self.parts.append(source)
        self.buf = bytearray()

    def finish(self) -> list[Any]:
        self.parts.append(self.buf)
        return self.parts


def _need(buf: Any, pos: int, n: int) -> None:
    if n < 0 or pos + n > len(buf):
        raise DecodeError(f"need {n} bytes at {pos}, have {len(buf) - pos}")


# -- varints ---------------------------------------------------------------


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    """Unsigned LEB128, as used for compact lengths and tags (at most 5 bytes)."""
    try:
        b = buf[pos]
    except IndexError:
        raise DecodeError("truncated varint") from None
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    while True:
        pos += 1
        try:
            b = buf[pos]
        except IndexError:
            raise DecodeError("truncated varint") from None
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7
        if shift > 28:
            raise DecodeError("varint too long")


def write_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


# -- strings ---------------------------------------------------------------


def read_string(buf: Any, pos: int) -> tuple[str | None, int]:
    try:
        (n,) = I16.unpack_from(buf, pos)
    except struct.error:
        raise DecodeError("truncated string length") from None
    pos += 2
    if n < 0:
        return None, pos
    _need(buf, pos, n)
    return str(buf[pos : pos + n], "utf-8"), pos + n


def read_compact_string(buf: Any, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _need(buf, pos, n)
    return str(buf[pos : pos + n], "utf-8"), pos + n


def write_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    data = value.encode()
    out += I16.pack(len(data))
    out += data


def write_compact_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    data = value.encode()
    write_uvarint(out, len(data) + 1)
    out += data


# -- bytes -----------------------------------------------------------------


def read_bytes(buf: Any, pos: int) -> tuple[bytes | None, int]:
    try:
        (n,) = I32.unpack_from(buf, pos)
    except struct.error:
        raise DecodeError("truncated bytes length") from None
    pos += 4
    if n < 0:
        return None, pos
    _need(buf, pos, n)
    return bytes(buf[pos : pos + n]), pos + n


def read_compact_bytes(buf: Any, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _need(buf, pos, n)
    return bytes(buf[pos : pos + n]), pos + n


def write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    out += I32.pack(len(value))
    out += value


def write_compact_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(0)
        return
    write_uvarint(out, len(value) + 1)
    out += value


# -- records: left as a view into the request buffer -----------------------


def read_records(buf: Any, pos: int) -> tuple[memoryview | None, int]:
    try:
        (n,) = I32.unpack_from(buf, pos)
    except struct.error:
        raise DecodeError("truncated records length") from None
    pos += 4
    if n < 0:
        return None, pos
    _need(buf, pos, n)
    return memoryview(buf)[pos : pos + n], pos + n


def read_compact_records(buf: Any, pos: int) -> tuple[memoryview | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _need(buf, pos, n)
    return memoryview(buf)[pos : pos + n], pos + n


def _is_buffer(value: Any) -> bool:
    return isinstance(value, bytes | bytearray | memoryview)


def write_records(w: Writer, value: Any) -> None:
    if value is None:
        w.buf += b"\xff\xff\xff\xff"
    elif _is_buffer(value):
        w.buf += I32.pack(len(value))
        w.buf += value
    else:
        w.buf += I32.pack(len(value))
        w.defer(value)


def write_compact_records(w: Writer, value: Any) -> None:
    if value is None:
        w.buf.append(0)
    elif _is_buffer(value):
        write_uvarint(w.buf, len(value) + 1)
        w.buf += value
    else:
        write_uvarint(w.buf, len(value) + 1)
        w.defer(value)


# -- uuid and arrays -------------------------------------------------------


def read_uuid(buf: Any, pos: int) -> tuple[bytes, int]:
    _need(buf, pos, 16)
    return bytes(buf[pos : pos + 16]), pos + 16


def read_array_length(buf: Any, pos: int) -> tuple[int, int]:
    """Classic int32 array length; -1 means null. Bounded by the bytes left."""
    try:
        (n,) = I32.unpack_from(buf, pos)
    except struct.error:
        raise DecodeError("truncated array length") from None
    pos += 4
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements in {len(buf) - pos} bytes")
    return n, pos


def read_compact_array_length(buf: Any, pos: int) -> tuple[int, int]:
    """Compact array length (N+1 as uvarint); -1 means null."""
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements in {len(buf) - pos} bytes")
    return n, pos


# Arrays of fixed-width numbers are short (replica lists, partition ids): their Structs are
# compiled once per item type and length, up to this length.
_CACHED_ARRAY_LENGTH = 64
_array_structs: dict[tuple[str, int], struct.Struct] = {}


def array_struct(item: struct.Struct, n: int) -> struct.Struct:
    """The Struct of ``n`` big-endian items of ``item``'s type."""
    key = (item.format, n)
    compiled = _array_structs.get(key)
    if compiled is None:
        compiled = struct.Struct(f">{n}{item.format[-1]}")
        if n <= _CACHED_ARRAY_LENGTH:
            _array_structs[key] = compiled
    return compiled


def read_fixed_array(buf: Any, pos: int, n: int, item: struct.Struct) -> tuple[list, int]:
    """An array of ``n`` fixed-width numbers in one unpack."""
    size = n * item.size
    _need(buf, pos, size)
    return list(array_struct(item, n).unpack_from(buf, pos)), pos + size


def skip_tagged_field(buf: Any, pos: int) -> int:
    size, pos = read_uvarint(buf, pos)
    _need(buf, pos, size)
    return pos + size


def read_tag_header(buf: Any, pos: int) -> tuple[int, int, int]:
    """Return (tag, size, position of the tagged value)."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    _need(buf, pos, size)
    return tag, size, pos
