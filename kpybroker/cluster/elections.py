"""Leader elections: the controller's decisions, as pure functions of a partition's state.

They follow Kafka's ZooKeeper-mode controller (``PartitionStateMachine``,
``PartitionLeaderElectionAlgorithms``, ``removeReplicasFromIsr``):

- A dead broker leaves the ISR, unless it is the last member: the last
  replica known to hold everything stays, so that it can lead again when it
  returns (``unclean.leader.election.enable=false`` lets nothing else lead).
- A partition whose leader died gets the first live in-sync replica in
  assignment order; with none, no leader (-1), or with unclean election
  enabled the first live replica, whose log then becomes the truth.
- The preferred leader is the first assigned replica; it takes over when it
  is alive and in sync.
- Every change of leader bumps the leader epoch; an ISR change alone does not.

Each returns the new state, or None when the partition needs no change.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from kpybroker.metadata.model import NO_LEADER, PartitionState
from kpybroker.protocol.errors import ErrorCode, KafkaError


def initial_state(
    replicas: Sequence[int], live: Collection[int], controller_epoch: int
) -> PartitionState | None:
    """The first state of a partition none of whose replicas was alive at creation."""
    isr = tuple(b for b in replicas if b in live)
    return PartitionState(isr[0], 0, isr, controller_epoch) if isr else None


def after_broker_changes(
    replicas: Sequence[int],
    state: PartitionState,
    live: Collection[int],
    unclean: bool,
    controller_epoch: int,
) -> PartitionState | None:
    """The state a partition needs after brokers died or came back (and without ISR
    members that are no longer replicas, should any have slipped in)."""
    isr = tuple(b for b in state.isr if b in live and b in replicas)
    if not isr and state.isr:
        isr = (state.leader,) if state.leader in state.isr else state.isr[-1:]
    leader = state.leader
    if leader not in live:
        candidates = [b for b in replicas if b in live and b in isr]
        if candidates:
            leader = candidates[0]
        elif unclean and (alive := [b for b in replicas if b in live]):
            leader, isr = alive[0], (alive[0],)
        else:
            leader = NO_LEADER
    return _changed(state, leader, isr, controller_epoch)


def preferred(
    replicas: Sequence[int], state: PartitionState, live: Collection[int], controller_epoch: int
) -> PartitionState:
    """Move leadership to the preferred replica (ElectLeaders, auto rebalance).

    Raises ELECTION_NOT_NEEDED when it leads already, PREFERRED_LEADER_NOT_AVAILABLE
    when it is dead or out of sync.
    """
    first = replicas[0] if replicas else NO_LEADER
    if state.leader == first:
        raise KafkaError(ErrorCode.ELECTION_NOT_NEEDED)
    if first not in live or first not in state.isr:
        raise KafkaError(
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"Failed to elect leader for partition under strategy "
            f"PreferredReplicaPartitionLeaderElectionStrategy: preferred replica {first} is "
            f"{'not in the ISR' if first in live else 'offline'}",
        )
    return PartitionState(first, state.leader_epoch + 1, state.isr, controller_epoch)


def unclean(
    replicas: Sequence[int], state: PartitionState, live: Collection[int], controller_epoch: int
) -> PartitionState:
    """Elect a leader for a leaderless partition, out of sync if need be (ElectLeaders).

    Raises ELECTION_NOT_NEEDED when the leader is alive, ELIGIBLE_LEADERS_NOT_AVAILABLE
    when no replica is.
    """
    if state.leader in live:
        raise KafkaError(ErrorCode.ELECTION_NOT_NEEDED)
    decided = after_broker_changes(replicas, state, live, True, controller_epoch)
    if decided is None or decided.leader == NO_LEADER:
        raise KafkaError(
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            "Failed to elect leader for partition under strategy "
            "UncleanPartitionLeaderElectionStrategy: no replica is alive",
        )
    return decided


def _changed(
    state: PartitionState, leader: int, isr: tuple[int, ...], controller_epoch: int
) -> PartitionState | None:
    if (leader, isr) == (state.leader, state.isr):
        return None
    epoch = state.leader_epoch + (leader != state.leader)
    return PartitionState(leader, epoch, isr, controller_epoch)
