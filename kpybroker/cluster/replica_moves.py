"""Partition reassignments: the controller's decisions, as pure functions.

They follow Kafka's (``ReplicationControlManager``, and ZooKeeper mode's
``ReplicaAssignment``): a reassignment to ``target`` makes the replicas
``target`` followed by the original replicas not in it, and records which of
them are being added and which removed. The added replicas start fetching at
once; when every target replica is in the ISR the reassignment completes: the
removed replicas leave the ISR (and leadership, which moves to a target
replica), then the assignment becomes ``target``. A cancellation goes back to
the original replicas in the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kpybroker.metadata.model import NO_LEADER, Assignment, PartitionMetadata, PartitionState
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.topic_admin import check_replica_list


def original_replicas(pm: PartitionMetadata) -> tuple[int, ...]:
    """The replicas before the reassignment in progress (all of them when none is)."""
    return tuple(r for r in pm.replicas if r not in pm.adding)


def target_replicas(pm: PartitionMetadata) -> tuple[int, ...]:
    """Where the partition is headed: its replicas once the reassignment completes."""
    return tuple(r for r in pm.replicas if r not in pm.removing)


def start(
    pm: PartitionMetadata,
    target: Sequence[int] | None,
    brokers: Collection[int],
    allow_replication_factor_change: bool = True,
) -> Assignment:
    """The assignment that starts moving ``pm`` to ``target`` (None: cancel the move).

    Raises Kafka's errors: INVALID_REPLICA_ASSIGNMENT for an empty target, a broker
    twice or an unregistered one; INVALID_REPLICATION_FACTOR when the replica count
    would change and that is not allowed; NO_REASSIGNMENT_IN_PROGRESS for a
    cancellation with nothing to cancel.
    """
    original = original_replicas(pm)
    if target is None:
        if not pm.reassigning:
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
        return Assignment(original)
    target = tuple(target)
    check_replica_list(list(target), list(brokers))
    if not allow_replication_factor_change and len(target) != len(original):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"The replication factor is changed from {len(original)} to {len(target)} but "
            "changing replication factor is not allowed for this reassignment.",
        )
    if target == original:
        return Assignment(original)
    return Assignment(
        target + tuple(r for r in original if r not in target),
        adding=tuple(r for r in target if r not in original),
        removing=tuple(r for r in original if r not in target),
    )


def fitted_state(
    state: PartitionState, replicas: Sequence[int], live: Collection[int], controller_epoch: int
) -> PartitionState | None:
    """The state once only ``replicas`` remain: the others leave the ISR, and a leader
    outside them hands over to the first of them that is alive and in sync, with a
    new leader epoch (None: no change needed). Raises ELIGIBLE_LEADERS_NOT_AVAILABLE
    when none of them could lead."""
    isr = tuple(b for b in state.isr if b in replicas)
    leader = state.leader
    if leader not in replicas:
        candidates = [b for b in replicas if b in isr and b in live]
        if not candidates:
            raise KafkaError(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
        leader = candidates[0]
    if (leader, isr) == (state.leader, state.isr):
        return None
    epoch = state.leader_epoch + (leader != state.leader)
    return PartitionState(leader, epoch, isr or (leader,), controller_epoch)


def ready_to_complete(pm: PartitionMetadata) -> bool:
    """A reassignment in progress whose every target replica is in sync."""
    if not pm.reassigning or pm.state is None or pm.state.leader == NO_LEADER:
        return False
    return all(r in pm.state.isr for r in target_replicas(pm))
