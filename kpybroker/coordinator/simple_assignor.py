"""The share group assignor ``simple`` (Kafka's ``SimpleAssignor``, KIP-932).

Every assignable partition of a subscribed topic is assigned. Members of a share
group consume a partition together, so when there are more members than
partitions a partition is shared by several of them (four members on a
one-partition topic all get partition 0); with fewer members, each gets its
share of the partitions. The principles are Kafka's
``SimpleHomogeneousAssignmentBuilder`` and ``SimpleHeterogeneousAssignmentBuilder``:

- balance first: each partition is shared by ``ceil(members / partitions)``
  members, and the resulting number of assignments is spread over the members
  so that any two differ by at most one;
- stickiness next: what a member already has is kept unless the balance needs
  it elsewhere (a member with too many partitions, a partition shared too much,
  lose the excess; the missing ones go to the members short of theirs).

When every member subscribes to the same topics (homogeneous) the balance is
over all their partitions together; otherwise it is per topic, among the
members subscribed to it, and the topics' results are combined.

Only *assignable* partitions are handed out: those whose share state the share
coordinator has initialized (Kafka's ``isPartitionAssignable``). Kafka iterates
Java hash sets; here members and partitions are taken in sorted order, so the
same group gives the same assignment every time (which partition a member gets
may differ from Kafka's, never the counts).
"""

from __future__ import annotations

from collections.abc import Mapping

from kpybroker.coordinator.consumer_group import Assignment

NAME = "simple"

TopicPartition = tuple[bytes, int]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def assign(
    subscriptions: Mapping[str, frozenset[bytes]],
    current: Mapping[str, Assignment],
    assignable: Mapping[bytes, frozenset[int]],
) -> dict[str, dict[bytes, frozenset[int]]]:
    """Every member's new target.

    ``subscriptions``: member ID -> the IDs of the existing topics it subscribes to;
    ``current``: each member's previous target; ``assignable``: topic ID -> its
    partitions that may be assigned.
    """
    members = sorted(subscriptions)
    targets: dict[str, set[TopicPartition]] = {m: set() for m in members}
    topic_sets = {subscriptions[m] for m in members}
    if len(topic_sets) == 1:
        (topics,) = topic_sets
        _balance(members, _partitions(topics, assignable), current, targets)
    else:
        for topic_id in sorted(set().union(*topic_sets)):
            subscribed = [m for m in members if topic_id in subscriptions[m]]
            _balance(subscribed, _partitions({topic_id}, assignable), current, targets)
    return {member: _by_topic(partitions) for member, partitions in targets.items()}


def _partitions(
    topics: frozenset[bytes] | set[bytes], assignable: Mapping[bytes, frozenset[int]]
) -> list[TopicPartition]:
    return [(t, p) for t in sorted(topics) for p in sorted(assignable.get(t, ()))]


def _by_topic(partitions: set[TopicPartition]) -> dict[bytes, frozenset[int]]:
    grouped: dict[bytes, set[int]] = {}
    for topic_id, partition in partitions:
        grouped.setdefault(topic_id, set()).add(partition)
    return {t: frozenset(ps) for t, ps in sorted(grouped.items())}


def _balance(
    members: list[str],
    partitions: list[TopicPartition],
    current: Mapping[str, Assignment],
    targets: dict[str, set[TopicPartition]],
) -> None:
    """Assign ``partitions`` among ``members``, adding to ``targets``: the four steps of
    Kafka's builders (keep what is still assignable, trim overfilled members, trim
    over-shared partitions, fill what is missing)."""
    if not members or not partitions:
        return
    wanted = set(partitions)
    sharing = _ceil_div(len(members), len(partitions))
    total = sharing * len(partitions)
    # Member i's quota: the total spread evenly, the remainder to the first ones
    # (Kafka's ceil(precise * (i + 1)) - ceil(precise * i), in integers).
    quota = {
        m: _ceil_div(total * (i + 1), len(members)) - _ceil_div(total * i, len(members))
        for i, m in enumerate(members)
    }
    holders: dict[TopicPartition, set[str]] = {tp: set() for tp in partitions}
    held: dict[str, list[TopicPartition]] = {}
    for member in members:
        previous = current.get(member, {})
        kept = sorted((t, p) for t, ps in previous.items() for p in ps if (t, p) in wanted)
        # 1-2. Keep what is still assignable, no more than the member's quota.
        kept = kept[: quota[member]]
        held[member] = kept
        for tp in kept:
            holders[tp].add(member)
    # 3. A partition shared by more members than the balance wants loses the excess.
    for tp in partitions:
        extra = len(holders[tp]) - sharing
        for member in sorted(holders[tp], reverse=True)[: max(extra, 0)]:
            holders[tp].discard(member)
            held[member].remove(tp)
    # 4. Partitions short of sharers go to members short of their quota, in turn.
    unfilled = [m for m in members if len(held[m]) < quota[m]]
    turn = 0
    for tp in partitions:
        missing = sharing - len(holders[tp])
        tried = 0
        while missing > 0 and unfilled and tried < len(unfilled):
            turn %= len(unfilled)
            member = unfilled[turn]
            if member in holders[tp]:
                turn += 1
                tried += 1
                continue
            holders[tp].add(member)
            held[member].append(tp)
            missing -= 1
            tried = 0
            if len(held[member]) >= quota[member]:
                unfilled.pop(turn)
            else:
                turn += 1
        if not unfilled:
            break
    for member in members:
        targets[member].update(held[member])
