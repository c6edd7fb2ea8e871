"""Checks the modern group protocols (consumer and share groups) share.

Kafka's ``GroupCoordinatorService`` checks a heartbeat's strings the same way
for both kinds of group (``throwIfEmptyString``, ``throwIfNull``), and both
take a group's own session timeout and heartbeat interval (group configs)
over the broker's, within the broker's current bounds.
"""

from __future__ import annotations

from kpybroker.protocol.errors import ErrorCode, KafkaError


def invalid_request(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def not_empty(value: str | None, message: str, *, null_too: bool = False) -> None:
    """INVALID_REQUEST for a blank string (and for null when ``null_too``)."""
    if (value is None and null_too) or (value is not None and not value.strip()):
        raise invalid_request(message)


def within(value: int | None, default: int, low: int, high: int) -> int:
    """A group's setting held within the broker's current bounds (they may have changed since
    it was set), or the broker's own setting when the group has none."""
    return default if value is None else min(max(value, low), high)
