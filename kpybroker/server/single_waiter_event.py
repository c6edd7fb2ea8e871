"""An ``asyncio.Event`` for a flag only one task ever waits on.

Each client connection has two such flags (a frame came; the socket can take more), and
only the connection's own task waits on them. ``asyncio.Event`` keeps a deque of waiters,
760 bytes even when empty, and makes a future and a deque entry per wait: together a
quarter of an idle connection's memory, and a share of every request's CPU. This keeps one
future, made only while the task waits.
"""

from __future__ import annotations

import asyncio


class SingleWaiterEvent:
    """``set``, ``clear``, ``is_set`` and ``wait`` as ``asyncio.Event``'s, for one waiter."""

    __slots__ = ("_set", "_waiter")

    def __init__(self, is_set: bool = False) -> None:
        self._set = is_set
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():  # done: its wait was cancelled
            waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> None:
        """Return once the flag is set (at once if it is)."""
        if self._set:
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            raise RuntimeError("a SingleWaiterEvent has one waiter at a time")
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        await waiter
