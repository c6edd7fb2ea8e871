"""The scripted scenarios, each run against Apache Kafka and against kpybroker.

Every scenario uses its own topics and groups, so the order they run in does
not matter, and records what a client would see after each step: error
codes, offsets, group states, configs. Paths are ``what/step`` so that an
allowlist entry (allowlist.toml) can name exactly one difference.
"""

from __future__ import annotations

import re
import struct
import time
import uuid
from typing import Any

from compat.wire import KafkaConnection
from kpybroker.protocol.messages import (
    alter_configs,
    api_versions,
    create_partitions,
    delete_groups,
    delete_records,
    delete_topics,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    offset_commit,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
)
from kpybroker.protocol.records import iter_batches

from .probe import (
    ABSENT,
    CONFIG_SOURCES,
    CONFIG_TYPES,
    Probe,
    api_name,
    batch,
    error,
    scenario,
)

#: Record timestamps far enough in the past to be stable, within Kafka's default limits.
T0 = 1_700_000_000_000
ZERO_UUID = bytes(16)
CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def uuid_shape(value: bytes) -> str:
    return "zero" if value == ZERO_UUID else "set"


# -- ApiVersions ----------------------------------------------------------------------------


@scenario
def api_versions_ranges(p: Probe) -> None:
    """ApiVersions v0, v3 and v4 ranges per API; an unsupported ApiVersions and Metadata version."""
    request = api_versions.ApiVersionsRequest(
        client_software_name="kpybroker-compat", client_software_version="1.0"
    )
    v3 = p.call(request, 3)
    p.see("v3/error", error(v3.error_code))
    ranges = {k.api_key: f"{k.min_version}-{k.max_version}" for k in v3.api_keys}
    for key in sorted(ranges):
        p.see(f"v3/{api_name(key)}", ranges[key])
    p.see("v3/supported_features", sorted(f.name for f in v3.supported_features))
    p.see("v3/finalized_features", sorted(f.name for f in v3.finalized_features))
    for version in (0, 4, 5):
        other = p.call(request, version)
        p.see(f"v{version}/error", error(other.error_code))
        same = {k.api_key: f"{k.min_version}-{k.max_version}" for k in other.api_keys} == ranges
        p.see(f"v{version}/same ranges as v3", same)
        if version == 4:
            # The one feature kpybroker has: its range, and the level both finalize (2).
            for f in other.supported_features:
                if f.name == "transaction.version":
                    p.see("v4/supported transaction.version", f"{f.min_version}-{f.max_version}")
            for f in other.finalized_features:
                if f.name == "transaction.version":
                    p.see("v4/finalized transaction.version", f.max_version_level)

    # A version higher than any broker knows: a v0 body with error 35 and ApiVersions' range.
    frame = p.raw(18, 127)
    if isinstance(frame, str):
        p.see("v127/answer", frame)
    else:
        _, code, count = struct.unpack_from(">ihi", frame, 0)
        keys = [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)]
        p.see(
            "v127/answer", {"error": error(code), "keys": [f"{k}:{lo}-{hi}" for k, lo, hi in keys]}
        )
    # Any other API at an unsupported version: Kafka closes the connection.
    answer = p.raw(3, 127)
    p.see("Metadata v127", answer if isinstance(answer, str) else "answered")


#: A cluster id no broker of the suite has (22 characters, as Kafka's ids).
ANOTHER_CLUSTER_ID = "AnotherClusterIdXXXXXX"


def versions_for(cluster_id: str | None, node_id: int) -> Any:
    """ApiVersions v5 naming the cluster and node it is meant for (KIP-1242)."""
    return api_versions.ApiVersionsRequest(
        client_software_name="kpybroker-compat",
        client_software_version="1.0",
        cluster_id=cluster_id,
        node_id=node_id,
    )


@scenario
def api_versions_cluster_and_node(p: Probe) -> None:
    """ApiVersions v5 (KIP-1242): the broker's own cluster and node, another of either
    (REBOOTSTRAP_REQUIRED), one without the other (INVALID_REQUEST), neither."""
    described = p.metadata([])
    cluster_id, node_id = described.cluster_id, described.brokers[0].node_id
    steps = {
        "neither": (None, -1),
        "this cluster and node": (cluster_id, node_id),
        "another cluster": (ANOTHER_CLUSTER_ID, node_id),
        "another node": (cluster_id, node_id + 1),
        "cluster id only": (cluster_id, -1),
        "node id only": (None, node_id),
    }
    for label, (cluster, node) in steps.items():
        request = versions_for(cluster, node)
        answer = p.call(request, 5)
        if answer.error_code:
            p.see_whole(f"v5/{label}", request, 5, answer)
        else:  # the ranges are api_versions_ranges' to compare
            p.see(f"v5/{label}/error", error(answer.error_code))
            p.see(f"v5/{label}/lists APIs", bool(answer.api_keys))
        p.see_connection(f"v5/{label}/then")


# -- Metadata -------------------------------------------------------------------------------


def see_topic_metadata(p: Probe, prefix: str, topic: Any) -> None:
    p.see(f"{prefix}/error", error(topic.error_code))
    if hasattr(topic, "topic_id"):
        p.see(f"{prefix}/topic_id", uuid_shape(topic.topic_id))
    p.see(f"{prefix}/is_internal", topic.is_internal)
    if hasattr(topic, "topic_authorized_operations"):
        p.see(f"{prefix}/topic_authorized_operations", topic.topic_authorized_operations)
    p.see(
        f"{prefix}/partitions",
        [
            {
                "partition": part.partition_index,
                "error": error(part.error_code),
                "leader": p.node(part.leader_id),
                "leader_epoch": getattr(part, "leader_epoch", ABSENT),
                "replicas": [p.node(n) for n in part.replica_nodes],
                "isr": [p.node(n) for n in part.isr_nodes],
                "offline": getattr(part, "offline_replicas", ABSENT),
            }
            for part in sorted(topic.partitions, key=lambda x: x.partition_index)
        ],
    )


