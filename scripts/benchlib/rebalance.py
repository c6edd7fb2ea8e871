"""Workload 10: a consumer group's members become stable, then one leaves, timed by the members.

The members are confluent-kafka consumers, all in this process: on two cores, one
process per member would measure the scheduler, while librdkafka runs each
consumer's group protocol on its own threads anyway. One loop polls every member
in turn (rebalance callbacks run only inside ``poll``), and each member keeps
the partitions its ``on_assign`` / ``on_revoke`` callbacks gave and took. Set
operations fit both kinds of callback: eager rebalancing (the classic protocol
with librdkafka's default range assignor) revokes everything and assigns the
whole new share; incremental rebalancing (the consumer protocol) passes only
what changes.

"Stable" is what the members' application code sees: every partition owned by
exactly one live member, each owning its even share (``partitions // members``
or one more). Both brokers' assignors (range, uniform) give every member its
even share of one topic, so no earlier state of a rebalance can pass for it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition

#: The two group protocols: ``group.protocol`` as a client sets it.
CLASSIC = "classic"
CONSUMER = "consumer"
PROTOCOLS = (CLASSIC, CONSUMER)
#: How the cases name them, with the assignor each gets: librdkafka's default
#: ``partition.assignment.strategy`` (range first) for the classic protocol, the brokers'
#: default ``group.consumer.assignors`` (uniform first) for the consumer protocol.
PROTOCOL_LABELS = {
    CLASSIC: "classic protocol, range assignor (eager)",
    CONSUMER: "consumer protocol, uniform assignor (incremental)",
}

#: Seconds between polling rounds over all members when no callback is due. A round of
#: ``poll(0)`` costs well under a millisecond; the pause keeps this loop from taking a core
#: from the broker while adding at most this much to each figure.
POLL_PAUSE_S = 0.002

#: Seconds either phase may take before the step fails.
STABLE_TIMEOUT_S = 120.0


class NotStableError(RuntimeError):
    """The group did not reach its even assignment in time."""


@dataclass(frozen=True)
class Phase:
    """One phase of a group's life: seconds until it was stable, and the broker's CPU seconds
    meanwhile."""

    seconds: float
    broker_cpu_s: float


@dataclass(frozen=True)
class GroupTimes:
    """One measured group: from the first member's start, and from the leaving member's
    ``close()``, until stable."""

    join: Phase
    leave: Phase


def member_config(bootstrap: str, group: str, protocol: str, heartbeat_ms: int) -> dict[str, Any]:
    """One member's settings. With the consumer protocol the heartbeat interval, session
    timeout and assignor are the broker's (``group.consumer.*``); with the classic protocol the
    client sets its heartbeat interval, here the same as the brokers give consumer-protocol
    members, so that neither protocol waits longer for members to notice a rebalance."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,  # no offset commits beside the group protocol
    }
    if protocol == CONSUMER:
        config["group.protocol"] = CONSUMER
    else:
        config["heartbeat.interval.ms"] = heartbeat_ms
    return config


class Member:
    """One consumer, and the partitions its rebalance callbacks say it owns."""

    def __init__(self, config: dict[str, Any], topic: str) -> None:
        self.owned: set[int] = set()
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned |= {tp.partition for tp in partitions}

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Also called for lost partitions (no on_lost callback is given).
        self.owned -= {tp.partition for tp in partitions}

    def poll(self) -> None:
        """Serve this member's callbacks. The topic has no records, so only errors come back:
        a fatal one fails the step, librdkafka retries after the others itself."""
        message = self.consumer.poll(0)
        if message is not None and message.error() is not None and message.error().fatal():
            raise NotStableError(f"member failed: {message.error()}")


