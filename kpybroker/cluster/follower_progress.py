"""What a leader knows of each follower: how far its log reaches, when it last caught up.

A leader learns a follower's log end offset only from the ``fetch_offset`` of
the follower's Fetch requests (the follower fetches from its log end). As in
Kafka's ``Replica.updateFetchState``, a follower is *caught up* at a fetch that
reaches the leader's log end, or the leader's log end as of the previous
fetch; ``kpybroker.cluster.isr`` decides from this who is in sync.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerProgress:
    """What the leader knows of one follower (Kafka's ``Replica`` state on the leader)."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_end_offset: int = UNKNOWN_OFFSET

    def on_fetch(self, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        """Record a fetch from ``fetch_offset`` while the leader's log ended at
        ``leader_end_offset``."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_end_offset >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_ms = now_ms

    def is_lagging(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """Out of sync: behind the leader and not caught up for ``max_lag_ms``."""
        return (
            self.log_end_offset != leader_end_offset
            and now_ms - self.last_caught_up_ms > max_lag_ms
        )


def fresh_progress(
    followers: Iterable[int], isr: Sequence[int], now_ms: int
) -> dict[int, FollowerProgress]:
    """Progress of the followers of a new leader: end offsets unknown until they fetch.

    In-sync ones count as caught up now, so that they get ``replica.lag.time.max.ms``
    to show up before the new leader drops them (Kafka's ``resetReplicaState``).
    """
    return {
        broker: FollowerProgress(last_caught_up_ms=now_ms if broker in isr else 0)
        for broker in followers
    }
