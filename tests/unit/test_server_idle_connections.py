"""connections.max.idle.ms: which connections are closed, and when the task looks."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kpybroker.server.idle_connections import close_idle, close_idle_connections


@dataclass
class FakeConnection:
    peer: str
    last_active: float
    closed: bool = False

    def close(self) -> None:
        self.closed = True


def test_only_connections_idle_past_the_limit_are_closed() -> None:
    quiet = FakeConnection("10.0.0.1:1", last_active=100.0)
    busy = FakeConnection("10.0.0.2:2", last_active=109.5)
    gone = FakeConnection("10.0.0.3:3", last_active=0.0, closed=True)
    assert close_idle([quiet, busy, gone], max_idle_s=5.0, now=110.0) == [quiet]
    assert quiet.closed and not busy.closed


def test_a_negative_limit_keeps_every_connection() -> None:
    connection = FakeConnection("10.0.0.1:1", last_active=-1e9)
    asyncio.run(close_idle_connections([connection], max_idle_ms=-1))
    assert not connection.closed


def test_the_task_closes_a_connection_once_it_has_been_idle_too_long() -> None:
    now = [0.0]
    connection = FakeConnection("10.0.0.1:1", last_active=0.0)

    async def scenario() -> None:
        task = asyncio.create_task(close_idle_connections([connection], 100, lambda: now[0]))
        await asyncio.sleep(0.2)  # several checks, none past the limit on the fake clock
        assert not connection.closed
        now[0] = 0.2
        while not connection.closed:
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(asyncio.wait_for(scenario(), 30))
