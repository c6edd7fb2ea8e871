"""``queued.max.requests`` and ``queued.max.request.bytes``: requests in flight are bounded.

Kafka's network threads put each request they read on one broker-wide queue
of ``queued.max.requests`` for the I/O threads, and block when it is full;
each request's buffer is taken from a memory pool of
``queued.max.request.bytes`` as soon as its size is known, and a channel
that finds the pool empty is muted until a request is done with its buffer.
Per connection Kafka reads one request, then mutes the channel until its
response is sent: what a client pipelines beyond that waits in the kernel's
socket buffer.

Here one event loop does it all. A connection's frame decoder asks its
:class:`ConnectionAccount` before it commits memory to a frame; the account
admits it when

* the connection is not busy with another frame, from taking it up until its
  answer is written (the pipelining limit, Kafka's: what a client pipelines
  waits in the socket buffer, so a client that never reads its answers holds
  no request and no request memory, only its one answer);
* the broker holds fewer than ``queued.max.requests`` frames read and not yet
  taken up by their connection (Kafka's request queue); and
* the frames read and not yet handled hold less than
  ``queued.max.request.bytes`` (-1 or 0: no limit), counting each at its full
  size from the moment it is taken in. As in Kafka's pool, the last frame
  admitted may go over by up to one frame (``socket.request.max.bytes``, which
  Kafka and kpybroker require the budget to be at least).

A connection refused by the broker-wide limits queues, and stops reading;
connections are admitted again in the order they queued as frames finish, so
none waits for ever behind others that keep arriving.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class RequestBudget:
    """The broker-wide limits on frames read and not yet handled."""

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        self.max_requests = max_requests
        #: None: no limit (Kafka's -1, also taken for 0).
        self.max_bytes = max_bytes if max_bytes > 0 else None
        #: Frames read and not yet taken up by their connection.
        self.queued_requests = 0
        #: Bytes of frames read and not yet handled.
        self.queued_bytes = 0
        self._waiting: deque[ConnectionAccount] = deque()

    def account(self, on_admissible: Callable[[], None]) -> ConnectionAccount:
        """A new connection's account; ``on_admissible`` is called when a frame it was
        refused may now be admitted."""
        return ConnectionAccount(self, on_admissible)

    def has_room(self) -> bool:
        return self.queued_requests < self.max_requests and (
            self.max_bytes is None or self.queued_bytes < self.max_bytes
        )

    def take(self, account: ConnectionAccount, size: int) -> bool:
        """Count a frame of ``size`` bytes, unless the budget is spent or other
        connections are queued first (then ``account`` queues too)."""
        waiting = self._waiting
        if self.has_room() and (not waiting or waiting[0] is account):
            if waiting:
                waiting.popleft()
            self.queued_requests += 1
            self.queued_bytes += size
            return True
        if account not in waiting:
            waiting.append(account)
        return False

    def give_back(self, requests: int, nbytes: int) -> None:
        """Frames were taken up (``requests``) or handled (``nbytes``): admit queued ones."""
        self.queued_requests -= requests
        self.queued_bytes -= nbytes
        while self._waiting and self.has_room():
            head = self._waiting[0]
            head.on_admissible()
            if self._waiting and self._waiting[0] is head:
                self._waiting.popleft()  # it took nothing (closed, or held back by itself)

    def withdraw(self, account: ConnectionAccount) -> None:
        if account in self._waiting:
            self._waiting.remove(account)


class ConnectionAccount:
    """One connection's frames in the :class:`RequestBudget` (a ``FrameAdmission``)."""

    def __init__(self, budget: RequestBudget, on_admissible: Callable[[], None]) -> None:
        self.budget = budget
        self.on_admissible = on_admissible
        #: Frames admitted and not yet taken up (received in place, or waiting).
        self.waiting = 0
        #: Bytes of frames admitted and not yet handled.
        self.held_bytes = 0
        #: A frame was taken up and its answer is not yet written.
        self.busy = False
        self.closed = False

    def admit(self, size: int) -> bool:
        if self.closed or self.waiting or self.busy or not self.budget.take(self, size):
            return False
        self.waiting += 1
        self.held_bytes += size
        return True

    def started(self) -> None:
        """The connection took up its waiting frame."""
        if self.closed:
            return
        self.waiting -= 1
        self.busy = True
        self.budget.give_back(1, 0)

    def answered(self) -> None:
        """The frame's answer is written (or it has none): the next frame may be read."""
        if self.closed:
            return
        self.busy = False
        self.on_admissible()

    def finished(self, size: int) -> None:
        """A frame of ``size`` bytes was handled: its memory is free."""
        if self.closed:
            return
        self.held_bytes -= size
        self.budget.give_back(0, size)

    def close(self) -> None:
        """The connection is gone: whatever it held is free."""
        if self.closed:
            return
        self.closed = True
        self.budget.withdraw(self)
        self.budget.give_back(self.waiting, self.held_bytes)
        self.waiting = self.held_bytes = 0
