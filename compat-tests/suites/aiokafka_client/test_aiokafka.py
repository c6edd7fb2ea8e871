"""aiokafka scenarios: what an asyncio application does with a broker.

aiokafka speaks old versions on purpose (ApiVersions v0, InitProducerId v0,
Metadata v1-5, OffsetCommit v2-3), which the Java and librdkafka suites rarely
exercise. Each test is a plain function running one ``asyncio.run``.

The broker is a secured one (``security`` fixture). Most tests use its
PLAINTEXT listener; the SASL tests log in as ``alice`` over SASL_SSL. aiokafka
has no ACL admin calls, so the suite's broker allows what no ACL governs
(``allow.everyone.if.no.acl.found=true``).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError
from aiokafka.helpers import create_ssl_context

from compat.security import SecuredBroker

CODECS = (None, "gzip", "snappy", "lz4", "zstd")


def run(coro: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coro(), 90))


async def create_topic(bootstrap: str, topic: str, partitions: int, **settings: Any) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **settings)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def read_partitions(
    bootstrap: str, topic: str, partitions: int, count: int
) -> dict[int, list[Any]]:
    """``count`` records in total from the start of every partition (no group)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        got: dict[int, list[Any]] = collections.defaultdict(list)
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < count and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for tp, records in batch.items():
                got[tp.partition].extend(records)
        return got
    finally:
        await consumer.stop()


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_produce_with_codec_then_consume(
    bootstrap: str, topic_name: str, codec: str | None
) -> None:
    async def scenario() -> None:
        await create_topic(bootstrap, topic_name, 1)
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5
        )
        await producer.start()
        try:
            values = [f"value-{i}-".encode() + b"z" * (i % 100) for i in range(300)]
            futures = [
                await producer.send(topic_name, v, key=b"k%d" % i) for i, v in enumerate(values)
            ]
            metadata = await asyncio.gather(*futures)
        finally:
            await producer.stop()
        assert [m.offset for m in metadata] == list(range(300))
        got = (await read_partitions(bootstrap, topic_name, 1, 300))[0]
        assert [r.value for r in got] == values
        assert [r.key for r in got] == [b"k%d" % i for i in range(300)]
        assert all(r.timestamp_type == 0 for r in got)

    run(scenario)


def test_idempotent_producer_writes_each_record_once(bootstrap: str, topic_name: str) -> None:
    """enable_idempotence (InitProducerId v0, acks=all): 2,000 concurrent sends, no gap or dup."""

    async def scenario() -> None:
        await create_topic(bootstrap, topic_name, 3)
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=2
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic_name, b"%d" % i, partition=i % 3) for i in range(2000)
            ]
            acked = await asyncio.gather(*futures)
        finally:
            await producer.stop()
        for partition in range(3):
            offsets = sorted(m.offset for m in acked if m.partition == partition)
            assert offsets == list(range(len(offsets))), f"partition {partition}: gaps or dups"
        got = await read_partitions(bootstrap, topic_name, 3, 2000)
        values = [int(r.value) for records in got.values() for r in records]
        assert sorted(values) == list(range(2000))

    run(scenario)


