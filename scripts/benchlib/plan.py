"""What a run does: the workloads' sizes, and the settings both brokers run with.

The full plan is issue 7's workloads exactly; ``--quick`` keeps every step
with small counts, so that CI's smoke test exercises the whole script in
about a minute.
"""

from __future__ import annotations

from dataclasses import dataclass


def format_size(size: int) -> str:
    """``1 KiB`` for 1024, else bytes: record sizes as the issue names them."""
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} B"


@dataclass(frozen=True)
class ProduceCase:
    """One ProducerPerformance run (workload 1), read back by ConsumerPerformance (workload 2)."""

    records: int
    record_size: int
    partitions: int

    @property
    def label(self) -> str:
        partitions = "1 partition" if self.partitions == 1 else f"{self.partitions} partitions"
        return f"{self.records:,} x {format_size(self.record_size)}, {partitions}"

    @property
    def megabytes(self) -> float:
        """Payload moved, in MB (10^6 bytes), the unit of the CPU-per-MB figures."""
        return self.records * self.record_size / 1e6


@dataclass(frozen=True)
class AbortedTopic:
    """Workload 7: a topic written in transactions, ``1 in abort_every`` of them aborted, read
    back ``read_committed``. Record ``i`` is in transaction ``i // per_transaction`` and
    partition ``i % partitions``, so every transaction writes to every partition."""

    records: int
    record_size: int
    partitions: int
    per_transaction: int
    abort_every: int = 10

    @property
    def transactions(self) -> int:
        return -(-self.records // self.per_transaction)

    def aborted(self, index: int) -> bool:
        """Whether record ``index`` is in an aborted transaction."""
        return (index // self.per_transaction) % self.abort_every == self.abort_every - 1

    @property
    def committed(self) -> int:
        return sum(1 for i in range(self.records) if not self.aborted(i))

    @property
    def label(self) -> str:
        return (
            f"{self.committed:,} of {self.records:,} x {format_size(self.record_size)} "
            f"committed, {self.partitions} partitions, 1 in {self.abort_every} of "
            f"{self.transactions:,} transactions aborted"
        )

    @property
    def megabytes(self) -> float:
        """Committed payload, in MB: what a read_committed consumer moves."""
        return self.committed * self.record_size / 1e6


@dataclass(frozen=True)
class ShareCase:
    """Workload 11: ``consumers`` share consumers of one new share group read a 1-partition
    topic of ``records`` from the earliest offset (ShareConsumerPerformance ``--threads``)."""

    records: int
    record_size: int
    consumers: int

    @property
    def label(self) -> str:
        return (
            f"{self.records:,} x {format_size(self.record_size)}, 1 partition, "
            f"{self.consumers} share consumers"
        )

    @property
    def megabytes(self) -> float:
        """Payload moved, in MB (10^6 bytes)."""
        return self.records * self.record_size / 1e6


@dataclass(frozen=True)
class StartupPlan:
    """Workload 14: the partitions of its populated case, and the warm starts of each case
    per broker and round (each a sample), after the one cold start."""

    partitions: int
    warm_starts: int


@dataclass(frozen=True)
class ReplicatedPlan:
    """Workload 15, on three brokers: ProducerPerformance runs (acks=all) on topics of
    replication factor 3, after an unrecorded one of ``warmup_records`` (0: none),
    EndToEndLatency runs of ``e2e_records`` at each of ``e2e_record_sizes``,
    ``catch_up``: what is produced while a follower is stopped, and then the creation of
    ``creation_topics`` topics of ``creation_partitions_per_topic`` partitions each."""

    warmup_records: int
    produce_cases: tuple[ProduceCase, ...]
    e2e_records: int
    e2e_record_sizes: tuple[int, ...]
    catch_up: ProduceCase
    creation_topics: int
    creation_partitions_per_topic: int


@dataclass(frozen=True)
class RecoveryPlan:
    """Workload 16: one topic of ``partitions`` partitions holding ``records`` records of
    ``record_size`` bytes, unflushed when the broker is killed."""

    partitions: int
    records: int
    record_size: int


@dataclass(frozen=True)
class CompactionPlan:
    """Workload 17: one partition of ``records`` records of ``record_size`` bytes over
    ``unique_keys`` keys, in segments of ``segment_bytes``."""

    records: int
    record_size: int
    unique_keys: int
    segment_bytes: int


@dataclass(frozen=True)
class Plan:
    """Sizes of every workload of one run."""

    name: str
    rounds: int
    produce_cases: tuple[ProduceCase, ...]
    #: Records of the unrecorded warm-up run (0: none).
    warmup_records: int
    e2e_records: int
    e2e_record_size: int
    librdkafka_records: int
    librdkafka_record_size: int
    librdkafka_partitions: int
    librdkafka_linger_ms: int
    scale_topics: int
    scale_partitions_per_topic: int
    scale_connections: int
    scale_hot_records: int
    metadata_requests: int
    idle_settle_s: float
    #: Workload 6: ProducerPerformance with a transactional id, once per transaction duration.
    txn_produce_case: ProduceCase
    txn_durations_ms: tuple[int, ...]
    #: Records of the unrecorded transactional warm-up (0: none).
    txn_warmup_records: int
    #: Workload 7.
    aborted_topic: AbortedTopic
    #: Workloads 8 and 9: ProducerPerformance, read back by ConsumerPerformance, over each
    #: secured listener.
    secured_cases: tuple[ProduceCase, ...]
    #: Records of the unrecorded warm-up over each secured listener (0: none).
    secured_warmup_records: int
    #: Workload 10: members of each group, partitions of their topic, and groups per
    #: protocol, broker and round (a rebalance's time depends on where each member is in
    #: its heartbeat interval: one group is a noisy sample).
    group_members: int
    group_partitions: int
    groups_per_round: int
    #: Workload 11, and its runs per broker and round (a new share group each).
    share_case: ShareCase
    share_runs_per_round: int
    #: Whether an unrecorded share-group run precedes workload 11 on each broker.
    share_warmup: bool
    #: Workload 12: clients (producers, then consumers, one partition each), seconds each
    #: phase is measured, and how often the consumers' partitions each get a record.
    small_request_clients: int
    small_request_seconds: float
    small_request_tick_s: float
    #: Workload 13: the records (1 KiB) every group reads, and the groups.
    fanout_records: int
    fanout_partitions: int
    fanout_groups: int
    #: Workload 14.
    startup: StartupPlan
    #: Workload 15.
    replicated: ReplicatedPlan
    #: Workload 16.
    recovery: RecoveryPlan
    #: Workload 17.
    compaction: CompactionPlan

    @property
    def scale_partitions(self) -> int:
        return self.scale_topics * self.scale_partitions_per_topic


def _produce_cases(small: int, large: int) -> tuple[ProduceCase, ...]:
    """Issue 7's matrix: {100 B, 1 KiB} x {1, 6} partitions."""
    return tuple(
        ProduceCase(count, size, partitions)
        for count, size in ((small, 100), (large, 1024))
        for partitions in (1, 6)
    )


FULL = Plan(
    name="full",
    rounds=3,
    produce_cases=_produce_cases(1_000_000, 200_000),
    warmup_records=300_000,
    e2e_records=10_000,
    e2e_record_size=100,
    librdkafka_records=1_000_000,
    librdkafka_record_size=100,
    librdkafka_partitions=6,
    librdkafka_linger_ms=5,
    scale_topics=100,
    scale_partitions_per_topic=100,
    scale_connections=10_000,
    scale_hot_records=1_000_000,
    metadata_requests=20,
    idle_settle_s=2.0,
    txn_produce_case=ProduceCase(1_000_000, 100, 6),
    txn_durations_ms=(100, 1000),
    txn_warmup_records=200_000,
    aborted_topic=AbortedTopic(1_000_000, 100, 6, per_transaction=1_000),
    secured_cases=(ProduceCase(1_000_000, 100, 6), ProduceCase(200_000, 1024, 6)),
    secured_warmup_records=200_000,
    group_members=50,
    group_partitions=100,
    groups_per_round=5,
    share_case=ShareCase(200_000, 100, 4),
    share_runs_per_round=3,
    share_warmup=True,
    small_request_clients=200,
    small_request_seconds=20.0,
    small_request_tick_s=0.1,
    fanout_records=200_000,
    fanout_partitions=6,
    fanout_groups=20,
    startup=StartupPlan(partitions=1_000, warm_starts=4),
    replicated=ReplicatedPlan(
        warmup_records=300_000,
        produce_cases=(ProduceCase(1_000_000, 100, 6), ProduceCase(200_000, 1024, 6)),
        e2e_records=10_000,
        e2e_record_sizes=(100, 1024),
        catch_up=ProduceCase(1_000_000, 1000, 2),
        # Issue 17: 10,000 partitions in 100 topics, RF 3.
        creation_topics=100,
        creation_partitions_per_topic=100,
    ),
    # Issue 17: 10 GB in 1,000 partitions.
    recovery=RecoveryPlan(partitions=1_000, records=10_000_000, record_size=1024),
    # Issue 17: 2 GB, 10% unique keys.
    compaction=CompactionPlan(
        records=2_000_000, record_size=1024, unique_keys=200_000, segment_bytes=128 * 1024**2
    ),
)

QUICK = Plan(
    name="quick",
    rounds=1,
    produce_cases=_produce_cases(20_000, 4_000),
    warmup_records=0,
    e2e_records=300,
    e2e_record_size=100,
    librdkafka_records=20_000,
    librdkafka_record_size=100,
    librdkafka_partitions=6,
    librdkafka_linger_ms=5,
    scale_topics=5,
    scale_partitions_per_topic=10,
    scale_connections=50,
    scale_hot_records=20_000,
    metadata_requests=5,
    idle_settle_s=0.5,
    txn_produce_case=ProduceCase(20_000, 100, 6),
    txn_durations_ms=(100, 1000),
    txn_warmup_records=0,
    aborted_topic=AbortedTopic(20_000, 100, 6, per_transaction=500),
    # One case: each step over TLS costs the tools' JVM start and handshakes, whatever the count.
    secured_cases=(ProduceCase(20_000, 100, 6),),
    secured_warmup_records=0,
    group_members=10,
    group_partitions=20,
    groups_per_round=1,
    share_case=ShareCase(20_000, 100, 4),
    share_runs_per_round=1,
    share_warmup=False,
    small_request_clients=10,
    small_request_seconds=2.0,
    small_request_tick_s=0.1,
    fanout_records=5_000,
    fanout_partitions=6,
    fanout_groups=3,
    startup=StartupPlan(partitions=20, warm_starts=1),
    # Seven JVMs and Pythons on the machine: each step as small as still runs it.
    replicated=ReplicatedPlan(
        warmup_records=0,
        produce_cases=(ProduceCase(5_000, 100, 6), ProduceCase(1_000, 1024, 6)),
        e2e_records=100,
        e2e_record_sizes=(100, 1024),
        catch_up=ProduceCase(4_000, 1000, 2),
        creation_topics=5,
        creation_partitions_per_topic=10,
    ),
    recovery=RecoveryPlan(partitions=20, records=20_000, record_size=1024),
    compaction=CompactionPlan(
        records=20_000, record_size=1024, unique_keys=2_000, segment_bytes=1024**2
    ),
)

#: Workload 10: how often group members heartbeat, with either protocol (the classic
#: protocol's members set it themselves). A member learns of a rebalance from its next
#: heartbeat, so this is what most of a rebalance waits for: far below the defaults (3 s
#: for librdkafka's classic members, Kafka's 5 s for consumer-protocol ones), it leaves
#: the brokers' own share visible.
GROUP_HEARTBEAT_MS = 500

#: Both brokers: consumer groups form at once (Kafka's shipped config/server.properties
#: also sets this; its built-in default of 3 s only delays the first join). The
#: ConsumerPerformance figures exclude the join anyway. Consumer-protocol members (only
#: workload 10 has any) heartbeat every ``GROUP_HEARTBEAT_MS``, which Kafka allows only
#: with the minimum lowered as well; and their group's target assignment is computed as
#: soon as its members change. kpybroker always does that; Kafka 4.4 by default computes
#: it at most once a second (``group.consumer.assignment.interval.ms=1000``), which would
#: add that wait to its figures. Share groups (only workload 11 has any) get the same:
#: with Kafka's defaults (``group.share.heartbeat.interval.ms=5000``,
#: ``group.share.assignment.interval.ms=1000``) its share consumers got their partition
#: 5 to 7 s after subscribing, and then read workload 11's 200,000 records in 1.5 s.
COMMON_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": str(GROUP_HEARTBEAT_MS),
    "group.consumer.min.heartbeat.interval.ms": str(GROUP_HEARTBEAT_MS),
    "group.consumer.assignment.interval.ms": "0",
    "group.share.heartbeat.interval.ms": str(GROUP_HEARTBEAT_MS),
    "group.share.min.heartbeat.interval.ms": str(GROUP_HEARTBEAT_MS),
    "group.share.assignment.interval.ms": "0",
}

#: Apache Kafka: what ``config/server.properties`` ships for one KRaft node, where it
#: differs from what tests/helpers/reference_kafka.py sets for quick tests. The
#: replication factors of the internal topics stay 1 (one node), as shipped.
KAFKA_SETTINGS: dict[str, str] = {
    **COMMON_SETTINGS,
    "num.network.threads": "3",
    "num.io.threads": "8",
    "offsets.topic.num.partitions": "50",
    "transaction.state.log.num.partitions": "50",
    "broker.heartbeat.interval.ms": "2000",
    "broker.session.timeout.ms": "9000",
}

#: Both brokers in workload 15's three-node clusters: the replication settings Kafka's own
#: defaults have for three nodes (``SINGLE_NODE_DEFAULTS`` lowers them for one), and the
#: issue's ``min.insync.replicas`` of 2.
REPLICATED_SETTINGS: dict[str, str] = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}

#: ``kafka-server-start.sh``'s heap (``-Xmx1G -Xms1G``).
KAFKA_HEAP = "1g"

#: kpybroker: its defaults (which are Kafka's), plus the common settings.
KPYBROKER_SETTINGS: dict[str, str] = dict(COMMON_SETTINGS)

#: The perf tools' JVM: ``kafka-run-class.sh``'s G1 options and the 512 MiB heap of
#: ``kafka-producer-perf-test.sh`` / ``kafka-consumer-perf-test.sh``.
TOOL_HEAP = "512m"
TOOL_JVM_OPTIONS: tuple[str, ...] = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
)
