"""Moving a member's current assignment towards its target, one safe step at a time.

Kafka's ``CurrentAssignmentBuilder``. The rule that makes incremental
rebalances safe: a member first gives up what the target takes from it
(UNREVOKED_PARTITIONS, at its old epoch) and only after it reports them gone
does it move to the target epoch; a partition another member still owns is
withheld (UNRELEASED_PARTITIONS) until that member has let it go. Partitions
the member keeps are never taken away in between.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from kpybroker.coordinator.consumer_group import Assignment, ConsumerMember, MemberState
from kpybroker.protocol.errors import ErrorCode, KafkaError

PartitionEpoch = Callable[[bytes, int], int]
Owned = Iterable[tuple[bytes, Iterable[int]]]


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Owned | None,
) -> ConsumerMember:
    """The member's next state; ``owned`` is what it reported owning (None: not reported)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or any(partitions for _, partitions in owned):
        raise KafkaError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "The consumer group member is in a unknown state. The member must abandon all "
            "its partitions and rejoin.",
        )
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: Owned | None, assignment: Assignment) -> bool:
    """Whether the member may still hold any of ``assignment`` (unknown counts as yes)."""
    if owned is None:
        return True
    return any(
        partition in assignment.get(topic_id, ())
        for topic_id, partitions in owned
        for partition in partitions
    )


def _next(
    member: ConsumerMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Owned | None,
) -> ConsumerMember:
    assigned: dict[bytes, frozenset[int]] = {}
    revoking: dict[bytes, frozenset[int]] = {}
    adding: dict[bytes, frozenset[int]] = {}
    unreleased = False
    for topic_id in {*target, *member.assigned}:
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        free = set()
        for partition in wanted - keep:
            if partition_epoch(topic_id, partition) == -1:
                free.add(partition)
            else:
                unreleased = True
        if keep:
            assigned[topic_id] = keep
        if current - keep:
            revoking[topic_id] = current - keep
        if free:
            adding[topic_id] = frozenset(free)
    if revoking and _owns_any(owned, revoking):
        return replace(
            member.with_epoch(member_epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assigned,
            pending_revocation=revoking,
        )
    for topic_id, partitions in adding.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(
        member.with_epoch(target_epoch), state=state, assigned=assigned, pending_revocation={}
    )
