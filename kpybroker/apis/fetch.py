"""Fetch (key 1): serve record batches as byte ranges of segment files.

Versions: 4 adds isolation level and aborted transactions (Kafka 4's floor);
5 the log start offset; 7 fetch sessions (KIP-227); 9 the current leader
epoch check; 11 rack-aware preferred replica; 12 is flexible with diverging
epochs; 13 names topics by ID; 15 moves replica_id into replica_state; 16
adds the current leader and node endpoints (KIP-951); 17 a replica directory
ID; 18 lets a follower tell the high watermark it knows (KIP-1166), and its
fetch then returns as soon as the leader's is higher, so that followers
learn a new high watermark at once.

This broker never opens fetch sessions: it answers every full fetch (epoch
-1 or 0, whatever session it names) with session ID 0, which every client
accepts (KIP-227 lets a broker refuse). An incremental fetch (any other
epoch) therefore names a session that does not exist.

Records are never decoded: the log returns file ranges of whole batches,
which the connection sends with sendfile. When there is less than
``min_bytes`` to send, the request waits up to ``max_wait_ms`` on the
partitions' signals (not a polling loop): a consumer's fetch for the high
watermark to move, a follower's for an append.

A read_committed fetch (isolation level 1) reads below the last stable offset
rather than the high watermark, and gets the aborted transactions overlapping
what it reads (found in the transaction indexes, never in the records); a
read_uncommitted one gets null there, as in Kafka. Both are told the real last
stable offset. The last stable offset moves only with the high watermark, so
a read_committed fetch waits on the same signal.

Only the leader serves fetches. Followers fetch too, with their broker id as
``replica_id``: they read up to the log end, and their fetch offsets are how
the leader tracks them (``kpybroker.cluster``). A fetch sent to a broker that
does not lead gets NOT_LEADER_OR_FOLLOWER, from v16 with the current leader
and, for a consumer, its endpoint.

Every partition of the answer has records, empty where there is nothing to
send or the partition failed: never null.

A consumer needs READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition
otherwise, asked after an unknown topic id and before an unknown partition); a
follower needs CLUSTER_ACTION on the cluster, without which every partition is
refused. A consumer's fetch is sized and counted against its byte-rate quota
(``consumer_byte_rate``): over it, Kafka answers with no records at all and the
throttle time, and does not count what it did not send.

What is answered is counted in Kafka's BrokerTopicMetrics (``metrics.topic_stats``):
each partition read, once per request however often it was read while waiting, and
the bytes sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import NamedTuple

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.leadership import HINTED_ERRORS, leader_endpoints
from kpybroker.apis.support.registry import api
from kpybroker.cluster.partition import Partition
from kpybroker.log.log_config import LONG_MAX
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import fetch
from kpybroker.protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from kpybroker.security.acls.model import AclOperation, ResourceType

TOPIC_IDS_FROM = 13
REPLICA_STATE_FROM = 15
#: The current leader and its endpoint on NOT_LEADER_OR_FOLLOWER (KIP-951).
LEADER_DISCOVERY_FROM = 16
READ_COMMITTED = 1
#: Session epochs of a full fetch: sessionless (-1) or asking for a new session (0).
FULL_FETCH_EPOCHS = (-1, 0)
#: A v18 fetch's high watermark when the follower does not report one (KIP-1166).
UNKNOWN_HIGH_WATERMARK = LONG_MAX
#: Read errors Kafka's ReplicaManager does not count as failed fetch requests.
NOT_COUNTED_AS_FAILED = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.OFFSET_OUT_OF_RANGE,
    }
)


def session_error(request: FetchRequest) -> ErrorCode:
    """A full fetch is answered whatever session it names (a new one is never opened);
    an incremental one names a session this broker cannot have."""
    if request.session_epoch in FULL_FETCH_EPOCHS:
        return ErrorCode.NONE
    return ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def replica_id_of(request: FetchRequest, api_version: int) -> int:
    """The fetching follower's broker id; negative for a consumer."""
    if api_version >= REPLICA_STATE_FROM:
        return request.replica_state.replica_id
    return request.replica_id


class Wanted(NamedTuple):
    """One requested partition, its topic resolved once, when the request arrives."""

    topic: FetchTopic
    name: str | None  # None: an unknown topic id
    fetch: FetchPartition


def erroneous_answer(index: int, code: ErrorCode) -> PartitionData:
    """A partition Kafka refuses before reading (``FetchResponse.partitionResponse``):
    every offset unknown, an empty list of aborted transactions, empty records
    (never null: librdkafka cannot parse a null record set and retries forever).
    A partition that fails to read has null aborted transactions instead."""
    return PartitionData(
        partition_index=index,
        error_code=code,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=[],
        records=b"",
    )


