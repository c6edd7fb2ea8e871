"""The principal of a TLS client: its certificate's subject, as Java prints it, mapped by rules.

Kafka names an SSL client after the distinguished name that Java's ``X500Principal.getName()``
prints for the client certificate's subject (RFC 2253 form), passed through the listener's
``ssl.principal.mapping.rules``. ACLs, quotas and ``super.users`` written for Kafka hold those
exact strings, so both steps are reproduced character for character here: the printing, with
Java's escaping, keywords, hex forms and byte decoding, and the rules, with Java's rule grammar,
back references and replacement syntax.

Mapping patterns are compiled with Python's ``re`` (ASCII mode, as Java's defaults): the usual
constructs mean the same in both, but Java-only syntax (``(?<name>...)``, ``\\Q...\\E``,
``\\p{...}``, a flag like ``(?i)`` after the start) is refused as an invalid rule, and a class
intersection (``[a-z&&[^b]]``) is read as Python reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kpybroker.config.core import ConfigError, java_trim
from kpybroker.security.principal import ANONYMOUS

MAPPING_RULES_KEY = "ssl.principal.mapping.rules"
DEFAULT_MAPPING_RULES = "DEFAULT"

# --------------------------------------------------------------------------- the subject's DN

# Attribute types that Java prints by keyword in RFC 2253 form; any other prints as its OID.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# Universal tags Java prints as text: UTF8, Printable, T61, IA5, General and BMP strings.
_TEXT_TAGS = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E})
_ESCAPED = frozenset(',=+<>#;"\\')
_SEQUENCE, _SET, _OID = 0x30, 0x31, 0x06


def distinguished_name(certificate_der: bytes) -> str:
    """The certificate's subject as Java's ``X500Principal.getName()`` prints it.

    Relative names come last-first, joined by commas; the values of a multi-valued one keep
    their encoded order, joined by ``+``. The encoded subject is walked directly because Java
    prints some values as the hex of their DER encoding, which ``cryptography`` does not give.
    """
    from cryptography import x509  # only a broker with TLS loads it (key_stores says why)

    subject = x509.load_der_x509_certificate(certificate_der).subject.public_bytes()
    rdns = [
        "+".join(_attribute(ava) for ava in _children(rdn, _SET))
        for rdn in _children(subject, _SEQUENCE)
    ]
    return ",".join(reversed(rdns))


def _attribute(ava: bytes) -> str:
    oid_tlv, value_tlv = _children(ava, _SEQUENCE)
    oid = _oid_text(_content(oid_tlv, _OID))
    keyword = _RFC2253_KEYWORDS.get(oid, oid)
    tag = value_tlv[0]
    if keyword[0].isdigit() or tag not in _TEXT_TAGS:
        return f"{keyword}=#{value_tlv.hex()}"
    # Java decodes the content bytes of every string type as UTF-8 (BMPString included).
    return f"{keyword}={_escape(_content(value_tlv, tag).decode('utf-8', 'replace'))}"


def _escape(value: str) -> str:
    """Java's ``AVA.toRFC2253String`` escaping: specials, NUL, then edge spaces and CRs."""
    chars: list[str] = []
    for c in value:
        if c in _ESCAPED:
            chars.append("\\" + c)
        elif c == "\0":
            chars.extend(("\\", "0", "0"))
        else:
            chars.append(c)
    # The escaped text is a list of single characters ("\\" and "," are two); Java escapes
    # the spaces and carriage returns at either end of it.
    text = "".join(chars)
    lead = len(text) - len(text.lstrip(" \r"))
    trail = len(text.rstrip(" \r"))
    if lead == len(text):
        return "".join("\\" + c for c in text)
    return (
        "".join("\\" + c for c in text[:lead])
        + text[lead:trail]
        + "".join("\\" + c for c in text[trail:])
    )


