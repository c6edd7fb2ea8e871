"""Per-entity quota state that disappears after an hour without use.

Kafka creates a sensor for every (user, client id) it meters and drops it once unused for
an hour (``ClientQuotaManager.InactiveSensorExpirationTimeSeconds``, swept every 30 s). A
client that makes up a new client id per connection therefore costs one sensor per id per
hour, not one per id forever. Here the entries sit in an ``OrderedDict`` in order of last
use, so the expired ones are always at its front and are dropped, a few at a time, by the
very call that uses the map: no sweeper task, and O(1) amortised per use.

``max_entries`` optionally bounds the map outright, dropping the least recently used entry
(Kafka has no such bound; by default there is none either).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Kafka's inactive-sensor expiry: one hour.
SENSOR_EXPIRY_MS = 3_600_000


class ExpiringSensors(Generic[K, V]):
    """Sensors by key, each forgotten ``expiry_ms`` after its last use (time in ms)."""

    def __init__(
        self,
        create: Callable[[], V],
        *,
        expiry_ms: int = SENSOR_EXPIRY_MS,
        max_entries: int | None = None,
    ) -> None:
        self._create = create
        self._expiry_ms = expiry_ms
        self._max_entries = max_entries
        self._entries: OrderedDict[K, tuple[int, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def use(self, key: K, now_ms: int) -> V:
        """The sensor for ``key``, created when absent; marks it used at ``now_ms``."""
        self._expire(now_ms)
        entry = self._entries.pop(key, None)
        sensor = self._create() if entry is None else entry[1]
        self._entries[key] = (now_ms, sensor)
        if self._max_entries is not None and len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
        return sensor

    def discard(self, key: K) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def _expire(self, now_ms: int) -> None:
        # Kafka's Sensor.hasExpired: idle for strictly longer than the expiry.
        entries = self._entries
        while entries:
            last_used_ms, _ = next(iter(entries.values()))
            if now_ms - last_used_ms <= self._expiry_ms:
                return
            entries.popitem(last=False)
