"""Accepting connections on a listener's sockets, and backing off when the process is out of
file descriptors.

Why not ``loop.create_server``: when ``accept`` fails with ``EMFILE`` (the process's
``RLIMIT_NOFILE`` reached) or ``ENFILE`` (the system's), neither event loop does what a
broker should. asyncio logs an ERROR with a traceback on every retry, once a second for
as long as it lasts; uvloop (libuv) logs nothing, and accepts each waiting connection
only to close it at once, so clients see their connections dropped with no reason on
the broker's side. Here, on EMFILE, ``make_room`` first asks the log's cache of open
files to close some (they are reopened on use) and the accept is retried. When nothing
can be freed, the first failure is logged once, accepting pauses for
:data:`ACCEPT_BACKOFF_S` and is retried; new connections wait in the kernel's accept
queue meanwhile (they are accepted once descriptors are free again), and established
connections go on as before. The first connection accepted after that is logged too.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable

log = logging.getLogger(__name__)

#: How long accepting pauses after the process ran out of descriptors.
ACCEPT_BACKOFF_S = 1.0
#: The most connections taken off the kernel's queue per wakeup, so that a burst of
#: connections does not hold up requests already queued on the event loop.
ACCEPTS_PER_WAKEUP = 64
#: accept's errors that mean "no resources now", not "this connection failed".
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Acceptor:
    """Serves connections from listening ``sockets`` with protocols from ``protocol_factory``
    (the part of ``asyncio.Server`` the broker uses: ``sockets``, ``start_serving``, ``close``)."""

    def __init__(
        self,
        name: str,
        sockets: list[socket.socket],
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        make_room: Callable[[], bool] = lambda: False,
    ) -> None:
        """``make_room`` frees descriptors when the process is out of them (True if it did)."""
        self.name = name
        self.sockets = sockets
        self._protocol_factory = protocol_factory
        self._make_room = make_room
        self._loop = asyncio.get_running_loop()
        self._serving = False
        self._resume: asyncio.TimerHandle | None = None
        #: Accepts refused since the process ran out of descriptors (0: accepting normally).
        self._refused = 0

    async def start_serving(self) -> None:
        self._serving = True
        self._watch()

    def close(self) -> None:
        """Stop accepting and close the listening sockets (connections stay open)."""
        self._serving = False
        if self._resume is not None:
            self._resume.cancel()
        self._unwatch()
        for sock in self.sockets:
            sock.close()

    def _watch(self) -> None:
        self._resume = None
        if self._serving:
            for sock in self.sockets:
                self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _unwatch(self) -> None:
        for sock in self.sockets:
            if sock.fileno() >= 0:
                self._loop.remove_reader(sock.fileno())

    def _accept(self, listening: socket.socket) -> None:
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                sock, _ = listening.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in OUT_OF_RESOURCES:
                    raise
                if exc.errno == errno.EMFILE and self._make_room():
                    continue
                self._back_off(exc)
                return
            if self._refused:
                log.info(
                    "Accepting connections on listener %s again, after %d attempt(s) "
                    "failed for lack of file descriptors",
                    self.name,
                    self._refused,
                )
                self._refused = 0
            self._loop.create_task(self._connect(sock))

    def _back_off(self, exc: OSError) -> None:
        """Pause accepting; the first failure of a run is logged, the others only counted."""
        if not self._refused:
            log.warning(
                "Cannot accept connections on listener %s: %s (the process's limit on open "
                "files, RLIMIT_NOFILE, or the system's, is reached). Existing connections are "
                "served; new ones wait in the accept queue and are retried every %.0f s; "
                "this is logged once until a connection is accepted again",
                self.name,
                exc.strerror,
                ACCEPT_BACKOFF_S,
            )
        self._refused += 1
        self._unwatch()
        self._resume = self._loop.call_later(ACCEPT_BACKOFF_S, self._watch)

    async def _connect(self, sock: socket.socket) -> None:
        """Hand an accepted socket to a new protocol; Kafka's answers go out without delay."""
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await self._loop.connect_accepted_socket(self._protocol_factory, sock)
        except OSError as exc:
            log.warning("Dropping a connection on listener %s: %s", self.name, exc)
            sock.close()