@scenario
def metadata_shape(p: Probe) -> None:
    """Metadata v12 and v1 of a 3-partition topic, a missing one, an invalid name, auto-creation."""
    p.create_topic("diff-shape", 3)
    response = p.metadata(["diff-shape", "diff-missing", "bad name!"], version=12)
    p.see(
        "v12/brokers",
        [[p.node(b.node_id), p.address(b.host, b.port), b.rack] for b in response.brokers],
    )
    p.see(
        "v12/cluster_id",
        "22-char id" if CLUSTER_ID.match(response.cluster_id or "") else response.cluster_id,
    )
    p.see("v12/controller_id", p.node(response.controller_id))
    for topic in response.topics:
        see_topic_metadata(p, f"v12/{topic.name}", topic)

    old = p.metadata(["diff-shape"], version=1)
    p.see("v1/controller_id", p.node(old.controller_id))
    [topic] = old.topics
    see_topic_metadata(p, "v1/diff-shape", topic)

    everything = p.metadata(None, version=12)
    p.see(
        "v12/all topics include diff-shape", any(t.name == "diff-shape" for t in everything.topics)
    )

    # Auto-creation (Metadata v4+ asks for it explicitly): the first answer, then the settled one.
    [first] = p.metadata(["diff-auto"], version=9, auto_create=True).topics
    p.see("auto/first answer", error(first.error_code))
    p.wait_until_served("diff-auto", 1)
    [settled] = p.metadata(["diff-auto"], version=9).topics
    see_topic_metadata(p, "auto/settled", settled)
    [refused] = p.metadata(["diff-not-auto"], version=9, auto_create=False).topics
    p.see("auto/not allowed", error(refused.error_code))


# -- CreateTopics, CreatePartitions, DeleteTopics --------------------------------------------


@scenario
def topic_admin_errors(p: Probe) -> None:
    """CreateTopics (v7) good and bad, CreatePartitions (v3), DeleteTopics (v6)."""
    created = p.create_topic("diff-admin", 1, {"retention.ms": "7200000"})
    p.see(
        "create/ok", [error(created.error_code), created.num_partitions, created.replication_factor]
    )
    configs = {c.name: c for c in created.configs or []}
    for name in ("retention.ms", "cleanup.policy", "max.message.bytes"):
        entry = configs.get(name)
        p.see(
            f"create/ok/config {name}",
            [entry.value, CONFIG_SOURCES.get(entry.config_source), entry.read_only]
            if entry
            else ABSENT,
        )
    defaults = p.create_topic("diff-defaults", -1, replication=-1)
    p.see(
        "create/defaults",
        [error(defaults.error_code), defaults.num_partitions, defaults.replication_factor],
    )

    cases: dict[str, dict[str, Any]] = {
        "duplicate": {"name": "diff-admin"},
        "zero partitions": {"name": "diff-bad-1", "partitions": 0},
        "negative partitions": {"name": "diff-bad-2", "partitions": -5},
        "replication 3 on one broker": {"name": "diff-bad-3", "replication": 3},
        "replication 0": {"name": "diff-bad-4", "replication": 0},
        "invalid name": {"name": "bad name!"},
        "name '.'": {"name": "."},
        "name of 250 chars": {"name": "x" * 250},
        "colliding name": {"name": "diff.admin"},
        "bad config value": {"name": "diff-bad-5", "configs": {"retention.ms": "soon"}},
        "unknown config": {"name": "diff-bad-6", "configs": {"no.such.config": "1"}},
        "validate only": {"name": "diff-validate", "partitions": 2, "validate_only": True},
    }
    for label, case in cases.items():
        name = case.pop("name")
        result = p.create_topic(name, case.pop("partitions", 1), case.pop("configs", None), **case)
        p.see(f"create/{label}", error(result.error_code))
    [validated] = p.metadata(["diff-validate"]).topics
    p.see("create/validate only leaves no topic", error(validated.error_code))

    def grow(topic: str, count: int) -> str:
        request = create_partitions.CreatePartitionsRequest(
            topics=[
                create_partitions.CreatePartitionsTopic(name=topic, count=count, assignments=None)
            ],
            timeout_ms=30000,
            validate_only=False,
        )
        [result] = p.call(request, 3).results
        return error(result.error_code)

    p.see("partitions/1 to 3", grow("diff-admin", 3))
    p.wait_until_served("diff-admin", 3)
    p.see("partitions/3 to 2", grow("diff-admin", 2))
    p.see("partitions/3 to 3", grow("diff-admin", 3))
    p.see("partitions/unknown topic", grow("diff-missing", 2))

    def delete(topic: str) -> str:
        request = delete_topics.DeleteTopicsRequest(
            topics=[delete_topics.DeleteTopicState(name=topic, topic_id=ZERO_UUID)],
            timeout_ms=30000,
        )
        [result] = p.call(request, 6).responses
        return error(result.error_code)

    p.see("delete/existing", delete("diff-defaults"))
    p.see("delete/unknown", delete("diff-missing"))
    deadline = time.monotonic() + 20
    while (code := p.metadata(["diff-defaults"]).topics[0].error_code) == 0:
        assert time.monotonic() < deadline, "deleted topic still in metadata"
        time.sleep(0.1)
    p.see("delete/metadata afterwards", error(code))


# -- Produce --------------------------------------------------------------------------------


