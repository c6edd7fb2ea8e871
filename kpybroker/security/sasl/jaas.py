"""Kafka's ``sasl.jaas.config`` value: JAAS login module entries written in one string.

``listener.name.<listener>.<mechanism>.sasl.jaas.config`` on a broker (and
``sasl.jaas.config`` on a client) hold entries of the form
``<LoginModuleClass> <controlFlag> (<key>=<value>)*;``. Kafka reads them with
``java.io.StreamTokenizer`` (``org.apache.kafka.common.security.JaasConfig``),
and that tokenizer's quirks are part of the format users write against: an
unquoted value must be a word (``option=3`` is rejected, ``option="3"`` is
not), ``'`` quotes like ``"``, C-style escapes work inside quotes, ``//`` and
``/* */`` are comments and so is a lone ``/`` up to the end of its line. This
module reproduces that tokenizer, character for character, and Kafka's error
messages.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

#: Login modules Kafka refuses by default (``JaasUtils.DISALLOWED_LOGIN_MODULES_DEFAULT``,
#: Kafka 4.x), because they can be made to reach out to remote directories.
DISALLOWED_LOGIN_MODULES = frozenset(
    {
        "com.sun.security.auth.module.JndiLoginModule",
        "com.sun.security.auth.module.LdapLoginModule",
    }
)


class ControlFlag(enum.Enum):
    """A login module's JAAS control flag (``LoginModuleControlFlag``)."""

    REQUIRED = "required"
    REQUISITE = "requisite"
    SUFFICIENT = "sufficient"
    OPTIONAL = "optional"


@dataclass(frozen=True, slots=True)
class JaasEntry:
    """One ``LoginModuleClass flag key=value ...;`` entry (``AppConfigurationEntry``)."""

    login_module: str
    control_flag: ControlFlag
    options: Mapping[str, str]


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """All entries of a JAAS config string, in order; ``ValueError`` with Kafka's message."""
    tokens = _Tokenizer(text)
    entries = []
    while tokens.next_token() != _EOF:
        entries.append(_parse_entry(tokens))
    if not entries:
        raise ValueError("Login module not specified in JAAS config")
    return entries


def parse_login_module(text: str) -> JaasEntry:
    """The one entry of a ``sasl.jaas.config`` value, as ``JaasContext.load`` requires it.

    Kafka accepts exactly one login module there, and not one of
    ``DISALLOWED_LOGIN_MODULES``.
    """
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise ValueError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    name = _java_trim(entries[0].login_module)
    if name in DISALLOWED_LOGIN_MODULES:
        raise ValueError(
            f"{name} is not allowed. The system property "
            "'org.apache.kafka.disallowed.login.modules' is deprecated. Use the "
            "org.apache.kafka.allowed.login.modules to allow this module. "
            f"e.g.,-Dorg.apache.kafka.allowed.login.modules={name}"
        )
    return entries[0]


def config_entry_option(
    entries: Iterable[JaasEntry], key: str, login_module: str | None = None
) -> str | None:
    """The first value of option ``key`` among the entries (of ``login_module`` only, if
    given), as ``JaasContext.configEntryOption``; None when no entry has it."""
    for entry in entries:
        if login_module is not None and entry.login_module != login_module:
            continue
        value = entry.options.get(key)
        if value is not None:
            return value
    return None


def _parse_entry(tokens: _Tokenizer) -> JaasEntry:
    """One entry, the tokenizer standing on its first token (``parseAppConfigurationEntry``)."""
    login_module = tokens.sval
    if tokens.next_token() == _EOF:
        raise ValueError("Login module control flag not specified in JAAS config")
    control_flag = _control_flag(tokens.sval)
    options: dict[str, str] = {}
    while tokens.next_token() != _EOF and tokens.ttype != _SEMICOLON:
        key = tokens.sval
        if tokens.next_token() != _EQUALS or tokens.next_token() == _EOF or tokens.sval is None:
            raise ValueError(f"Value not specified for key '{_java_str(key)}' in JAAS config")
        if key is not None:  # Java keeps an option named null (from `3=x`); nothing reads it
            options[key] = tokens.sval
    if tokens.ttype != _SEMICOLON:
        raise ValueError("JAAS config entry not terminated by semi-colon")
    if not login_module:
        # Java's AppConfigurationEntry refuses a missing or empty module name with an
        # IllegalArgumentException that has no message; Kafka passes it on as it is.
        raise ValueError("Login module not specified in JAAS config")
    return JaasEntry(login_module, control_flag, MappingProxyType(options))


def _control_flag(flag: str | None) -> ControlFlag:
    if flag is None:
        raise ValueError("Login module control flag is not available in the JAAS config")
    control_flag = ControlFlag.__members__.get(flag.upper())
    if control_flag is None:
        raise ValueError(f"Invalid login module control flag '{flag}' in JAAS config")
    return control_flag


def _java_str(value: str | None) -> str:
    """Java's string concatenation writes a null as ``null``."""
    return "null" if value is None else value


def _java_trim(value: str) -> str:
    """``String.trim``: strips every character up to and including the space."""
    return value.strip("".join(map(chr, range(33))))


