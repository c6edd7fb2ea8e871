"""Error paths compared as whole responses, at several versions of each API.

Each step is one request and the fields that may differ in it; the whole
response is observed (``Probe.answer``, ``whole.py``), so null against empty,
a -1 against a real offset, or an extra element all fail the scenario. Every
API is asked at its lowest version, at the versions where its response
schema changes, and at its highest, with one request mixing partitions (or
groups) that succeed with ones that fail, as clients send them.

To add a step: build the request, ``p.answer("label", request, version)``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from compat.wire import KafkaConnection
from kpybroker.protocol.messages import (
    alter_configs,
    create_partitions,
    create_topics,
    delete_groups,
    delete_records,
    delete_topics,
    describe_configs,
    describe_groups,
    fetch,
    find_coordinator,
    incremental_alter_configs,
    list_offsets,
    offset_commit,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
)

from .probe import Probe, batch, scenario

T = TypeVar("T")
ZERO_UUID = bytes(16)
#: Record timestamps far enough in the past to be stable, within Kafka's default limits.
T0 = 1_700_000_000_000
UNKNOWN_ID = uuid.UUID("6b1f2c1e-1d2e-4c7a-9a0b-5e4d3c2b1a09").bytes
#: Topic ids no broker has: two random-looking ones and the zero one.
UNKNOWN_IDS = (UNKNOWN_ID, uuid.UUID("0c9d8e7f-6a5b-4c3d-8e2f-1a0b9c8d7e6f").bytes, ZERO_UUID)
#: When a record was appended: a field that changes with every run.
APPEND_TIME = ("*log_append_time_ms",)
#: Produce's error texts that quote the broker's clock.
CLOCK_TEXTS = ("*error_message", "*batch_index_error_message")


@dataclass(frozen=True)
class Part:
    """One partition of a request: where to read from (or what to ask)."""

    topic: str
    partition: int
    offset: int = 0
    max_bytes: int = 1 << 20
    leader_epoch: int = -1


class Topics:
    """Topic names and their ids on the broker under test (ids differ between brokers)."""

    def __init__(self, p: Probe) -> None:
        self.p = p
        self.ids: dict[str, bytes] = {}

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        self.p.create_topic(name, partitions, configs)
        [meta] = self.p.metadata([name]).topics
        self.ids[name] = meta.topic_id

    def id_of(self, name: str) -> bytes:
        return self.ids.get(name, UNKNOWN_ID)


def by_topic(items: Iterable[T], entry: Callable[[T], tuple[str, Any]]) -> dict[str, list[Any]]:
    """A request's per-partition entries grouped by topic, topics in order of first appearance.

    ``entry(item)`` gives the topic and the entry for one item.
    """
    grouped: dict[str, list[Any]] = {}
    for item in items:
        topic, made = entry(item)
        grouped.setdefault(topic, []).append(made)
    return grouped


# -- Fetch ----------------------------------------------------------------------------------

#: Fetch versions asked: the lowest kpybroker serves, the last before flexible
#: versions, the first flexible one (tagged fields), topic ids, the replica
#: state, node endpoints, and the highest.
FETCH_VERSIONS = (4, 11, 12, 13, 15, 16, 17, 18)


def fetch_request(
    topics: Topics,
    version: int,
    parts: list[Part],
    *,
    max_bytes: int = 1 << 20,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    replica_id: int = -1,
    isolation_level: int = 0,
    session: tuple[int, int] = (0, -1),
) -> Any:
    wanted = by_topic(
        parts,
        lambda part: (
            part.topic,
            fetch.FetchPartition(
                partition=part.partition,
                current_leader_epoch=part.leader_epoch,
                fetch_offset=part.offset,
                partition_max_bytes=part.max_bytes,
            ),
        ),
    )
    return fetch.FetchRequest(
        replica_id=replica_id,
        replica_state=fetch.ReplicaState(replica_id=replica_id),
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=session[0],
        session_epoch=session[1],
        topics=[
            fetch.FetchTopic(
                topic=name,
                topic_id=topics.id_of(name) if version >= 13 else ZERO_UUID,
                partitions=partitions,
            )
            for name, partitions in wanted.items()
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def fill_fetch_topics(p: Probe, topics: Topics, fe: str) -> int:
    """``fe`` (p0: batches of 6 and 1 records, p1 empty, p2: 1) and ``fe``-trim (start 4).

    Returns the size of p0's first batch.
    """
    topics.create(fe, 3)
    topics.create(f"{fe}-trim", 1)
    p.produce(fe, 0, batch([b"%d" % i for i in range(6)], timestamp=T0))
    p.produce(fe, 0, batch([b"more"], timestamp=T0 + 1))
    p.produce(fe, 2, batch([b"two"], timestamp=T0 + 2))
    for n in range(3):
        p.produce(f"{fe}-trim", 0, batch([b"t%d" % n, b"u%d" % n], timestamp=T0 + n))
    trim = delete_records.DeleteRecordsRequest(
        topics=[
            delete_records.DeleteRecordsTopic(
                name=f"{fe}-trim",
                partitions=[delete_records.DeleteRecordsPartition(partition_index=0, offset=4)],
            )
        ],
        timeout_ms=30000,
    )
    p.call(trim, 2)
    first_batch = p.call(fetch_request(topics, 12, [Part(fe, 0)]), 12)
    return len(bytes(first_batch.responses[0].partitions[0].records))


@scenario
def fetch_error_paths(p: Probe) -> None:
    """Fetch at every version where its response changes: each error a partition can get."""
    topics = Topics(p)
    fe, trim = "diff-fe", "diff-fe-trim"
    first_batch = fill_fetch_topics(p, topics, fe)
    for v in FETCH_VERSIONS:
        steps: dict[str, dict[str, Any]] = {
            "from 0, three partitions": {"parts": [Part(fe, 0), Part(fe, 1), Part(fe, 2)]},
            "at the end": {"parts": [Part(fe, 0, 7)]},
            "past the end": {"parts": [Part(fe, 0, 100_000)]},
            "before the log start": {"parts": [Part(trim, 0, 1)]},
            "at the log start": {"parts": [Part(trim, 0, 4)]},
            "negative offset": {"parts": [Part(fe, 0, -1)]},
            "unknown topic": {"parts": [Part("diff-nope", 0)]},
            "unknown partition": {"parts": [Part(fe, 9)]},
            "mixed": {"parts": [Part(fe, 0), Part(fe, 9), Part(fe, 2, 100_000), Part(fe, 1)]},
            "max_bytes 0": {"parts": [Part(fe, 0), Part(fe, 2)], "max_bytes": 0},
            "max_bytes cuts the second batch": {
                "parts": [Part(fe, 0)],
                "max_bytes": first_batch + 20,
            },
            "partition limits below the first batch": {
                "parts": [Part(fe, 0, max_bytes=10), Part(fe, 2, max_bytes=10)]
            },
            "follower fetch from a non-replica": {"parts": [Part(fe, 0)], "replica_id": 1},
            "read_committed": {"parts": [Part(fe, 0), Part(fe, 9)], "isolation_level": 1},
            "unknown session": {"parts": [Part(fe, 0)], "session": (424242, 1)},
            "session epoch without a session": {"parts": [Part(fe, 0)], "session": (0, 3)},
        }
        if v >= 9:
            steps["leader epoch ahead"] = {"parts": [Part(fe, 0, leader_epoch=7)]}
            steps["leader epoch current"] = {"parts": [Part(fe, 0, leader_epoch=0)]}
        for label, step in steps.items():
            p.answer(f"v{v}/{label}", fetch_request(topics, v, **step), v)


@scenario
def fetch_deleted_while_waiting(p: Probe) -> None:
    """A Fetch long-polling a partition whose topic is deleted meanwhile."""
    for v in (11, 12, 13, 18):
        topics = Topics(p)
        name = f"diff-fe-gone-{v}"
        topics.create(name, 1)
        waiting = KafkaConnection(p.bootstrap, client_id="compat-differential")
        try:
            request = fetch_request(topics, v, [Part(name, 0, 0)], max_wait_ms=8000, min_bytes=1)
            waiting.send(request, v)
            time.sleep(0.5)  # the fetch is parked before the topic goes
            p.delete_topic(name)
            waiting.sock.settimeout(20)
            try:
                response = waiting.receive(request, v)
            except (TimeoutError, ConnectionError) as exc:
                p.see(f"v{v}", f"no answer ({type(exc).__name__})")
                continue
            p.see_whole(f"v{v}", request, v, response)
        finally:
            waiting.close()


# -- ListOffsets, OffsetForLeaderEpoch -------------------------------------------------------

LIST_OFFSETS_VERSIONS = (1, 2, 4, 6, 7, 8, 9, 10, 11)


def list_offsets_request(parts: list[Part], isolation_level: int = 0) -> Any:
    """``Part.offset`` is the timestamp asked for."""
    wanted = by_topic(
        parts,
        lambda part: (
            part.topic,
            list_offsets.ListOffsetsPartition(
                partition_index=part.partition,
                current_leader_epoch=part.leader_epoch,
                timestamp=part.offset,
            ),
        ),
    )
    return list_offsets.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[
            list_offsets.ListOffsetsTopic(name=name, partitions=partitions)
            for name, partitions in wanted.items()
        ],
        timeout_ms=10000,
    )


@scenario
def list_offsets_error_paths(p: Probe) -> None:
    """ListOffsets at each version: special and real timestamps beside failing partitions."""
    topics = Topics(p)
    fe = "diff-lo"
    fill_fetch_topics(p, topics, fe)
    # Kafka collects ListOffsets answers in a hash map, then groups them by topic.
    unordered = ("topics", "topics/partitions")
    for v in LIST_OFFSETS_VERSIONS:
        mixed = [
            Part(fe, 0, -1), Part(fe, 1, -2), Part(fe, 2, T0 + 2), Part(fe, 9, -1),
            Part("diff-nope", 0, -1), Part(f"{fe}-trim", 0, -2),
        ]  # fmt: skip
        steps: dict[str, list[Part]] = {
            "mixed": mixed,
            "a timestamp after the last": [Part(fe, 0, T0 + 10_000)],
            "an invalid timestamp (-7)": [Part(fe, 0, -7)],
        }
        if v >= 7:
            steps["max timestamp"] = [Part(fe, 0, -3), Part(fe, 1, -3)]
        if v >= 8:
            steps["earliest local"] = [Part(f"{fe}-trim", 0, -4)]
        if v >= 9:
            steps["latest tiered"] = [Part(fe, 0, -5)]
        if v >= 11:
            steps["earliest pending upload"] = [Part(fe, 0, -6), Part(f"{fe}-trim", 0, -6)]
        if v >= 4:
            steps["leader epoch ahead"] = [Part(fe, 0, -1, leader_epoch=7)]
        if v < 9:
            steps["a timestamp of a later version (-5)"] = [Part(fe, 0, -5)]
        if v < 11:
            steps["a timestamp of a later version (-6)"] = [Part(fe, 0, -6)]
        for label, parts in steps.items():
            p.answer(f"v{v}/{label}", list_offsets_request(parts), v, unordered=unordered)
        if v >= 2:
            request = list_offsets_request(mixed, 1)
            p.answer(f"v{v}/read_committed", request, v, unordered=unordered)
    twice = list_offsets_request([Part(fe, 0, -1), Part(fe, 1, -1), Part(fe, 0, -2)])
    p.answer("v1/the same partition twice", twice, 1, unordered=unordered)


@scenario
def offset_for_leader_epoch_error_paths(p: Probe) -> None:
    """OffsetForLeaderEpoch v2-v4: known, future and unknown epochs beside failing partitions."""
    topics = Topics(p)
    fe = "diff-ole"
    fill_fetch_topics(p, topics, fe)
    for v in (2, 3, 4):
        queries = [
            (fe, 0, -1, 0), (fe, 1, -1, 0), (fe, 2, -1, 5), (fe, 0, 7, 0), (fe, 0, 0, 0),
            (fe, 9, -1, 0), ("diff-nope", 0, -1, 0), (f"{fe}-trim", 0, -1, 0),
        ]  # fmt: skip
        wanted = by_topic(
            queries,
            lambda q: (
                q[0],
                offset_for_leader_epoch.OffsetForLeaderPartition(
                    partition=q[1], current_leader_epoch=q[2], leader_epoch=q[3]
                ),
            ),
        )
        request = offset_for_leader_epoch.OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                offset_for_leader_epoch.OffsetForLeaderTopic(topic=t, partitions=ps)
                for t, ps in wanted.items()
            ],
        )
        p.answer(f"v{v}/mixed", request, v)


# -- Produce --------------------------------------------------------------------------------

PRODUCE_VERSIONS = (3, 8, 9, 12, 13)


@scenario
def produce_error_paths(p: Probe) -> None:
    """Produce at each version: one request whose partitions succeed and fail side by side."""
    topics = Topics(p)
    topics.create("diff-pe", 3)
    topics.create("diff-pe-small", 1, {"max.message.bytes": "200"})
    topics.create("diff-pe-compact", 1, {"cleanup.policy": "compact"})
    # Kafka answers from a map of partitions, grouped by topic in a hash map.
    unordered = ("responses", "responses/partition_responses")
    for v in PRODUCE_VERSIONS:
        good = batch([b"v%d" % v], timestamp=T0)
        bad_crc = bytearray(good)
        bad_crc[17] ^= 0xFF
        too_short = bytearray(good)
        too_short[8:12] = (0).to_bytes(4, "big")  # a batch length below any record's
        mixed = {
            "diff-pe": [(0, good), (1, bytes(bad_crc)), (9, good), (2, good + good)],
            "diff-pe-small": [(0, batch([b"x" * 400], timestamp=T0))],
            "diff-nope": [(0, good)],
        }
        poisoned = {"diff-pe": [(0, good), (1, bytes(too_short))], "diff-nope": [(0, good)]}
        bad_magic = bytearray(good)
        bad_magic[16] = 7
        short = bytearray(good[:32])
        short[8:12] = (20).to_bytes(4, "big")  # a whole batch of 32 bytes: less than a header
        plans = {
            "mixed": mixed,
            "a batch cut at 17 bytes": {"diff-pe": [(0, good[:17]), (1, good)]},
            "a batch cut at 14 bytes": {"diff-pe": [(0, good[:14]), (1, good)]},
            # Alone in its request: Kafka fails the whole request on it (allowlist.toml).
            "a whole batch shorter than a header": {"diff-pe": [(0, bytes(short))]},
            "one unreadable batch": poisoned,
            "a batch of magic 7": {"diff-pe": [(0, good), (1, bytes(bad_magic))]},
            "keyless records on a compacted topic": {"diff-pe-compact": [(0, good)]},
        }
        for label, plan in plans.items():
            request = produce_request(topics, plan)
            p.answer(f"v{v}/{label}", request, v, varies=APPEND_TIME, unordered=unordered)
        future = batch([b"late"], timestamp=int(time.time() * 1000) + 2 * 3600 * 1000)
        request = produce_request(topics, {"diff-pe": [(0, future), (1, good)]})
        p.answer(
            f"v{v}/a timestamp 2 h ahead",
            request,
            v,
            varies=APPEND_TIME + CLOCK_TEXTS,
            unordered=unordered,
        )


def produce_request(topics: Topics, plan: dict[str, list[tuple[int, bytes]]]) -> Any:
    """acks=all Produce of ``{topic: [(partition, records)]}``, topics named and by id."""
    return produce.ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=10000,
        topic_data=[
            produce.TopicProduceData(
                name=name,
                topic_id=topics.id_of(name),
                partition_data=[produce.PartitionProduceData(index=i, records=r) for i, r in parts],
            )
            for name, parts in plan.items()
        ],
    )


# -- Groups and offsets ---------------------------------------------------------------------


def commit_request(
    group: str, offsets: list[tuple[str, int, int]], topics: Topics | None = None
) -> Any:
    """An admin OffsetCommit (generation -1, no member), as tools send while a group is empty;
    with ``topics``, each topic also by its id (v10 sends only the id)."""
    wanted = by_topic(
        offsets,
        lambda o: (
            o[0],
            offset_commit.OffsetCommitRequestPartition(
                partition_index=o[1], committed_offset=o[2], committed_metadata="m"
            ),
        ),
    )
    return offset_commit.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=-1,
        topics=[
            offset_commit.OffsetCommitRequestTopic(
                name=t, topic_id=topics.id_of(t) if topics else ZERO_UUID, partitions=ps
            )
            for t, ps in wanted.items()
        ],
    )


def ready_coordinator(p: Probe, group: str) -> None:
    """Until FindCoordinator answers for ``group`` (the offsets topic is made on first use)."""
    request = find_coordinator.FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
    p.retry(lambda: p.call(request, 4).coordinators[0].error_code, lambda c: c == 0, group)


@scenario
def group_offsets_error_paths(p: Probe) -> None:
    """OffsetCommit and OffsetFetch with partitions and groups that fail beside ones that do not."""
    topics = Topics(p)
    topics.create("diff-go", 2)
    group = "diff-go-group"
    ready_coordinator(p, group)
    p.retry(
        lambda: p.call(commit_request(group, [("diff-go", 0, 1)]), 2).topics[0],
        lambda t: t.partitions[0].error_code == 0,
        "the first commit",
    )
    mixed = [("diff-go", 0, 5), ("diff-go", 9, 1), ("diff-nope", 0, 1), ("diff-go", 1, 7)]
    for v in (2, 5, 8, 9, 10):
        # v10 names topics by id: diff-nope's (unknown) answers UNKNOWN_TOPIC_ID.
        p.answer(f"commit v{v}/mixed", commit_request(group, mixed, topics), v)
    # Two unknown ids and the zero one are three topics of the answer, none committed.
    for label, ids in (("unknown ids", UNKNOWN_IDS), ("known id last", (*UNKNOWN_IDS, None))):
        request = commit_request(group, [("diff-go", 0, 8)], topics)
        known = request.topics[0]
        request.topics = [
            offset_commit.OffsetCommitRequestTopic(
                topic_id=i, partitions=[offset_commit.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=9, committed_metadata=None)])
            if i is not None else known
            for i in ids
        ]  # fmt: skip
        p.answer(f"commit v10/{label}", request, 10)
    asked = [("diff-go", [0, 1, 9]), ("diff-nope", [0])]
    for v in (1, 2, 5, 6, 7):
        request = offset_fetch.OffsetFetchRequest(
            group_id=group,
            topics=[offset_fetch.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in asked],
            require_stable=False,
        )  # fmt: skip
        p.answer(f"fetch v{v}/mixed", request, v)
        if v >= 2:
            all_topics = offset_fetch.OffsetFetchRequest(group_id=group, topics=None)
            p.answer(f"fetch v{v}/all topics", all_topics, v)
            unknown = offset_fetch.OffsetFetchRequest(group_id="diff-go-never", topics=None)
            p.answer(f"fetch v{v}/unknown group", unknown, v)
    for v in (8, 9, 10):
        # v10 names topics by id: diff-nope's (unknown) answers UNKNOWN_TOPIC_ID.
        groups = [
            offset_fetch.OffsetFetchRequestGroup(
                group_id=group,
                topics=[offset_fetch.OffsetFetchRequestTopics(
                            name=t, topic_id=topics.id_of(t), partition_indexes=ps)
                        for t, ps in asked],
            ),
            offset_fetch.OffsetFetchRequestGroup(group_id=group, topics=None),
            offset_fetch.OffsetFetchRequestGroup(group_id="diff-go-never", topics=None),
        ]  # fmt: skip
        request = offset_fetch.OffsetFetchRequest(groups=groups, require_stable=False)
        p.answer(f"fetch v{v}/three groups", request, v)
    by_id = [
        offset_fetch.OffsetFetchRequestGroup(
            group_id=g,
            topics=[offset_fetch.OffsetFetchRequestTopics(topic_id=i, partition_indexes=[0, 1])
                    for i in (*UNKNOWN_IDS, topics.id_of("diff-go"))],
        )
        for g in (group, "diff-go-never")
    ]  # fmt: skip
    request = offset_fetch.OffsetFetchRequest(groups=by_id, require_stable=True)
    p.answer("fetch v10/unknown ids", request, 10)


@scenario
def group_admin_error_paths(p: Probe) -> None:
    """DescribeGroups and DeleteGroups over a known, an unknown and an unnamed group."""
    topics = Topics(p)
    topics.create("diff-ga", 1)
    for group in ("diff-ga-empty", "diff-ga-kept"):
        ready_coordinator(p, group)
        p.retry(
            lambda g=group: p.call(commit_request(g, [("diff-ga", 0, 3)]), 2).topics[0],
            lambda t: t.partitions[0].error_code == 0,
            f"a commit for {group}",
        )
    for v in (0, 1, 3, 4, 5, 6):
        request = describe_groups.DescribeGroupsRequest(
            groups=["diff-ga-empty", "diff-ga-never", ""],
            include_authorized_operations=False,
        )
        # Kafka asks each group's coordinator shard and answers in shard order.
        p.answer(f"describe v{v}", request, v, unordered=("groups",))
    for v, group in ((0, "diff-ga-empty"), (2, "diff-ga-kept"), (3, "diff-ga-kept")):
        request = delete_groups.DeleteGroupsRequest(groups_names=[group, "diff-ga-never", ""])
        p.answer(f"delete v{v}", request, v, unordered=("results",))


@scenario
def find_coordinator_answers(p: Probe) -> None:
    """FindCoordinator at each version, for a group, a transactional id and a bad key type."""
    group = "diff-fc-group"
    ready_coordinator(p, group)
    for v in (0, 1, 2, 3, 4):
        for label, key_type in (("group", 0), ("bad key type", 5)):
            if v == 0 and key_type:
                continue
            request = find_coordinator.FindCoordinatorRequest(
                key=group, key_type=key_type, coordinator_keys=[group]
            )
            p.answer(f"v{v}/{label}", request, v)
    both = find_coordinator.FindCoordinatorRequest(
        key_type=0, coordinator_keys=[group, "diff-fc-other"]
    )
    p.answer("v4/two groups", both, 4)


# -- Topic administration -------------------------------------------------------------------


@scenario
def oversized_topic_admin_answers(p: Probe) -> None:
    """Requests over Kafka 4's controller bounds (validate_only: nothing is made): a
    CreateTopics of 10,001 partitions in all, one of 9,999 partitions with two configs
    (10,002 metadata records) with a name given twice, and a CreatePartitions adding
    10,001 to a topic beside an unknown one, then the largest of each that passes."""
    p.create_topic("diff-big", 1)

    def create(*topics: tuple[str, int, dict[str, str]]) -> Any:
        return create_topics.CreateTopicsRequest(
            topics=[
                create_topics.CreatableTopic(
                    name=name,
                    num_partitions=count,
                    replication_factor=1,
                    assignments=[],
                    configs=[
                        create_topics.CreatableTopicConfig(name=k, value=v)
                        for k, v in configs.items()
                    ],
                )
                for name, count, configs in topics
            ],
            timeout_ms=30000,
            validate_only=True,
        )

    two_configs = {"retention.ms": "1000", "cleanup.policy": "delete"}
    cases = {
        "too many partitions": create(("diff-big-a", 5000, {}), ("diff-big-b", 5001, {})),
        "too many records": create(
            ("diff-big-c", 9999, two_configs), ("diff-big-d", 1, {}), ("diff-big-d", 1, {})
        ),
        "10,000 records": create(("diff-big-e", 9999, {})),
    }
    for label, request in cases.items():
        for v in (2, 5, 7):
            p.answer(f"create v{v} {label}", request, v)
    for count in (10_002, 10_001):
        request = create_partitions.CreatePartitionsRequest(
            topics=[
                create_partitions.CreatePartitionsTopic(name=name, count=n, assignments=None)
                for name, n in (("diff-big", count), ("diff-nope", 2))
            ],
            timeout_ms=30000,
            validate_only=True,
        )
        for v in (0, 3):
            p.answer(f"partitions v{v} to {count}", request, v, unordered=("results",))


@scenario
def topic_admin_error_paths(p: Probe) -> None:
    """CreateTopics, CreatePartitions, DeleteTopics and DeleteRecords, each mixing outcomes."""
    p.create_topic("diff-ta", 1)
    for v in (2, 3, 4, 5, 7):
        request = create_topics.CreateTopicsRequest(
            topics=[
                create_topics.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    assignments=[],
                    configs=[
                        create_topics.CreatableTopicConfig(name=k, value=val)
                        for k, val in configs.items()
                    ],
                )
                for name, partitions, configs in [
                    (f"diff-ta-new-{v}", 2, {}),
                    ("diff-ta", 1, {}),
                    ("bad name!", 1, {}),
                    (f"diff-ta-bad-{v}", 0, {}),
                    (f"diff-ta-cfg-{v}", 1, {"retention.ms": "soon"}),
                ]
            ],
            timeout_ms=30000,
            validate_only=False,
        )
        p.answer(f"create v{v}", request, v)
        p.wait_until_served(f"diff-ta-new-{v}", 2)
    for v in (0, 1, 3):
        request = create_partitions.CreatePartitionsRequest(
            topics=[
                create_partitions.CreatePartitionsTopic(name=name, count=count, assignments=None)
                for name, count in ((f"diff-ta-new-{v + 2}", 3), ("diff-ta", 1), ("diff-nope", 2))
            ],
            timeout_ms=30000,
            validate_only=False,
        )
        # KRaft answers unknown topics first, then the controller's results.
        p.answer(f"partitions v{v}", request, v, unordered=("results",))
    for v in (0, 1, 2):
        request = delete_records.DeleteRecordsRequest(
            topics=[
                delete_records.DeleteRecordsTopic(
                    name=name,
                    partitions=[
                        delete_records.DeleteRecordsPartition(partition_index=i, offset=o)
                        for i, o in parts
                    ],
                )
                for name, parts in (("diff-ta", [(0, 0), (5, 0), (0, 99)]), ("diff-nope", [(0, 0)]))
            ],
            timeout_ms=30000,
        )
        # Kafka answers DeleteRecords from a map of partitions, grouped by topic.
        unordered = ("topics", "topics/partitions")
        p.answer(f"delete records v{v}", request, v, unordered=unordered)
    for v in (1, 4, 6):
        request = delete_topics.DeleteTopicsRequest(
            topic_names=[f"diff-ta-new-{v}" if v < 6 else "diff-ta-new-7", "diff-nope"],
            topics=[
                delete_topics.DeleteTopicState(name=name, topic_id=ZERO_UUID)
                for name in ("diff-ta-new-7", "diff-nope")
            ],
            timeout_ms=30000,
        )
        p.answer(f"delete topics v{v}", request, v, unordered=("responses",))
    for v in (1, 2, 3, 4):
        request = describe_configs.DescribeConfigsRequest(
            resources=[
                describe_configs.DescribeConfigsResource(
                    resource_type=kind, resource_name=name, configuration_keys=keys
                )
                for kind, name, keys in (
                    (2, "diff-ta", ["retention.ms", "cleanup.policy"]),
                    (2, "diff-nope", None),
                    (4, "7", None),
                    (2, "diff-ta", ["no.such.config"]),
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        p.answer(f"describe configs v{v}", request, v)


@scenario
def alter_configs_error_paths(p: Probe) -> None:
    """AlterConfigs and IncrementalAlterConfigs over good and bad resources in one request."""
    # One resource each: Kafka 4.1 never answers a request naming one resource twice.
    for name in ("diff-ac-1", "diff-ac-2", "diff-ac-3"):
        p.create_topic(name, 1)
    changes = [
        (2, "diff-ac-1", "retention.ms", "7200000"),
        (2, "diff-nope", "retention.ms", "7200000"),
        (2, "diff-ac-2", "no.such.config", "1"),
        (2, "diff-ac-3", "retention.ms", "soon"),
    ]
    for v in (2, 1, 0):
        request = alter_configs.AlterConfigsRequest(
            resources=[
                alter_configs.AlterConfigsResource(
                    resource_type=kind,
                    resource_name=name,
                    configs=[alter_configs.AlterableConfig(name=key, value=value)],
                )
                for kind, name, key, value in changes
            ],
            validate_only=True,
        )
        p.answer(f"alter v{v}", request, v)
    for v in (1, 0):
        request = incremental_alter_configs.IncrementalAlterConfigsRequest(
            resources=[
                incremental_alter_configs.AlterConfigsResource(
                    resource_type=kind,
                    resource_name=name,
                    configs=[
                        incremental_alter_configs.AlterableConfig(
                            name=key, config_operation=0, value=value
                        )
                    ],
                )
                for kind, name, key, value in changes
            ],
            validate_only=True,
        )
        p.answer(f"incremental v{v}", request, v)