def _read_tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, content start, end) of the DER element at ``pos``."""
    tag, length = data[pos], data[pos + 1]
    start = pos + 2
    if length & 0x80:
        size = length & 0x7F
        length = int.from_bytes(data[start : start + size], "big")
        start += size
    end = start + length
    if end > len(data):
        raise ValueError("truncated DER element")
    return tag, start, end


def _content(tlv: bytes, tag: int) -> bytes:
    found, start, end = _read_tlv(tlv, 0)
    if found != tag:
        raise ValueError(f"expected DER tag {tag:#x}, found {found:#x}")
    return tlv[start:end]


def _children(tlv: bytes, tag: int) -> list[bytes]:
    """The elements (whole TLVs) inside a constructed element of the given tag."""
    content = _content(tlv, tag)
    items = []
    pos = 0
    while pos < len(content):
        _, _, end = _read_tlv(content, pos)
        items.append(content[pos:end])
        pos = end
    return items


def _oid_text(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(map(str, (first, arcs[0] - 40 * first, *arcs[1:])))


# --------------------------------------------------------------------------- mapping rules

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)", re.ASCII)
_RULE_PARSER = re.compile(_RULE, re.ASCII)
_BACK_REFERENCE = re.compile(r"\$([0-9]+)")


class NoMatchingRule(ValueError):
    """No rule gave a name; Kafka then fails the connection's authentication."""


