"""The time a request's handler itself spends on the event loop, for ``request_percentage``.

Kafka's request quota charges a client for the time its requests occupy the
broker's threads, not for the time they wait (a long-polling fetch, an acks=all
produce). One event loop runs every handler here, so the wall time from start
to answer would charge a waiting request for everyone else's work. Instead the
handler's coroutine is driven step by step and only the steps themselves are
timed: each step is a stretch of this request's own code between two awaits.
Only requests of clients with a request quota are driven this way.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

_T = TypeVar("_T")


class TimedCoroutine:
    """``await TimedCoroutine(coro)`` awaits ``coro``; ``elapsed_ns`` is then the time
    spent inside it, waiting excluded."""

    __slots__ = ("coro", "elapsed_ns")

    def __init__(self, coro: Coroutine[Any, Any, _T]) -> None:
        self.coro = coro
        self.elapsed_ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter_ns()
            try:
                waiting = coro.throw(error) if error is not None else coro.send(value)
            except StopIteration as done:
                self.elapsed_ns += time.perf_counter_ns() - started
                return done.value
            except BaseException:
                self.elapsed_ns += time.perf_counter_ns() - started
                raise
            self.elapsed_ns += time.perf_counter_ns() - started
            try:
                value, error = (yield waiting), None
            except BaseException as exc:  # cancelled while waiting: pass it in
                value, error = None, exc
