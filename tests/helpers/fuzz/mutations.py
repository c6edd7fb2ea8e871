"""Almost-valid and invalid variants of an encoded request, aimed at its structure.

Each mutation takes the request's pieces (``pieces.Piece``) and a hypothesis
``draw``, and returns the mutated bytes, or None where it has nothing to aim at
(no string to spoil in a request without strings). Only ``unknown_tags`` keeps
the request valid: a decoder must skip tags it does not know.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from hypothesis import strategies as st

from kpybroker.protocol._codec import read_uvarint
from tests.helpers.fuzz.pieces import Piece, Role, join, uvarint

Mutation = Callable[[list[Piece], st.DrawFn], bytes | None]

INVALID_UTF8 = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80")
BAD_VARINTS = (
    b"\xff\xff\xff\xff\xff\xff",
    b"\x80",
    b"\xff\xff\xff\xff\x7f",
    b"\x80\x80\x80\x80\x80\x01",
)


def _pick(pieces: list[Piece], draw: st.DrawFn, wanted: Callable[[Piece], bool]) -> int | None:
    where = [i for i, p in enumerate(pieces) if wanted(p)]
    return draw(st.sampled_from(where)) if where else None


def _replace(pieces: list[Piece], index: int, data: bytes) -> bytes:
    return join(pieces[:index]) + data + join(pieces[index + 1 :])


def _length_value(piece: Piece, value: int) -> bytes:
    """``value`` written as ``piece``'s length is written (``value`` counted as on the wire)."""
    if piece.compact:
        return uvarint(value & 0xFFFFFFFF)
    if len(piece.data) == 2:
        return struct.pack(">h", max(-(2**15), min(2**15 - 1, value)))
    return struct.pack(">i", max(-(2**31), min(2**31 - 1, value)))


def truncated(pieces: list[Piece], draw: st.DrawFn) -> bytes:
    data = join(pieces)
    return data[: draw(st.integers(0, max(0, len(data) - 1)))]


def extra_bytes(pieces: list[Piece], draw: st.DrawFn) -> bytes:
    return join(pieces) + draw(st.binary(min_size=1, max_size=16))


def flipped_byte(pieces: list[Piece], draw: st.DrawFn) -> bytes | None:
    data = bytearray(join(pieces))
    if not data:
        return None
    data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
    return bytes(data)


def huge_count(pieces: list[Piece], draw: st.DrawFn) -> bytes | None:
    """An array that claims 2^31-1 (or a few million) items in a few bytes."""
    i = _pick(pieces, draw, lambda p: p.role is Role.LENGTH and p.counts_items)
    if i is None:
        return None
    count = draw(st.sampled_from([2**31 - 1, 2**31 - 2, 4_000_000, 2**28]))
    return _replace(pieces, i, _length_value(pieces[i], count + pieces[i].compact))


def negative_size(pieces: list[Piece], draw: st.DrawFn) -> bytes | None:
    """A length below -1 (for a compact length: one that wraps past 2^32)."""
    i = _pick(pieces, draw, lambda p: p.role is Role.LENGTH)
    if i is None:
        return None
    return _replace(
        pieces, i, _length_value(pieces[i], draw(st.sampled_from([-2, -100, -(2**31)])))
    )


def wrong_length(pieces: list[Piece], draw: st.DrawFn) -> bytes | None:
    """A length or count off by a little: the fields after it are read out of step."""
    i = _pick(pieces, draw, lambda p: p.role is Role.LENGTH)
    if i is None:
        return None
    piece = pieces[i]
    if piece.compact:
        current = read_uvarint(piece.data, 0)[0] - 1
    else:
        current = int.from_bytes(piece.data, "big", signed=True)
    delta = draw(st.sampled_from([-2, -1, 1, 2, 7, 1000]))
    return _replace(pieces, i, _length_value(piece, max(0, current + delta) + piece.compact))


def null_where_not_nullable(pieces: list[Piece], draw: st.DrawFn) -> bytes | None:
    i = _pick(pieces, draw, lambda p: p.role is Role.LENGTH and not p.nullable)
    if i is None:
        return None
    return _replace(pieces, i, b"\x00" if pieces[i].compact else b"\xff" * len(pieces[i].data))


def bad_varint(pieces: list[Piece], draw: st.DrawFn) -> bytes | None:
    i = _pick(pieces, draw, lambda p: p.compact)
    if i is None:
        return None
    return _replace(pieces, i, draw(st.sampled_from(BAD_VARINTS)))


def invalid_utf8(pieces: list[Piece], draw: st.DrawFn) -> bytes | None:
    """A string whose bytes are not UTF-8 (same length, so everything else still lines up)."""
    i = _pick(pieces, draw, lambda p: p.role is Role.TEXT and len(p.data) > 0)
    if i is None:
        return None
    text = pieces[i].data
    junk = draw(st.sampled_from(INVALID_UTF8))[: len(text)]
    at = draw(st.integers(0, len(text) - len(junk)))
    return _replace(pieces, i, text[:at] + junk + text[at + len(junk) :])


def unknown_tags(pieces: list[Piece], draw: st.DrawFn) -> bytes | None:
    """Tagged fields no schema knows, in an empty tag section: valid, to be skipped."""
    i = _pick(pieces, draw, lambda p: p.role is Role.TAGS and p.data == b"\x00")
    if i is None:
        return None
    tags = draw(st.lists(st.integers(10_000, 2**31 - 1), min_size=1, max_size=3, unique=True))
    section = uvarint(len(tags))
    for tag in sorted(tags):
        value = draw(st.binary(max_size=8))
        section += uvarint(tag) + uvarint(len(value)) + value
    return _replace(pieces, i, section)


MUTATIONS: dict[str, Mutation] = {
    "truncated": truncated,
    "extra_bytes": extra_bytes,
    "flipped_byte": flipped_byte,
    "huge_count": huge_count,
    "negative_size": negative_size,
    "wrong_length": wrong_length,
    "null_where_not_nullable": null_where_not_nullable,
    "bad_varint": bad_varint,
    "invalid_utf8": invalid_utf8,
    "unknown_tags": unknown_tags,
}
#: Mutations after which the request must still decode, to the same value.
STILL_VALID = {"unknown_tags"}