class FetchPlan:
    """One pass over the requested partitions; rerun after each wake-up.

    The partitions are sorted out once, as Kafka's ``handleFetchRequest``
    does: an unknown topic id (UNKNOWN_TOPIC_ID) or a partition the cluster
    does not have (UNKNOWN_TOPIC_OR_PARTITION) is refused then and answered
    after the partitions that are read, in request order. A partition that
    goes away while the fetch waits is answered as Kafka's delayed fetch does:
    UNKNOWN_TOPIC_OR_PARTITION once the cluster no longer has it (also when it
    was named by id), NOT_LEADER_OR_FOLLOWER when it moved to other brokers.

    A follower's fetch (``replica_id`` >= 0) reads up to the log end rather
    than the high watermark, and its fetch offset, which is its own log end,
    is reported to the partition once, on the first pass: that is how the
    leader learns the follower's progress.
    """

    def __init__(self, ctx: RequestContext, request: FetchRequest) -> None:
        self.ctx = ctx
        self.request = request
        self.replica_id = replica_id_of(request, ctx.api_version)
        self.partitions: list[Partition] = []  # resolved partitions, for waiting on appends
        self.hinted_leaders: set[int] = set()
        self.bytes = 0
        self.errors = False
        self.passes = 0
        self.wanted, self.refused = self._sort_out()
        # A follower that told the high watermark it knows (v18) also waits for it to move.
        self.reports_hwm = self.from_follower and any(
            w.fetch.high_watermark != UNKNOWN_HIGH_WATERMARK for w in self.wanted
        )
        self.hwm_news = False  # a reporting follower is behind on some high watermark
        self.answers: list[tuple[Wanted, PartitionData]] = []  # the last pass's reads
        self.quota_bytes = self._quota_bytes()

    def _quota_bytes(self) -> int:
        """A consumer fetches at most what its byte-rate quota allows in one window."""
        quota = self.ctx.services.quotas.fetch
        if self.from_follower or not quota.quotas_enabled:
            return LONG_MAX
        return quota.max_value_in_quota_window(self.ctx.principal.name, self.ctx.client_id or "")

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0

    def _sort_out(self) -> tuple[list[Wanted], list[tuple[Wanted, PartitionData]]]:
        replicas = self.ctx.services.replicas
        by_id = self.ctx.api_version >= TOPIC_IDS_FROM
        # Kafka keys the request's partitions in a map: a partition named twice is read once.
        unique: dict[tuple[bytes, str, int], Wanted] = {}
        for topic in self.request.topics:
            name = replicas.topic_name(topic.topic_id) if by_id else topic.topic
            for fp in topic.partitions:
                unique[(topic.topic_id, topic.topic, fp.partition)] = Wanted(topic, name, fp)
        wanted, refused = [], []
        candidates = list(unique.values())
        if not self.from_follower:
            # A consumer's unknown topic ids are refused before anything is asked about the
            # rest, and answered first (Kafka's two passes); a follower's keep their place.
            unknown = ErrorCode.UNKNOWN_TOPIC_ID
            refused = [
                (w, erroneous_answer(w.fetch.partition, unknown))
                for w in candidates
                if w.name is None
            ]
            candidates = [w for w in candidates if w.name is not None]
        readable = self._readable(candidates)
        for want in candidates:
            index = want.fetch.partition
            if readable is not None and want.name not in readable:
                denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                refused.append((want, erroneous_answer(index, denied)))
            elif want.name is None:
                refused.append((want, erroneous_answer(index, ErrorCode.UNKNOWN_TOPIC_ID)))
            elif not replicas.knows(want.name, index):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                refused.append((want, erroneous_answer(index, code)))
            else:
                wanted.append(want)
        return wanted, refused

    def _readable(self, wanted: Iterable[Wanted]) -> set[str | None] | None:
        """The topics the fetcher may read (None: all, unknown ids included). A follower
        needs CLUSTER_ACTION, and without it gets nothing; a consumer READ per topic."""
        if self.from_follower:
            return None if self.ctx.authorize_cluster(AclOperation.CLUSTER_ACTION) else set()
        if self.ctx.services.authorizer is None:
            return None
        names = {want.name for want in wanted if want.name is not None}
        return set(self.ctx.authorized_names(AclOperation.READ, ResourceType.TOPIC, names))

    def run(self) -> list[FetchableTopicResponse]:
        remaining = min(self.request.max_bytes, self.quota_bytes)
        min_one = True
        self.bytes = 0
        self.errors = False  # a partition that failed to read: answer at once, as Kafka
        self.hwm_news = False
        self.partitions = []
        answers: list[tuple[Wanted, PartitionData]] = []
        for want in self.wanted:
            pd = self.read(want, min(want.fetch.partition_max_bytes, remaining), min_one)
            answers.append((want, pd))
            if pd.records:
                self.bytes += len(pd.records)
                remaining = max(0, remaining - len(pd.records))
                min_one = False
        self.passes += 1
        self.answers = answers
        return grouped(answers + self.refused)

    def read(self, want: Wanted, limit: int, min_one: bool) -> PartitionData:
        fp = want.fetch
        committed = self.request.isolation_level == READ_COMMITTED and not self.from_follower
        try:
            partition = self.ctx.services.replicas.partition_for(
                want.name, fp.partition, fp.current_leader_epoch
            )
            self.partitions.append(partition)
            records = partition.read_records(
                fp.fetch_offset,
                limit,
                min_one,
                for_follower=self.from_follower,
                committed=committed,
            )
            if self.from_follower and not self.passes:
                partition.update_follower(self.replica_id, fp.fetch_offset)
        except KafkaError as exc:
            return self.fail(want, exc)
        hwm = partition.high_watermark
        if self.reports_hwm and fp.high_watermark < hwm:
            self.hwm_news = True
        aborted = None
        if committed:
            aborted = [
                AbortedTransaction(txn.producer_id, txn.first_offset)
                for txn in partition.aborted_transactions(fp.fetch_offset, records)
            ]
        return PartitionData(
            partition_index=fp.partition,
            high_watermark=hwm,
            last_stable_offset=partition.last_stable_offset,
            log_start_offset=partition.log.log_start_offset,
            aborted_transactions=aborted,
            records=records if records is not None and len(records) else b"",
        )

    def fail(self, want: Wanted, exc: KafkaError) -> PartitionData:
        self.errors = True
        pd = erroneous_answer(want.fetch.partition, exc.code)
        pd.aborted_transactions = None
        if exc.code in HINTED_ERRORS and self.ctx.api_version >= LEADER_DISCOVERY_FROM:
            hint = self.ctx.services.replicas.leader_hint(want.name, want.fetch.partition)
            pd.current_leader = LeaderIdAndEpoch(hint.leader_id, hint.leader_epoch)
            if not self.from_follower:  # Kafka tells only consumers where the leader is
                self.hinted_leaders.add(hint.leader_id)
        return pd


