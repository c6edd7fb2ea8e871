"""``connections.max.idle.ms``: connections with no traffic for that long are closed.

Kafka's selectors keep their channels in order of last activity and close the
oldest once it has been idle too long, whatever the client: a client that
vanished without closing its socket (a killed container, a dropped NAT entry)
does not hold a file descriptor and its buffers for ever. Here one task looks
over the broker's connections a few times per idle period; activity is a
request received or an answer written (``KafkaConnection.last_active``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from typing import Protocol

log = logging.getLogger(__name__)

#: Checks per idle period: a connection is closed at most this fraction late.
CHECKS_PER_PERIOD = 10
#: Bounds of the time between two checks, in seconds.
MIN_CHECK_S, MAX_CHECK_S = 0.05, 30.0


class IdleCandidate(Protocol):
    peer: str
    last_active: float
    closed: bool

    def close(self) -> None: ...


def close_idle(
    connections: Collection[IdleCandidate], max_idle_s: float, now: float
) -> list[IdleCandidate]:
    """Close the connections idle for over ``max_idle_s`` at ``now`` (monotonic); the ones
    closed."""
    idle = [c for c in connections if not c.closed and now - c.last_active > max_idle_s]
    for connection in idle:
        log.debug(
            "About to close the idle connection from %s due to being idle for %.0f millis",
            connection.peer,
            (now - connection.last_active) * 1000,
        )
        connection.close()
    return idle


async def close_idle_connections(
    connections: Collection[IdleCandidate],
    max_idle_ms: int,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Run until cancelled: close the connections idle for over ``max_idle_ms`` (a
    negative value, as in Kafka, closes none)."""
    if max_idle_ms < 0:
        return
    max_idle_s = max_idle_ms / 1000
    interval = min(max(max_idle_s / CHECKS_PER_PERIOD, MIN_CHECK_S), MAX_CHECK_S)
    while True:
        await asyncio.sleep(interval)
        close_idle(list(connections), max_idle_s, clock())
