"""CRC-32C (record batches, producer-state snapshots), from the crc32c package at first use.

The package's ``__init__`` reads its own version with ``importlib.metadata``, which imports
the ``email`` package and scans the installed distributions: about 20 ms of every start,
before any record is checked. A broker starts without it and imports it at the first batch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """The CRC-32C (Castagnoli) of ``data``, as Kafka's record batches carry it."""
    return _implementation()(data)


@functools.cache
def _implementation() -> Callable[[bytes | bytearray | memoryview], int]:
    from crc32c import crc32c as package_crc32c

    return package_crc32c
