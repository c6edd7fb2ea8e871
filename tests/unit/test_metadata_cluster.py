"""Tests of ``ClusterMetadata``: Kafka's znode layout, writes, and the watched cache.

They run on every backend of the store contract suite; "another broker" is a
second ``ClusterMetadata`` on a second session of the same store.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from kpybroker.metadata.cluster_metadata import ClusterMetadata
from kpybroker.metadata.model import (
    NO_LEADER,
    BrokerIdInUseError,
    ChangeKind,
    Endpoint,
    MetadataChange,
    PartitionState,
    PartitionStateConflictError,
    TopicExistsError,
    UnknownTopicError,
    random_uuid,
    uuid_from_str,
    uuid_to_str,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError
from tests.helpers.metadata_backends import (
    Backend,
    Recorder,
    ZooKeeperBackend,
    scenario,
)
from tests.helpers.waiting import eventually

PLAINTEXT = (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)


async def broker(backend: Backend, broker_id: int = 0) -> ClusterMetadata:
    """A started ClusterMetadata on a new session, registered as ``broker_id``."""
    cluster = ClusterMetadata(await backend.connect())
    await cluster.start()
    await cluster.register_broker(broker_id, PLAINTEXT)
    return cluster


async def znode(cluster: ClusterMetadata, path: str) -> object:
    return json.loads((await cluster.store.get(path))[0])


# -- ids -------------------------------------------------------------------------


def test_uuid_text_round_trip() -> None:
    value = uuid.UUID("d3f7c0a1-5b8e-4f0e-9a7b-2c1d0e9f8a7b")
    text = uuid_to_str(value)
    assert text == "0_fAoVuOTw6aeywdDp-Kew"
    assert uuid_from_str(text) == value
    for _ in range(200):
        fresh = random_uuid()
        assert len(uuid_to_str(fresh)) == 22
        assert not uuid_to_str(fresh).startswith("-")


@pytest.mark.parametrize(
    "text",
    [
        "AAAAAAAAAAAAAAAAAAAAAA",  # the all-zero UUID: "no id" in Kafka
        "0_fAoVuOTw6aeywdDp-Kew==",  # padded
        "0_fAoVuOTw6aeywdDp-Ke",  # short
        "0_fAoVuOTw6aeywdDp+Kew",  # not the URL alphabet
        "0_fAoVuOTw6aeywdDp-Kex",  # non-canonical trailing bits
    ],
)
def test_uuid_from_str_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        uuid_from_str(text)


# -- znode layout ----------------------------------------------------------------


@scenario
async def test_znodes_are_laid_out_as_kafka_wrote_them(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    cluster_id = await cluster.ensure_cluster_id()
    assert await cluster.ensure_cluster_id() == cluster_id
    assert await znode(cluster, "/cluster/id") == {"version": "1", "id": cluster_id}
    assert uuid_from_str(cluster_id)

    registration = await znode(cluster, "/brokers/ids/0")
    assert isinstance(registration, dict)
    assert int(registration.pop("timestamp")) == pytest.approx(time.time() * 1000, abs=60_000)
    assert registration == {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://127.0.0.1:9092"],
        "jmx_port": -1,
        "host": "127.0.0.1",
        "port": 9092,
        "version": 5,
    }
    assert (
        await cluster.store.exists("/brokers/ids/0")
    ).ephemeral_owner == cluster.store.session_id

    assert await cluster.elect_controller(0) == 1
    controller = await znode(cluster, "/controller")
    assert isinstance(controller, dict)
    del controller["timestamp"]
    assert controller == {"version": 2, "brokerid": 0, "kraftControllerEpoch": -1}
    assert (await cluster.store.get("/controller_epoch"))[0] == b"1"

    topic_id = await cluster.create_topic("orders", {0: [0], 1: [0]}, {"cleanup.policy": "compact"})
    assert await znode(cluster, "/brokers/topics/orders") == {
        "version": 3,
        "topic_id": uuid_to_str(topic_id),
        "partitions": {"0": [0], "1": [0]},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    assert await znode(cluster, "/brokers/topics/orders/partitions/1/state") == {
        "controller_epoch": 1,
        "leader": 0,
        "version": 1,
        "leader_epoch": 0,
        "isr": [0],
    }
    assert await znode(cluster, "/config/topics/orders") == {
        "version": 1,
        "config": {"cleanup.policy": "compact"},
    }
    await cluster.set_broker_config(None, {"log.retention.ms": "1000"})
    await cluster.set_broker_config(0, {"log.cleaner.threads": "2"})
    assert await znode(cluster, "/config/brokers/<default>") == {
        "version": 1,
        "config": {"log.retention.ms": "1000"},
    }
    assert await znode(cluster, "/config/brokers/0") == {
        "version": 1,
        "config": {"log.cleaner.threads": "2"},
    }


# -- topics ----------------------------------------------------------------------


@scenario
async def test_create_topic_fills_the_cache(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    topic_id = await cluster.create_topic("t", {0: [0], 1: [0], 2: [0]}, {"retention.ms": "5"})
    topic = cluster.topics()["t"]
    assert topic.topic_id == topic_id
    assert topic.configs == {"retention.ms": "5"}
    assert sorted(topic.partitions) == [0, 1, 2]
    partition = topic.partitions[2]
    assert (partition.replicas, partition.leader, partition.leader_epoch, partition.isr) == (
        (0,),
        0,
        0,
        (0,),
    )
    assert partition.state_version == 0
    assert list(cluster.topics()) == ["t"]


@scenario
async def test_create_topic_rejects_duplicates_and_bad_input(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    await cluster.create_topic("t", {0: [0]})
    with pytest.raises(TopicExistsError) as exists:
        await cluster.create_topic("t", {0: [0]})
    assert exists.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
    bad_requests = [
        ("a/b", {0: [0]}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", {0: [0]}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("x" * 250, {0: [0]}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("u", {}, ErrorCode.INVALID_PARTITIONS),
        ("u", {1: [0]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("u", {0: [0, 0]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("u", {0: [0], 1: [0, 1]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ]
    for name, assignment, code in bad_requests:
        with pytest.raises(KafkaError) as error:
            await cluster.create_topic(name, assignment)
        assert error.value.code is code
    assert list(cluster.topics()) == ["t"]


@scenario
async def test_partition_without_live_replica_has_no_state(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    await cluster.create_topic("t", {0: [0], 1: [7]})
    offline = cluster.topics()["t"].partitions[1]
    assert (offline.leader, offline.isr, offline.state, offline.state_version) == (
        NO_LEADER,
        (),
        None,
        None,
    )
    assert await cluster.store.exists("/brokers/topics/t/partitions/1/state") is None
    version = await cluster.set_partition_state("t", 1, PartitionState(7, 0, (7,), 1), None)
    assert version == 0
    assert cluster.topics()["t"].partitions[1].leader == 7


@scenario
async def test_delete_topic(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    await cluster.create_topic("t", {0: [0]}, {"retention.ms": "5"})
    await cluster.delete_topic("t")
    assert "t" not in cluster.topics()
    assert await cluster.store.exists("/brokers/topics/t") is None
    assert await cluster.store.exists("/config/topics/t") is None
    with pytest.raises(UnknownTopicError):
        await cluster.delete_topic("t")
    recreated = await cluster.create_topic("t", {0: [0], 1: [0]})
    assert cluster.topics()["t"].topic_id == recreated
    assert sorted(cluster.topics()["t"].partitions) == [0, 1]


@scenario
async def test_set_topic_config(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    await cluster.create_topic("t", {0: [0]}, {"retention.ms": "5"})
    await cluster.set_topic_config("t", {"segment.bytes": "1024"})
    assert cluster.topics()["t"].configs == {"segment.bytes": "1024"}
    with pytest.raises(UnknownTopicError):
        await cluster.set_topic_config("nope", {})


@scenario
async def test_partition_state_compare_and_set(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    await cluster.create_topic("t", {0: [0]})
    cached = cluster.topics()["t"].partitions[0]
    assert cached.state is not None
    bumped = PartitionState(0, cached.leader_epoch + 1, (0,), cached.state.controller_epoch)
    version = await cluster.set_partition_state("t", 0, bumped, cached.state_version)
    assert version == 1
    now = cluster.topics()["t"].partitions[0]
    assert (now.state, now.state_version) == (bumped, 1)

    stale = PartitionState(0, 9, (0,), 1)
    with pytest.raises(PartitionStateConflictError) as conflict:
        await cluster.set_partition_state("t", 0, stale, cached.state_version)
    assert conflict.value.code is ErrorCode.INVALID_UPDATE_VERSION
    with pytest.raises(PartitionStateConflictError):
        await cluster.set_partition_state("t", 0, stale, None)  # exists already
    assert cluster.topics()["t"].partitions[0].state == bumped
    with pytest.raises(UnknownTopicError):
        await cluster.set_partition_state("t", 5, stale, 0)


@scenario
async def test_recovery_state_round_trips(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    await cluster.create_topic("t", {0: [0]})
    recovering = PartitionState(0, 1, (0,), 1, leader_recovery_state=1)
    await cluster.set_partition_state("t", 0, recovering, 0)
    raw = await znode(cluster, "/brokers/topics/t/partitions/0/state")
    assert isinstance(raw, dict)
    assert raw["leader_recovery_state"] == 1
    assert cluster.topics()["t"].partitions[0].state == recovering


@scenario
async def test_large_topic(backend: Backend) -> None:
    """Many partitions in one topic; fewer on ZooKeeper, where each costs a round trip."""
    count = 2_000 if isinstance(backend, ZooKeeperBackend) else 10_000
    cluster = await broker(backend, 0)
    await cluster.create_topic("big", {p: [0] for p in range(count)})
    partitions = cluster.topics()["big"].partitions
    assert len(partitions) == count
    assert all(p.leader == 0 for p in partitions.values())


# -- brokers and controller ------------------------------------------------------


@scenario
async def test_broker_registration(backend: Backend) -> None:
    first = await broker(backend, 0)
    endpoints = (
        Endpoint("INTERNAL", "::1", 9093, "SSL"),
        Endpoint("PLAINTEXT", "broker1", 9092),
    )
    second = ClusterMetadata(await backend.connect())
    await second.start()
    registration = await second.register_broker(1, endpoints, rack="r1")
    assert registration.endpoints == endpoints
    assert registration.rack == "r1"
    raw = await znode(second, "/brokers/ids/1")
    assert isinstance(raw, dict)
    assert raw["endpoints"] == ["INTERNAL://[::1]:9093", "PLAINTEXT://broker1:9092"]
    assert (raw["host"], raw["port"], raw["rack"]) == ("broker1", 9092, "r1")
    await eventually(lambda: 1 in first.live_brokers())
    assert first.live_brokers()[1] == registration
    assert sorted(second.live_brokers()) == [0, 1]

    with pytest.raises(BrokerIdInUseError):
        await second.register_broker(0, PLAINTEXT)
    await second.register_broker(1, PLAINTEXT)  # its own registration: updated in place
    await eventually(lambda: first.live_brokers()[1].endpoints == PLAINTEXT)

    await second.close()
    await second.store.close()
    await eventually(lambda: 1 not in first.live_brokers())


@scenario
async def test_broker_re_registers_after_session_expiry(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    old = cluster.live_brokers()[0]
    await backend.expire(cluster.store)
    await eventually(lambda: 0 in cluster.live_brokers() and cluster.live_brokers()[0] != old)
    new = cluster.live_brokers()[0]
    assert new.epoch > old.epoch
    stat = await cluster.store.exists("/brokers/ids/0")
    assert stat is not None
    assert stat.ephemeral_owner == cluster.store.session_id


@scenario
async def test_controller_election(backend: Backend) -> None:
    first = await broker(backend, 0)
    second = await broker(backend, 1)
    assert await first.elect_controller(0) == 1
    assert await second.elect_controller(1) is None
    assert first.controller_id == second.controller_id == 0
    await first.close()
    await first.store.close()
    await eventually(lambda: second.controller_id is None)
    assert await second.elect_controller(1) == 2
    assert second.controller_id == 1


# -- following another broker's changes ----------------------------------------------


@scenario
async def test_cache_follows_changes_made_by_another_broker(backend: Backend) -> None:
    writer = await broker(backend, 0)
    follower = await broker(backend, 1)
    changes = Recorder()
    follower.add_listener(changes)

    topic_id = await writer.create_topic("t", {0: [0, 1], 1: [1, 0]}, {"retention.ms": "5"})
    # The config, topic and state znodes are watched separately, so they may arrive apart.
    await eventually(
        lambda: (
            "t" in follower.topics()
            and follower.topics()["t"].partitions[0].leader == 0
            and follower.topics()["t"].partitions[1].leader == 1
            and bool(follower.topics()["t"].configs)
        )
    )
    seen = follower.topics()["t"]
    assert seen.topic_id == topic_id
    assert seen.partitions[0].isr == (0, 1)
    assert seen.configs == {"retention.ms": "5"}
    assert MetadataChange(ChangeKind.TOPIC, "t") in changes.events
    assert MetadataChange(ChangeKind.PARTITION, "t", 1) in changes.events

    cached = writer.topics()["t"].partitions[0]
    await writer.set_partition_state("t", 0, PartitionState(1, 1, (1,), 1), cached.state_version)
    await eventually(lambda: follower.topics()["t"].partitions[0].leader == 1)
    assert follower.topics()["t"].partitions[0].state_version == 1

    await writer.set_topic_config("t", {"retention.ms": "6"})
    await eventually(lambda: follower.topics()["t"].configs == {"retention.ms": "6"})
    assert MetadataChange(ChangeKind.TOPIC_CONFIG, "t") in changes.events

    await writer.set_broker_config(1, {"num.io.threads": "4"})
    await eventually(lambda: follower.broker_config(1) == {"num.io.threads": "4"})
    assert MetadataChange(ChangeKind.BROKER_CONFIG, "1") in changes.events

    await writer.delete_topic("t")
    await eventually(lambda: "t" not in follower.topics())


@scenario
async def test_cache_sees_state_written_after_the_topic(backend: Backend) -> None:
    """A state znode that appears after its topic is found through ancestor watches."""
    writer = await broker(backend, 0)
    follower = await broker(backend, 1)
    await writer.create_topic("t", {0: [5]})  # broker 5 is not live: no state yet
    await eventually(lambda: "t" in follower.topics())
    assert follower.topics()["t"].partitions[0].state is None
    await writer.set_partition_state("t", 0, PartitionState(5, 0, (5,), 1), None)
    await eventually(lambda: follower.topics()["t"].partitions[0].leader == 5)


@scenario
async def test_cache_is_rebuilt_after_session_expiry(backend: Backend) -> None:
    writer = await broker(backend, 0)
    follower = await broker(backend, 1)
    await writer.create_topic("t", {0: [0]})
    await eventually(lambda: "t" in follower.topics())
    await backend.expire(follower.store)
    await eventually(lambda: 1 in writer.live_brokers() and 1 in follower.live_brokers())
    # The new session's watches work: changes keep flowing in.
    await writer.create_topic("u", {0: [0]})
    await eventually(lambda: "u" in follower.topics())
    cached = writer.topics()["t"].partitions[0]
    await writer.set_partition_state("t", 0, PartitionState(0, 3, (0,), 1), cached.state_version)
    await eventually(lambda: follower.topics()["t"].partitions[0].leader_epoch == 3)


@scenario
async def test_metadata_persists_across_restart(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    cluster_id = await cluster.ensure_cluster_id()
    topic_id = await cluster.create_topic("t", {0: [0]}, {"retention.ms": "5"})
    await cluster.close()
    await backend.restart()

    cluster = ClusterMetadata(await backend.connect())
    await cluster.start()
    assert await cluster.ensure_cluster_id() == cluster_id
    assert cluster.live_brokers() == {}
    topic = cluster.topics()["t"]
    assert (topic.topic_id, topic.configs, topic.partitions[0].leader) == (
        topic_id,
        {"retention.ms": "5"},
        0,
    )
    await cluster.close()


@scenario
async def test_listener_errors_do_not_break_the_cache(backend: Backend) -> None:
    cluster = await broker(backend, 0)

    def failing(change: MetadataChange) -> None:
        raise RuntimeError("listener bug")

    cluster.add_listener(failing)
    await cluster.create_topic("t", {0: [0]})
    assert cluster.topics()["t"].partitions[0].leader == 0


@scenario
async def test_topic_ids_resolve_to_names_until_the_topic_goes(backend: Backend) -> None:
    cluster = await broker(backend, 0)
    first = await cluster.create_topic("t", {0: [0]})
    assert cluster.topic_name(first.bytes) == "t"
    assert cluster.topic_name(bytes(16)) is None
    await cluster.delete_topic("t")
    await eventually(lambda: "t" not in cluster.topics())
    assert cluster.topic_name(first.bytes) is None
    second = await cluster.create_topic("t", {0: [0]})  # the same name, a new id
    assert cluster.topic_name(second.bytes) == "t"
    assert cluster.topic_name(first.bytes) is None
