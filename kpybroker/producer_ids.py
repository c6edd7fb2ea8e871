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
            try:
                data, stat = await self.store.get(BLOCK_PATH)
            except NoNodeError:
                start, version = 0, None
            else:
                start, version = int(json.loads(data)["block_end"]) + 1, stat.version
            end = start + BLOCK_SIZE - 1
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
                continue  # another broker claimed it first; read again
            return start, end
