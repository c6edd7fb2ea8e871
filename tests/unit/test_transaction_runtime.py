"""The transaction coordinator's runtime with a fake broker: when a version-2 transaction
completes relative to its EndTxn answer, and waiting for a transaction to take partitions
again (``wait_until_free``), which a partition leader does when the first write of a
transaction finds the previous one still writing its markers."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kpybroker.metadata.topic_names import TRANSACTION_STATE_TOPIC
from kpybroker.protocol.errors import ErrorCode
from kpybroker.transaction_coordinator.effects import TxnMarkers
from kpybroker.transaction_coordinator.marker_channel import MarkerChannel
from kpybroker.transaction_coordinator.marker_writer import TxnMarkerWriter
from kpybroker.transaction_coordinator.runtime import TransactionRuntime
from kpybroker.transaction_coordinator.shard import ProducerIdAndEpoch, TransactionShard
from kpybroker.transaction_coordinator.transaction_settings import TransactionSettings
from tests.unit.test_coordinator_runtime import FakeCluster

SETTINGS = TransactionSettings(topic_partitions=1)
TXN = "app"
TP = ("t", 0)
#: Longer than any test runs: a wait that ends was ended by the coordinator.
FOREVER_S = 3600.0


class HeldMarkers:
    """A marker channel that writes nothing until released."""

    def __init__(self) -> None:
        self.released = asyncio.Event()
        self.sent: list[TxnMarkers] = []

    async def send(self, markers: TxnMarkers) -> bool:
        self.sent.append(markers)
        await self.released.wait()
        return True

    def close(self) -> None:
        pass


class AloneReplicas:
    """This broker leads ``TP`` with no followers: every marker is committed as appended."""

    def __init__(self) -> None:
        self.markers: list[tuple[str, int, int, int]] = []

    def append_txn_marker(self, topic, partition, producer_id, producer_epoch, *_rest):
        self.markers.append((topic, partition, producer_id, producer_epoch))
        return ErrorCode.NONE


def local_markers(replicas: AloneReplicas) -> MarkerChannel:
    """The real channel and writer, ``TP`` led here (broker 0)."""
    topics = {TP[0]: SimpleNamespace(partitions={TP[1]: SimpleNamespace(leader=0)})}
    return MarkerChannel(
        0,
        lambda: topics,  # type: ignore[arg-type, return-value]
        lambda broker: None,  # type: ignore[arg-type, return-value]
        TxnMarkerWriter(replicas, groups=None),  # type: ignore[arg-type]
        request_timeout_ms=1000,
        retry_backoff_ms=100,
    )


async def started(markers=None) -> tuple[TransactionRuntime, HeldMarkers, TransactionShard]:
    """A runtime leading the one ``__transaction_state`` partition, alone (every append
    committed at once), with ``markers`` (by default held)."""
    broker = FakeCluster()
    broker.partitions = {(TRANSACTION_STATE_TOPIC, 0): broker.partition}
    broker.partition.high_watermark = 10**9
    markers = HeldMarkers() if markers is None else markers
    runtime = TransactionRuntime(SETTINGS, broker, broker, broker.topics, markers)  # type: ignore[arg-type]
    await runtime.start()
    return runtime, markers, runtime.shard_for(TXN)


async def add(runtime: TransactionRuntime, shard: TransactionShard, producer: ProducerIdAndEpoch):
    return await runtime.call(
        shard, lambda token: shard.add_partitions(token, TXN, producer, [TP], 2)
    )


async def committed_once(
    runtime: TransactionRuntime, shard: TransactionShard
) -> ProducerIdAndEpoch:
    """Open a version-2 transaction on ``TP`` and end it; the producer's bumped epoch."""
    init = await runtime.call(
        shard, lambda token: shard.init_producer_id(token, TXN, 60_000, None, 7)
    )
    producer = ProducerIdAndEpoch(init.producer_id, init.producer_epoch)
    assert await add(runtime, shard, producer) == ErrorCode.NONE
    ended = await runtime.call(shard, lambda token: shard.end_txn(token, TXN, producer, True, 2))
    assert ended.error == ErrorCode.NONE
    return ProducerIdAndEpoch(ended.producer_id, ended.producer_epoch)


def test_local_markers_complete_a_transaction_in_the_step_after_its_answer() -> None:
    """EndTxn is answered before its markers are written, as in Kafka; on a partition led
    here without followers, they and the completion are then written in the event loop's
    next step, before a request read meanwhile is handled: the producer's next write
    never finds the transaction still completing."""

    async def scenario() -> None:
        replicas = AloneReplicas()
        runtime, _markers, shard = await started(local_markers(replicas))
        bumped = await committed_once(runtime, shard)
        assert shard.busy(TXN) and not replicas.markers  # answered first
        await asyncio.sleep(0)  # one step: a request read meanwhile would be handled after it
        assert replicas.markers == [(*TP, bumped.producer_id, bumped.producer_epoch)]
        assert not shard.busy(TXN)
        assert await add(runtime, shard, bumped) == ErrorCode.NONE
        await runtime.stop()

    asyncio.run(scenario())


def test_a_wait_ends_when_the_previous_transaction_is_completed() -> None:
    async def scenario() -> None:
        runtime, markers, shard = await started()
        bumped = await committed_once(runtime, shard)
        # The client has its EndTxn answer; the markers are not written yet.
        assert await add(runtime, shard, bumped) == ErrorCode.CONCURRENT_TRANSACTIONS
        waiting = asyncio.ensure_future(runtime.wait_until_free(TXN, FOREVER_S))
        await asyncio.sleep(0)
        assert not waiting.done() and [m.partitions for m in markers.sent] == [{TP}]
        markers.released.set()
        await asyncio.wait_for(waiting, 10)
        assert not shard.busy(TXN)
        assert await add(runtime, shard, bumped) == ErrorCode.NONE
        assert not runtime._write_waiters  # nothing left behind
        await runtime.stop()

    asyncio.run(scenario())


def test_no_wait_when_free_or_coordinated_elsewhere() -> None:
    async def scenario() -> None:
        runtime, _markers, shard = await started()
        await asyncio.wait_for(runtime.wait_until_free(TXN, FOREVER_S), 10)  # unknown id
        init = await runtime.call(
            shard, lambda token: shard.init_producer_id(token, TXN, 60_000, None, 7)
        )
        assert init.error == ErrorCode.NONE and not shard.busy(TXN)
        await asyncio.wait_for(runtime.wait_until_free(TXN, FOREVER_S), 10)
        await runtime.stop()  # no longer a coordinator at all
        await asyncio.wait_for(runtime.wait_until_free(TXN, FOREVER_S), 10)

    asyncio.run(scenario())


def test_a_wait_still_ends_at_its_timeout() -> None:
    async def scenario() -> None:
        runtime, markers, shard = await started()
        await committed_once(runtime, shard)
        await runtime.wait_until_free(TXN, 0.0)
        assert shard.busy(TXN) and not runtime._write_waiters
        markers.released.set()
        await runtime.stop()

    asyncio.run(scenario())
