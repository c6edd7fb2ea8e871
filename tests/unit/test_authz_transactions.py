"""Authorization of the producer-id and transaction APIs, as Kafka 4.4's request handlers do it.

InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, TxnOffsetCommit, DescribeTransactions and ListTransactions
against fakes of their services and a real ``AclAuthorizer``: what a
refused principal is answered, in which order the checks come, and that
the coordinators are not asked about what was refused.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    init_producer_id,
    list_transactions,
    txn_offset_commit,
    write_txn_markers,
)
from kpybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
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
from kpybroker.transaction_coordinator.shard import EndResult, InitResult
from kpybroker.transaction_coordinator.transaction_state import TxnState
from tests.helpers.fake_services import (
    FakeGroups,
    FakeTopics,
    FakeTransactions,
    FakeVerifier,
    call,
    services,
    topic_of,
)

ALICE = KafkaPrincipal.user("alice")
BROKER = KafkaPrincipal.user("broker")
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TXN_AUTHZ = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
GROUP_AUTHZ, TOPIC_AUTHZ = (
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
)
CLUSTER_AUTHZ = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def granting(
    *grants: tuple[ResourceType, str, AclOperation], pattern: PatternType = PatternType.LITERAL
) -> AclAuthorizer:
    """An authorizer that allows alice exactly ``grants`` (and what they imply); ``broker``
    is a super user."""
    authorizer = AclAuthorizer(super_users=(BROKER,), allow_if_no_acls=False)
    for resource_type, name, operation in grants:
        authorizer.add(
            AclBinding(
                ResourcePattern(resource_type, name, pattern),
                AccessControlEntry(str(ALICE), "*", operation, AclPermissionType.ALLOW),
            )
        )
    return authorizer


def as_alice(request: Any, version: int, **kwargs: Any) -> Any:
    """``call`` for alice, with services built from ``kwargs``."""
    return call(services(**kwargs), request, version, principal=ALICE)


def errors_of(topics: list[Any]) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.error_code) for t in topics for p in t.partitions]


# -- InitProducerId ------------------------------------------------------------------------


async def init_ok(tid: str, timeout_ms: int, expected: object) -> InitResult:
    return InitResult(ErrorCode.NONE, 5, 1)


def test_init_producer_id_transactional_needs_write_on_the_id_before_anything_else() -> None:
    transactions = FakeTransactions(init_producer_id=init_ok)
    # An id without an epoch would be INVALID_REQUEST, but authorization comes first.
    request = init_producer_id.InitProducerIdRequest(
        transactional_id="tx", transaction_timeout_ms=60_000, producer_id=7, producer_epoch=-1
    )
    answer = as_alice(
        request, 5, transactions=transactions, authorizer=granting((TXN, "tx", DESCRIBE))
    )
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (TXN_AUTHZ, -1, -1)
    assert transactions.calls == []
    request.producer_id = -1
    answer = as_alice(
        request, 5, transactions=transactions, authorizer=granting((TXN, "tx", WRITE))
    )
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (0, 5, 1)


def test_init_producer_id_idempotent_needs_idempotent_write_or_write_on_some_topic(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = init_producer_id.InitProducerIdRequest(transactional_id=None)
    caplog.set_level(logging.DEBUG, logger="kafka.authorizer.logger")
    refused = as_alice(request, 4, authorizer=granting((TXN, "tx", WRITE), (TOPIC, "t", READ)))
    assert (refused.error_code, refused.producer_id, refused.producer_epoch) == (
        CLUSTER_AUTHZ,
        -1,
        -1,
    )
    assert "IDEMPOTENT_WRITE" not in caplog.text  # asked without logging its refusal
    for authorizer in (
        granting((CLUSTER, CLUSTER_NAME, AclOperation.IDEMPOTENT_WRITE)),
        granting((TOPIC, "t", WRITE)),
        granting((TOPIC, "logs-", WRITE), pattern=PatternType.PREFIXED),
    ):
        answer = as_alice(request, 4, authorizer=authorizer)
        assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (0, 1000, 0)


def test_init_producer_id_invalid_request_after_authorization() -> None:
    request = init_producer_id.InitProducerIdRequest(
        transactional_id=None, producer_id=7, producer_epoch=-1
    )
    answer = as_alice(request, 4, authorizer=granting((TOPIC, "t", WRITE)))
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (
        ErrorCode.INVALID_REQUEST,
        -1,
        -1,
    )


# -- AddPartitionsToTxn --------------------------------------------------------------------


async def added(tid: str, producer: object, partitions: object, version: int = 1) -> ErrorCode:
    return ErrorCode.NONE


def add_v3(*topics: tuple[str, list[int]]) -> add_partitions_to_txn.AddPartitionsToTxnRequest:
    return add_partitions_to_txn.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=5,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[
            add_partitions_to_txn.AddPartitionsToTxnTopic(name=n, partitions=p) for n, p in topics
        ],
    )


def v3_errors(answer: Any) -> list[tuple[str, int, int]]:
    return [
        (t.name, p.partition_index, p.partition_error_code)
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]


def test_add_partitions_v3_needs_write_on_the_transactional_id() -> None:
    transactions = FakeTransactions(add_partitions=added)
    answer = as_alice(
        add_v3(("t", [0, 1]), ("nope", [0])),
        3,
        transactions=transactions,
        topics=FakeTopics(topic_of("t", 2)),
        authorizer=granting((TOPIC, "t", WRITE), (TOPIC, "nope", WRITE)),
    )
    assert v3_errors(answer) == [("t", 0, TXN_AUTHZ), ("t", 1, TXN_AUTHZ), ("nope", 0, TXN_AUTHZ)]
    assert transactions.calls == []


def test_add_partitions_v3_refused_topic_fails_the_request() -> None:
    transactions = FakeTransactions(add_partitions=added)
    answer = as_alice(
        add_v3(("t", [0]), ("secret", [0]), ("nope", [0])),
        3,
        transactions=transactions,
        topics=FakeTopics(topic_of("t")),
        authorizer=granting((TXN, "tx", WRITE), (TOPIC, "t", WRITE), (TOPIC, "nope", WRITE)),
    )
    assert v3_errors(answer) == [
        ("t", 0, ErrorCode.OPERATION_NOT_ATTEMPTED),
        ("secret", 0, TOPIC_AUTHZ),  # refused, whether or not it exists
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert transactions.calls == []


def test_add_partitions_v3_never_adds_an_internal_topic() -> None:
    transactions = FakeTransactions(add_partitions=added)
    topics = FakeTopics(topic_of("t"), topic_of("__consumer_offsets"))
    answer = as_alice(
        add_v3(("t", [0]), ("__consumer_offsets", [0])), 2, transactions=transactions, topics=topics
    )
    assert v3_errors(answer) == [
        ("t", 0, ErrorCode.OPERATION_NOT_ATTEMPTED),
        ("__consumer_offsets", 0, TOPIC_AUTHZ),
    ]
    allowed = as_alice(add_v3(("t", [0])), 2, transactions=transactions, topics=topics)
    assert v3_errors(allowed) == [("t", 0, 0)]


def add_v4() -> add_partitions_to_txn.AddPartitionsToTxnRequest:
    return add_partitions_to_txn.AddPartitionsToTxnRequest(
        transactions=[
            add_partitions_to_txn.AddPartitionsToTxnTransaction(
                transactional_id="tx",
                producer_id=5,
                producer_epoch=0,
                verify_only=False,
                topics=[add_partitions_to_txn.AddPartitionsToTxnTopic(name="t", partitions=[0])],
            )
        ]
    )


def test_add_partitions_v4_needs_cluster_action() -> None:
    transactions = FakeTransactions(add_partitions=added)
    topics = FakeTopics(topic_of("t"))
    # Producers' permissions do not count: v4+ is a broker's request.
    authorizer = granting((TXN, "tx", WRITE), (TOPIC, "t", WRITE))
    answer = as_alice(add_v4(), 4, transactions=transactions, topics=topics, authorizer=authorizer)
    assert (answer.error_code, answer.results_by_transaction) == (CLUSTER_AUTHZ, [])
    assert transactions.calls == []
    for principal, authorizer in (
        (ALICE, granting((CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION))),
        (BROKER, granting()),
    ):
        svc = services(transactions=transactions, topics=topics, authorizer=authorizer)
        answer = call(svc, add_v4(), 5, principal=principal)
        assert answer.error_code == 0
        [result] = answer.results_by_transaction
        assert errors_of_results(result.topic_results) == [("t", 0, 0)]


def errors_of_results(topics: list[Any]) -> list[tuple[str, int, int]]:
    return [
        (t.name, p.partition_index, p.partition_error_code)
        for t in topics
        for p in t.results_by_partition
    ]


# -- AddOffsetsToTxn, EndTxn ---------------------------------------------------------------


def test_add_offsets_needs_write_on_the_id_then_read_on_the_group() -> None:
    transactions = FakeTransactions(add_partitions=added)
    groups = FakeGroups(partition_for=lambda group_id: 0)
    request = add_offsets_to_txn.AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=5, producer_epoch=0, group_id="g"
    )
    for authorizer, error in (
        (granting(), TXN_AUTHZ),
        (granting((GROUP, "g", READ)), TXN_AUTHZ),
        (granting((TXN, "tx", WRITE), (GROUP, "g", DESCRIBE)), GROUP_AUTHZ),
    ):
        answer = as_alice(
            request, 4, transactions=transactions, groups=groups, authorizer=authorizer
        )
        assert answer.error_code == error
    assert transactions.calls == []
    allowed = granting((TXN, "tx", WRITE), (GROUP, "g", READ))
    answer = as_alice(request, 4, transactions=transactions, groups=groups, authorizer=allowed)
    assert answer.error_code == 0
    [(_, (tid, producer, partitions))] = transactions.calls
    assert (tid, producer.producer_id, partitions) == ("tx", 5, [("__consumer_offsets", 0)])


def test_end_txn_needs_write_on_the_transactional_id() -> None:
    async def ended(*args: object) -> EndResult:
        return EndResult(ErrorCode.NONE, 5, 2)

    transactions = FakeTransactions(end_txn=ended)
    request = end_txn.EndTxnRequest(
        transactional_id="tx", producer_id=5, producer_epoch=1, committed=True
    )
    answer = as_alice(
        request, 5, transactions=transactions, authorizer=granting((TXN, "tx", DESCRIBE))
    )
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (TXN_AUTHZ, -1, -1)
    assert transactions.calls == []
    answer = as_alice(
        request, 5, transactions=transactions, authorizer=granting((TXN, "tx", WRITE))
    )
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (0, 5, 2)


# -- WriteTxnMarkers -----------------------------------------------------------------------


def markers_request() -> write_txn_markers.WriteTxnMarkersRequest:
    return write_txn_markers.WriteTxnMarkersRequest(
        markers=[
            write_txn_markers.WritableTxnMarker(
                producer_id=pid,
                producer_epoch=0,
                transaction_result=True,
                coordinator_epoch=1,
                topics=[
                    write_txn_markers.WritableTxnMarkerTopic(name=n, partition_indexes=[0])
                    for n in names
                ],
            )
            for pid, names in ((5, ("t", "u")), (6, ("t",)))
        ]
    )


def marker_errors(answer: Any) -> list[tuple[int, str, int, int]]:
    return [
        (m.producer_id, t.name, p.partition_index, p.error_code)
        for m in answer.markers
        for t in m.topics
        for p in t.partitions
    ]


async def written(pid: int, epoch: int, committed: bool, coordinator_epoch: int, partitions: Any):
    return dict.fromkeys(partitions, ErrorCode.NONE)


def test_write_txn_markers_refused_on_every_partition_of_every_marker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="kafka.authorizer.logger")
    markers = FakeTransactions(write=written)
    answer = as_alice(markers_request(), 1, txn_markers=markers, authorizer=granting())
    assert marker_errors(answer) == [
        (5, "t", 0, CLUSTER_AUTHZ),
        (5, "u", 0, CLUSTER_AUTHZ),
        (6, "t", 0, CLUSTER_AUTHZ),
    ]
    assert markers.calls == []
    # The ALTER question is asked silently; the CLUSTER_ACTION refusal is logged.
    assert [r.getMessage().split(" operation = ")[1].split()[0] for r in caplog.records] == [
        "CLUSTER_ACTION"
    ]


@pytest.mark.parametrize("operation", [AclOperation.ALTER, AclOperation.CLUSTER_ACTION])
def test_write_txn_markers_with_alter_or_cluster_action(operation: AclOperation) -> None:
    markers = FakeTransactions(write=written)
    answer = as_alice(
        markers_request(),
        2,
        txn_markers=markers,
        topics=FakeTopics(topic_of("t"), topic_of("u")),
        authorizer=granting((CLUSTER, CLUSTER_NAME, operation)),
    )
    assert {error for *_, error in marker_errors(answer)} == {0}
    assert len(markers.calls) == 2


# -- TxnOffsetCommit -----------------------------------------------------------------------


def txn_commit_request() -> txn_offset_commit.TxnOffsetCommitRequest:
    return txn_offset_commit.TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id="g",
        producer_id=5,
        producer_epoch=0,
        topics=[
            txn_offset_commit.TxnOffsetCommitRequestTopic(
                name=name,
                partitions=[
                    txn_offset_commit.TxnOffsetCommitRequestPartition(
                        partition_index=i, committed_offset=3
                    )
                    for i in (0, 1)
                ],
            )
            for name in ("secret", "t", "nope")
        ],
    )


async def commit_all(request: Any) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(partition_index=p.partition_index)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


@pytest.mark.parametrize(
    ("grants", "error"),
    [
        (((GROUP, "g", READ),), TXN_AUTHZ),
        (((TXN, "tx", WRITE), (GROUP, "g", DESCRIBE)), GROUP_AUTHZ),
    ],
)
def test_txn_offset_commit_refuses_every_partition_without_the_id_or_the_group(
    grants: tuple[tuple[ResourceType, str, AclOperation], ...], error: ErrorCode
) -> None:
    groups = FakeGroups(commit_transactional_offsets=commit_all, partition_for=lambda g: 0)
    verifier = FakeVerifier()
    answer = as_alice(
        txn_commit_request(),
        5,
        groups=groups,
        txn_verifier=verifier,
        topics=FakeTopics(topic_of("t", 2)),
        authorizer=granting(*grants, (TOPIC, "t", READ)),
    )
    assert errors_of(answer.topics) == [
        (name, i, error) for name in ("secret", "t", "nope") for i in (0, 1)
    ]
    assert (groups.calls, verifier.asked) == ([], [])


def test_txn_offset_commit_refuses_topics_before_looking_them_up() -> None:
    groups = FakeGroups(commit_transactional_offsets=commit_all, partition_for=lambda g: 0)
    answer = as_alice(
        txn_commit_request(),
        3,
        groups=groups,
        topics=FakeTopics(topic_of("t", 1), topic_of("secret", 2)),
        authorizer=granting(
            (TXN, "tx", WRITE), (GROUP, "g", READ), (TOPIC, "t", READ), (TOPIC, "nope", READ)
        ),
    )
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert errors_of(answer.topics) == [
        ("secret", 0, TOPIC_AUTHZ),
        ("secret", 1, TOPIC_AUTHZ),
        ("t", 1, unknown),
        ("t", 0, 0),
        ("nope", 0, unknown),
        ("nope", 1, unknown),
    ]
    [(_, (sent,))] = [c for c in groups.calls if c[0] == "commit_transactional_offsets"]
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in sent.topics] == [
        ("t", [0])
    ]


# -- DescribeTransactions, ListTransactions ------------------------------------------------


def transaction(transactional_id: str) -> Any:
    """What the coordinator knows of an id: an ongoing transaction over t-0, secret-0, t-1."""
    fields = SimpleNamespace(
        state=TxnState.ONGOING,
        timeout_ms=60_000,
        start_timestamp_ms=1_000,
        producer_id=5,
        producer_epoch=2,
        partitions=frozenset({("t", 0), ("secret", 0), ("t", 1)}),
    )
    return SimpleNamespace(
        transactional_id=transactional_id,
        current=fields,
        producer_id=5,
        state=TxnState.ONGOING,
    )


def test_describe_transactions_refuses_ids_and_hides_topics() -> None:
    transactions = FakeTransactions(describe=lambda tid: (ErrorCode.NONE, transaction(tid)))
    request = describe_transactions.DescribeTransactionsRequest(transactional_ids=["no", "tx"])
    authorizer = granting((TXN, "tx", DESCRIBE), (TOPIC, "t", READ))
    answer = as_alice(request, 0, transactions=transactions, authorizer=authorizer)
    refused, shown = answer.transaction_states
    assert (refused.transactional_id, refused.error_code, refused.transaction_state) == (
        "no",
        TXN_AUTHZ,
        "",
    )
    assert (refused.producer_id, refused.producer_epoch, refused.topics) == (0, 0, [])
    assert (refused.transaction_timeout_ms, refused.transaction_start_time_ms) == (0, 0)
    assert (shown.error_code, shown.transaction_state) == (0, "Ongoing")
    assert [(t.topic, t.partitions) for t in shown.topics] == [("t", [0, 1])]
    assert transactions.calls == [("describe", ("tx",))]


def test_list_transactions_shows_only_describable_ids() -> None:
    listed = [transaction(tid) for tid in ("a", "b", "c")]
    transactions = FakeTransactions(list_transactions=lambda wanted: (ErrorCode.NONE, listed))
    request = list_transactions.ListTransactionsRequest()
    authorizer = granting((TXN, "a", DESCRIBE), (TXN, "c", WRITE))
    answer = as_alice(request, 1, transactions=transactions, authorizer=authorizer)
    assert answer.error_code == 0
    assert [t.transactional_id for t in answer.transaction_states] == ["a", "c"]
    everything = as_alice(request, 1, transactions=transactions)
    assert [t.transactional_id for t in everything.transaction_states] == ["a", "b", "c"]


# -- without an authorizer -----------------------------------------------------------------


def test_without_an_authorizer_only_internal_topics_are_refused() -> None:
    async def ended(*args: object) -> EndResult:
        return EndResult(ErrorCode.NONE)

    transactions = FakeTransactions(
        add_partitions=added,
        end_txn=ended,
        init_producer_id=init_ok,
        describe=lambda tid: (ErrorCode.NONE, transaction(tid)),
    )
    groups = FakeGroups(commit_transactional_offsets=commit_all, partition_for=lambda g: 0)
    markers = FakeTransactions(write=written)
    topics = FakeTopics(topic_of("t", 2), topic_of("u"), topic_of("secret"))
    svc = services(transactions=transactions, groups=groups, txn_markers=markers, topics=topics)
    transactional = init_producer_id.InitProducerIdRequest(transactional_id="tx")
    assert call(svc, transactional, 5, principal=ALICE).producer_id == 5
    idempotent = init_producer_id.InitProducerIdRequest(transactional_id=None)
    assert call(svc, idempotent, 5, principal=ALICE).producer_id == 1000
    assert v3_errors(call(svc, add_v3(("t", [0])), 3, principal=ALICE)) == [("t", 0, 0)]
    assert call(svc, add_v4(), 4, principal=ALICE).error_code == 0
    add_offsets = add_offsets_to_txn.AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=5, producer_epoch=0, group_id="g"
    )
    assert call(svc, add_offsets, 4, principal=ALICE).error_code == 0
    end = end_txn.EndTxnRequest(transactional_id="tx", producer_id=5, producer_epoch=0)
    assert call(svc, end, 4, principal=ALICE).error_code == 0
    assert {e for *_, e in marker_errors(call(svc, markers_request(), 1, principal=ALICE))} == {0}
    commit = call(svc, txn_commit_request(), 3, principal=ALICE)
    assert {e for *_, e in errors_of(commit.topics)} == {0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    described = call(
        svc,
        describe_transactions.DescribeTransactionsRequest(transactional_ids=["tx"]),
        0,
        principal=ALICE,
    )
    assert [t.topic for t in described.transaction_states[0].topics] == ["secret", "t"]
