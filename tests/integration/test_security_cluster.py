"""A secured, replicated cluster: brokers that authenticate to each other, ACLs every broker
follows, and a leader that fails over while an authorized client keeps writing.

Three brokers on a real ZooKeeper. They reach each other on their SASL_SSL listener with
SCRAM-SHA-512 as ``User:broker``, whose credential an operator put into ZooKeeper before
starting them, the way Kafka's documentation says to (``kafka-configs.sh --zookeeper ...
--alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users --entity-name
broker``): the znode ``/config/users/broker``. ``broker`` and ``admin`` are super users;
``alice`` may only write and read her topic, through ACLs made on one broker.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from kpybroker.security.sasl.scram_credentials import ScramMechanism, credential_to_string
from tests.helpers.replication_cluster import wait_for, zookeeper
from tests.helpers.secure_broker import Credentials, SecureKpyBroker
from tests.helpers.secure_clients import acl, add_acls, add_scram_users, confluent_config
from tests.helpers.zookeeper import ZooKeeperServer

__all__ = ["zookeeper"]  # fixture
pytestmark = pytest.mark.timeout(240)

BROKER_PASSWORD = "broker-secret"
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="broker" password="{BROKER_PASSWORD}";'
)


@pytest.fixture
def secured_cluster(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> Iterator[dict[int, SecureKpyBroker]]:
    chroot = f"/secure-{uuid.uuid4().hex[:6]}"
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start(10)
    try:
        credential = ScramMechanism.SCRAM_SHA_512.credential(BROKER_PASSWORD, 4096)
        config = {"SCRAM-SHA-512": credential_to_string(credential)}
        zk.create(
            f"{chroot}/config/users/broker",
            json.dumps({"version": 1, "config": config}).encode(),
            makepath=True,
        )
    finally:
        zk.stop()
        zk.close()
    credentials = Credentials(tmp_path / "credentials")
    brokers = {
        i: SecureKpyBroker(
            tmp_path / f"broker-{i}",
            credentials,
            {
                "broker.id": i,
                "zookeeper.connect": zookeeper.connect + chroot,
                "zookeeper.session.timeout.ms": 3000,
                "replica.lag.time.max.ms": 2000,
                "replica.fetch.wait.max.ms": 200,
                "default.replication.factor": 3,
                "min.insync.replicas": 2,
                "offsets.topic.replication.factor": 3,
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
                "super.users": "User:admin;User:broker",
            },
        )
        for i in range(3)
    }
    try:
        for broker in brokers.values():
            broker.start()
        yield brokers
    finally:
        for broker in brokers.values():
            if broker.is_running:
                broker.stop()
        for i, broker in brokers.items():
            (tmp_path / f"broker-{i}.log").write_text(broker.log_text())


def client(brokers: dict[int, SecureKpyBroker], credentials: Credentials, user: str) -> dict:
    config = confluent_config(brokers[0], credentials, "SASL_SSL", user, "SCRAM-SHA-512")
    config["bootstrap.servers"] = ",".join(
        b.bootstrap_for("SASL_SSL") for b in brokers.values() if b.is_running
    )
    return config


def test_brokers_replicate_over_sasl_ssl_and_acls_hold_through_a_failover(
    secured_cluster: dict[int, SecureKpyBroker],
) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = secured_cluster
    credentials = brokers[0].credentials
    add_scram_users(brokers[0])
    admin = AdminClient(client(brokers, credentials, "admin"))
    topic = f"replicated-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    # ACLs made through broker 2 bind on every broker (each watches the ACL znodes).
    add_acls(
        brokers[2],
        acl("TOPIC", topic, "alice", "WRITE"),
        acl("TOPIC", topic, "alice", "READ"),
        acl("GROUP", "alice-", "alice", "READ", pattern="PREFIXED"),
    )

    def in_sync(name: str, partitions: int) -> bool:
        metadata = admin.list_topics(name, timeout=10).topics[name]
        return len(metadata.partitions) == partitions and all(
            len(p.isrs) == 3 for p in metadata.partitions.values()
        )

    wait_for(
        lambda: in_sync(topic, 3),
        "every replica in sync over the SASL_SSL inter-broker listener",
        60,
    )
    # The group read after the failover needs __consumer_offsets, which the first
    # FindCoordinator creates, but, as in Kafka, only while offsets.topic.replication.factor
    # (3) brokers are registered: left to the consumer, it was made only if the consumer
    # came before the killed broker's ZooKeeper session expired, else refused (the consumer
    # retries COORDINATOR_NOT_AVAILABLE without a word) until the timeout. Made now, while
    # all three are up, the failover also moves the coordinators the killed broker had.
    wait_for(lambda: group_described(admin, "alice-readers"), "the group's coordinator", 30)
    wait_for(
        lambda: in_sync("__consumer_offsets", 50),  # offsets.topic.num.partitions
        "every replica of __consumer_offsets in sync",
        60,
    )

    acked: list[str] = []
    producer = Producer(client(brokers, credentials, "alice") | {"acks": "all"})

    def send(count: int, prefix: str) -> None:
        for i in range(count):
            producer.produce(
                topic,
                f"{prefix}{i}".encode(),
                on_delivery=lambda err, msg: err is None and acked.append(msg.value().decode()),
            )
        assert producer.flush(60) == 0

    send(100, "before-")
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    brokers[leader].kill()
    send(100, "after-")

    # The consumer's errors (its error callback's and its messages'), to say why it read
    # too little, with the brokers' logs, if it did.
    errors: list[str] = []
    consumer = Consumer(
        client(brokers, credentials, "alice")
        | {
            "group.id": "alice-readers",
            "auto.offset.reset": "earliest",
            "error_cb": lambda err: errors.append(f"{time.monotonic():.1f} error_cb: {err}"),
        }
    )
    consumer.subscribe([topic])
    read: set[str] = set()
    deadline = time.monotonic() + 60
    try:
        while len(read) < len(acked) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                errors.append(f"{time.monotonic():.1f} message: {message.error()}")
            else:
                read.add(message.value().decode())
    finally:
        consumer.close()
    assert len(acked) == 200 and set(acked) <= read, (
        f"acked {len(acked)}, read {len(read)} of them (broker {leader} killed)\n"
        + "consumer errors:\n"
        + "\n".join(errors[-50:])
        + "".join(
            f"\n===== broker {i} (tail) =====\n{b.log_text()[-6000:]}" for i, b in brokers.items()
        )
    )

    refused = [
        line
        for broker in brokers.values()
        for line in broker.log_text().splitlines()
        if "Failed authentication" in line
    ]
    assert refused == [], "brokers failed to authenticate to each other"


def test_a_broker_with_the_wrong_password_cannot_join(
    secured_cluster: dict[int, SecureKpyBroker], tmp_path: Path
) -> None:
    """A fourth broker whose JAAS password is wrong is refused by its peers, as in Kafka."""
    brokers = secured_cluster
    impostor = SecureKpyBroker(
        tmp_path / "impostor",
        brokers[0].credentials,
        {
            **{k: v for k, v in brokers[0].overrides.items() if k != "broker.id"},
            "broker.id": 3,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.replace(
                BROKER_PASSWORD, "wrong"
            ),
        },
    )
    impostor.start()
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        add_scram_users(brokers[0])
        admin = AdminClient(client(brokers, brokers[0].credentials, "admin"))
        topic = f"with-impostor-{uuid.uuid4().hex[:6]}"
        assignment: Any = [[0, 1, 3]]  # the impostor follows broker 0
        new = NewTopic(topic, 1, replica_assignment=assignment)
        admin.create_topics([new])[topic].result(30)

        def refused() -> bool:
            return any(
                "Failed authentication" in line
                for broker in brokers.values()
                for line in broker.log_text().splitlines()
            )

        wait_for(refused, "the peers to refuse the impostor's fetches", 60)
    finally:
        impostor.stop()


def group_described(admin: Any, group: str) -> bool:
    """Whether the admin client could describe ``group``: its coordinator may still be
    loading just after ``__consumer_offsets`` was made, and the client is told to retry."""
    from confluent_kafka import KafkaException

    try:
        admin.describe_consumer_groups([group])[group].result(30)
    except KafkaException:
        return False
    return True