class Group:
    """``members`` consumers of one group, started together and stopped together;
    ``settings`` are further consumer settings (a secured listener's)."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, members: int, **settings: Any
    ) -> None:
        self.topic = topic
        self.consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=10000,
                heartbeat_interval_ms=500,
                **settings,
            )
            for _ in range(members)
        ]
        self.records: list[list[Any]] = [[] for _ in self.consumers]

    async def __aenter__(self) -> Group:
        for consumer in self.consumers:
            await consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for consumer in self.consumers:
            await consumer.stop()

    async def poll(self) -> None:
        """One poll by every member, all at once (each keeps what it got)."""
        batches = await asyncio.gather(*(c.getmany(timeout_ms=200) for c in self.consumers))
        for mine, batch in zip(self.records, batches, strict=True):
            for part in batch.values():
                mine.extend(part)

    def assignments(self) -> list[set[int]]:
        return [{tp.partition for tp in c.assignment()} for c in self.consumers]

    async def until_every_member_has_partitions(self, partitions: int, timeout: float = 30) -> None:
        """Poll until the assignments split all partitions among all members."""
        deadline = time.monotonic() + timeout
        while True:
            await self.poll()
            mine = self.assignments()
            if all(mine) and sorted(p for a in mine for p in a) == list(range(partitions)):
                return
            assert time.monotonic() < deadline, f"assignments never settled: {mine}"

    async def until_consumed(self, count: int, timeout: float = 45) -> list[Any]:
        """Poll until ``count`` records arrived in total, then commit them; all records."""
        deadline = time.monotonic() + timeout
        while sum(map(len, self.records)) < count:
            assert time.monotonic() < deadline, f"{sum(map(len, self.records))}/{count} consumed"
            await self.poll()
        for consumer in self.consumers:
            await consumer.commit()
        return [r for mine in self.records for r in mine]

    async def committed(self, partitions: int) -> dict[int, int | None]:
        first = self.consumers[0]
        return {p: await first.committed(TopicPartition(self.topic, p)) for p in range(partitions)}


async def produce_values(
    bootstrap: str, topic: str, values: list[bytes], partitions: int, **settings: Any
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, **settings)
    await producer.start()
    try:
        for i, value in enumerate(values):
            await producer.send(topic, value, partition=i % partitions)
        await producer.flush()
    finally:
        await producer.stop()


def test_group_consumers_share_partitions_commit_and_resume(
    bootstrap: str, topic_name: str
) -> None:
    """Two members split four partitions, read each record once, commit; a restart resumes."""

    async def scenario() -> None:
        await create_topic(bootstrap, topic_name, 4)
        group = f"{topic_name}-group"
        first = [b"first-%d" % i for i in range(400)]
        async with Group(bootstrap, topic_name, group, 2) as members:
            # Both members own partitions before anything is produced, so both must read.
            await members.until_every_member_has_partitions(4)
            await produce_values(bootstrap, topic_name, first, 4)
            consumed = await members.until_consumed(400)
            assert sorted(r.value for r in consumed) == sorted(first), "each record once"
            assert all(members.records), "a member with partitions read nothing"
            assert await members.committed(4) == {p: 100 for p in range(4)}

        later = [b"second-%d" % i for i in range(8)]
        await produce_values(bootstrap, topic_name, later, 4)
        async with Group(bootstrap, topic_name, group, 1) as member:
            consumed = await member.until_consumed(8)
            assert sorted(r.value for r in consumed) == sorted(later), "resumed from the commits"
            assert await member.committed(4) == {p: 102 for p in range(4)}

    run(scenario)


def test_admin_create_describe_delete(bootstrap: str, topic_name: str) -> None:
    async def scenario() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(topic_name, 2, 1, topic_configs={"retention.ms": "3600000"})]
            )
            assert topic_name in await admin.list_topics()
            [described] = await admin.describe_topics([topic_name])
            assert described["error_code"] == 0 and len(described["partitions"]) == 2, described
            await admin.delete_topics([topic_name])
            deadline = time.monotonic() + 20
            while topic_name in await admin.list_topics():
                assert time.monotonic() < deadline, "topic still listed after delete"
                await asyncio.sleep(0.2)
        finally:
            await admin.close()

    run(scenario)


def test_transactions_commit_abort_and_offsets(bootstrap: str, topic_name: str) -> None:
    """A transactional producer (InitProducerId v1, AddPartitionsToTxn, EndTxn) commits and
    aborts; read_committed sees the committed records only; send_offsets_to_transaction
    (AddOffsetsToTxn, TxnOffsetCommit) commits a group's offsets with the transaction."""

    async def scenario() -> None:
        await create_topic(bootstrap, topic_name, 2)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-txn")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(10):
                    await producer.send(topic_name, b"committed-%d" % i, partition=i % 2)
            await producer.begin_transaction()
            for i in range(4):
                await producer.send(topic_name, b"aborted-%d" % i, partition=i % 2)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send(topic_name, b"with-offsets", partition=0)
                await producer.send_offsets_to_transaction(
                    {TopicPartition(topic_name, 0): 5}, "aio-txn-group"
                )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic_name, p) for p in range(2)])
            seen: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(seen) < 11 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    seen.extend(r.value for r in records)
            await asyncio.sleep(1)  # anything aborted would arrive with the rest
            for records in (await consumer.getmany(timeout_ms=500)).values():
                seen.extend(r.value for r in records)
        finally:
            await consumer.stop()
        assert sorted(seen) == sorted([b"committed-%d" % i for i in range(10)] + [b"with-offsets"])
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets("aio-txn-group")
        finally:
            await admin.close()
        assert offsets[TopicPartition(topic_name, 0)].offset == 5

    run(scenario)


def scram_over_tls(security: SecuredBroker, password: str | None = None) -> dict[str, Any]:
    """Client settings for alice, SCRAM-SHA-512 over SASL_SSL, the broker checked against
    the CA (aiokafka takes TLS settings only as an ``ssl_context``)."""
    return {
        "security_protocol": "SASL_SSL",
        "ssl_context": create_ssl_context(cafile=security.ca_pem),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": password or security.users["alice"],
    }


def test_scram_sha_512_over_sasl_ssl_producer_and_group_consumer(
    security: SecuredBroker, topic_name: str
) -> None:
    """alice creates a topic, two group members split it, an idempotent producer fills it,
    the members read each record once and commit, all over SASL_SSL with SCRAM-SHA-512."""

    async def scenario() -> None:
        address = security.bootstrap_for("SASL_SSL")
        login = scram_over_tls(security)
        await create_topic(address, topic_name, 2, **login)
        values = [b"scram-%d" % i for i in range(200)]
        async with Group(address, topic_name, f"{topic_name}-group", 2, **login) as members:
            await members.until_every_member_has_partitions(2)
            await produce_values(address, topic_name, values, 2, **login)
            consumed = await members.until_consumed(200)
            assert sorted(r.value for r in consumed) == sorted(values), "each record once"
            assert await members.committed(2) == {0: 100, 1: 100}

    run(scenario)


def test_scram_sha_512_with_a_wrong_password_is_refused(
    security: SecuredBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """The producer cannot start, and the broker's SaslAuthenticate error (58, in Kafka's
    words) is what aiokafka logs as the reason."""

    async def scenario() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=security.bootstrap_for("SASL_SSL"),
            **scram_over_tls(security, password="not-alice-secret"),
        )
        try:
            with pytest.raises(KafkaConnectionError):
                await producer.start()
        finally:
            await producer.stop()

    run(scenario)
    expected = (
        "[Error 58] SaslAuthenticationFailed: Authentication failed during authentication due "
        "to invalid credentials with SASL mechanism SCRAM-SHA-512"
    )
    assert any(expected in record.getMessage() for record in caplog.records), caplog.text
