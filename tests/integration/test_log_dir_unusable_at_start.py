"""A log directory that cannot be used at start-up is offline; the broker starts on the others.

As Kafka's ``LogManager`` (``createAndValidateLogDirs``, ``loadLogs``): one ERROR
line names the directory, its partitions answer KAFKA_STORAGE_ERROR (and are not
re-created empty in the healthy directory), DescribeLogDirs, Metadata and the
metrics report it as after a failure at run time, and new partitions go to the
directories online. Once the disk is repaired, a restart finds every acknowledged
record. With no usable directory the broker exits with status 1, as Kafka does.

In a cluster the controller learns a broker's offline replicas when it is elected
and when the broker registers (it asks with DescribeLogDirs), so a controller
failover does not hand leadership to an offline replica through an unclean
election, which would leave the partition stuck on a replica that cannot serve.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from kpybroker.protocol.errors import ErrorCode
from tests.helpers.brokers import BrokerFactory, BrokerStartError
from tests.helpers.disk_faults import loop_filesystem
from tests.helpers.groups_wire import Wire
from tests.helpers.log_life import consume_all, create_topic, wait_until
from tests.helpers.replication_cluster import ReplicatedCluster, wait_for, zookeeper
from tests.helpers.zookeeper import ZooKeeperServer
from tests.integration.test_log_dir_failure import (
    BEFORE,
    TOPIC,
    Acked,
    describe_log_dirs,
    list_offsets_error,
    offline_replicas,
    placement,
    two_dir_broker,
)
from tests.integration.test_metrics import metrics_url, scrape, value

__all__ = ["zookeeper"]  # a fixture

FRESH = "fresh"


def dirs_of(wire: Wire, topic: str) -> dict[int, str]:
    """The log directory of each partition of ``topic`` on this broker."""
    return {
        p.partition_index: r.log_dir
        for r in describe_log_dirs(wire).results
        for t in r.topics
        if t.name == topic
        for p in t.partitions
    }


def test_a_dir_failed_before_start_is_offline_and_the_others_serve(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    with loop_filesystem(tmp_path, "faulty") as fs:
        broker, doomed = two_dir_broker(broker_factory, fs.mountpoint, tmp_path, {})
        healthy = 1 - doomed
        faulty_dir, healthy_dir = (
            str(fs.mountpoint.resolve()),
            str((tmp_path / "healthy").resolve()),
        )
        acked = Acked()
        with Wire(broker.bootstrap) as wire:
            for _ in range(BEFORE):
                assert acked.produce(wire, doomed) == ErrorCode.NONE
                assert acked.produce(wire, healthy) == ErrorCode.NONE
        assert broker.stop() == 0
        fs.shut_down()  # every later operation on it fails with EIO

        broker.start()
        with Wire(broker.bootstrap) as wire:
            assert acked.produce(wire, doomed) == ErrorCode.KAFKA_STORAGE_ERROR
            assert list_offsets_error(wire, doomed) == ErrorCode.KAFKA_STORAGE_ERROR
            assert acked.produce(wire, healthy) == ErrorCode.NONE
            assert list_offsets_error(wire, healthy) == ErrorCode.NONE
            assert offline_replicas(wire) == {doomed: [0], healthy: []}
            dirs = placement(wire)
            assert dirs[faulty_dir] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
            assert dirs[healthy_dir] == (ErrorCode.NONE, {healthy})  # not re-created there
            create_topic(broker.bootstrap, FRESH, {}, partitions=2)
            wait_until(lambda: len(dirs_of(wire, FRESH)) == 2, "the new topic's logs")
            assert set(dirs_of(wire, FRESH).values()) == {healthy_dir}
        samples = scrape(metrics_url(broker))
        assert value(samples, "kafka_log_logmanager_offlinelogdirectorycount") == 1
        text = broker.log_text().split("ready, listening on", 1)[1]  # the second run
        errors = [line for line in text.splitlines() if " ERROR " in line]
        assert len(errors) == 1, errors
        assert re.search(
            rf"(Failed to create or validate data directory|Error while loading log dir) "
            rf"{re.escape(str(fs.mountpoint))}: \[Errno 5\] .*; the directory goes offline$",
            errors[0],
        ), errors
        assert "Traceback" not in text
        assert broker.stop() == 0

        fs.repair()
        broker.start()
        with Wire(broker.bootstrap) as wire:
            for partition in (doomed, healthy):
                stored = [
                    record for _, (_, record) in consume_all(broker.bootstrap, TOPIC, partition)
                ]
                assert stored == acked.values[partition], partition
                assert acked.produce(wire, partition) == ErrorCode.NONE
            assert {code for code, _ in placement(wire).values()} == {ErrorCode.NONE}
        assert broker.stop() == 0


def test_without_a_usable_dir_the_broker_does_not_start(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("a file where the log directory should be")
    with pytest.raises(BrokerStartError, match="exit status: 1") as failed:
        broker_factory({"log.dirs": not_a_dir, "metadata.log.dir": tmp_path / "metadata"})
    message = str(failed.value)
    assert f"Failed to create or validate data directory {not_a_dir}: [Errno 17]" in message
    assert (
        f"Shutdown broker because none of the specified log dirs from {not_a_dir} "
        "can be created or validated" in message
    )


@pytest.mark.timeout(180)
def test_a_new_controller_keeps_offline_replicas_out_of_unclean_elections(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    """Partition replicas [O, V, C], unclean leader election on; C is the controller. V's
    log dir fails (V leaves the ISR), C is killed -9 (the ISR is O alone), then O too.
    The only live replica left is V's, which is offline: the new controller, having
    asked the brokers, elects no leader (before, it knew nothing and elected V, whose
    replica cannot serve, and O, back, then followed it forever). O restarts and leads
    again with every acknowledged record."""
    with loop_filesystem(tmp_path, "faulty") as fs:
        cluster = ReplicatedCluster(tmp_path / "cluster", zookeeper)
        v = 2
        victim = cluster.brokers[v]
        victim.overrides["log.dirs"] = f"{fs.mountpoint},{victim.log_dir}"
        cluster.start()
        try:
            c = cluster.controller()
            assert c not in (-1, v), c
            [o] = set(cluster.brokers) - {c, v}
            admin = cluster.admin()  # alive until the answer: its destruction cancels it
            config = {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"}
            created = admin.create_topics(
                [NewTopic(TOPIC, 1, replica_assignment=[[o, v, c]], config=config)]
            )
            created[TOPIC].result(30)
            wait_for(lambda: set(cluster.state(TOPIC, 0).isr) == {o, v, c}, "the full ISR")
            with Wire(victim.bootstrap) as wire:
                # The ISR starts full in ZooKeeper; V creates its log when LeaderAndIsr reaches it.
                wait_until(lambda: dirs_of(wire, TOPIC) != {}, "V's log")
                assert dirs_of(wire, TOPIC) == {0: str(fs.mountpoint.resolve())}
            acked = Acked()
            with Wire(cluster.brokers[o].bootstrap) as wire:
                for _ in range(BEFORE):
                    assert acked.produce(wire, 0) == ErrorCode.NONE
                fs.shut_down()
                assert acked.produce(wire, 0) == ErrorCode.NONE  # V's fetch meets the fault
            wait_for(lambda: set(cluster.state(TOPIC, 0).isr) == {o, c}, "V to leave the ISR")

            cluster.brokers[c].kill()
            wait_for(lambda: cluster.controller() not in (-1, c), "a new controller")
            wait_for(lambda: cluster.state(TOPIC, 0).isr == (o,), "C to leave the ISR")
            cluster.brokers[o].kill()
            wait_for(lambda: cluster.state(TOPIC, 0).leader != o, "O's leadership to end")
            assert cluster.state(TOPIC, 0).leader == -1  # not V's offline replica

            cluster.brokers[o].start()
            wait_for(lambda: cluster.state(TOPIC, 0).leader == o, "O to lead again")
            stored = [record for _, (_, record) in consume_all(cluster.brokers[o].bootstrap, TOPIC)]
            assert stored == acked.values[0]
            cluster.brokers[c].start()
            assert victim.stop() == 0
            fs.repair()
            victim.start()
            cluster.wait_for_full_isr(TOPIC, 1, timeout=60)
        finally:
            problems = cluster.close()
        assert not problems, "\n\n".join(problems)
