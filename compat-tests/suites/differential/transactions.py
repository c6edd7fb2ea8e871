"""Whole answers of the transactional APIs, transaction version 1, with their error paths.

FindCoordinator for a transactional id, InitProducerId with one,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions, WriteTxnMarkers sent by a client, transactional Produce,
and read_committed Fetch and ListOffsets (the last stable offset and the
aborted transactions), each at the versions both brokers serve, and
``transaction_version_2`` (KIP-890 part 2). Both brokers run with
``transaction.partition.verification.enable=false`` (``suite.py``), so
Kafka does not ask its coordinator before a transactional write (KIP-890
part 1) and both run the same protocol.

Every scenario uses its own transactional ids and topics: the brokers are
shared by all scenarios, and an open transaction holds its partitions'
last stable offset back until it times out.
"""

from __future__ import annotations

import time
from typing import Any

from kpybroker.protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    find_coordinator,
    init_producer_id,
    list_transactions,
    produce,
    txn_offset_commit,
    write_txn_markers,
)

from .consumer_groups import heartbeat
from .error_paths import (
    T0,
    Part,
    Topics,
    fetch_request,
    list_offsets_request,
    ready_coordinator,
)
from .probe import Probe, batch, error, scenario
from .scenarios import COORDINATOR_LOADING

#: A transaction timeout well past any scenario's length.
TIMEOUT_MS = 60_000
#: Errors a transaction coordinator gives before its __transaction_state partition is loaded.
TXN_LOADING = (*COORDINATOR_LOADING, "CONCURRENT_TRANSACTIONS")
#: Fields of a record batch header that depend on the broker: the producer id (each cluster's
#: own counter), and a control batch's timestamps (the broker's clock) with the crc over them.
BROKER_BATCH_FIELDS = (
    "*records/batch/producer_id",
    "*records/batch/base_timestamp",
    "*records/batch/max_timestamp",
    "*records/batch/crc",
)


class Producer:
    """A transactional id's producer id and epoch on one broker."""

    def __init__(self, tid: str, producer_id: int, epoch: int) -> None:
        self.tid, self.producer_id, self.epoch = tid, producer_id, epoch
        self.sequence: dict[tuple[str, int], int] = {}

    def records(self, topic: str, partition: int, values: list[bytes]) -> bytes:
        sequence = self.sequence.get((topic, partition), 0)
        self.sequence[(topic, partition)] = sequence + len(values)
        return batch(
            values,
            timestamp=T0,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=sequence,
            transactional=True,
        )


def ready_txn_coordinator(p: Probe, tid: str) -> None:
    """Until FindCoordinator answers for ``tid`` (__transaction_state is made on first use)."""
    request = find_coordinator.FindCoordinatorRequest(key_type=1, coordinator_keys=[tid])
    p.retry(lambda: p.call(request, 4).coordinators[0].error_code, lambda c: c == 0, tid)


def init_request(
    tid: str | None, timeout_ms: int = TIMEOUT_MS, producer_id: int = -1, epoch: int = -1
) -> Any:
    return init_producer_id.InitProducerIdRequest(
        transactional_id=tid,
        transaction_timeout_ms=timeout_ms,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


def first_init(p: Probe, tid: str, version: int = 3, label: str | None = None) -> Producer:
    """InitProducerId for a new ``tid``, retried while its coordinator loads."""
    ready_txn_coordinator(p, tid)
    request = init_request(tid)
    answer = p.retry(
        lambda: p.call(request, version),
        lambda a: error(a.error_code) not in TXN_LOADING,
        f"{tid}'s coordinator",
    )
    if label:
        p.see_whole(label, request, version, answer)
    assert answer.error_code == 0, f"{p.name}: InitProducerId {tid}: {error(answer.error_code)}"
    return Producer(tid, answer.producer_id, answer.producer_epoch)


def add_request(tid: str, producer_id: int, epoch: int, parts: list[tuple[str, list[int]]]) -> Any:
    """AddPartitionsToTxn v0-v3 (the v3-and-below fields)."""
    return add_partitions_to_txn.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            add_partitions_to_txn.AddPartitionsToTxnTopic(name=name, partitions=indexes)
            for name, indexes in parts
        ],
    )


