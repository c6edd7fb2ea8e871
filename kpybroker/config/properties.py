"""Java ``.properties`` files and ``--override key=value`` arguments, read as Kafka reads them.

Kafka loads server.properties with ``java.util.Properties.load``, so a file that works with
Kafka must mean the same here: ``#`` and ``!`` comments, ``=``, ``:`` or whitespace between
key and value, a trailing backslash continuing the line (leading whitespace of the next line
dropped), backslash escapes including ``\\uXXXX``, and the last duplicate winning.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping

_WHITESPACE = " \t\f"
_SEPARATORS = "=:"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_NEWLINE = re.compile(r"\r\n|\r|\n")
_ESCAPED_WHEN_WRITTEN = {
    "\\": "\\\\",
    "\t": "\\t",
    "\n": "\\n",
    "\r": "\\r",
    "\f": "\\f",
}
# In a key, these would end it or (the first character) make the line a comment.
_KEY_ENDS = " =:#!"


class PropertiesFormatError(ValueError):
    """A properties file or override argument that cannot be read at all."""


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse the text of a properties file into key -> value, in file order."""
    props: dict[str, str] = {}
    for line_number, line in _logical_lines(text):
        key, value = _split_key_value(line)
        try:
            props[_unescape(key)] = _unescape(value)
        except ValueError as e:
            raise PropertiesFormatError(f"{source}, line {line_number}: {e}") from None
    return props


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a properties file.

    Java reads these files as ISO-8859-1; a file in UTF-8 (what editors write today) is
    decoded as UTF-8 instead, so non-ASCII paths survive. Pure ASCII files, the usual
    case, read the same either way.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text, os.fspath(path))


def parse_override(arg: str) -> tuple[str, str]:
    """One ``--override`` argument: ``key=value``, split at the first ``=``.

    Like Kafka's command line, ``key`` alone (or ``key=``) sets an empty value.
    """
    key, _, value = arg.partition("=")
    if not key.strip():
        raise PropertiesFormatError(f"Invalid override {arg!r}: expected key=value")
    return key.strip(), value


def format_properties(props: Mapping[str, str]) -> str:
    """The text of a properties file holding ``props``, one ``key=value`` line each.

    Escaped so that ``parse_properties`` (and Java, so Kafka) read back exactly ``props``:
    backslashes, line breaks and tabs everywhere; in keys also spaces and the characters
    that would end the key or start a comment; a value's leading space. Unlike Java's
    ``Properties.store``, ``=`` and ``:`` in values stay as they are, so that listener
    URLs read as written.
    """
    return "".join(f"{_escape(key, key=True)}={_escape(value)}\n" for key, value in props.items())


def _escape(text: str, *, key: bool = False) -> str:
    out = []
    for i, c in enumerate(text):
        if c in _ESCAPED_WHEN_WRITTEN:
            out.append(_ESCAPED_WHEN_WRITTEN[c])
        elif (key and c in _KEY_ENDS) or (c == " " and i == 0):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield (first line number, logical line) with comments, blank lines and continuations handled.

    As in Java's ``Properties.LineReader``: a comment is recognised only at the start of a
    logical line, a comment never continues, and a blank line ends a continuation.
    """
    natural = _NEWLINE.split(text)
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line) and i < len(natural):
            following = natural[i].lstrip(_WHITESPACE)
            i += 1
            line = line[:-1] + following
            if not following:
                break
        if _ends_with_continuation(line):  # a backslash at the very end of the input
            line = line[:-1]
        yield start + 1, line


def _ends_with_continuation(line: str) -> bool:
    """An odd number of trailing backslashes: the last one escapes the line end."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """Split at the first unescaped separator (``=``, ``:`` or whitespace), as Java does."""
    escaped = False
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    for i, c in enumerate(line):
        if not escaped and (c in _SEPARATORS or c in _WHITESPACE):
            key_end = i
            value_start = i + 1
            has_separator = c in _SEPARATORS
            break
        escaped = c == "\\" and not escaped
    while value_start < len(line):
        c = line[value_start]
        if c in _WHITESPACE:
            value_start += 1
        elif c in _SEPARATORS and not has_separator:
            has_separator = True
            value_start += 1
        else:
            break
    return line[:key_end], line[value_start:]


def _unescape(text: str) -> str:
    r"""Resolve backslash escapes: \t \n \r \f, \uXXXX, and \c meaning c for any other c."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c != "\\" or i == len(text):
            out.append(c)
            continue
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) < 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    # \uXXXX pairs may encode one character outside the BMP as UTF-16 surrogates
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")
