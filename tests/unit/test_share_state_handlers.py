"""The share-state APIs (83-87) and FindCoordinator's share keys, against a fake coordinator.

What the handlers add to the share coordinator: one call per partition,
results grouped by topic, Kafka's empty answer for a request without a
group, topics or partitions, CLUSTER_ACTION on the cluster (else every
partition is CLUSTER_AUTHORIZATION_FAILED and the coordinator is not asked),
and FindCoordinator v6 routing a valid "group:topicId:partition" key to it.
"""

from __future__ import annotations

import uuid
from typing import Any

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    delete_share_group_state,
    find_coordinator,
    initialize_share_group_state,
    read_share_group_state,
    read_share_group_state_summary,
    write_share_group_state,
)
from kpybroker.security.acls.authorizer import AclAuthorizer
from kpybroker.security.acls.model import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kpybroker.security.principal import KafkaPrincipal
from kpybroker.share_coordinator.persister import PartitionState, ShareKey, StateBatch, uuid_string
from kpybroker.share_coordinator.share_state import StateAnswer
from tests.helpers.fake_services import FakeShareState, call, services

T1 = uuid.UUID("6a1d3c9e-93b4-4c59-8f5e-2f4f3b0a9d11").bytes
T2 = uuid.UUID("0b7b1c7e-0f4e-4d2a-9a55-5d8f1e3c2b10").bytes
BROKER = KafkaPrincipal.user("broker")


def cluster_action_for_broker() -> AclAuthorizer:
    authorizer = AclAuthorizer(super_users=(), allow_if_no_acls=False)
    authorizer.add(
        AclBinding(
            ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL),
            AccessControlEntry(
                str(BROKER), "*", AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW
            ),
        )
    )
    return authorizer


def read_request(group: str = "g", topics: Any = None) -> Any:
    m = read_share_group_state
    if topics is None:
        topics = [
            m.ReadStateData(topic_id=T1, partitions=[m.PartitionData(0, 4), m.PartitionData(2, 4)]),
            m.ReadStateData(topic_id=T2, partitions=[m.PartitionData(1, 5)]),
        ]
    return m.ReadShareGroupStateRequest(group_id=group, topics=topics)


def test_read_answers_each_partition_grouped_by_topic() -> None:
    async def read(key: ShareKey, leader_epoch: int) -> StateAnswer:
        if key.partition == 2:
            return StateAnswer(ErrorCode.FENCED_LEADER_EPOCH, "old")
        return StateAnswer(
            state=PartitionState(3, 10 + key.partition, leader_epoch, (StateBatch(10, 12, 2, 1),))
        )

    fake = FakeShareState(read=read)
    answer = call(services(share_state=fake), read_request(), 0)
    assert sorted(args for _, args in fake.calls) == sorted(
        [(ShareKey("g", T1, 0), 4), (ShareKey("g", T1, 2), 4), (ShareKey("g", T2, 1), 5)]
    )
    [first, second] = answer.results
    assert (bytes(first.topic_id), bytes(second.topic_id)) == (T1, T2)
    p0, p2 = first.partitions
    assert (p0.partition, p0.error_code, p0.state_epoch, p0.start_offset) == (0, 0, 3, 10)
    assert [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in p0.state_batches
    ] == [(10, 12, 2, 1)]
    assert (p2.partition, p2.error_code, p2.error_message) == (2, 74, "old")
    assert second.partitions[0].start_offset == 11


def test_requests_without_group_topics_or_partitions_get_an_empty_answer() -> None:
    m = read_share_group_state
    fake = FakeShareState()
    for request in (
        read_request(group=""),
        read_request(topics=[]),
        read_request(topics=[m.ReadStateData(topic_id=T1, partitions=[])]),
    ):
        assert call(services(share_state=fake), request, 0).results == []
    assert fake.calls == []


def test_without_cluster_action_every_partition_is_refused() -> None:
    fake = FakeShareState()
    answer = call(
        services(
            share_state=fake, authorizer=AclAuthorizer(super_users=(), allow_if_no_acls=False)
        ),
        read_request(),
        0,
        principal=BROKER,
    )
    refused = [(p.partition, p.error_code) for r in answer.results for p in r.partitions]
    assert refused == [(0, 31), (2, 31), (1, 31)]
    assert answer.results[0].partitions[0].error_message == ("Cluster authorization failed.")
    assert fake.calls == []
    allowed = FakeShareState(read=lambda key, epoch: StateAnswer(state=PartitionState(0, 0)))
    answer = call(
        services(share_state=allowed, authorizer=cluster_action_for_broker()),
        read_request(),
        0,
        principal=BROKER,
    )
    assert all(p.error_code == 0 for r in answer.results for p in r.partitions)