def add_partitions(p: Probe, producer: Producer, parts: list[tuple[str, list[int]]]) -> None:
    request = add_request(producer.tid, producer.producer_id, producer.epoch, parts)
    answer = p.retry(
        lambda: p.call(request, 3),
        lambda a: all(
            error(r.partition_error_code) not in TXN_LOADING
            for t in a.results_by_topic_v3_and_below
            for r in t.results_by_partition
        ),
        f"{producer.tid}: AddPartitionsToTxn",
    )
    codes = [
        error(r.partition_error_code)
        for t in answer.results_by_topic_v3_and_below
        for r in t.results_by_partition
    ]
    assert set(codes) == {"NONE"}, f"{p.name}: AddPartitionsToTxn {producer.tid}: {codes}"


def end_request(producer: Producer, committed: bool, *, epoch: int | None = None) -> Any:
    return end_txn.EndTxnRequest(
        transactional_id=producer.tid,
        producer_id=producer.producer_id,
        producer_epoch=producer.epoch if epoch is None else epoch,
        committed=committed,
    )


def describe(p: Probe, tid: str) -> Any:
    request = describe_transactions.DescribeTransactionsRequest(transactional_ids=[tid])
    [state] = p.call(request, 0).transaction_states
    return state


def wait_for_state(p: Probe, tid: str, state: str) -> None:
    """Until the coordinator has written a transaction's markers (EndTxn answers before)."""
    p.retry(lambda: describe(p, tid).transaction_state, lambda s: s == state, f"{tid} {state}")


def end(p: Probe, producer: Producer, committed: bool) -> None:
    answer = p.call(end_request(producer, committed), 3)
    assert answer.error_code == 0, f"{p.name}: EndTxn {producer.tid}: {error(answer.error_code)}"
    wait_for_state(p, producer.tid, "CompleteCommit" if committed else "CompleteAbort")


