"""Transactions on the cluster side: markers written acks=all by the replica manager, and
what Fetch, ListOffsets and DescribeProducers answer for a partition with transactions
(real partitions and logs behind the handlers' fake services)."""

import asyncio

from kpybroker.apis.fetch import handle_fetch
from kpybroker.apis.support.context import RequestContext
from kpybroker.cluster.partition import Partition
from kpybroker.cluster.replica_manager import ReplicaManager
from kpybroker.metadata.model import PartitionMetadata, PartitionState
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import describe_producers, fetch, list_offsets
from kpybroker.protocol.records import iter_batches
from tests.helpers.fake_services import FakeReplicas, FakeTopics, call, services, topic_of
from tests.helpers.log_builders import batch, open_log
from tests.unit.test_log_transactions import txn_batch

ME = 1


def leader(tmp_path, isr=(ME,), min_isr: int = 1) -> Partition:
    p = Partition(open_log(tmp_path / "t-0"), "t", 0, b"\x01" * 16, ME, min_isr)
    p.apply(PartitionMetadata(0, (1, 2), PartitionState(ME, 3, isr, 1), 0))
    return p


def manager_with(p: Partition) -> ReplicaManager:
    manager = ReplicaManager(ME)
    manager.partitions[("t", 0)] = p
    return manager


async def marker(manager: ReplicaManager, *args, **kwargs) -> ErrorCode:
    """``append_txn_marker``'s answer, awaited if it is not known at once."""
    outcome = manager.append_txn_marker(*args, **kwargs)
    return outcome if isinstance(outcome, ErrorCode) else await outcome


def test_a_marker_is_answered_once_the_high_watermark_passes_it(tmp_path) -> None:
    async def main() -> None:
        p = leader(tmp_path, isr=(1, 2))
        p.update_follower(2, 0)
        p.append_as_leader(txn_batch(7, 0), required_acks=-1)
        p.update_follower(2, 2)
        assert p.last_stable_offset == 0
        manager = manager_with(p)
        outcome = manager.append_txn_marker("t", 0, 7, 0, 1, False)
        assert not isinstance(outcome, ErrorCode)  # appended; waiting for the follower
        task = asyncio.ensure_future(outcome)
        await asyncio.sleep(0)
        assert not task.done()
        assert p.log.log_end_offset == 3
        assert p.log.read(2, 1000, 3).read_bytes()  # the marker, stamped with epoch 3
        [(_, header)] = list(iter_batches(p.log.read(2, 1000, 3).read_bytes()))
        assert header.is_control and header.partition_leader_epoch == 3
        p.update_follower(2, 3)  # the follower has the marker: HWM and LSO move
        assert await task == ErrorCode.NONE
        assert p.last_stable_offset == p.high_watermark == 3

    asyncio.run(main())


def test_marker_errors_as_kafkas_write_txn_markers(tmp_path) -> None:
    async def main() -> None:
        p = leader(tmp_path)
        manager = manager_with(p)
        assert await marker(manager, "nope", 0, 7, 0, 1, True) == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        p.append_as_leader(txn_batch(7, 0), required_acks=-1)
        # Alone in its ISR: written and committed at once, nothing to await.
        assert manager.append_txn_marker("t", 0, 7, 0, 5, True) == ErrorCode.NONE
        assert await marker(manager, "t", 0, 7, 0, 4, True) == (
            ErrorCode.TRANSACTION_COORDINATOR_FENCED
        )
        manager.set_fenced(True)
        assert await marker(manager, "t", 0, 7, 0, 5, True) == (ErrorCode.NOT_LEADER_OR_FOLLOWER)
        manager.set_fenced(False)
        p.min_insync_replicas = 2
        assert await marker(manager, "t", 0, 7, 0, 5, True) == (ErrorCode.NOT_ENOUGH_REPLICAS)

    asyncio.run(main())


