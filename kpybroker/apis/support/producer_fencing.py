"""PRODUCER_FENCED as each client version understands it.

Kafka 2.7 (KIP-588) added PRODUCER_FENCED; clients of the transaction APIs'
older versions know only INVALID_PRODUCER_EPOCH for it, and Kafka's handlers
answer them that instead. Each API names the version from which its clients
know the new error.
"""

from __future__ import annotations

from kpybroker.protocol.errors import ErrorCode


def fenced_error_for(version: int, error: ErrorCode, fenced_from: int) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and version < fenced_from:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
