"""Registering this broker under ``/brokers/ids/<id>``, across a restart after a crash.

A broker killed without closing its ZooKeeper session leaves its ephemeral
registration behind until the session expires (``zookeeper.session.timeout.ms``).
Kafka refuses to start then; a restarted kpybroker waits for the old session to
expire instead, so that a supervisor can restart it at once. The controller
sees the old registration go and elects other leaders meanwhile, exactly as if
the broker had stayed down that long.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from kpybroker.metadata.cluster_metadata import ClusterMetadata
from kpybroker.metadata.model import BrokerIdInUseError, Endpoint

log = logging.getLogger(__name__)

RETRY_INTERVAL_S = 0.2


async def register(
    cluster: ClusterMetadata,
    broker_id: int,
    endpoints: Sequence[Endpoint],
    rack: str | None,
    wait_s: float,
) -> None:
    """Register, waiting up to ``wait_s`` for a previous session's registration to expire.

    Raises ``BrokerIdInUseError`` when the id is still taken after that: another
    live broker has it.
    """
    deadline = time.monotonic() + wait_s
    logged = False
    while True:
        try:
            await cluster.register_broker(broker_id, endpoints, rack)
            return
        except BrokerIdInUseError:
            if time.monotonic() > deadline:
                raise
            if not logged:
                log.warning(
                    "broker id %d is still registered by an earlier session; waiting up to "
                    "%.0f s for it to expire",
                    broker_id,
                    wait_s,
                )
                logged = True
            await asyncio.sleep(RETRY_INTERVAL_S)