def grouped(answers: list[tuple[Wanted, PartitionData]]) -> list[FetchableTopicResponse]:
    """One topic entry per run of answers of the same topic, keeping their order
    (Kafka's ``FetchResponse.toMessage``)."""
    responses: list[FetchableTopicResponse] = []
    last: tuple[bytes, str] | None = None
    for want, pd in answers:
        key = (want.topic.topic_id, want.topic.topic)
        if key != last:
            responses.append(
                FetchableTopicResponse(topic=want.topic.topic, topic_id=want.topic.topic_id)
            )
            last = key
        responses[-1].partitions.append(pd)
    return responses


def count_reads(ctx: RequestContext, plan: FetchPlan) -> None:
    """Kafka's BrokerTopicMetrics of what is answered: each partition read, and its bytes
    (a follower's as replication bytes out)."""
    stats = ctx.services.topic_stats
    follower = plan.from_follower
    for want, pd in plan.answers:
        failed = pd.error_code != 0 and pd.error_code not in NOT_COUNTED_AS_FAILED
        stats.fetched(want.name, len(pd.records), failed=failed, follower=follower)


def record_fetched(ctx: RequestContext, plan: FetchPlan) -> int:
    """Count a consumer's fetched bytes against its byte rate; the throttle time (ms) it
    earns. A throttled fetch is answered empty (Kafka's ``getThrottledResponse``), so what
    was counted is taken back."""
    quota = ctx.services.quotas.fetch
    if plan.from_follower or not quota.quotas_enabled:
        return 0
    user, client_id = ctx.principal.name, ctx.client_id or ""
    now_ms = time.monotonic_ns() // 1_000_000
    throttle_ms = quota.record(user, client_id, plan.bytes, now_ms)
    if throttle_ms:
        quota.unrecord(user, client_id, plan.bytes, now_ms)
    return throttle_ms


@api(fetch, 4, 18)
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    error = session_error(request)
    if error:
        return FetchResponse(error_code=error, session_id=0)
    plan = FetchPlan(ctx, request)
    responses = plan.run()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, request.max_wait_ms) / 1000
    while plan.bytes < request.min_bytes and not (plan.errors or plan.hwm_news):
        timeout = deadline - loop.time()
        if timeout <= 0 or not plan.partitions:
            break
        woken = await ctx.services.replicas.wait_for_append(
            plan.partitions,
            timeout,
            for_follower=plan.from_follower,
            and_high_watermark=plan.reports_hwm,
        )
        if not woken:
            break
        responses = plan.run()
    throttle_ms = record_fetched(ctx, plan)
    if throttle_ms:
        return FetchResponse(error_code=ErrorCode.NONE, throttle_time_ms=throttle_ms, session_id=0)
    count_reads(ctx, plan)
    response = FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=responses)
    if plan.hinted_leaders:
        response.node_endpoints = [
            NodeEndpoint(a.broker_id, a.host, a.port, a.rack)
            for a in leader_endpoints(ctx, plan.hinted_leaders)
        ]
    return response
