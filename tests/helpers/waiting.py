"""Waiting, bounded, for something that happens asynchronously (watches, elections)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def eventually(condition: Callable[[], object], timeout: float = 5.0) -> None:
    """Wait until ``condition()`` is true: watches are delivered asynchronously."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.005)