# java.io.StreamTokenizer, with the syntax table JaasConfig sets up. Token types are
# Java's: the negative constants, or the code of the ordinary or quote character.
_EOF = -1
_NUMBER = -2
_WORD = -3
_SEMICOLON = ord(";")
_EQUALS = ord("=")
_NEED_CHAR = -4  # Java's NEED_CHAR: no look-ahead character is held

_WHITESPACE, _DIGIT, _ALPHA, _QUOTE, _COMMENT = 1, 2, 4, 8, 16


def _syntax_table() -> list[int]:
    """The constructor's defaults, then JaasConfig's ``wordChars('-'), ('_'), ('$')``."""
    table = [0] * 256
    for low, high in (("a", "z"), ("A", "Z"), ("\xa0", "\xff")):
        for code in range(ord(low), ord(high) + 1):
            table[code] |= _ALPHA
    for code in range(ord(" ") + 1):
        table[code] = _WHITESPACE
    table[ord("/")] = _COMMENT
    table[ord('"')] = _QUOTE
    table[ord("'")] = _QUOTE
    for char in "0123456789.-":
        table[ord(char)] |= _DIGIT
    for char in "-_$":
        table[ord(char)] |= _ALPHA
    return table


_SYNTAX = _syntax_table()
_ESCAPES = {"a": 0x7, "b": 0x8, "f": 0xC, "n": 0xA, "r": 0xD, "t": 0x9, "v": 0xB}


def _char_type(code: int) -> int:
    return _SYNTAX[code] if code < 256 else _ALPHA


class _Tokenizer:
    """``StreamTokenizer.nextToken`` over a string; characters are read as code units
    (ints, -1 at the end) so that the port follows Java's control flow line by line."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._peek = _NEED_CHAR
        self.ttype = _NEED_CHAR
        self.sval: str | None = None

    def _read(self) -> int:
        if self._pos >= len(self._text):
            return _EOF
        self._pos += 1
        return ord(self._text[self._pos - 1])

    def next_token(self) -> int:
        self.ttype = self._next()
        return self.ttype

    def _next(self) -> int:
        while True:  # a comment restarts the scan (Java recurses)
            self.sval = None
            c = self._peek if self._peek != _NEED_CHAR else self._read()
            self._peek = _NEED_CHAR
            if c < 0:
                return _EOF
            ctype = _char_type(c)
            while ctype & _WHITESPACE:
                c = self._read()
                if c < 0:
                    return _EOF
                ctype = _char_type(c)

            if ctype & _DIGIT:
                if c == ord("-"):
                    c = self._read()
                    if c != ord(".") and not ord("0") <= c <= ord("9"):
                        self._peek = c
                        return ord("-")
                seen_dot = False
                while (c == ord(".") and not seen_dot) or ord("0") <= c <= ord("9"):
                    seen_dot = seen_dot or c == ord(".")
                    c = self._read()
                self._peek = c
                return _NUMBER

            if ctype & _ALPHA:
                chars = []
                while c >= 0 and _char_type(c) & (_ALPHA | _DIGIT):
                    chars.append(chr(c))
                    c = self._read()
                self._peek = c
                self.sval = "".join(chars)
                return _WORD

            if ctype & _QUOTE:
                self.sval = self._quoted(quote=c)
                return c

            if c == ord("/"):
                c = self._read()
                if c == ord("*"):
                    if self._skip_block_comment():
                        continue
                    return _EOF
                # "//", and a lone "/" (a comment character) after the character it ate
                self._peek = self._skip_line()
                continue

            return c

    def _quoted(self, quote: int) -> str:
        """The body of a quoted string; it also ends, unterminated, at a line end."""
        chars = []
        d = self._read()
        while d >= 0 and d != quote and d not in (0xA, 0xD):
            if d == ord("\\"):
                c = first = self._read()
                if ord("0") <= c <= ord("7"):  # up to three octal digits, at most \377
                    c -= ord("0")
                    c2 = self._read()
                    if ord("0") <= c2 <= ord("7"):
                        c = (c << 3) + c2 - ord("0")
                        c2 = self._read()
                        if ord("0") <= c2 <= ord("7") and first <= ord("3"):
                            c = (c << 3) + c2 - ord("0")
                            c2 = self._read()
                    d = c2
                else:
                    c = _ESCAPES.get(chr(c), c) if c >= 0 else c
                    d = self._read()
            else:
                c = d
                d = self._read()
            chars.append(chr(c) if c >= 0 else "\uffff")  # Java's (char) -1, from "\\" at the end
        self._peek = _NEED_CHAR if d == quote else d
        return "".join(chars)

    def _skip_block_comment(self) -> bool:
        """Past ``*/``; False when the text ends first. Java's loop skips the check on the
        character after a line end, and so does this."""
        prev = 0
        while True:
            c = self._read()
            if c == ord("/") and prev == ord("*"):
                return True
            if c == 0xD:
                c = self._read()
                if c == 0xA:
                    c = self._read()
            elif c == 0xA:
                c = self._read()
            if c < 0:
                return False
            prev = c

    def _skip_line(self) -> int:
        """Characters up to a line end; returns the line end (or -1), which Java keeps."""
        c = self._read()
        while c >= 0 and c not in (0xA, 0xD):
            c = self._read()
        return c