@scenario
def produce_errors(p: Probe) -> None:
    """Produce v9: good batches, then each way a produce can be refused, and old versions."""
    p.create_topic("diff-produce", 2)
    p.create_topic("diff-small", 1, {"max.message.bytes": "1024"})
    p.create_topic("diff-append-time", 1, {"message.timestamp.type": "LogAppendTime"})

    def outcome(part: Any) -> list[Any]:
        return [error(part.error_code), part.base_offset, part.log_start_offset]

    good = batch([b"a", b"b", b"c"])
    p.see("good", outcome(p.produce("diff-produce", 0, good)))
    p.see("good again", outcome(p.produce("diff-produce", 0, batch([b"d", b"e"]))))
    p.see("unknown topic", outcome(p.produce("diff-nope", 0, good)))
    p.see("unknown partition", outcome(p.produce("diff-produce", 7, good)))
    bad_crc = bytearray(good)
    bad_crc[17] ^= 0xFF
    p.see("bad crc", outcome(p.produce("diff-produce", 0, bytes(bad_crc))))
    p.see("garbage bytes", outcome(p.produce("diff-produce", 0, b"\x00" * 70)))
    big = batch([b"x" * 2000])
    p.see("batch over max.message.bytes", outcome(p.produce("diff-small", 0, big)))
    p.see("batch under max.message.bytes", outcome(p.produce("diff-small", 0, batch([b"x" * 500]))))
    huge = batch([bytes(range(256)) * 4500])  # 1.15 MB against the default 1 MB limit
    p.see("batch over the default limit", outcome(p.produce("diff-produce", 1, huge)))
    p.see("acks=2", outcome(p.produce("diff-produce", 0, good, acks=2)))
    future = batch([b"late"], timestamp=int(time.time() * 1000) + 2 * 3600 * 1000)
    p.see("timestamp 2 h ahead", outcome(p.produce("diff-produce", 0, future)))
    stamped = p.produce("diff-append-time", 0, batch([b"t"], timestamp=T0))
    p.see(
        "LogAppendTime",
        [
            error(stamped.error_code),
            "set" if stamped.log_append_time_ms > T0 else stamped.log_append_time_ms,
        ],
    )
    p.see("v3", outcome(p.produce("diff-produce", 1, batch([b"v3"]), version=3)))
    try:
        old = p.produce("diff-produce", 1, batch([b"v2"]), version=2)
        p.see("v2", outcome(old))
    except Exception as exc:  # the broker closed the connection
        p.reconnect()
        p.see("v2", f"closed ({type(exc).__name__})")
    p.see("end offsets", [p.list_offset("diff-produce", n, -1)[1] for n in (0, 1)])


@scenario
def produce_by_topic_id(p: Probe) -> None:
    """Produce v13 names topics by ID: a known ID, an unknown one, the zero UUID."""
    p.create_topic("diff-by-id", 1)
    [topic] = p.metadata(["diff-by-id"], version=12).topics
    data = [produce.PartitionProduceData(index=0, records=batch([b"by id"]))]
    for label, topic_id in [
        ("known id", topic.topic_id),
        ("unknown id", uuid.uuid4().bytes),
        ("zero id", ZERO_UUID),
    ]:
        request = produce.ProduceRequest(
            acks=-1,
            timeout_ms=10000,
            topic_data=[produce.TopicProduceData(topic_id=topic_id, partition_data=data)],
        )
        [answer] = p.call(request, 13).responses
        [part] = answer.partition_responses
        p.see(
            label,
            [
                uuid_shape(answer.topic_id),
                error(part.error_code),
                part.base_offset,
                part.log_start_offset,
            ],
        )
    bad_partition = [produce.PartitionProduceData(index=3, records=batch([b"x"]))]
    request = produce.ProduceRequest(
        acks=1,
        timeout_ms=10000,
        topic_data=[
            produce.TopicProduceData(topic_id=topic.topic_id, partition_data=bad_partition)
        ],
    )
    [answer] = p.call(request, 13).responses
    p.see("known id, unknown partition", error(answer.partition_responses[0].error_code))


# -- ListConfigResources ----------------------------------------------------------------------


@scenario
def config_resources(p: Probe) -> None:
    """ListConfigResources v0 and v1: by type, every type, an unsupported type; a group is
    listed once it has a config."""
    p.create_topic("diff-config-resources", 1)

    def listed(version: int, types: list[int]) -> list[Any]:
        request = list_config_resources.ListConfigResourcesRequest(resource_types=types)
        answer = p.call(request, version)
        found = [
            (r.resource_type, "a broker" if r.resource_type in (4, 8) else r.resource_name)
            for r in answer.config_resources
            if r.resource_type not in (2, 32) or r.resource_name.startswith("diff-config")
        ]
        return [error(answer.error_code), found]

    p.see("v1 [32] before", listed(1, [32]))
    p.see(
        "group config",
        alter_incrementally(p, "diff-config-group", ("consumer.heartbeat.interval.ms", 0, "6000")),
    )
    # Kafka applies the change through its metadata log: wait until it is listed.
    p.retry(lambda: listed(1, [32]), lambda answer: len(answer[1]) == 1, "the group config")
    p.see("v0", listed(0, []))
    for types in ([2], [4], [8], [2, 4], [8, 32, 4], [16], [32], [], [1], [2, 99]):
        p.see(f"v1 {types}", listed(1, types))


# -- Fetch ----------------------------------------------------------------------------------


