"""The controller's leader elections, as Kafka's ZooKeeper-mode controller decides them."""

import pytest

from kpybroker.cluster import elections
from kpybroker.metadata.model import NO_LEADER, PartitionState
from kpybroker.protocol.errors import ErrorCode, KafkaError

REPLICAS = (1, 2, 3)
EPOCH = 7  # the controller's


def state(leader: int, leader_epoch: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(leader, leader_epoch, isr, controller_epoch=5)


def test_nothing_changes_while_every_replica_lives() -> None:
    assert (
        elections.after_broker_changes(REPLICAS, state(1, 4, (1, 2, 3)), {1, 2, 3}, False, EPOCH)
        is None
    )


def test_a_dead_follower_leaves_the_isr_without_a_new_epoch() -> None:
    new = elections.after_broker_changes(REPLICAS, state(1, 4, (1, 2, 3)), {1, 3}, False, EPOCH)
    assert new == PartitionState(1, 4, (1, 3), EPOCH)


def test_an_isr_member_that_is_no_longer_a_replica_leaves_the_isr() -> None:
    new = elections.after_broker_changes(REPLICAS, state(1, 4, (1, 2, 9)), {1, 2, 9}, False, EPOCH)
    assert new == PartitionState(1, 4, (1, 2), EPOCH)


def test_a_dead_leader_is_replaced_by_the_first_live_in_sync_replica() -> None:
    new = elections.after_broker_changes(REPLICAS, state(1, 4, (1, 3, 2)), {2, 3}, False, EPOCH)
    assert new == PartitionState(2, 5, (3, 2), EPOCH)  # assignment order picks 2


def test_an_out_of_sync_replica_never_leads_a_clean_election() -> None:
    new = elections.after_broker_changes(REPLICAS, state(1, 4, (1, 2)), {3}, False, EPOCH)
    # The last in-sync replica stays in the ISR, so that it can lead when it returns.
    assert new == PartitionState(NO_LEADER, 5, (1,), EPOCH)
    back = elections.after_broker_changes(REPLICAS, new, {1, 3}, False, EPOCH)
    assert back == PartitionState(1, 6, (1,), EPOCH)


def test_unclean_election_takes_a_live_out_of_sync_replica() -> None:
    new = elections.after_broker_changes(REPLICAS, state(1, 4, (1, 2)), {3}, True, EPOCH)
    assert new == PartitionState(3, 5, (3,), EPOCH)


def test_a_leaderless_partition_stays_so_without_rewrites() -> None:
    leaderless = state(NO_LEADER, 5, (1,))
    assert elections.after_broker_changes(REPLICAS, leaderless, {2, 3}, False, EPOCH) is None


def test_initial_state_waits_for_a_live_replica() -> None:
    assert elections.initial_state(REPLICAS, set(), EPOCH) is None
    assert elections.initial_state(REPLICAS, {3, 2}, EPOCH) == PartitionState(2, 0, (2, 3), EPOCH)


def test_preferred_election() -> None:
    moved = state(2, 4, (2, 3, 1))
    assert elections.preferred(REPLICAS, moved, {1, 2, 3}, EPOCH) == PartitionState(
        1, 5, (2, 3, 1), EPOCH
    )
    with pytest.raises(KafkaError) as exc:
        elections.preferred(REPLICAS, state(1, 4, (1, 2)), {1, 2, 3}, EPOCH)
    assert exc.value.code == ErrorCode.ELECTION_NOT_NEEDED
    for isr, live in (((2, 3), {1, 2, 3}), ((2, 3, 1), {2, 3})):
        with pytest.raises(KafkaError) as exc:
            elections.preferred(REPLICAS, state(2, 4, isr), live, EPOCH)
        assert exc.value.code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election_on_request() -> None:
    with pytest.raises(KafkaError) as exc:
        elections.unclean(REPLICAS, state(1, 4, (1,)), {1, 2}, EPOCH)
    assert exc.value.code == ErrorCode.ELECTION_NOT_NEEDED
    assert elections.unclean(REPLICAS, state(NO_LEADER, 4, (1,)), {2}, EPOCH).leader == 2
    with pytest.raises(KafkaError) as exc:
        elections.unclean(REPLICAS, state(NO_LEADER, 4, (1,)), set(), EPOCH)
    assert exc.value.code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
