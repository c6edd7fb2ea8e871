"""The connection gate drives the connection limits in Kafka's acceptor order, over fakes."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import pytest

from kpybroker.quotas.connection_quotas import ConnectionLimits, ConnectionQuotas, ListenerLimits
from kpybroker.server import request_time
from kpybroker.server.connection_gate import ConnectionGate
from kpybroker.server.request_time import TimedCoroutine


@dataclass(eq=False)
class FakeConnection:
    listener: str = "PLAINTEXT"
    client_host: str = "10.0.0.1"
    last_active: float = 0.0
    holds: set[str] = field(default_factory=set)
    served: bool = False
    closed: bool = False

    def hold_reading(self, reason: str) -> None:
        self.holds.add(reason)

    def release_reading(self, reason: str) -> None:
        self.holds.discard(reason)

    def admitted(self) -> None:
        self.served = True

    def close(self) -> None:
        self.closed = True


def gate(limits: ConnectionLimits, backlog: int = 2) -> tuple[ConnectionGate, list[int]]:
    clock = [1_000_000]
    return ConnectionGate(ConnectionQuotas(limits), backlog, lambda: clock[0]), clock


def run(test):  # type: ignore[no-untyped-def]
    """The gate schedules wake-ups on the running loop."""

    async def main() -> None:
        test()

    asyncio.run(main())


def test_connections_over_the_per_ip_limit_are_closed_at_once() -> None:
    def test() -> None:
        limits = ConnectionLimits(
            listeners={"PLAINTEXT": ListenerLimits()}, max_connections_per_ip=1
        )
        g, _ = gate(limits)
        first, second = FakeConnection(), FakeConnection()
        g.arrived(first)
        g.arrived(second)
        assert first.served and not first.closed
        assert second.closed and not second.served
        g.left(first)
        third = FakeConnection()
        g.arrived(third)
        assert third.served

    run(test)


def test_a_full_listener_makes_connections_wait_then_lets_one_in_per_freed_slot() -> None:
    def test() -> None:
        limits = ConnectionLimits(listeners={"PLAINTEXT": ListenerLimits(max_connections=1)})
        g, _ = gate(limits, backlog=1)
        served, waiting, dropped = FakeConnection(), FakeConnection(), FakeConnection()
        for connection in (served, waiting, dropped):
            g.arrived(connection)
        assert served.served
        assert not waiting.served and waiting.holds == {"accepting"}
        assert dropped.closed  # the "backlog" is full
        g.left(served)
        assert waiting.served and not waiting.holds

    run(test)


def test_a_waiting_connection_that_goes_away_frees_nothing() -> None:
    def test() -> None:
        limits = ConnectionLimits(listeners={"PLAINTEXT": ListenerLimits(max_connections=1)})
        g, _ = gate(limits)
        served, waiting = FakeConnection(), FakeConnection()
        g.arrived(served)
        g.arrived(waiting)
        g.left(waiting)
        g.left(served)
        assert g.quotas.total_connections == 0

    run(test)


def test_the_protected_listener_pushes_the_others_least_recent_connection_out() -> None:
    def test() -> None:
        limits = ConnectionLimits(
            listeners={"PLAINTEXT": ListenerLimits(), "BROKERS": ListenerLimits()},
            inter_broker_listener="BROKERS",
            max_connections=2,
        )
        g, _ = gate(limits)
        old = FakeConnection(last_active=1.0)
        recent = FakeConnection(last_active=2.0)
        g.arrived(old)
        g.arrived(recent)
        peer = FakeConnection(listener="BROKERS")
        g.arrived(peer)
        assert peer.served
        assert old.closed and not recent.closed

    run(test)


def test_the_timed_coroutine_counts_only_its_own_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock that moves 1 ns per reading, and 1 s whenever the handler waits: only the
    two steps around the wait are charged."""
    clock = [0]

    def reading() -> int:
        clock[0] += 1
        return clock[0]

    monkeypatch.setattr(request_time.time, "perf_counter_ns", reading)

    async def handler() -> str:
        await asyncio.sleep(0)
        return "done"

    async def elsewhere() -> None:
        clock[0] += 1_000_000_000  # a second spent on other work while the handler waits

    async def main() -> None:
        timed = TimedCoroutine(handler())
        other = asyncio.ensure_future(elsewhere())
        assert await timed == "done"
        await other
        assert timed.elapsed_ns == 2

    asyncio.run(main())


def test_the_timed_coroutine_passes_errors_and_cancellation_through() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    async def waiting() -> None:
        await asyncio.sleep(10)

    async def main() -> None:
        try:
            await TimedCoroutine(failing())
        except ValueError as exc:
            assert str(exc) == "boom"
        task = asyncio.ensure_future(TimedCoroutine(waiting()))
        await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(main())