@dataclass(frozen=True, slots=True)
class _Rule:
    """``DEFAULT`` (pattern None) or ``RULE:pattern/replacement/[LU]``."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        replacement = _escape_literal_back_references(self.replacement, self.pattern.groups)
        name = _java_replace_all(self.pattern, dn, replacement)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        flag = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{flag}"


class SslPrincipalMapper:
    """Kafka's ``SslPrincipalMapper``: ``ssl.principal.mapping.rules``, first rule that applies.

    Rules are comma separated (commas inside a pattern need no escaping: the rule grammar
    finds the rule's end); ``DEFAULT`` gives the DN unchanged; ``RULE:p/r/`` applies when the
    regex ``p`` matches the whole DN, and gives ``r`` with ``$n`` group references, then
    lower-cased (``/L``) or upper-cased (``/U``). Empty rules are skipped. Raises
    ``ConfigError`` on text that is not a list of rules, as Kafka refuses the listener.
    """

    def __init__(self, rules: str | None = DEFAULT_MAPPING_RULES) -> None:
        text = DEFAULT_MAPPING_RULES if rules is None else rules
        self._rules = tuple(
            rule
            for part in (m.group(1) for m in _RULE_SPLITTER.finditer(java_trim(text)))
            if (rule := _parse_rule(text, part)) is not None
        )

    def name(self, distinguished_name: str) -> str:
        """The principal name for a DN; ``NoMatchingRule`` when no rule applies."""
        for rule in self._rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {self._rules_text()}")

    def _rules_text(self) -> str:
        return "[" + ", ".join(map(str, self._rules)) + "]"

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = {self._rules_text()})"


def _parse_rule(rules: str, rule: str) -> _Rule | None:
    """One rule's text (as the splitter cut it) -> the rule, or None for an empty one."""
    match = _RULE_PARSER.match(rule)
    assert match is not None  # the grammar's last branch matches anything
    if match.end() != len(rule):
        reason = f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end() :]}`"
        raise ConfigError.invalid_value(MAPPING_RULES_KEY, rules, reason)
    if match.group(1) is not None:
        return _Rule()
    if match.group(2) is None:
        return None
    try:
        pattern = re.compile(match.group(2), re.ASCII)
    except re.error as exc:
        reason = f"Invalid rule: `{rule}`, bad pattern: {exc}"
        raise ConfigError.invalid_value(MAPPING_RULES_KEY, rules, reason) from exc
    return _Rule(pattern, match.group(4), match.group(6))


def _escape_literal_back_references(replacement: str, group_count: int) -> str:
    """Kafka's (from Apache NiFi): a ``$n`` naming no group becomes a literal ``$n``.

    Too many digits are dropped from the right first (``$12`` with one group is group 1
    followed by "2"). Like Kafka's, positions are those of the original text, so only the
    first of several literal references is escaped where it stands.
    """
    if group_count == 0:
        return replacement
    value = replacement
    for match in _BACK_REFERENCE.finditer(replacement):
        digits = match.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > group_count and index >= 10:
            index //= 10
        if index > group_count:
            at = match.start(1) - 1
            value = value[:at] + "\\" + value[at:]
    return value


def _java_replace_all(pattern: re.Pattern[str], text: str, replacement: str) -> str:
    """Java's ``String.replaceAll``: its search steps and its replacement syntax.

    Java resumes a search one character on after an empty match (Python may then match a
    non-empty run at the same place), so the loop is spelled out rather than ``re.sub``.
    """
    parts: list[str] = []
    last = 0
    pos = 0
    while pos <= len(text) and (match := pattern.search(text, pos)) is not None:
        parts.append(text[last : match.start()])
        parts.append(_expand(match, replacement))
        last = match.end()
        pos = last + 1 if match.start() == match.end() else last
    parts.append(text[last:])
    return "".join(parts)


def _expand(match: re.Match[str], replacement: str) -> str:
    """Java's ``Matcher.appendExpandedReplacement``: ``\\x`` literal, ``$n``, ``${name}``.

    ``$`` takes the longest run of digits that still names a group. Errors carry Java's text.
    """
    out: list[str] = []
    groups = match.re.groups
    i = 0
    while i < len(replacement):
        c = replacement[i]
        i += 1
        if c == "\\":
            if i == len(replacement):
                raise ValueError("character to be escaped is missing")
            out.append(replacement[i])
            i += 1
        elif c == "$":
            if i == len(replacement):
                raise ValueError("Illegal group reference: group index is missing")
            if replacement[i] == "{":
                start = i = i + 1
                while (
                    i < len(replacement) and replacement[i].isascii() and replacement[i].isalnum()
                ):
                    i += 1
                name = replacement[start:i]
                if not name:
                    raise ValueError("named capturing group has 0 length name")
                if i == len(replacement) or replacement[i] != "}":
                    raise ValueError("named capturing group is missing trailing '}'")
                if name[0].isdigit():
                    raise ValueError(f"capturing group name {{{name}}} starts with digit character")
                if name not in match.re.groupindex:
                    raise ValueError(f"No group with name {{{name}}}")
                ref = match.re.groupindex[name]
                i += 1
            else:
                if not "0" <= replacement[i] <= "9":
                    raise ValueError("Illegal group reference")
                ref = int(replacement[i])
                i += 1
                while i < len(replacement) and "0" <= replacement[i] <= "9":
                    longer = ref * 10 + int(replacement[i])
                    if longer > groups:
                        break
                    ref = longer
                    i += 1
                if ref > groups:
                    raise ValueError(f"No group {ref}")
            out.append(match.group(ref) or "")
        else:
            out.append(c)
    return "".join(out)


def _is_ascii_alnum(c: str) -> bool:
    return c.isascii() and c.isalnum()


# --------------------------------------------------------------------------- the principal


def principal_name(certificate_der: bytes | None, mapper: SslPrincipalMapper) -> str:
    """The name Kafka's ``DefaultKafkaPrincipalBuilder`` gives a TLS client.

    ``certificate_der`` is the client's certificate (``getpeercert(binary_form=True)``), None
    when it sent none (``ssl.client.auth`` none, or requested and declined): then the
    client is ``ANONYMOUS``, as Kafka's unverified peer is. Raises ``NoMatchingRule`` when no
    rule applies and ``ValueError`` for a replacement Java would refuse; Kafka closes the
    connection in both cases.
    """
    if certificate_der is None:
        return ANONYMOUS.name
    return mapper.name(distinguished_name(certificate_der))
