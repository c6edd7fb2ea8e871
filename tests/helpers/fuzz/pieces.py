"""A request encoded piece by piece, as the schema lays it out, for mutations to aim at.

The generated codecs write a message in one go; the fuzzer needs to know where
each length prefix, string, blob and tag section lies, so this encoder walks the
schema beside the value and returns :class:`Piece` s. Joined, they are the
codec's bytes exactly (the codec fuzz test checks it on every valid case).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any

from kpybroker.protocol._codec import write_uvarint
from tests.helpers.fuzz.schemas import RequestSchema

FIXED_FORMATS = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "float64": "d",
}
_HEADER_FIXED = struct.Struct(">hhi")


class Role(enum.Enum):
    FIXED = "fixed-width value"
    LENGTH = "length or count"
    TEXT = "UTF-8 text"
    BLOB = "bytes"
    TAGS = "tag count"
    TAG_HEADER = "tag and size"
    MARKER = "null marker of a struct"


@dataclass(frozen=True)
class Piece:
    data: bytes
    role: Role
    path: str
    #: LENGTH and TAGS: an unsigned varint (flexible versions), else int16/int32.
    compact: bool = False
    #: LENGTH: whether null (-1, or 0 when compact) is legal here.
    nullable: bool = True
    #: LENGTH: whether it counts array items (rather than bytes).
    counts_items: bool = False


def uvarint(value: int) -> bytes:
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


def _length(
    n: int | None, path: str, flexible: bool, width: int, *, nullable: bool, items: bool
) -> Piece:
    if flexible:
        data = uvarint(0 if n is None else n + 1)
    else:
        data = struct.pack(">h" if width == 2 else ">i", -1 if n is None else n)
    return Piece(data, Role.LENGTH, path, flexible, nullable, items)


class PieceEncoder:
    """Encodes values of one API's request schema at one version."""

    def __init__(self, schema: RequestSchema, version: int) -> None:
        self.schema = schema
        self.version = version
        self.flexible = schema.flexible(version)

    def request(self, value: Any) -> list[Piece]:
        return self.struct(self.schema.request_class, self.schema.fields, value, "")

    def struct(self, cls: type, fields: list[Any], value: Any, path: str) -> list[Piece]:
        v = self.version
        present = [f for f in fields if f.present(v)]
        pieces: list[Piece] = []
        for f in present:
            if f.tag is None:
                pieces += self.field(f, getattr(value, f.name), f"{path}.{f.name}")
        if not self.flexible:
            return pieces
        defaults = cls()
        tagged = sorted((f for f in present if f.tag is not None), key=lambda f: f.tag)
        tags = []
        for f in tagged:
            field_value = getattr(value, f.name)
            if field_value != getattr(defaults, f.name):
                tags.append((f.tag, self.field(f, field_value, f"{path}.{f.name}")))
        pieces.append(Piece(uvarint(len(tags)), Role.TAGS, path + ".<tags>", compact=True))
        for tag, encoded in tags:
            size = sum(len(p.data) for p in encoded)
            pieces.append(Piece(uvarint(tag) + uvarint(size), Role.TAG_HEADER, path))
            pieces += encoded
        return pieces

    def field(self, f: Any, value: Any, path: str) -> list[Piece]:
        nullable = f.nullable_in(self.version)
        if f.array:
            if value is None and not nullable:
                value = []
            head = _length(
                None if value is None else len(value),
                path,
                self.flexible,
                4,
                nullable=nullable,
                items=True,
            )
            items = [] if value is None else value
            return [head] + [
                p for i, item in enumerate(items) for p in self.item(f, item, f"{path}[{i}]")
            ]
        if f.is_struct and nullable:
            if value is None:
                return [Piece(b"\xff", Role.MARKER, path)]
            return [Piece(b"\x01", Role.MARKER, path), *self.item(f, value, path)]
        if f.type in ("string", "bytes", "records") and not nullable and value is None:
            value = "" if f.type == "string" else b""
        return self.item(f, value, path, nullable=nullable)

    def item(self, f: Any, value: Any, path: str, *, nullable: bool = False) -> list[Piece]:
        t = f.type
        if t in FIXED_FORMATS:
            return [Piece(struct.pack(">" + FIXED_FORMATS[t], value), Role.FIXED, path)]
        if t == "uuid":
            return [Piece(bytes(value), Role.FIXED, path)]
        if t in ("string", "bytes", "records"):
            data = None if value is None else value.encode() if t == "string" else bytes(value)
            width = 2 if t == "string" else 4
            head = _length(
                None if data is None else len(data),
                path,
                self.flexible,
                width,
                nullable=nullable,
                items=False,
            )
            if data is None:
                return [head]
            return [head, Piece(data, Role.TEXT if t == "string" else Role.BLOB, path)]
        return self.struct(self.schema.struct_class(f), f.children, value, path)


def header_pieces(
    api_key: int, version: int, correlation_id: int, client_id: str | None, *, flexible: bool
) -> list[Piece]:
    """Request header v1, or v2 (with its tag section) for flexible versions."""
    pieces = [
        Piece(_HEADER_FIXED.pack(api_key, version, correlation_id), Role.FIXED, "header"),
        _length(
            None if client_id is None else len(client_id.encode()),
            "header.client_id",
            False,
            2,
            nullable=True,
            items=False,
        ),
    ]
    if client_id is not None:
        pieces.append(Piece(client_id.encode(), Role.TEXT, "header.client_id"))
    if flexible:
        pieces.append(Piece(b"\x00", Role.TAGS, "header.<tags>", compact=True))
    return pieces


def join(pieces: list[Piece]) -> bytes:
    return b"".join(p.data for p in pieces)