def fetch_partition(
    p: Probe,
    topic: str,
    partition: int,
    offset: int,
    *,
    version: int = 12,
    topic_id: bytes = ZERO_UUID,
) -> tuple[str, Any]:
    """One partition's Fetch answer: (top-level error, partition data)."""
    request = fetch.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            fetch.FetchTopic(
                topic=topic,
                topic_id=topic_id,
                partitions=[
                    fetch.FetchPartition(
                        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    response = p.call(request, version)
    top = error(getattr(response, "error_code", 0))
    [topic_response] = response.responses
    [data] = topic_response.partitions
    return top, data


@scenario
def fetch_errors(p: Probe) -> None:
    """Fetch v12 (by name) and v13 (by id): in range, at the end, out of range, unknown."""
    p.create_topic("diff-fetch", 2)
    p.produce("diff-fetch", 0, batch([b"%d" % i for i in range(6)]))
    p.produce("diff-fetch", 0, batch([b"more"]))

    def see(
        label: str, offset: int, topic: str = "diff-fetch", partition: int = 0, **kw: Any
    ) -> None:
        top, data = fetch_partition(p, topic, partition, offset, **kw)
        records = bytes(data.records or b"")
        headers = [h for _, h in iter_batches(records)]
        p.see(
            label,
            {
                "top error": top,
                "error": error(data.error_code),
                "high_watermark": data.high_watermark,
                "last_stable_offset": data.last_stable_offset,
                "log_start_offset": data.log_start_offset,
                "batches": [[h.base_offset, h.record_count] for h in headers],
            },
        )

    see("from 0", 0)
    see("from 3 (inside a batch)", 3)
    see("at the end", 7)
    see("past the end", 8)
    see("negative offset", -1)
    see("unknown topic", 0, topic="diff-nope")
    see("unknown partition", 0, partition=9)
    see("empty partition", 0, partition=1)
    see("v4", 0, version=4)
    [meta] = p.metadata(["diff-fetch"]).topics
    see("v13 by id", 0, version=13, topic_id=meta.topic_id)
    see("v13 unknown id", 0, version=13, topic_id=uuid.uuid4().bytes)
    try:
        old = fetch_partition(p, "diff-fetch", 0, 0, version=3)
        p.see("v3", error(old[1].error_code))
    except Exception as exc:
        p.reconnect()
        p.see("v3", f"closed ({type(exc).__name__})")


# -- ListOffsets, DeleteRecords --------------------------------------------------------------


@scenario
def offsets_by_time_and_deletion(p: Probe) -> None:
    """ListOffsets v8 by special and real timestamps; DeleteRecords; offsets after each step."""
    topic = "diff-times"
    p.create_topic(topic, 1)
    steps = [
        ("A", [T0, T0 + 1, T0 + 2]),
        ("B", [T0 + 1000, T0 + 1005]),
        ("C (older timestamp)", [T0 + 500]),
    ]
    for label, stamps in steps:
        from kpybroker.protocol.records import NewRecord, build_batch

        data = build_batch([NewRecord(None, b"v", (), ts) for ts in stamps])
        part = p.produce(topic, 0, data)
        p.see(f"produce {label}", [error(part.error_code), part.base_offset, part.log_start_offset])
        p.see(f"after {label}/latest", p.list_offset(topic, 0, -1))

    queries = {
        "earliest (-2)": -2, "latest (-1)": -1, "max timestamp (-3)": -3,
        "earliest local (-4)": -4, "T0": T0, "T0+2": T0 + 2, "T0+3": T0 + 3,
        "T0+501": T0 + 501, "T0+1001": T0 + 1001, "after the last": T0 + 1006,
    }  # fmt: skip
    for label, timestamp in queries.items():
        p.see(f"query/{label}", p.list_offset(topic, 0, timestamp))
    p.see("query/v1 latest", p.list_offset(topic, 0, -1, version=1))
    p.see("query/unknown partition", p.list_offset(topic, 4, -1))
    p.see("query/unknown topic", p.list_offset("diff-nope", 0, -1))

    def delete_to(offset: int, partition: int = 0) -> list[Any]:
        request = delete_records.DeleteRecordsRequest(
            topics=[
                delete_records.DeleteRecordsTopic(
                    name=topic,
                    partitions=[
                        delete_records.DeleteRecordsPartition(
                            partition_index=partition, offset=offset
                        )
                    ],
                )
            ],
            timeout_ms=30000,
        )
        [result] = p.call(request, 2).topics
        [part] = result.partitions
        return [error(part.error_code), part.low_watermark]

    p.see("delete/to 2", delete_to(2))
    p.see("delete/earliest after", p.list_offset(topic, 0, -2))
    p.see("delete/T0 after", p.list_offset(topic, 0, T0))
    p.see("delete/past the end", delete_to(100))
    p.see("delete/backwards", delete_to(1))
    p.see("delete/unknown partition", delete_to(1, partition=3))
    p.see("delete/to the end (-1)", delete_to(-1))
    part = p.produce(topic, 0, batch([b"after"]))
    p.see(
        "produce after deleting all",
        [error(part.error_code), part.base_offset, part.log_start_offset],
    )

    request = offset_for_leader_epoch.OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            offset_for_leader_epoch.OffsetForLeaderTopic(
                topic=topic,
                partitions=[
                    offset_for_leader_epoch.OffsetForLeaderPartition(partition=0, leader_epoch=e)
                    for e in (0, 5)
                ],
            )
        ],
    )
    [result] = p.call(request, 4).topics
    for part in result.partitions:
        p.see(
            f"leader epoch query {part.partition}/{len(p.observed)}",
            [error(part.error_code), part.leader_epoch, part.end_offset],
        )


# -- Idempotent producer ---------------------------------------------------------------------


@scenario
def idempotent_producer_sequences(p: Probe) -> None:
    """InitProducerId v4; in-order, duplicate, gapped and foreign sequences; offsets after each."""
    topic = "diff-idempotent"
    p.create_topic(topic, 1)
    init = p.retry(
        lambda: p.call(
            init_producer_id.InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=-1
            ),
            4,
        ),
        lambda answer: answer.error_code == 0,
        "InitProducerId",
    )
    p.see(
        "init",
        [
            error(init.error_code),
            "assigned" if init.producer_id >= 0 else init.producer_id,
            init.producer_epoch,
        ],
    )
    pid, epoch = init.producer_id, init.producer_epoch

    def send(label: str, seq: int, count: int, *, producer: int = pid, epoch_: int = epoch) -> None:
        data = batch(
            [b"%d" % (seq + i) for i in range(count)],
            producer_id=producer,
            producer_epoch=epoch_,
            base_sequence=seq,
        )
        part = p.produce(topic, 0, data)
        p.see(label, [error(part.error_code), part.base_offset])
        p.see(f"{label}/latest", p.list_offset(topic, 0, -1)[1])

    send("seq 0-4", 0, 5)
    send("seq 0-4 again (duplicate)", 0, 5)
    send("seq 5-6", 5, 2)
    send("seq 10 (gap)", 10, 1)
    send("seq 3 (old, not the last batch)", 3, 2)
    send("unknown producer id", 0, 1, producer=pid + 1000)
    send("bumped epoch, seq 0", 0, 1, epoch_=epoch + 1)
    send("old epoch", 7, 1)


# -- Classic consumer groups ----------------------------------------------------------------

