"""Which accepted connections are served: Kafka's connection limits, on the accept path.

``quotas.connection_quotas`` decides; this drives it as Kafka's acceptor does
(``SocketServer.Acceptor``), one socket at a time per listener:

1. a new socket is counted against the broker's and the listener's creation
   rates (``max.connection.creation.rate``), which may ask for a delay;
2. it waits, unread, until that delay is over and the listener is under
   ``max.connections`` (a connection closing frees a slot). Kafka leaves such
   sockets in the kernel's accept backlog; asyncio accepts them at once, so they
   wait here instead, at most ``socket.listen.backlog.size`` per listener, and a
   socket beyond that is closed at once, as a full backlog would drop it;
3. it is admitted, refused (``max.connections.per.ip``: closed at once), or
   throttled (an address over its ``connection_creation_rate``: held unread,
   then closed);
4. when the broker holds more than ``max.connections`` because the protected
   inter-broker listener went over, the other listeners close their least
   recently active connections.

Each refusal is logged once, with the address, in Kafka's words.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from kpybroker.quotas.connection_quotas import ConnectionQuotas, Outcome

log = logging.getLogger(__name__)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class GatedConnection(Protocol):
    """What the gate needs of a connection (``KafkaConnection``)."""

    listener: str
    client_host: str
    last_active: float

    def hold_reading(self, reason: str) -> None: ...

    def release_reading(self, reason: str) -> None: ...

    def admitted(self) -> None:
        """Start serving."""

    def close(self) -> None: ...


class ConnectionGate:
    """The connection limits of one broker, over all its listeners."""

    def __init__(
        self,
        quotas: ConnectionQuotas,
        backlog: int,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.quotas = quotas
        self.backlog = backlog
        self.clock_ms = clock_ms
        self._waiting: dict[str, deque[tuple[GatedConnection, int]]] = {}
        self._open: dict[str, set[GatedConnection]] = {}
        self._wakeups: dict[str, asyncio.TimerHandle] = {}

    def arrived(self, connection: GatedConnection) -> None:
        """A socket was accepted: serve it now, or make it wait, or refuse it."""
        listener = connection.listener
        now = self.clock_ms()
        ready_at = now + self.quotas.accept_delay_ms(listener, now)
        waiting = self._waiting.setdefault(listener, deque())
        if not waiting and ready_at <= now and self.quotas.slot_available(listener):
            self._admit(connection)
            return
        if len(waiting) >= self.backlog:
            log.info(
                "Closed connection from %s: listener %s is full and %d connections already "
                "wait to be accepted",
                connection.client_host,
                listener,
                len(waiting),
            )
            connection.close()
            return
        connection.hold_reading("accepting")
        waiting.append((connection, ready_at))
        self._wake_later(listener, ready_at - now)

    def left(self, connection: GatedConnection) -> None:
        """A connection closed, however: free its slot and let a waiting one in."""
        listener = connection.listener
        opened = self._open.get(listener)
        if opened is not None and connection in opened:
            opened.discard(connection)
            self.quotas.release(listener, connection.client_host)
            self._drain(listener)
            return
        waiting = self._waiting.get(listener)
        if waiting:
            self._waiting[listener] = deque(w for w in waiting if w[0] is not connection)

    def _admit(self, connection: GatedConnection) -> None:
        listener = connection.listener
        admission = self.quotas.admit(listener, connection.client_host, self.clock_ms())
        if admission.outcome is Outcome.REFUSE:
            log.info("%s", admission.reason)
            connection.close()
        elif admission.outcome is Outcome.THROTTLE:
            log.info("%s", admission.reason)
            connection.hold_reading("throttled")
            asyncio.get_running_loop().call_later(admission.delay_ms / 1000, connection.close)
        else:
            self._open.setdefault(listener, set()).add(connection)
            connection.admitted()
            self._close_excess()

    def _drain(self, listener: str) -> None:
        """Admit waiting connections whose delay is over while slots are free."""
        waiting = self._waiting.get(listener)
        now = self.clock_ms()
        while waiting and self.quotas.slot_available(listener):
            connection, ready_at = waiting[0]
            if ready_at > now:
                self._wake_later(listener, ready_at - now)
                return
            waiting.popleft()
            connection.release_reading("accepting")
            self._admit(connection)

    def _wake_later(self, listener: str, delay_ms: int) -> None:
        if listener in self._wakeups:
            return

        def wake() -> None:
            del self._wakeups[listener]
            self._drain(listener)

        loop = asyncio.get_running_loop()
        self._wakeups[listener] = loop.call_later(max(delay_ms, 0) / 1000, wake)

    def _close_excess(self) -> None:
        """Over ``max.connections`` through the protected listener: the others close their
        least recently active connections."""
        for listener, opened in self._open.items():
            while opened and self.quotas.excess_connections(listener):
                oldest = min(opened, key=lambda c: c.last_active)
                log.info(
                    "Closing the least recently active connection from %s on %s: the broker "
                    "is over max.connections",
                    oldest.client_host,
                    listener,
                )
                self.left(oldest)
                oldest.close()
