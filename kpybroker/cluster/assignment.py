"""Where a new partition's replicas go: Kafka's ``AdminUtils.assignReplicasToBrokers``.

Leaders go round-robin from a random broker; each partition's followers
follow its leader at a shift that grows every full round, so that replicas
of consecutive partitions do not pile onto the same brokers. When brokers
have racks (``broker.rack``), brokers are first listed alternating between
racks, and a follower is skipped while its rack already holds a replica and
some rack holds none, so that each partition spans as many racks as it can.
As in KRaft, a broker without a rack counts as a rack of its own kind.
"""

from __future__ import annotations

import random
from collections.abc import Mapping


def assign_replicas(
    racks: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    first_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for ``partitions`` new partitions, numbered from ``first_partition``.

    ``racks`` maps every live broker to its rack (None: none); the caller has
    checked that there are at least ``replication_factor`` brokers.
    """
    rng = rng or random.Random()
    if all(rack is None for rack in racks.values()):
        brokers = sorted(racks)
        rack_of = dict.fromkeys(brokers, "")
    else:
        rack_of = {broker: rack or "" for broker, rack in racks.items()}
        brokers = _rack_alternated(rack_of)
    n = len(brokers)
    n_racks = len(set(rack_of.values()))
    start = rng.randrange(n)
    shift = rng.randrange(n)
    assignment = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [brokers[first]]
        k = 0
        while len(replicas) < replication_factor:
            broker = brokers[_replica_index(first, shift * n_racks, k, n)]
            k += 1
            used_racks = {rack_of[b] for b in replicas}
            rack_taken = rack_of[broker] in used_racks and len(used_racks) < n_racks
            if broker not in replicas and not rack_taken:
                replicas.append(broker)
        assignment[p] = replicas
    return assignment


def _replica_index(first: int, shift: int, k: int, n: int) -> int:
    return (first + 1 + (shift + k) % (n - 1)) % n if n > 1 else first


def _rack_alternated(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers taken from each rack in turn, racks and brokers in order (Kafka's
    ``getRackAlternatedBrokerList``): [a1, b1, c1, a2, b2, ...]."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(rack_of):
        by_rack.setdefault(rack_of[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max(len(column) for column in columns)
    return [column[i] for i in range(depth) for column in columns if i < len(column)]