#: Errors a coordinator gives while it is still loading: clients retry through them.
COORDINATOR_LOADING = (
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
)


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: int16 version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hih", 0, 1, len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", x) for x in partitions)
    return out + struct.pack(">i", -1)


class Member:
    """One classic-protocol group member, with its own connection to the broker.

    ``join``/``sync`` remember the member id and generation the broker gave,
    as a client does; every method also takes explicit values, so scenarios
    can send the wrong ones on purpose.
    """

    def __init__(self, p: Probe, group: str, topic: str) -> None:
        self.p = p
        self.group = group
        self.topic = topic
        self.conn = KafkaConnection(p.bootstrap, client_id="compat-differential")
        self.member_id = ""
        self.generation = -1

    def close(self) -> None:
        self.conn.close()

    def join_request(
        self, *, session: int = 10000, member_id: str | None = None, group: str | None = None
    ) -> Any:
        return join_group.JoinGroupRequest(
            group_id=group or self.group,
            session_timeout_ms=session,
            rebalance_timeout_ms=10000,
            member_id=self.member_id if member_id is None else member_id,
            protocol_type="consumer",
            protocols=[
                join_group.JoinGroupRequestProtocol(name="range", metadata=subscription(self.topic))
            ],
        )

    def _joined(self, response: Any) -> Any:
        if response.member_id:
            self.member_id = response.member_id
        if response.error_code == 0:
            self.generation = response.generation_id
        return response

    def join(self, *, version: int = 7, **kwargs: Any) -> Any:
        return self._joined(self.conn.request(self.join_request(**kwargs), version))

    def start_join(self) -> None:
        """Send a JoinGroup the coordinator will hold until the rebalance completes."""
        self.conn.send(self.join_request(), 7)

    def finish_join(self) -> Any:
        return self._joined(self.conn.receive(self.join_request(), 7))

    def join_as_new_member(self) -> Any:
        """Join with no member id, retrying while the coordinator loads, then rejoin with the id."""
        return self.p.retry(
            lambda: self.join(member_id=""),
            lambda r: error(r.error_code) not in COORDINATOR_LOADING,
            "the group coordinator",
        )

    def sync_request(self, assignments: dict[str, bytes], generation: int | None = None) -> Any:
        return sync_group.SyncGroupRequest(
            group_id=self.group,
            generation_id=self.generation if generation is None else generation,
            member_id=self.member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[
                sync_group.SyncGroupRequestAssignment(member_id=m, assignment=a)
                for m, a in assignments.items()
            ],
        )

    def sync(self, assignments: dict[str, bytes], generation: int | None = None) -> Any:
        return self.conn.request(self.sync_request(assignments, generation), 5)

    def heartbeat(self, generation: int | None = None, member_id: str | None = None) -> str:
        request = heartbeat.HeartbeatRequest(
            group_id=self.group,
            generation_id=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
        )
        return error(self.conn.request(request, 4).error_code)

    def commit(
        self,
        offsets: dict[int, int],
        *,
        generation: int | None = None,
        member_id: str | None = None,
        topic: str | None = None,
    ) -> list[str]:
        request = offset_commit.OffsetCommitRequest(
            group_id=self.group,
            generation_id_or_member_epoch=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            topics=[
                offset_commit.OffsetCommitRequestTopic(
                    name=topic or self.topic,
                    partitions=[
                        offset_commit.OffsetCommitRequestPartition(
                            partition_index=k, committed_offset=v, committed_metadata="m"
                        )
                        for k, v in offsets.items()
                    ],
                )
            ],
        )
        [result] = self.conn.request(request, 8).topics
        return [error(x.error_code) for x in result.partitions]

    def leave(self) -> list[Any]:
        request = leave_group.LeaveGroupRequest(
            group_id=self.group, members=[leave_group.MemberIdentity(member_id=self.member_id)]
        )
        response = self.conn.request(request, 4)
        return [error(response.error_code), [error(m.error_code) for m in response.members]]


def describe_group(p: Probe, group: str) -> list[Any]:
    """DescribeGroups v5: [error, state, protocol type, protocol, member count]."""
    [described] = p.call(describe_groups.DescribeGroupsRequest(groups=[group]), 5).groups
    return [
        error(described.error_code),
        described.group_state,
        described.protocol_type,
        described.protocol_data,
        len(described.members),
    ]


def settled_state(p: Probe, group: str, state: str) -> list[Any]:
    """DescribeGroups once the group reached ``state`` (coordinators apply joins asynchronously)."""
    return p.retry(lambda: describe_group(p, group), lambda d: d[1] == state, f"{group} in {state}")


def committed_offsets(p: Probe, group: str, topic: str, version: int = 8) -> list[Any]:
    """OffsetFetch of a group: v8+ asks for all its topics, older ones for partitions 0-2."""
    if version >= 8:
        request = offset_fetch.OffsetFetchRequest(
            groups=[offset_fetch.OffsetFetchRequestGroup(group_id=group, topics=None)],
            require_stable=True,
        )
        [result] = p.call(request, version).groups
        topics, top = result.topics, result.error_code
    else:
        request = offset_fetch.OffsetFetchRequest(
            group_id=group,
            topics=[offset_fetch.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1, 2])],
        )
        response = p.call(request, version)
        topics, top = response.topics, getattr(response, "error_code", 0)
    return [error(top)] + [
        [t.name, x.partition_index, x.committed_offset, x.metadata, error(x.error_code)]
        for t in topics
        for x in sorted(t.partitions, key=lambda x: x.partition_index)
    ]


def delete_group(p: Probe, group: str) -> str:
    [result] = p.call(delete_groups.DeleteGroupsRequest(groups_names=[group]), 2).results
    return error(result.error_code)