class Group:
    """``members`` consumers of one new group on ``topic``, which has ``partitions``;
    ``cpu_seconds`` reads the broker's CPU time."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        protocol: str,
        members: int,
        partitions: int,
        heartbeat_ms: int,
        cpu_seconds: Callable[[], float],
    ) -> None:
        self.config = member_config(
            bootstrap, f"bench-{protocol}-{uuid.uuid4().hex[:8]}", protocol, heartbeat_ms
        )
        self.topic, self.size, self.partitions = topic, members, partitions
        self.cpu_seconds = cpu_seconds
        self.live: list[Member] = []

    def balanced(self) -> bool:
        """Every partition owned by exactly one live member, each owning its even share."""
        counts = [len(member.owned) for member in self.live]
        share, extra = divmod(self.partitions, len(self.live))
        if min(counts) < share or max(counts) > share + (extra > 0):
            return False
        owned = set().union(*(member.owned for member in self.live))
        return sum(counts) == len(owned) == self.partitions

    def until_balanced(self, change: Callable[[], None]) -> Phase:
        """Make ``change`` to the group; the phase until it is ``balanced``."""
        cpu, started = self.cpu_seconds(), time.perf_counter()
        change()
        self.poll_until(self.balanced, "stable")
        return Phase(time.perf_counter() - started, self.cpu_seconds() - cpu)

    def poll_until(self, done: Callable[[], bool], what: str) -> None:
        """Poll every live member in turn until ``done()``."""
        deadline = time.monotonic() + STABLE_TIMEOUT_S
        while True:
            for member in self.live:
                member.poll()
            if done():
                return
            if time.monotonic() > deadline:
                counts = sorted(len(member.owned) for member in self.live)
                raise NotStableError(
                    f"{self.config['group.id']} not {what} after {STABLE_TIMEOUT_S:g} s: "
                    f"{len(self.live)} members own {counts} of {self.partitions} partitions"
                )
            time.sleep(POLL_PAUSE_S)

    def start_members(self) -> None:
        """Create every member; each subscribes (and so starts joining) as it is created."""
        self.live = [Member(self.config, self.topic) for _ in range(self.size)]

    def join(self) -> Phase:
        """Start every member; the phase until the group is stable."""
        return self.until_balanced(self.start_members)

    def leave_one(self) -> Phase:
        """Close one member (it leaves the group); the phase until the others are stable again.

        ``close()`` blocks until the member has left; it runs on a thread of its own so the
        others are polled meanwhile (confluent-kafka releases the GIL while it waits). The
        member was polled just before, in a stable group, so no rebalance callback is
        pending in it (see ``close``).
        """
        leaver = self.live.pop()
        closing = threading.Thread(target=leaver.consumer.close, name="leaver", daemon=True)
        phase = self.until_balanced(closing.start)
        closing.join(STABLE_TIMEOUT_S)
        if closing.is_alive():
            raise NotStableError(f"close() of a member of {self.config['group.id']} hangs")
        return phase

    def close(self) -> None:
        """Take the remaining members out of the group, then close them (unmeasured).

        ``close()`` must not find a rebalance callback pending: librdkafka can then hang in
        it for good (confluentinc/librdkafka#4884), and members closed one after the other
        would queue some as the others leave. So every member unsubscribes first and is
        polled until it has given up all its partitions.
        """
        for member in self.live:
            member.consumer.unsubscribe()
        self.poll_until(lambda: not any(member.owned for member in self.live), "empty")
        for member in self.live:
            member.consumer.close()
        self.live = []


def measure(
    bootstrap: str,
    topic: str,
    protocol: str,
    members: int,
    partitions: int,
    heartbeat_ms: int,
    cpu_seconds: Callable[[], float],
) -> GroupTimes:
    """A new group of ``members`` on ``topic``: its time to stable, then its time to stable
    again after one member leaves; then the others leave too. ``cpu_seconds`` reads the
    broker's CPU time."""
    group = Group(bootstrap, topic, protocol, members, partitions, heartbeat_ms, cpu_seconds)
    try:
        joined = group.join()
        left = group.leave_one()
    finally:
        group.close()
    return GroupTimes(joined, left)
