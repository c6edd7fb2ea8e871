"""Producer IDs for idempotent producers, claimed in blocks from the metadata store.

Kafka's ZooKeeper mode kept the last claimed block in
``/latest_producer_id_block`` and every broker claimed the next 1000 IDs
with a compare-and-set on that node, so IDs stay unique across brokers and
restarts. This is the same scheme, behind the store interface.
"""

from __future__ import annotations

import asyncio
import json

from kpybroker.metadata.store import BadVersionError, MetadataStore, NodeExistsError, NoNodeError

BLOCK_PATH = "/latest_producer_id_block"
BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore, broker_id: int) -> None:
        self.store = store
        self.broker_id = broker_id
        self.next = 0
        self.end = -1  # last ID of the claimed block
        self.lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self.lock:
            if self.next > self.end:
                self.next, self.end = await self.claim_block()
            producer_id = self.next
            self.next += 1
            return producer_id

    async def claim_block(self) -> tuple[int, int]:
        while True:
            block_end, version = await self._block_end_and_version()
            start, end = block_end + 1, block_end + BLOCK_SIZE
            if await self._write_block(start, end, version):
                return start, end

    async def reserve_through(self, producer_id: int) -> None:
        """Make every block claimed from now on start above ``producer_id``.

        The IDs in the producer state of logs this broker loaded are in use: logs
        adopted from another cluster (a migration from Kafka) bring producers whose
        IDs this cluster never handed out, and a new producer given one of them
        would collide with its sequence numbers.
        """
        while True:
            block_end, version = await self._block_end_and_version()
            if block_end >= producer_id:
                return
            if await self._write_block(block_end + 1, producer_id, version):
                return

    async def _block_end_and_version(self) -> tuple[int, int | None]:
        """The last ID of the latest claimed block (-1 before any), and its node's version."""
        try:
            data, stat = await self.store.get(BLOCK_PATH)
        except NoNodeError:
            return -1, None
        return int(json.loads(data)["block_end"]), stat.version

    async def _write_block(self, start: int, end: int, version: int | None) -> bool:
        """Record ``[start, end]`` as the latest block; False if another broker wrote first."""
        payload = json.dumps(
            {
                "version": 1,
                "broker": self.broker_id,
                "block_start": str(start),
                "block_end": str(end),
            }
        ).encode()
        try:
            if version is None:
                await self.store.create(BLOCK_PATH, payload)
            else:
                await self.store.set(BLOCK_PATH, payload, version=version)
        except (BadVersionError, NodeExistsError):
            return False  # another broker claimed it first; read again
        return True