@scenario
def group_states_and_generations(p: Probe) -> None:
    """One member from FindCoordinator to deletion: states, generations, bad requests."""
    group, topic = "diff-group", "diff-group-topic"
    p.create_topic(topic, 2)
    [coordinator] = p.retry(
        lambda: (
            p.call(
                find_coordinator.FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4
            ).coordinators
        ),
        lambda answer: answer[0].error_code == 0,
        "the group coordinator",
    )
    p.see(
        "coordinator",
        [
            error(coordinator.error_code),
            p.node(coordinator.node_id),
            p.address(coordinator.host, coordinator.port),
        ],
    )
    txn = p.call(
        find_coordinator.FindCoordinatorRequest(key_type=1, coordinator_keys=["diff-txn"]), 4
    )
    p.see("transaction coordinator", error(txn.coordinators[0].error_code))

    a = Member(p, group, topic)
    first = a.join_as_new_member()
    p.see(
        "join without member id",
        [error(first.error_code), first.generation_id, bool(first.member_id)],
    )
    p.see(
        "join without member id/member id prefix",
        first.member_id.startswith("compat-differential-"),
    )
    joined = a.join()
    p.see(
        "join",
        [
            error(joined.error_code),
            joined.generation_id,
            joined.protocol_type,
            joined.protocol_name,
            joined.leader == a.member_id,
            len(joined.members),
        ],
    )
    p.see("state after join", describe_group(p, group))
    p.see("heartbeat before sync", a.heartbeat())
    mine = {a.member_id: assignment(topic, [0, 1])}
    p.see("sync wrong generation", error(a.sync(mine, a.generation + 1).error_code))
    synced = a.sync(mine)
    p.see("sync", [error(synced.error_code), synced.assignment == assignment(topic, [0, 1])])
    p.see("state after sync", describe_group(p, group))
    p.see("heartbeat", a.heartbeat())
    p.see("heartbeat wrong generation", a.heartbeat(a.generation + 1))
    p.see("heartbeat unknown member", a.heartbeat(member_id="nobody"))
    p.see("commit wrong generation", a.commit({0: 1}, generation=a.generation + 1))
    p.see("commit unknown member", a.commit({0: 1}, member_id="nobody"))
    p.see("commit as admin while stable", a.commit({0: 1}, generation=-1, member_id=""))
    p.see("commit", a.commit({0: 5, 1: 7}))
    p.see("commit unknown topic", a.commit({0: 1}, topic="diff-nope"))
    p.see("offsets v8", committed_offsets(p, group, topic, 8))
    p.see("offsets v1", committed_offsets(p, group, topic, 1))
    p.see("join with a short session", error(a.join(session=10, member_id="").error_code))
    p.see("join with an unknown member id", error(a.join(member_id="bogus-member").error_code))
    other = Member(p, "diff-group-v3", topic)
    p.see("join v3 new member (no member-id round)", error(other.join(version=3).error_code))
    other.close()

    # Kafka 4's ListGroups reads committed coordinator state, which trails the
    # newest join by a few ms: only the group settled since the sync is compared.
    listed = p.call(list_groups.ListGroupsRequest(states_filter=[]), 4)
    p.see(
        "list",
        [
            [g.group_id, g.protocol_type, g.group_state]
            for g in listed.groups
            if g.group_id == group
        ],
    )
    p.see("leave", a.leave())
    a.close()
    p.see("state after leave", describe_group(p, group))
    admin = Member(p, group, topic)
    p.see("commit as admin while empty", admin.commit({1: 9}, generation=-1, member_id=""))
    admin.close()
    p.see("offsets after admin commit", committed_offsets(p, group, topic, 8))
    p.see("delete", delete_group(p, group))
    p.see("state after delete", describe_group(p, group))
    p.see("delete again", delete_group(p, group))
    p.see("state of a group never seen", describe_group(p, "diff-group-never"))
    p.see("delete a group never seen", delete_group(p, "diff-group-never"))


@scenario
def group_rebalance_two_members(p: Probe) -> None:
    """A second member joins a stable group, then leaves: every rebalance step as members see it."""
    group, topic = "diff-rebalance", "diff-rebalance-topic"
    p.create_topic(topic, 2)
    a, b = Member(p, group, topic), Member(p, group, topic)
    try:
        a.join_as_new_member()
        a.join()
        a.sync({a.member_id: assignment(topic, [0, 1])})
        p.see("one member", settled_state(p, group, "Stable"))
        first_generation = a.generation

        b.join_as_new_member()  # MEMBER_ID_REQUIRED: B now has an id
        b.start_join()  # held until A rejoins
        p.see("B waiting", settled_state(p, group, "PreparingRebalance"))
        p.see("A heartbeat during the rebalance", a.heartbeat())
        p.see("A commit during the rebalance", a.commit({0: 3}))
        rejoined = a.join()
        joined = b.finish_join()
        for name, answer in (("A", rejoined), ("B", joined)):
            p.see(
                f"{name} join answer",
                [
                    error(answer.error_code),
                    answer.generation_id - first_generation,
                    answer.leader == a.member_id,
                    len(answer.members),
                ],
            )
        p.see("both joined", describe_group(p, group))
        p.see("A heartbeat before sync", a.heartbeat())

        b.conn.send(b.sync_request({}), 5)  # a follower's sync waits for the leader's
        leader = a.sync({a.member_id: assignment(topic, [0]), b.member_id: assignment(topic, [1])})
        follower = b.conn.receive(b.sync_request({}), 5)
        p.see("A sync", [error(leader.error_code), leader.assignment == assignment(topic, [0])])
        p.see("B sync", [error(follower.error_code), follower.assignment == assignment(topic, [1])])
        p.see("two members", describe_group(p, group))
        p.see("B commit with the old generation", b.commit({1: 1}, generation=first_generation))
        p.see("B commit", b.commit({1: 2}))

        p.see("B leaves", b.leave())
        p.see("after B left", settled_state(p, group, "PreparingRebalance"))
        p.see("A heartbeat after B left", a.heartbeat())
        again = a.join()
        p.see(
            "A rejoins alone",
            [error(again.error_code), again.generation_id - first_generation, len(again.members)],
        )
        p.see("A sync alone", error(a.sync({a.member_id: assignment(topic, [0, 1])}).error_code))
        p.see(
            "A commit with the previous generation", a.commit({0: 4}, generation=a.generation - 1)
        )
        p.see("A alone", describe_group(p, group))
        p.see("offsets", committed_offsets(p, group, topic))
    finally:
        a.close()
        b.close()


