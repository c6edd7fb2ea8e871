"""Creating many partitions as a client would, and timing until every one is served.

Shared by workloads 5 and 15 of ``scripts/bench`` and by ``scripts/bench_partition_creation.py``.

The two brokers answer CreateTopics at different points: Kafka in KRaft mode once its
controller has committed the topics (its brokers make the logs afterwards), kpybroker once
the answering broker's logs exist. Neither answer, nor leaders in Metadata, is the same
moment in both. Being served is: each partition's leader answers ListOffsets for it, and
the asked broker's Metadata lists all of its replicas in its ISR. That is what the
creation figures compare.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable

from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from benchlib.clusters import metadata
from kpybroker.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from tests.helpers.groups_wire import Wire

#: Seconds a broker may take to answer (CreateTopics' timeout_ms).
TIMEOUT_S = 1800
#: The ListOffsets version of Kafka 4's clients.
LIST_OFFSETS_VERSION = 9
#: Kafka 4's bound on one request: metadata records of a CreateTopics (a topic and each
#: of its partitions), partitions added by a CreatePartitions.
REQUEST_LIMIT = 10_000
#: The topic config whose record brings one more with it in Kafka's controller.
MIN_INSYNC_REPLICAS = "min.insync.replicas"
#: Seconds between the polls for served partitions.
POLL_S = 0.05
#: Seconds between Metadata refreshes while waiting for the leaders to serve.
LEADERS_REFRESH_S = 1.0

#: One CreateTopics or CreatePartitions request, sent by an admin client; its futures.
Request = Callable[[AdminClient], dict]


def create_requests(
    sizes: dict[str, int], replication: int, config: dict[str, str] | None = None
) -> list[Request]:
    """CreateTopics requests making these topics, each within Kafka's bound on the
    metadata records of one request: a record for each topic, each of its partitions and
    each of its ``config`` entries, and with ``min.insync.replicas`` among them one more
    (Kafka 4's controller clears the topic's eligible leader replicas with a record of its
    own). A topic of at most 9,999 partitions without a config."""
    config = config or {}
    made: list[Request] = []
    batch: list[NewTopic] = []
    records = 0
    for name, size in sizes.items():
        topic_records = 1 + size + len(config) + (MIN_INSYNC_REPLICAS in config)
        if batch and records + topic_records > REQUEST_LIMIT:
            made.append(functools.partial(_create, batch))
            batch, records = [], 0
        batch.append(NewTopic(name, size, replication, config=config))
        records += topic_records
    if batch:
        made.append(functools.partial(_create, batch))
    return made


def grow_requests(current: dict[str, int], sizes: dict[str, int]) -> list[Request]:
    """CreatePartitions requests growing topics from their ``current`` size to ``sizes``,
    each adding at most Kafka's bound of partitions, and naming a topic at most once."""
    made: list[Request] = []
    batch: list[NewPartitions] = []
    room = REQUEST_LIMIT
    for name, size in sizes.items():
        count = current[name]
        while count < size:
            if room == 0:
                made.append(functools.partial(_grow, batch))
                batch, room = [], REQUEST_LIMIT
            step = min(size - count, room)
            count += step
            room -= step
            batch.append(NewPartitions(name, count))
    if batch:
        made.append(functools.partial(_grow, batch))
    return made


def _create(topics: list[NewTopic], admin: AdminClient) -> dict:
    return admin.create_topics(topics, operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)


def _grow(growth: list[NewPartitions], admin: AdminClient) -> dict:
    return admin.create_partitions(growth, operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)


def send(admin: AdminClient, requests: list[Request]) -> None:
    """Each request in turn, once the one before is answered; KafkaException if one fails."""
    for request in requests:
        for future in request(admin).values():
            future.result(TIMEOUT_S)


def admin_client(bootstrap: str) -> AdminClient:
    """An admin client that waits as long as a broker busy creating partitions may take,
    and does not log the reconnects of a client outliving its brokers."""
    return AdminClient(
        {"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000, "log_level": 0}
    )


def create_until_served(
    bootstrap: str, probed: str, sizes: dict[str, int], replication: int,
    config: dict[str, str] | None = None,
) -> float:  # fmt: skip
    """Create these topics in as few requests as Kafka's bounds allow, one after the other;
    the seconds from the first request until every partition is served (``wait_all_served``,
    asking ``probed``)."""
    admin = admin_client(bootstrap)
    started = time.monotonic()
    send(admin, create_requests(sizes, replication, config))
    wait_all_served(probed, sizes, replication)
    return time.monotonic() - started


def wait_all_served(probed: str, sizes: dict[str, int], replication: int) -> None:
    """Until every partition of ``sizes`` is served: its leader answers ListOffsets for
    it without error, and the ``probed`` broker's Metadata lists ``replication`` replicas
    in its ISR.

    Both controllers put every live replica in a new partition's ISR, and a leader drops a
    follower that has not fetched for ``replica.lag.time.max.ms``.
    """
    wait_leaders_serve(probed, sizes)
    while not isr_full(probed, list(sizes), replication):
        time.sleep(POLL_S)


def wait_leaders_serve(probed: str, sizes: dict[str, int]) -> None:
    """Until each partition's leader answers ListOffsets for it, asked every ``POLL_S``
    (no client's retry back-off in the way); the leaders as the probed broker tells."""
    waiting = {name: set(range(size)) for name, size in sizes.items()}
    leaders: dict[tuple[str, int], int] = {}
    addresses: dict[int, str] = {}
    refreshed = 0.0
    with contextlib.ExitStack() as stack:
        wires: dict[int, Wire] = {}
        while waiting:
            unled = any((n, p) not in leaders for n, ps in waiting.items() for p in ps)
            if unled or time.monotonic() - refreshed > LEADERS_REFRESH_S:
                answer = metadata(probed, list(waiting))
                addresses = {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}
                leaders = {
                    (t.name, p.partition_index): p.leader_id
                    for t in answer.topics
                    for p in t.partitions
                    if p.leader_id >= 0
                }
                refreshed = time.monotonic()
            by_leader: dict[int, dict[str, list[int]]] = {}
            for name, ps in waiting.items():
                for p in ps:
                    if (leader := leaders.get((name, p))) is not None:
                        by_leader.setdefault(leader, {}).setdefault(name, []).append(p)
            for leader, topics in by_leader.items():
                if leader not in wires:
                    wires[leader] = stack.enter_context(
                        Wire(addresses[leader], client_id="creation-bench")
                    )
                for topic in wires[leader].call(list_offsets(topics), LIST_OFFSETS_VERSION).topics:
                    waiting[topic.name] -= {
                        p.partition_index for p in topic.partitions if p.error_code == 0
                    }
            waiting = {name: ps for name, ps in waiting.items() if ps}
            if waiting:
                time.sleep(POLL_S)


def list_offsets(partitions: dict[str, list[int]]) -> ListOffsetsRequest:
    """A consumer's ListOffsets for the latest offset of these partitions."""
    return ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=name,
                partitions=[ListOffsetsPartition(partition_index=p, timestamp=-1) for p in ps],
            )
            for name, ps in partitions.items()
        ],
    )


def isr_full(probed: str, topics: list[str], replication: int) -> bool:
    """Whether the probed broker's Metadata lists ``replication`` replicas in the ISR of
    every partition of ``topics``."""
    return all(
        len(p.isr_nodes) == replication
        for t in metadata(probed, topics).topics
        for p in t.partitions
    )
