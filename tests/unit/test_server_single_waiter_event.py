"""The connection's flags behave as ``asyncio.Event`` does for its one waiting task."""

from __future__ import annotations

import asyncio

import pytest

from kpybroker.server.single_waiter_event import SingleWaiterEvent


def test_a_set_flag_is_waited_for_at_once_and_a_clear_one_until_set() -> None:
    asyncio.run(_a_set_flag_is_waited_for_at_once_and_a_clear_one_until_set())


async def _a_set_flag_is_waited_for_at_once_and_a_clear_one_until_set() -> None:
    flag = SingleWaiterEvent(is_set=True)
    await flag.wait()
    flag.clear()
    waiting = asyncio.ensure_future(flag.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    flag.set()
    await waiting
    assert flag.is_set()


def test_a_cancelled_wait_leaves_the_flag_usable() -> None:
    asyncio.run(_a_cancelled_wait_leaves_the_flag_usable())


async def _a_cancelled_wait_leaves_the_flag_usable() -> None:
    flag = SingleWaiterEvent()
    waiting = asyncio.ensure_future(flag.wait())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    flag.set()  # the cancelled future is not resolved again
    flag.clear()
    again = asyncio.ensure_future(flag.wait())
    await asyncio.sleep(0)
    flag.set()
    await again


def test_a_second_waiter_is_refused() -> None:
    asyncio.run(_a_second_waiter_is_refused())


async def _a_second_waiter_is_refused() -> None:
    flag = SingleWaiterEvent()
    first = asyncio.ensure_future(flag.wait())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError):
        await flag.wait()
    flag.set()
    await first