# -- DescribeConfigs -----------------------------------------------------------------------

#: Broker configs whose values come from how the test started each broker.
LOCAL_VALUES = {
    "listeners", "advertised.listeners", "log.dirs", "log.dir", "metadata.log.dir",
    "controller.quorum.voters", "controller.quorum.bootstrap.servers", "broker.id", "node.id",
}  # fmt: skip


def see_configs(p: Probe, prefix: str, result: Any) -> None:
    p.see(f"{prefix}/error", error(result.error_code))
    for config in sorted(result.configs, key=lambda c: c.name):
        value = "<local>" if config.name in LOCAL_VALUES and config.value else config.value
        p.see(
            f"{prefix}/{config.name}",
            [
                value,
                CONFIG_SOURCES.get(config.config_source, config.config_source),
                CONFIG_TYPES.get(config.config_type, config.config_type),
                "read-only" if config.read_only else "writable",
                "sensitive" if config.is_sensitive else "plain",
            ],
        )


@scenario
def describe_configs_defaults(p: Probe) -> None:
    """DescribeConfigs v4: a new topic's configs and broker 0's: value, source and type of each."""
    p.create_topic("diff-configs", 1)
    see_configs(p, "topic", p.describe_configs(2, "diff-configs"))
    see_configs(p, "broker", p.describe_configs(4, str(p.node_id)))
    p.see("unknown topic", error(p.describe_configs(2, "diff-nope").error_code))
    p.see("other broker", error(p.describe_configs(4, "7").error_code))
    p.see("broker name not a number", error(p.describe_configs(4, "zero").error_code))


# -- Group configs (KIP-848's GROUP config resource) ---------------------------------------

GROUP_RESOURCE = 32


def alter_incrementally(
    p: Probe,
    name: str,
    *ops: tuple[str, int, str | None],
    validate_only: bool = False,
    resource_type: int = GROUP_RESOURCE,
) -> list[Any]:
    """IncrementalAlterConfigs v1 of one resource (a group unless told); its error and message."""
    request = incremental_alter_configs.IncrementalAlterConfigsRequest(
        resources=[
            incremental_alter_configs.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[
                    incremental_alter_configs.AlterableConfig(
                        name=key, config_operation=op, value=value
                    )
                    for key, op, value in ops
                ],
            )
        ],
        validate_only=validate_only,
    )
    [result] = p.call(request, 1).responses
    return [error(result.error_code), result.error_message]


def describe_group_configs(p: Probe, name: str, *, synonyms: bool = True) -> Any:
    return p.describe_configs(GROUP_RESOURCE, name, synonyms=synonyms)


def group_config_value(p: Probe, name: str, key: str) -> str | None:
    configs = describe_group_configs(p, name, synonyms=False).configs
    return next((c.value for c in configs if c.name == key), None)


def see_group_synonyms(p: Probe, prefix: str, result: Any) -> None:
    for config in sorted(result.configs, key=lambda c: c.name):
        p.see(
            f"{prefix}/{config.name} synonyms",
            [[s.name, s.value, CONFIG_SOURCES.get(s.source, s.source)] for s in config.synonyms],
        )


@scenario
def describe_configs_group(p: Probe) -> None:
    """DescribeConfigs v4 of a group that does not exist, at Kafka's defaults, after
    IncrementalAlterConfigs sets two of its configs and after they are deleted again."""
    group = "diff-gc"
    defaults = describe_group_configs(p, group)
    see_configs(p, "defaults", defaults)
    see_group_synonyms(p, "defaults", defaults)
    p.see(
        "set",
        alter_incrementally(
            p,
            group,
            ("consumer.session.timeout.ms", 0, "50000"),
            ("share.auto.offset.reset", 0, "earliest"),
        ),
    )
    # Kafka applies the change through its metadata log: wait until it shows.
    p.retry(
        lambda: group_config_value(p, group, "consumer.session.timeout.ms"),
        lambda value: value == "50000",
        "the group config",
    )
    altered = describe_group_configs(p, group)
    see_configs(p, "altered", altered)
    see_group_synonyms(p, "altered", altered)
    p.see(
        "delete",
        alter_incrementally(
            p,
            group,
            ("consumer.session.timeout.ms", 1, None),
            ("share.auto.offset.reset", 1, None),
        ),
    )
    p.retry(
        lambda: group_config_value(p, group, "consumer.session.timeout.ms"),
        lambda value: value == "45000",
        "the group config's deletion",
    )
    see_configs(p, "deleted", describe_group_configs(p, group, synonyms=False))
    unnamed = describe_group_configs(p, "")
    p.see("no name", [error(unnamed.error_code), unnamed.error_message, len(unnamed.configs)])


# -- Broker loggers (the BROKER_LOGGER config resource) ---------------------------------------

BROKER_LOGGER_RESOURCE = 8


def describe_loggers(p: Probe, name: str, keys: list[str] | None, documentation: bool) -> Any:
    return p.describe_configs(
        BROKER_LOGGER_RESOURCE, name, keys=keys, synonyms=True, documentation=documentation
    )


def seen_logger_result(p: Probe, result: Any) -> list[Any]:
    """A described resource whole: its error, and each entry's every field."""
    return [
        error(result.error_code),
        (result.error_message or "").replace(str(p.node_id), "self"),
        [
            [c.name, c.value, CONFIG_SOURCES.get(c.config_source, c.config_source), c.read_only,
             c.is_sensitive, c.synonyms, c.config_type, c.documentation]
            for c in result.configs
        ],
    ]  # fmt: skip