def produce_request(tid: str | None, topic: str, partition: int, records: bytes) -> Any:
    return produce.ProduceRequest(
        transactional_id=tid,
        acks=-1,
        timeout_ms=10000,
        topic_data=[
            produce.TopicProduceData(
                name=topic,
                partition_data=[produce.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )


def send(p: Probe, producer: Producer, topic: str, partition: int, values: list[bytes]) -> None:
    records = producer.records(topic, partition, values)
    [t] = p.call(produce_request(producer.tid, topic, partition, records), 9).responses
    [part] = t.partition_responses
    assert part.error_code == 0, f"{p.name}: produce {producer.tid}: {error(part.error_code)}"


# -- FindCoordinator, InitProducerId --------------------------------------------------------


@scenario
def find_coordinator_transactional(p: Probe) -> None:
    """FindCoordinator key type 1 (a transactional id) at v1-v5, one and two ids at v4 and v5."""
    tid = "diff-fct"
    ready_txn_coordinator(p, tid)
    for v in (1, 2, 3, 4, 5):
        request = find_coordinator.FindCoordinatorRequest(
            key=tid, key_type=1, coordinator_keys=[tid]
        )
        p.answer(f"v{v}/transactional id", request, v)
    both = find_coordinator.FindCoordinatorRequest(key_type=1, coordinator_keys=[tid, "diff-fct-2"])
    for v in (4, 5):
        p.answer(f"v{v}/two transactional ids", both, v)


@scenario
def init_producer_id_transactional(p: Probe) -> None:
    """InitProducerId with a transactional id at v0-v5: first, again, and each way to fail."""
    for v in (0, 1, 2, 3, 4, 5):
        tid = f"diff-ipt-{v}"
        producer = first_init(p, tid, v, label=f"v{v}/first init")
        p.answer(f"v{v}/second init", init_request(tid), v)
        p.answer(f"v{v}/timeout 0", init_request(tid, 0), v)
        p.answer(f"v{v}/timeout above the maximum", init_request(tid, 900_001), v)
        p.answer(f"v{v}/empty transactional id", init_request(""), v)
        if v < 3:
            continue
        # v3 (KIP-360) lets a producer name the id and epoch it had.
        p.answer(f"v{v}/producer id without epoch", init_request(tid, producer_id=5), v)
        p.answer(f"v{v}/epoch without producer id", init_request(tid, epoch=1), v)
        wrong = init_request(tid, producer_id=producer.producer_id + 1000, epoch=1)
        p.answer(f"v{v}/wrong expected producer id", wrong, v)
        right = init_request(tid, producer_id=producer.producer_id, epoch=1)
        p.answer(f"v{v}/expected producer id and epoch", right, v)
        stale = init_request(tid, producer_id=producer.producer_id, epoch=0)
        p.answer(f"v{v}/stale expected epoch", stale, v)


# -- AddPartitionsToTxn, AddOffsetsToTxn ----------------------------------------------------

#: Kafka fills AddPartitionsToTxn's results from hash maps.
ADD_UNORDERED = (
    "results_by_topic_v3_and_below",
    "results_by_topic_v3_and_below/results_by_partition",
    "results_by_transaction",
    "results_by_transaction/topic_results",
    "results_by_transaction/topic_results/results_by_partition",
)


@scenario
def add_partitions_to_txn_answers(p: Probe) -> None:
    """AddPartitionsToTxn v0-v3: unknown id, wrong epoch, unknown topic, success, again."""
    topic = "diff-apt"
    p.create_topic(topic, 2)
    for v in (0, 1, 2, 3):
        producer = first_init(p, f"diff-apt-{v}")
        pid, epoch = producer.producer_id, producer.epoch
        steps = (
            ("unknown transactional id", f"diff-apt-nobody-{v}", epoch, [(topic, [0])]),
            ("wrong epoch", producer.tid, epoch + 3, [(topic, [0])]),
            ("unknown topic", producer.tid, epoch, [(topic, [0]), ("diff-nope", [0])]),
            ("unknown partition", producer.tid, epoch, [(topic, [0, 9])]),
            ("success", producer.tid, epoch, [(topic, [0, 1])]),
            ("already added", producer.tid, epoch, [(topic, [0])]),
        )
        for label, tid, e, parts in steps:
            p.answer(f"v{v}/{label}", add_request(tid, pid, e, parts), v, unordered=ADD_UNORDERED)


@scenario
def add_partitions_to_txn_batched(p: Probe) -> None:
    """AddPartitionsToTxn v4/v5 (the brokers' batched form) sent by a client."""
    topic = "diff-aptb"
    p.create_topic(topic, 2)
    for v in (4, 5):
        producer = first_init(p, f"diff-aptb-{v}")
        add_partitions(p, producer, [(topic, [0])])
        for verify_only in (True, False):
            request = add_partitions_to_txn.AddPartitionsToTxnRequest(
                transactions=[
                    add_partitions_to_txn.AddPartitionsToTxnTransaction(
                        transactional_id=tid,
                        producer_id=producer.producer_id,
                        producer_epoch=producer.epoch,
                        verify_only=verify_only,
                        topics=[
                            add_partitions_to_txn.AddPartitionsToTxnTopic(
                                name=topic, partitions=[0, 1]
                            )
                        ],
                    )
                    for tid in (producer.tid, f"diff-aptb-nobody-{v}")
                ]
            )
            label = f"v{v}/verify only {verify_only}"
            p.answer(label, request, v, unordered=ADD_UNORDERED)


@scenario
def add_offsets_to_txn_answers(p: Probe) -> None:
    """AddOffsetsToTxn v0-v4: success, again, wrong epoch, unknown transactional id."""
    group = "diff-aot-group"
    ready_coordinator(p, group)
    for v in (0, 1, 2, 3, 4):
        producer = first_init(p, f"diff-aot-{v}")

        def request(tid: str = producer.tid, epoch: int = producer.epoch) -> Any:
            return add_offsets_to_txn.AddOffsetsToTxnRequest(
                transactional_id=tid,
                producer_id=producer.producer_id,  # noqa: B023  (used within the iteration)
                producer_epoch=epoch,
                group_id=group,
            )

        p.answer(f"v{v}/unknown transactional id", request(tid=f"diff-aot-nobody-{v}"), v)
        p.answer(f"v{v}/wrong epoch", request(epoch=producer.epoch + 3), v)
        p.answer(f"v{v}/success", request(), v)
        p.answer(f"v{v}/again", request(), v)


# -- EndTxn ---------------------------------------------------------------------------------


@scenario
def end_txn_answers(p: Probe) -> None:
    """EndTxn v0-v4: no transaction, commit, its retry, abort after it, wrong epoch, unknown id."""
    topic = "diff-et"
    p.create_topic(topic, 1)
    for v in (0, 1, 2, 3, 4):
        producer = first_init(p, f"diff-et-{v}")
        p.answer(f"v{v}/commit without a transaction", end_request(producer, True), v)
        p.answer(f"v{v}/abort without a transaction", end_request(producer, False), v)
        add_partitions(p, producer, [(topic, [0])])
        send(p, producer, topic, 0, [b"v%d" % v])
        wrong = end_request(producer, True, epoch=producer.epoch + 3)
        p.answer(f"v{v}/wrong epoch", wrong, v)
        unknown = Producer(f"diff-et-nobody-{v}", producer.producer_id, producer.epoch)
        p.answer(f"v{v}/unknown transactional id", end_request(unknown, True), v)
        p.answer(f"v{v}/commit", end_request(producer, True), v)
        # The answer comes once PrepareCommit is written; the markers follow.
        wait_for_state(p, producer.tid, "CompleteCommit")
        p.answer(f"v{v}/commit again", end_request(producer, True), v)
        p.answer(f"v{v}/abort after the commit", end_request(producer, False), v)
        # An abort of an open transaction, then its retry.
        add_partitions(p, producer, [(topic, [0])])
        p.answer(f"v{v}/abort", end_request(producer, False), v)
        wait_for_state(p, producer.tid, "CompleteAbort")
        p.answer(f"v{v}/abort again", end_request(producer, False), v)
        p.answer(f"v{v}/commit after the abort", end_request(producer, True), v)


@scenario
def init_during_a_transaction(p: Probe) -> None:
    """InitProducerId while a transaction is open: CONCURRENT_TRANSACTIONS while the coordinator
    aborts it with a fenced epoch; the old producer is fenced; a retry gets a new epoch."""
    topic = "diff-idt"
    p.create_topic(topic, 1)
    for v in (3, 5):
        producer = first_init(p, f"diff-idt-{v}")
        add_partitions(p, producer, [(topic, [0])])
        send(p, producer, topic, 0, [b"open"])
        p.answer(f"v{v}/init while open", init_request(producer.tid), v)
        wait_for_state(p, producer.tid, "CompleteAbort")
        p.answer(f"v{v}/end with the fenced epoch", end_request(producer, True), 3)
        p.answer(f"v{v}/init again", init_request(producer.tid), v)


@scenario
def transaction_version_2(p: Probe) -> None:
    """Transaction version 2 (KIP-890): Produce v12 adds its partition; EndTxn v5 bumps the
    epoch (its retry, the old epoch, an abort with nothing added, a commit with nothing)."""
    topic = "diff-tv2"
    p.create_topic(topic, 1)
    producer = first_init(p, "diff-tv2")
    request = produce_request(producer.tid, topic, 0, producer.records(topic, 0, [b"a", b"b"]))
    added = p.retry(
        lambda: p.call(request, 12),
        lambda a: error(a.responses[0].partition_responses[0].error_code) != "NOT_ENOUGH_REPLICAS",
        "Produce v12's implicit add",
    )
    p.see_whole("v12/first write adds the partition", request, 12, added)
    p.answer("ongoing", describe_transactions.DescribeTransactionsRequest([producer.tid]), 0,
             varies=START_TIME)  # fmt: skip
    p.answer("v5/wrong epoch", end_request(producer, True, epoch=producer.epoch + 3), 5)
    p.answer("v5/commit", end_request(producer, True), 5)
    wait_for_state(p, producer.tid, "CompleteCommit")
    p.answer("v5/commit again with the old epoch", end_request(producer, True), 5)
    p.answer("v5/abort with the old epoch", end_request(producer, False), 5)
    bumped = Producer(producer.tid, producer.producer_id, producer.epoch + 1)
    p.answer("v5/commit with nothing added", end_request(bumped, True), 5)
    p.answer("v5/abort with nothing added", end_request(bumped, False), 5)
    wait_for_state(p, producer.tid, "CompleteAbort")
    p.answer("completed", describe_transactions.DescribeTransactionsRequest([producer.tid]), 0,
             varies=START_TIME)  # fmt: skip


# -- TxnOffsetCommit ------------------------------------------------------------------------

#: A topic ID no broker of the suite has.
UNKNOWN_TOPIC_ID = bytes.fromhex("5eed" * 8)


def txn_commit(
    producer: Producer,
    group: str,
    parts: list[tuple[str, list[int]]],
    *,
    member: str = "",
    epoch: int = -1,
    ids: dict[str, bytes] | None = None,
) -> Any:
    """TxnOffsetCommit of offset 5 in each partition of ``parts``; with ``ids`` (v6) the topics
    are named by ID only (a name not in ``ids`` by an ID no broker has)."""
    return txn_offset_commit.TxnOffsetCommitRequest(
        transactional_id=producer.tid,
        group_id=group,
        producer_id=producer.producer_id,
        producer_epoch=producer.epoch,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        group_instance_id=None,
        topics=[
            txn_offset_commit.TxnOffsetCommitRequestTopic(
                name=name if ids is None else "",
                topic_id=bytes(16) if ids is None else ids.get(name, UNKNOWN_TOPIC_ID),
                partitions=[
                    txn_offset_commit.TxnOffsetCommitRequestPartition(
                        partition_index=i, committed_offset=5, committed_metadata="m"
                    )
                    for i in indexes
                ],
            )
            for name, indexes in parts
        ],
    )


def add_offsets(p: Probe, producer: Producer, group: str) -> None:
    """AddOffsetsToTxn v3 (TxnOffsetCommit before v5 needs it; v5+ adds the partition itself)."""
    request = add_offsets_to_txn.AddOffsetsToTxnRequest(
        transactional_id=producer.tid,
        producer_id=producer.producer_id,
        producer_epoch=producer.epoch,
        group_id=group,
    )
    p.retry(lambda: error(p.call(request, 3).error_code), lambda e: e == "NONE", f"{group} added")


def settled(p: Probe, request: Any, version: int) -> Any:
    """The answer to ``request`` once the group's coordinator has loaded its partition."""
    return p.retry(
        lambda: p.call(request, version),
        lambda a: (
            not any(
                error(x.error_code) in COORDINATOR_LOADING for t in a.topics for x in t.partitions
            )
        ),
        f"{request.group_id}'s coordinator",
    )


@scenario
def txn_offset_commit_answers(p: Probe) -> None:
    """TxnOffsetCommit v3, v5 and v6 (KIP-1319: topics by ID, and GROUP_ID_NOT_FOUND and
    STALE_MEMBER_EPOCH where older versions get ILLEGAL_GENERATION): known, unknown and
    missing partitions; a member of a group that does not exist; a consumer group's member
    at its epoch, at a later one, unknown, and no member at all."""
    topic = "diff-toc"
    p.create_topic(topic, 2)
    [described] = p.metadata([topic]).topics
    ids = {topic: described.topic_id}
    unordered = ("topics", "topics/partitions")
    for v in (3, 5, 6):
        producer = first_init(p, f"diff-toc-{v}")
        group, missing, consumers = f"diff-toc-{v}", f"diff-toc-{v}-none", f"diff-toc-{v}-cg"
        for g in (group, missing, consumers):
            ready_coordinator(p, g)
            if v < 5:
                add_offsets(p, producer, g)
        by = ids if v >= 6 else None
        mixed = txn_commit(producer, group, [(topic, [0, 7]), ("diff-nope", [0])], ids=by)
        # Kafka loads a new __consumer_offsets partition a moment after FindCoordinator.
        p.see_whole(f"v{v}/mixed", mixed, v, settled(p, mixed, v), unordered=unordered)
        request = txn_commit(producer, missing, [(topic, [1])], member="m", epoch=3, ids=by)
        answer = settled(p, request, v)
        p.see_whole(f"v{v}/a member of a group that does not exist", request, v, answer)
        join = heartbeat(consumers, topics=[topic], owned=[])
        joined = p.retry(
            lambda join=join: p.call(join, 1),
            lambda a: error(a.error_code) not in COORDINATOR_LOADING,
            f"{consumers} joined",
        )
        assert joined.error_code == 0, f"{p.name}: {consumers}: {error(joined.error_code)}"
        member, epoch = joined.member_id, joined.member_epoch
        for label, (who, at) in {
            "at its epoch": (member, epoch),
            "at a later epoch": (member, epoch + 5),
            "unknown": ("diff-toc-nobody", epoch),
            "no member": ("", -1),
        }.items():
            request = txn_commit(producer, consumers, [(topic, [0])], member=who, epoch=at, ids=by)
            p.answer(f"v{v}/consumer group member {label}", request, v)
        p.call(heartbeat(consumers, member, -1), 1)
        # Each transaction is aborted as its version's client would end it.
        answer = p.call(end_request(producer, False), 3 if v < 5 else 5)
        assert answer.error_code == 0, f"{p.name}: EndTxn {producer.tid}: {answer.error_code}"
        wait_for_state(p, producer.tid, "CompleteAbort")


# -- DescribeTransactions, ListTransactions -------------------------------------------------

#: When a transaction started, by each broker's clock (-1 when none is open).
START_TIME = ("transaction_states/transaction_start_time_ms",)


@scenario
def describe_transactions_answers(p: Probe) -> None:
    """DescribeTransactions v0 in states Empty, Ongoing, CompleteCommit; unknown and empty ids."""
    topic = "diff-dt"
    p.create_topic(topic, 2)
    empty = first_init(p, "diff-dt-empty")
    ongoing = first_init(p, "diff-dt-ongoing")
    add_partitions(p, ongoing, [(topic, [1])])
    committed = first_init(p, "diff-dt-committed")
    add_partitions(p, committed, [(topic, [0])])
    send(p, committed, topic, 0, [b"c"])
    end(p, committed, True)
    ids = [empty.tid, ongoing.tid, committed.tid, "diff-dt-nobody", ""]
    for tid in ids:
        request = describe_transactions.DescribeTransactionsRequest(transactional_ids=[tid])
        p.answer(f"v0/{tid or 'empty id'}", request, 0, varies=START_TIME)
    together = describe_transactions.DescribeTransactionsRequest(transactional_ids=ids)
    p.answer("v0/all together", together, 0, varies=START_TIME, unordered=("transaction_states",))
    end(p, ongoing, False)


@scenario
def list_transactions_answers(p: Probe) -> None:
    """ListTransactions v0-v2 filtered by state, producer id, duration and (v2) id pattern.

    Every request names this scenario's producer ids or ids, as the brokers
    also hold the other scenarios' transactions.
    """
    topic = "diff-lt"
    p.create_topic(topic, 1)
    empty = first_init(p, "diff-lt-empty")
    ongoing = first_init(p, "diff-lt-ongoing")
    add_partitions(p, ongoing, [(topic, [0])])
    mine = [empty.producer_id, ongoing.producer_id]
    unordered = ("transaction_states", "unknown_state_filters")

    def listed(
        states: list[str], pids: list[int], duration: int = -1, pattern: str | None = None
    ) -> Any:
        return list_transactions.ListTransactionsRequest(
            state_filters=states,
            producer_id_filters=pids,
            duration_filter=duration,
            transactional_id_pattern=pattern,
        )

    time.sleep(0.2)  # the open transaction runs for longer than the 100 ms filter below
    for v in (0, 1, 2):
        steps = {
            "my producer ids": listed([], mine),
            "state Ongoing": listed(["Ongoing"], mine),
            "state Empty": listed(["Empty"], mine),
            "an unknown state": listed(["Ongoing", "NoSuchState"], mine),
            "another producer id": listed([], [ongoing.producer_id + 1000]),
        }
        if v >= 1:
            steps["longer than 100 ms"] = listed([], mine, 100)
            steps["longer than an hour"] = listed([], mine, 3_600_000)
        if v >= 2:
            steps["pattern"] = listed([], [], pattern="diff-lt-.*")
            steps["pattern and state"] = listed(["Empty"], [], pattern="diff-lt-e.*")
            steps["pattern matching nothing"] = listed([], [], pattern="diff-lt-nobody.*")
            steps["invalid pattern"] = listed([], [], pattern="diff-lt-(")
            steps["empty pattern"] = listed([], mine, pattern="")
        for label, request in steps.items():
            p.answer(f"v{v}/{label}", request, v, unordered=unordered)
    end(p, ongoing, False)


# -- Produce, Fetch and ListOffsets ---------------------------------------------------------

#: Produce versions asked: the lowest Kafka 4 serves, the first flexible one, the highest of
#: transaction version 1 (v12 is the first of transaction version 2).
PRODUCE_VERSIONS = (3, 9, 11)


@scenario
def produce_transactional(p: Probe) -> None:
    """A transactional batch without a transactional id on the request, then with one."""
    topic = "diff-ptx"
    p.create_topic(topic, len(PRODUCE_VERSIONS))
    for index, v in enumerate(PRODUCE_VERSIONS):
        producer = first_init(p, f"diff-ptx-{v}")
        add_partitions(p, producer, [(topic, [index])])
        records = producer.records(topic, index, [b"a", b"b"])
        without = produce_request(None, topic, index, records)
        p.answer(f"v{v}/no transactional id", without, v)
        p.answer(f"v{v}/transactional id", produce_request(producer.tid, topic, index, records), v)
        end(p, producer, True)


@scenario
def read_committed_answers(p: Probe) -> None:
    """Fetch and ListOffsets read_committed after a commit and an abort, then with one open."""
    topics = Topics(p)
    topic = "diff-rc"
    topics.create(topic, 1)
    committed = first_init(p, "diff-rc-committed")
    add_partitions(p, committed, [(topic, [0])])
    send(p, committed, topic, 0, [b"c1", b"c2"])  # offsets 0-1, its commit marker 2
    end(p, committed, True)
    aborted = first_init(p, "diff-rc-aborted")
    add_partitions(p, aborted, [(topic, [0])])
    send(p, aborted, topic, 0, [b"a1"])  # offset 3, its abort marker 4
    end(p, aborted, False)
    p.produce(topic, 0, batch([b"plain"], timestamp=T0))  # offset 5
    varies = BROKER_BATCH_FIELDS

    def look(label: str) -> None:
        # A fetch answers with the batch at its offset (both brokers, as the log is read
        # here), so each batch is asked for: committed data, its marker, aborted data, its
        # marker and the plain record after them.
        for v in (4, 11, 12, 16):
            for isolation in (0, 1):
                for offset in (0, 2, 3, 4, 5):
                    parts = [Part(topic, 0, offset)]
                    request = fetch_request(topics, v, parts, isolation_level=isolation)
                    step = f"{label}/fetch v{v} isolation {isolation} from {offset}"
                    p.answer(step, request, v, varies=varies)
        for v in (2, 4, 8, 10):
            for isolation in (0, 1):
                request = list_offsets_request([Part(topic, 0, -1)], isolation)
                p.answer(f"{label}/list offsets v{v} latest isolation {isolation}", request, v)

    look("settled")
    open_txn = first_init(p, "diff-rc-open")
    add_partitions(p, open_txn, [(topic, [0])])
    send(p, open_txn, topic, 0, [b"o1"])  # offset 6: the last stable offset stays there
    p.produce(topic, 0, batch([b"after"], timestamp=T0))  # offset 7
    look("open")
    # From a read_committed fetch at the open transaction's first offset.
    request = fetch_request(topics, 12, [Part(topic, 0, 6)], isolation_level=1)
    p.answer("open/fetch v12 isolation 1 from the last stable offset", request, 12, varies=varies)
    end(p, open_txn, False)
    look("open one aborted")


# -- WriteTxnMarkers ------------------------------------------------------------------------


@scenario
def write_txn_markers_from_a_client(p: Probe) -> None:
    """WriteTxnMarkers v1/v2 sent by a client: for a partition the cluster lacks, and one it has.

    Without an authorizer Kafka does not check CLUSTER_ACTION, so a client's
    markers are written. The transaction is one no coordinator knows of: an
    idempotent producer id writing transactional batches (verification is off).
    """
    topics = Topics(p)
    topic = "diff-wtm"
    topics.create(topic, 2)
    for index, v in enumerate((1, 2)):
        init = init_request(None, -1)
        answer = p.retry(lambda r=init: p.call(r, 4), lambda a: a.error_code == 0, "a producer id")
        producer = Producer(f"diff-wtm-{v}", answer.producer_id, answer.producer_epoch)
        send(p, producer, topic, index, [b"w1", b"w2"])
        request = write_txn_markers.WriteTxnMarkersRequest(
            markers=[
                write_txn_markers.WritableTxnMarker(
                    producer_id=producer.producer_id,
                    producer_epoch=producer.epoch,
                    transaction_result=True,
                    topics=[
                        write_txn_markers.WritableTxnMarkerTopic(name=name, partition_indexes=ps)
                        for name, ps in ((topic, [index]), ("diff-nope", [0]), (topic, [7]))
                    ],
                    coordinator_epoch=0,
                    transaction_version=0,
                )
            ]
        )
        unordered = ("markers/topics", "markers/topics/partitions")
        p.answer(f"v{v}/commit", request, v, unordered=unordered)
        for isolation in (0, 1):
            read = fetch_request(topics, 12, [Part(topic, index)], isolation_level=isolation)
            label = f"v{v}/fetch isolation {isolation} after"
            p.answer(label, read, 12, varies=BROKER_BATCH_FIELDS)
