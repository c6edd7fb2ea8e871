"""Waiting, bounded, for something that happens asynchronously (watches, elections)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def eventually(condition: Callable[[], object], timeout: float = 30.0) -> None:
    """Wait until ``condition()`` is true: watches are delivered asynchronously.

    The bound only limits how long a failing test hangs; a passing one returns as
    soon as the condition holds. 5 s was once too short on a loaded 2-core CI
    machine (a cancelled reassignment's replica was deleted later than that).
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.005)
