"""A replicated cluster as operators see it: assignment, Kafka's tools, preferred leaders.

Three brokers on a real ZooKeeper (see tests/helpers/replication_cluster.py). Kafka's own
``kafka-topics.sh``, ``kafka-leader-election.sh`` and ``kafka-reassign-partitions.sh``
(their Java classes) must tell the truth about replicas, the ISR and
under-replicated partitions, move leadership back to preferred replicas, and move
partitions between brokers with their data; ``kafka-configs.sh`` changes one broker's
loggers.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.helpers.process import REPO_ROOT, ToolRunner
from tests.helpers.replication_cluster import (
    ReplicatedCluster,
    cluster,
    wait_for,
    zookeeper,
)

__all__ = ["cluster", "zookeeper"]  # fixtures
pytestmark = pytest.mark.timeout(180)  # each test, on a loaded 2-core machine

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
LEADER_ELECTION_COMMAND = "org.apache.kafka.tools.LeaderElectionCommand"
REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
UNDER_REPLICATED = ("--describe", "--under-replicated-partitions")


def preferred_leaders(cluster: ReplicatedCluster, topic: str, partitions: int) -> bool:
    replicas = cluster.admin().list_topics(topic, timeout=10).topics[topic].partitions
    return all(cluster.state(topic, p).leader == replicas[p].replicas[0] for p in range(partitions))


def test_replication_factor_beyond_the_brokers_is_refused(cluster: ReplicatedCluster) -> None:
    admin = cluster.admin()
    future = admin.create_topics([NewTopic("too-many", 1, 4)])["too-many"]
    with pytest.raises(KafkaException) as exc:
        future.result(30)
    assert exc.value.args[0].name() == "INVALID_REPLICATION_FACTOR"
    cluster.create_topic("spread", 6, 3)
    meta = admin.list_topics("spread", timeout=10).topics["spread"]
    assert {p.leader for p in meta.partitions.values()} == {0, 1, 2}
    assert all(sorted(p.replicas) == [0, 1, 2] for p in meta.partitions.values())


def test_kafka_topics_describes_replicas_and_the_isr(
    cluster: ReplicatedCluster, java_tool: ToolRunner
) -> None:
    cluster.create_topic("described", 3, 3)
    bootstrap = cluster.brokers[0].bootstrap
    cluster.brokers[2].kill()
    wait_for(lambda: all(2 not in cluster.state("described", p).isr for p in range(3)), "ISR")
    under = java_tool(TOPIC_COMMAND, "--bootstrap-server", bootstrap, *UNDER_REPLICATED).check()
    assert under.stdout.count("Topic: described") == 3, under.describe()
    described = java_tool(
        TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--topic", "described"
    ).check()
    for p in range(3):
        state = cluster.state("described", p)
        assert f"Leader: {state.leader}\t" in described.stdout
        assert f"Isr: {','.join(map(str, state.isr))}\t" in described.stdout
    cluster.brokers[2].start()
    cluster.wait_for_full_isr("described", 3)
    under = java_tool(TOPIC_COMMAND, "--bootstrap-server", bootstrap, *UNDER_REPLICATED).check()
    assert "Topic: described" not in under.stdout, under.describe()


def test_kafka_configs_changes_the_loggers_of_the_broker_it_names(
    cluster: ReplicatedCluster, java_tool: ToolRunner
) -> None:
    """Broker loggers are per broker: the admin client sends the change to the broker named,
    whichever it bootstrapped from, and the others keep their levels."""

    def configs(broker_id: int, *args: str) -> str:
        return (
            java_tool(
                CONFIG_COMMAND,
                "--bootstrap-server",
                cluster.brokers[0].bootstrap,
                "--entity-type",
                "broker-loggers",
                "--entity-name",
                str(broker_id),
                *args,
            )
            .check()
            .stdout
        )

    configs(2, "--alter", "--add-config", "kpybroker=DEBUG")
    assert "  kpybroker=DEBUG sensitive=false synonyms={}" in configs(2, "--describe")
    for other in (0, 1):
        assert "  kpybroker=INFO sensitive=false synonyms={}" in configs(other, "--describe")


def test_kafka_leader_election_moves_leaders_back(
    cluster: ReplicatedCluster, java_tool: ToolRunner
) -> None:
    cluster.create_topic("elected", 3, 3)
    victim = cluster.state("elected", 0).leader
    cluster.brokers[victim].kill()
    wait_for(lambda: cluster.state("elected", 0).leader not in (victim, -1), "a new leader")
    cluster.brokers[victim].start()
    cluster.wait_for_full_isr("elected", 3)
    assert not preferred_leaders(cluster, "elected", 3)
    java_tool(
        LEADER_ELECTION_COMMAND,
        "--bootstrap-server",
        cluster.bootstrap,
        "--election-type",
        "PREFERRED",
        "--all-topic-partitions",
    ).check()
    wait_for(lambda: preferred_leaders(cluster, "elected", 3), "preferred leaders")


def test_kafka_reassign_partitions_moves_a_partition_and_its_data(
    cluster: ReplicatedCluster, java_tool: ToolRunner, tmp_path: Path
) -> None:
    cluster.create_topic("moved", 1, 1)
    source = cluster.state("moved", 0).leader
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1})  # RF 1 < min ISR
    for i in range(100):
        producer.produce("moved", b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    targets = [b for b in sorted(cluster.brokers) if b != source]
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": targets}]}
        )
    )

    def reassign(action: str) -> str:
        args = ("--bootstrap-server", cluster.bootstrap, action, "--reassignment-json-file")
        return java_tool(REASSIGN_COMMAND, *args, str(plan)).check().stdout

    assert "Successfully started partition reassignment for moved-0" in reassign("--execute")
    wait_for(lambda: "moved-0 is completed" in reassign("--verify"), "the move to complete")
    assignment, _ = cluster.zk.get("/brokers/topics/moved")
    assert json.loads(assignment)["partitions"] == {"0": targets}
    state = cluster.state("moved", 0)
    assert state.leader in targets and sorted(state.isr) == targets
    wait_for(lambda: not (cluster.brokers[source].log_dir / "moved-0").exists(), "old log deleted")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "moved-check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition("moved", 0, 0)])
    values = []
    while len(values) < 100:
        message = consumer.poll(30)
        assert message is not None and message.error() is None, message and message.error()
        values.append(message.value())
    consumer.close()
    assert values == [b"%d" % i for i in range(100)]


@pytest.mark.parametrize("cluster", [{"leader.imbalance.check.interval.seconds": 1}], indirect=True)
def test_auto_leader_rebalance(cluster: ReplicatedCluster) -> None:
    cluster.create_topic("balanced", 3, 3)
    victim = cluster.state("balanced", 0).leader
    cluster.brokers[victim].kill()
    wait_for(lambda: cluster.state("balanced", 0).leader not in (victim, -1), "a new leader")
    cluster.brokers[victim].start()
    wait_for(lambda: preferred_leaders(cluster, "balanced", 3), "preferred leaders again")


def test_scripts_cluster_starts_and_stops(tmp_path: Path) -> None:
    script = str(REPO_ROOT / "scripts" / "cluster")
    env = {**os.environ, "CLUSTER_DIR": str(tmp_path), "BASE_PORT": "0", "ZK_PORT": "0"}
    try:
        started = subprocess.run(
            [script, "start", "2"], env=env, capture_output=True, text=True, timeout=120
        )
        assert started.returncode == 0, started.stderr
        assert len(started.stdout.strip().split(",")) == 2
        status = subprocess.run([script, "status"], env=env, capture_output=True, text=True)
        assert status.stdout.count("running") == 3, status.stdout
    finally:
        subprocess.run([script, "stop"], env=env, timeout=120, check=True)
    status = subprocess.run([script, "status"], env=env, capture_output=True, text=True)
    assert "running" not in status.stdout
