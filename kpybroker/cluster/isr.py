"""In-sync replicas: what a leader knows of its followers, and the ISR changes it writes.

A leader learns a follower's log end offset only from the ``fetch_offset`` of
the follower's Fetch requests (the follower fetches from its log end). As in
Kafka's ``Replica.updateFetchState``, a follower is *caught up* at a fetch that
reaches the leader's log end, or the leader's log end as of the previous fetch;
one that has not been caught up for ``replica.lag.time.max.ms`` is out of sync.
A follower that asks for the leader's end offset once a second is therefore in
sync however slowly records arrive, and one that stops fetching drops out.

The leader writes ISR changes itself, as brokers did in Kafka's ZooKeeper mode:
a compare-and-set on the partition's state znode, at the version it last saw.
A failed compare-and-set means someone (the controller, electing a new leader)
changed the znode meanwhile; the change is dropped, and the watch on the
znode brings the new state, after which the checks run again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kpybroker.metadata.model import PartitionState
from kpybroker.protocol.errors import KafkaError

if TYPE_CHECKING:
    from kpybroker.cluster.partition import Partition
    from kpybroker.metadata.cluster_metadata import ClusterMetadata

log = logging.getLogger(__name__)


def lagging_followers(partition: Partition, now_ms: int, max_lag_ms: int) -> list[int]:
    """The in-sync followers of ``partition`` that fell out of sync."""
    leader_end = partition.log.log_end_offset
    return [
        broker
        for broker in partition.isr
        if broker != partition.broker_id
        and partition.follower(broker).is_lagging(leader_end, now_ms, max_lag_ms)
    ]


class IsrWriter:
    """Writes the ISR changes that leaders decide, one change in flight per partition."""

    def __init__(self, cluster: ClusterMetadata, clock_ms: Callable[[], int]) -> None:
        self.cluster = cluster
        self.clock_ms = clock_ms
        self._tasks: set[asyncio.Task[None]] = set()

    def expand(self, partition: Partition, follower: int) -> None:
        """Add a caught-up follower to the ISR (Kafka's ``maybeExpandIsr``), if its broker
        is registered (``isReplicaIsrEligible``): a broker cut off from ZooKeeper but still
        fetching would otherwise be added back after each shrink by the controller."""
        if follower not in self.cluster.live_brokers():
            return
        self._submit(partition, (*partition.isr, follower), "caught up")

    def shrink(self, partitions: Iterable[Partition], max_lag_ms: int) -> None:
        """Drop lagging followers from the ISR of each partition led here (``maybeShrinkIsr``)."""
        now = self.clock_ms()
        for partition in partitions:
            if partition.is_leader and partition.pending_isr is None:
                lagging = lagging_followers(partition, now, max_lag_ms)
                if lagging:
                    isr = tuple(b for b in partition.isr if b not in lagging)
                    self._submit(partition, isr, f"{lagging} out of sync")

    def _submit(self, partition: Partition, isr: tuple[int, ...], why: str) -> None:
        meta = partition.meta
        if partition.pending_isr is not None or meta.state is None or not partition.is_leader:
            return
        partition.pending_isr = isr
        task = asyncio.create_task(self._write(partition, meta.state, meta.state_version, isr, why))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(
        self,
        partition: Partition,
        state: PartitionState,
        version: int | None,
        isr: tuple[int, ...],
        why: str,
    ) -> None:
        name = f"{partition.topic}-{partition.index}"
        new_state = PartitionState(
            state.leader,
            state.leader_epoch,
            isr,
            state.controller_epoch,
            state.leader_recovery_state,
        )
        try:
            await self.cluster.set_partition_state(
                partition.topic, partition.index, new_state, version
            )
            log.info("%s: ISR %s -> %s (%s)", name, list(state.isr), list(isr), why)
        except KafkaError as exc:
            log.info("%s: ISR change to %s not written: %s", name, list(isr), exc.message)
        except Exception:
            log.exception("%s: ISR change to %s failed", name, list(isr))
        finally:
            partition.pending_isr = None
            partition.maybe_advance_high_watermark()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
