"""Transactions in a replicated cluster: three brokers, a real ZooKeeper, coordinator failover.

``__transaction_state`` and the data topic are replicated three ways
(min.insync.replicas 2). A librdkafka transactional producer commits and
aborts transactions over every partition in a loop while the test kills
(kill -9) the broker leading its coordinator partition, then the leaders of
the data partitions, restarting each. Every transaction's outcome is
recorded as the producer learned it: committed, aborted, or uncertain (the
commit call failed, so the transaction may or may not have committed).

A read_committed consumer watches the topic throughout. The checks: it never
sees an aborted record, nor any record twice; at the end, read again from
the start, every committed record is there exactly once, no aborted record
is, and an uncertain transaction is there whole or not at all; with
read_uncommitted, no record appears twice (the producer is idempotent too).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as TP

from kpybroker.coordinator.partitioning import partition_for
from tests.helpers.reading import read_to_end
from tests.helpers.replication_cluster import ReplicatedCluster, cluster, wait_for, zookeeper

__all__ = ["cluster", "zookeeper"]  # fixtures
pytestmark = pytest.mark.timeout(240)

TOPIC = "txn-faults"
PARTITIONS = 3
STATE_PARTITIONS = 3
TXN_ID = "txn-failover"
RECORDS_PER_TXN = 6
TRANSACTIONAL = {
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": STATE_PARTITIONS,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
}


@dataclass
class Outcomes:
    committed: list[list[str]] = field(default_factory=list)
    aborted: list[list[str]] = field(default_factory=list)
    uncertain: list[list[str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class TransactionalLoop:
    """Commits four transactions of every five and aborts the fifth, until stopped."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.outcomes = Outcomes()
        self.stopping = threading.Event()
        self.finished = 0
        self.thread = threading.Thread(target=self.run, name="txn-loop", daemon=True)

    def producer(self) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": TXN_ID,
                "transaction.timeout.ms": 10_000,
                "message.timeout.ms": 10_000,
            }
        )
        producer.init_transactions(60)
        return producer

    def run(self) -> None:
        producer = self.producer()
        number = 0
        while not self.stopping.is_set():
            values = [f"t{number}-r{i}" for i in range(RECORDS_PER_TXN)]
            commit = number % 5 != 4
            try:
                producer.begin_transaction()
                for i, value in enumerate(values):
                    producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
                producer.flush(30)
                if commit:
                    self.commit(producer, values)
                else:
                    producer.abort_transaction(30)
                    self.outcomes.aborted.append(values)
            except KafkaException as exc:
                error = exc.args[0]
                self.outcomes.errors.append(str(error))
                if commit:
                    self.outcomes.uncertain.append(values)
                else:
                    self.outcomes.aborted.append(values)  # never committed
                producer = self.recover(producer, error)
            number += 1
            self.finished = number

    def commit(self, producer: Producer, values: list[str]) -> None:
        for attempt in range(5):
            try:
                producer.commit_transaction(30)
                self.outcomes.committed.append(values)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or attempt == 4:
                    raise
                time.sleep(0.5)

    def recover(self, producer: Producer, error: KafkaError) -> Producer:
        if error.txn_requires_abort():
            try:
                producer.abort_transaction(30)
                return producer
            except KafkaException as exc:
                self.outcomes.errors.append(f"abort: {exc.args[0]}")
        return self.producer()

    def wait_for(self, transactions: int, timeout: float = 90.0) -> None:
        target = self.finished + transactions
        wait_for(lambda: self.finished >= target, f"{transactions} more transactions", timeout)


class Watcher:
    """A read_committed consumer reading the topic while the test runs."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "watcher",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        self.consumer.assign([TP(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        self.seen: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, name="watcher", daemon=True)

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                for message in self.consumer.consume(100, 0.5):
                    if message.error() is None:
                        self.seen.append(message.value().decode())
        finally:
            self.consumer.close()

    def stop(self) -> list[str]:
        self.stopping.set()
        self.thread.join(30)
        return self.seen


def read_back(bootstrap: str, isolation: str) -> list[str]:
    return [r.value for r in read_to_end(bootstrap, TOPIC, PARTITIONS, isolation)]


def kill_and_restart(cluster: ReplicatedCluster, broker: int) -> None:
    cluster.brokers[broker].kill()
    time.sleep(1)
    cluster.brokers[broker].start()


@pytest.mark.parametrize("cluster", [TRANSACTIONAL], indirect=True)
def test_coordinator_and_leader_failover(cluster: ReplicatedCluster) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    watcher = Watcher(cluster.bootstrap)
    watcher.thread.start()
    loop = TransactionalLoop(cluster.bootstrap)
    loop.thread.start()
    loop.wait_for(5)
    coordinator_partition = partition_for(TXN_ID, STATE_PARTITIONS)
    coordinator = cluster.state("__transaction_state", coordinator_partition).leader
    kill_and_restart(cluster, coordinator)
    # Another broker takes over, or (when the restart beats the controller to it) the
    # restarted one resumes; either way the id's transactions must go on.
    wait_for(
        lambda: cluster.state("__transaction_state", coordinator_partition).leader >= 0,
        "a transaction coordinator",
    )
    loop.wait_for(5)
    for partition in range(PARTITIONS):
        kill_and_restart(cluster, cluster.state(TOPIC, partition).leader)
        loop.wait_for(3)
    loop.stopping.set()
    loop.thread.join(120)
    assert not loop.thread.is_alive()
    cluster.wait_for_full_isr(TOPIC, PARTITIONS)
    watched = Counter(watcher.stop())

    outcomes = loop.outcomes
    print(
        f"transactions: {len(outcomes.committed)} committed, {len(outcomes.aborted)} aborted, "
        f"{len(outcomes.uncertain)} uncertain; producer errors: {outcomes.errors}"
    )
    assert [v for v, n in watched.items() if n > 1] == [], "the watcher saw records twice"
    never_committed = {v for txn in outcomes.aborted for v in txn}
    assert never_committed.isdisjoint(watched), "the watcher saw aborted records"
    committed_view = Counter(read_back(cluster.bootstrap, "read_committed"))
    assert set(watched) <= set(committed_view), "the watcher saw records later undone"
    duplicated = [v for v, n in committed_view.items() if n > 1]
    assert duplicated == [], "records read twice"
    lost = [v for txn in outcomes.committed for v in txn if v not in committed_view]
    assert lost == [], "committed records missing"
    leaked = [v for txn in outcomes.aborted for v in txn if v in committed_view]
    assert leaked == [], "aborted records visible to read_committed"
    for txn in outcomes.uncertain:
        present = [v in committed_view for v in txn]
        assert all(present) or not any(present), f"a transaction seen in part: {txn}"
    everything = Counter(read_back(cluster.bootstrap, "read_uncommitted"))
    assert [v for v, n in everything.items() if n > 1] == [], "records stored twice"
    assert len(outcomes.committed) >= 10