@scenario
def broker_loggers(p: Probe) -> None:
    """The BROKER_LOGGER resource: root's entry described whole, the resource names and the
    changes both APIs refuse, and root's level set (validate-only, then for real and back).
    The two brokers' other loggers are their own (log4j's and Python's), so only root's
    entry and a logger neither has are compared."""
    me = str(p.node_id)
    for documentation in (False, True):
        root = describe_loggers(p, me, ["root", "diff.no.such.logger"], documentation)
        p.see(f"describe root, documentation {documentation}", seen_logger_result(p, root))
    for label, name in (("no name", ""), ("not a number", "x"), ("another broker", "7")):
        p.see(f"describe {label}", seen_logger_result(p, describe_loggers(p, name, None, False)))

    def alter(name: str, *ops: tuple[str, int, str | None], validate_only: bool = False) -> Any:
        code, message = alter_incrementally(
            p, name, *ops, validate_only=validate_only, resource_type=BROKER_LOGGER_RESOURCE
        )
        return [code, None if message is None else message.replace(me, "self")]

    for label, name, ops in [
        ("unknown logger", me, [("diff.no.such.logger", 0, "INFO")]),
        ("level in lower case", me, [("root", 0, "debug")]),
        ("level OFF", me, [("root", 0, "OFF")]),
        ("unset unknown logger", me, [("diff.no.such.logger", 1, None)]),
        ("unset root", me, [("root", 1, None)]),
        ("append", me, [("root", 2, "INFO")]),
        ("subtract", me, [("root", 3, "INFO")]),
        ("unknown operation", me, [("root", 7, "INFO")]),
        ("no value", me, [("root", 0, None)]),
        ("twice", me, [("root", 0, "INFO"), ("root", 1, None)]),
        ("no name", "", [("root", 0, "INFO")]),
        ("not a number", "x", [("root", 0, "INFO")]),
        ("another broker", "+7", [("root", 0, "INFO")]),
    ]:
        p.see(f"alter {label}", alter(name, *ops))
    p.see("validate only", alter(me, ("root", 0, "DEBUG"), validate_only=True))
    p.see("after validate only", seen_logger_result(p, describe_loggers(p, me, ["root"], False)))
    p.see("set root", alter(me, ("root", 0, "WARN")))
    p.see("after set", seen_logger_result(p, describe_loggers(p, me, ["root"], False)))
    p.see("set root back", alter(me, ("root", 0, "INFO")))
    for v in (0, 2):
        request = alter_configs.AlterConfigsRequest(
            resources=[
                alter_configs.AlterConfigsResource(
                    resource_type=BROKER_LOGGER_RESOURCE,
                    resource_name=me,
                    configs=[alter_configs.AlterableConfig(name="root", value="DEBUG")],
                )
            ],
            validate_only=True,
        )
        [result] = p.call(request, v).responses
        p.see(f"AlterConfigs v{v}", [error(result.error_code), result.error_message])


@scenario
def alter_configs_group_errors(p: Probe) -> None:
    """IncrementalAlterConfigs and AlterConfigs (validate_only) of groups: values out of the
    broker's bounds, unknown names, bad types, list operations and a group without a name."""
    cases: list[tuple[str, str, str]] = [
        ("session in range", "consumer.session.timeout.ms", "50000"),
        ("session too short", "consumer.session.timeout.ms", "5000"),
        ("session not a number", "consumer.session.timeout.ms", "soon"),
        ("session below 1", "consumer.session.timeout.ms", "0"),
        ("heartbeat too long", "consumer.heartbeat.interval.ms", "20000"),
        ("unknown name", "nope", "1"),
        ("share lock too short", "share.record.lock.duration.ms", "10000"),
        ("share delivery limit", "share.delivery.count.limit", "20"),
        ("share reset", "share.auto.offset.reset", "by_duration:PT1H"),
        ("share reset bad", "share.auto.offset.reset", "sometime"),
        ("isolation bad", "share.isolation.level", "READ_COMMITTED"),
        ("standby replicas", "streams.num.standby.replicas", "5"),
        ("streams assignor", "streams.assignor.name", "greedy"),
        ("rack tags twice", "streams.rack.aware.assignment.tags", "a,b,a"),
        ("dlq internal", "errors.deadletterqueue.topic.name", "__dlq"),
        ("internal config", "consumer.assignor.offload.enable", "false"),
    ]
    for label, key, value in cases:
        p.see(
            f"incremental/{label}",
            alter_incrementally(p, "diff-ga", (key, 0, value), validate_only=True),
        )
    p.see(
        "incremental/append",
        alter_incrementally(
            p, "diff-ga", ("streams.rack.aware.assignment.tags", 2, "a"), validate_only=True
        ),
    )
    p.see(
        "incremental/no name",
        alter_incrementally(p, "", ("consumer.session.timeout.ms", 0, "50000"), validate_only=True),
    )
    p.see(
        "incremental/bounds before request order",
        alter_incrementally(
            p,
            "diff-ga",
            ("share.delivery.count.limit", 0, "20"),
            ("consumer.session.timeout.ms", 0, "1"),
            validate_only=True,
        ),
    )
    resources = [
        ("diff-ga-1", "consumer.heartbeat.interval.ms", "6000"),
        ("diff-ga-2", "consumer.heartbeat.interval.ms", "1"),
        ("diff-ga-3", "nope", "1"),
        ("", "consumer.heartbeat.interval.ms", "6000"),
    ]
    for v in (0, 1, 2):
        request = alter_configs.AlterConfigsRequest(
            resources=[
                alter_configs.AlterConfigsResource(
                    resource_type=GROUP_RESOURCE,
                    resource_name=name,
                    configs=[alter_configs.AlterableConfig(name=key, value=value)],
                )
                for name, key, value in resources
            ],
            validate_only=True,
        )
        p.answer(f"alter v{v}", request, v)
    for v in (0, 1):
        request = incremental_alter_configs.IncrementalAlterConfigsRequest(
            resources=[
                incremental_alter_configs.AlterConfigsResource(
                    resource_type=GROUP_RESOURCE,
                    resource_name=name,
                    configs=[
                        incremental_alter_configs.AlterableConfig(
                            name=key, config_operation=0, value=value
                        )
                    ],
                )
                for name, key, value in resources
            ],
            validate_only=True,
        )
        p.answer(f"incremental v{v}", request, v)