def test_write_initialize_delete_and_summary_reach_the_coordinator() -> None:
    fake = FakeShareState(
        write=lambda key, state: StateAnswer(),
        initialize=lambda key, state_epoch, start: StateAnswer(
            ErrorCode.FENCED_STATE_EPOCH, "fenced"
        ),
        delete=lambda key: StateAnswer(),
        read_summary=lambda key, epoch: StateAnswer(
            state=PartitionState(2, 40, 6, delivery_complete_count=9)
        ),
    )
    s = services(share_state=fake)
    w = write_share_group_state
    written = call(
        s,
        w.WriteShareGroupStateRequest(
            group_id="g",
            topics=[
                w.WriteStateData(
                    topic_id=T1,
                    partitions=[
                        w.PartitionData(
                            partition=1,
                            state_epoch=2,
                            leader_epoch=6,
                            start_offset=40,
                            delivery_complete_count=3,
                            state_batches=[w.StateBatch(40, 45, 0, 2)],
                        )
                    ],
                )
            ],
        ),
        1,
    )
    assert written.results[0].partitions[0].error_code == 0
    assert fake.calls[-1] == (
        "write",
        (ShareKey("g", T1, 1), PartitionState(2, 40, 6, (StateBatch(40, 45, 0, 2),), 3)),
    )
    i = initialize_share_group_state
    initialized = call(
        s,
        i.InitializeShareGroupStateRequest(
            group_id="g",
            topics=[i.InitializeStateData(topic_id=T1, partitions=[i.PartitionData(1, 2, 40)])],
        ),
        0,
    )
    result = initialized.results[0].partitions[0]
    assert (result.error_code, result.error_message) == (124, "fenced")
    d = delete_share_group_state
    deleted = call(
        s,
        d.DeleteShareGroupStateRequest(
            group_id="g", topics=[d.DeleteStateData(topic_id=T1, partitions=[d.PartitionData(1)])]
        ),
        0,
    )
    assert deleted.results[0].partitions[0].error_code == 0
    r = read_share_group_state_summary
    summary_request = r.ReadShareGroupStateSummaryRequest(
        group_id="g",
        topics=[r.ReadStateSummaryData(topic_id=T1, partitions=[r.PartitionData(1, 6)])],
    )
    for version, count in ((0, -1), (1, 9)):
        summary = call(s, summary_request, version).results[0].partitions[0]
        assert (summary.state_epoch, summary.leader_epoch, summary.start_offset) == (2, 6, 40)
        assert summary.delivery_complete_count == count


def test_find_coordinator_v6_routes_share_keys() -> None:
    async def coordinator(key: str) -> tuple[ErrorCode, int]:
        return ErrorCode.NONE, 0

    fake = FakeShareState(find_coordinator=coordinator)
    good = f" g :{uuid_string(T1)}:3"
    answer = call(
        services(share_state=fake),
        find_coordinator.FindCoordinatorRequest(
            key_type=2, coordinator_keys=[good, "g:not-a-uuid:1", "g:x"]
        ),
        6,
    )
    assert [(c.key, c.error_code, c.node_id) for c in answer.coordinators] == [
        (good, 0, 0),
        ("g:not-a-uuid:1", ErrorCode.INVALID_REQUEST, -1),
        ("g:x", ErrorCode.INVALID_REQUEST, -1),
    ]
    # The key is hashed as Kafka does: the group id trimmed, the topic ID re-encoded.
    assert fake.calls == [("find_coordinator", (f"g:{uuid_string(T1)}:3",))]
    refused = call(
        services(
            share_state=fake, authorizer=AclAuthorizer(super_users=(), allow_if_no_acls=False)
        ),
        find_coordinator.FindCoordinatorRequest(key_type=2, coordinator_keys=[good]),
        6,
        principal=BROKER,
    )
    assert [(c.error_code, c.error_message) for c in refused.coordinators] == [
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    ]
