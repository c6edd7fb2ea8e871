"""``max.connections.per.ip.overrides``: "host:count,host:count", parsed as Kafka does.

Kafka splits the value with ``Csv.parseCsvMap`` (on commas with the whitespace around
them; each entry on its *last* colon, so IPv6 addresses work; both sides trimmed; a later
entry for a host wins), turns each count into an int with ``Integer.parseInt``, and, once
the whole config is read, checks the hosts' characters and that ``max.connections.per.ip``
is 0 only when there are overrides. The error texts are Kafka's, down to the Java
exception messages they carry, since operators search for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kpybroker.config.core import ConfigError

OVERRIDES_KEY = "max.connections.per.ip.overrides"
MAX_PER_IP_KEY = "max.connections.per.ip"

# Java's regex \s is [ \t\n\x0B\f\r]; Python's is wider.
_CSV_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
# Utils.validHostPattern.
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*")
# String.trim removes every char up to and including the space.
_JAVA_TRIMMED = "".join(chr(c) for c in range(33))


def parse_max_connections_per_ip_overrides(value: str) -> dict[str, int]:
    """Host (name or IP literal, as written) -> connection limit.

    Raises ``ConfigError`` with Kafka's text for an entry without a colon or a count that
    is not a Java int.
    """
    if not value:
        return {}
    entries = _CSV_SEPARATOR.split(value)
    while entries and not entries[-1]:  # Java's split drops trailing empty strings
        entries.pop()
    counts: dict[str, str] = {}
    for entry in entries:
        host, colon, count = entry.rpartition(":")
        if not colon:
            # Kafka's substring(0, -1) fails; getMap wraps the exception's message.
            length = len(entry.encode("utf-16-le")) // 2
            raise ConfigError(
                OVERRIDES_KEY,
                f"Error parsing configuration property '{OVERRIDES_KEY}': "
                f"begin 0, end -1, length {length}",
            )
        counts[host.strip(_JAVA_TRIMMED)] = count.strip(_JAVA_TRIMMED)
    return {host: _parse_java_int(count) for host, count in counts.items()}


def check_per_ip_limits(max_per_ip: int, overrides: Mapping[str, int]) -> None:
    """``KafkaConfig.validateValues``' checks of the two configs, in its order."""
    if max_per_ip == 0 and not overrides:
        raise ConfigError(
            MAX_PER_IP_KEY,
            f"requirement failed: {MAX_PER_IP_KEY} can be set to zero only if "
            f"{OVERRIDES_KEY} property is set.",
        )
    invalid = [host for host in overrides if not _VALID_HOST.fullmatch(host)]
    if invalid:
        raise ConfigError(
            OVERRIDES_KEY, f"{OVERRIDES_KEY} contains invalid addresses : {','.join(invalid)}"
        )


def _parse_java_int(text: str) -> int:
    """``Integer.parseInt``, with its ``NumberFormatException`` message."""
    if _JAVA_INT.fullmatch(text):
        number = int(text)
        if -(1 << 31) <= number < (1 << 31):
            return number
    raise ConfigError(OVERRIDES_KEY, f'For input string: "{text}"')
