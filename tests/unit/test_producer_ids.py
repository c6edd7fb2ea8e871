"""ProducerIdManager: blocks of producer IDs claimed in the metadata store."""

import asyncio

from kpybroker.metadata.builtin import BuiltinMetadataStore
from kpybroker.producer_ids import BLOCK_SIZE, ProducerIdManager


def ids_after(tmp_path, reserved: int, count: int) -> list[int]:
    """The first ``count`` IDs two brokers hand out after one reserved through ``reserved``."""

    async def run() -> list[int]:
        store = BuiltinMetadataStore(tmp_path)
        await store.start()
        try:
            first, second = ProducerIdManager(store, 1), ProducerIdManager(store, 2)
            await first.reserve_through(reserved)
            return [await first.next_id(), await second.next_id()][:count]
        finally:
            await store.close()

    return asyncio.run(run())


def test_blocks_follow_one_another(tmp_path) -> None:
    assert ids_after(tmp_path, -1, 2) == [0, BLOCK_SIZE]


def test_ids_of_adopted_logs_are_never_handed_out(tmp_path) -> None:
    # Producer 41 came with a log copied from Kafka: every broker starts above it.
    assert ids_after(tmp_path, 41, 2) == [42, 42 + BLOCK_SIZE]


def test_a_reservation_below_the_claimed_blocks_changes_nothing(tmp_path) -> None:
    ids_after(tmp_path / "store", 2500, 2)  # claims up to 2500 + 2 blocks
    assert ids_after(tmp_path / "store", 7, 2) == [2501 + 2 * BLOCK_SIZE, 2501 + 3 * BLOCK_SIZE]