def test_a_marker_waiting_for_followers_times_out(tmp_path) -> None:
    async def main() -> None:
        p = leader(tmp_path, isr=(1, 2))
        p.update_follower(2, 0)
        manager = manager_with(p)
        error = await marker(manager, "t", 0, 7, 0, 1, True, timeout_ms=10)
        assert error == ErrorCode.REQUEST_TIMED_OUT

    asyncio.run(main())


def partition_with_transactions(tmp_path) -> Partition:
    """0-1 aborted by producer 1 (marker 3), 2 plain, 4-5 open (producer 2), 6 plain."""
    p = leader(tmp_path)
    p.append_as_leader(txn_batch(1, 0), required_acks=-1)
    p.append_as_leader(batch(1), required_acks=-1)
    p.append_txn_marker(1, 0, 0, False)
    p.append_as_leader(txn_batch(2, 0), required_acks=-1)
    p.append_as_leader(batch(1), required_acks=-1)
    assert (p.high_watermark, p.last_stable_offset) == (7, 4)
    return p


def fetch_of(isolation_level: int) -> fetch.FetchRequest:
    return fetch.FetchRequest(
        max_wait_ms=0,
        min_bytes=0,
        session_epoch=-1,
        isolation_level=isolation_level,
        topics=[
            fetch.FetchTopic(
                topic="t",
                partitions=[
                    fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def replicas_of(p: Partition) -> FakeReplicas:
    replicas = FakeReplicas()
    replicas.partitions[("t", 0)] = p
    return replicas


def fetched(p: Partition, isolation_level: int) -> fetch.PartitionData:
    """The handler's answer before encoding: its records are file slices of the real log."""
    ctx = RequestContext(services(replicas=replicas_of(p)), 12, 7, "unit-test", "127.0.0.1", "L")
    response = asyncio.run(handle_fetch(ctx, fetch_of(isolation_level)))
    [part] = response.responses[0].partitions
    part.records = part.records.read_bytes()
    return part


def test_read_committed_fetch_stops_at_the_lso_and_lists_the_aborts(tmp_path) -> None:
    part = fetched(partition_with_transactions(tmp_path), 1)
    assert (part.high_watermark, part.last_stable_offset) == (7, 4)
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(1, 0)]
    assert max(h.last_offset for _, h in iter_batches(bytes(part.records))) == 3


def test_read_uncommitted_fetch_reads_to_the_hwm_and_reports_the_real_lso(tmp_path) -> None:
    part = fetched(partition_with_transactions(tmp_path), 0)
    assert (part.high_watermark, part.last_stable_offset) == (7, 4)
    assert part.aborted_transactions is None
    assert max(h.last_offset for _, h in iter_batches(bytes(part.records))) == 6


def test_list_offsets_latest_is_the_lso_under_read_committed(tmp_path) -> None:
    p = partition_with_transactions(tmp_path)
    answers = []
    for isolation_level in (0, 1):
        request = list_offsets.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[
                list_offsets.ListOffsetsTopic(
                    name="t",
                    partitions=[list_offsets.ListOffsetsPartition(partition_index=0, timestamp=-1)],
                )
            ],
        )
        [topic] = call(services(replicas=replicas_of(p)), request, 8).topics
        answers.append(topic.partitions[0].offset)
    assert answers == [7, 4]


def test_describe_producers_reports_the_open_transaction(tmp_path) -> None:
    p = partition_with_transactions(tmp_path)
    request = describe_producers.DescribeProducersRequest(
        topics=[describe_producers.TopicRequest(name="t", partition_indexes=[0])]
    )
    svc = services(replicas=replicas_of(p), topics=FakeTopics(topic_of("t")))
    [topic] = call(svc, request, 0).topics
    states = {s.producer_id: s for s in topic.partitions[0].active_producers}
    assert states[2].current_txn_start_offset == 4
    assert (states[1].current_txn_start_offset, states[1].coordinator_epoch) == (-1, 0)
