"""Fault tests of a replicated cluster: real processes, a real ZooKeeper, three brokers.

Every test runs idempotent acks=all producers (``min.insync.replicas=2``) and
group consumers while it breaks something, then checks the whole history with
``scripts/history_check.py``: nothing acknowledged lost, duplicated, misplaced
or reordered, no offset going backwards, no consumer reading a record that was
later undone, and every acknowledged record read by the group.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.helpers.replication_cluster import (
    ReplicatedCluster,
    Workload,
    check_history,
    cluster,
    stored_records,
    wait_for,
    zookeeper,
)
from tests.helpers.wire import (
    RawConnection,
    produce_error,
    produce_request,
    record_batch,
    response_class_for,
)

__all__ = ["cluster", "zookeeper"]  # fixtures
pytestmark = pytest.mark.timeout(180)  # each test, on a loaded 2-core machine

TOPIC = "faults"
PARTITIONS = 3
ZOMBIE_VALUE = b"zombie:0"
KILLS = 5


def start_workload(cluster: ReplicatedCluster) -> Workload:
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    work = Workload(cluster.bootstrap, TOPIC, PARTITIONS).start()
    work.wait_progress(acked=200, polled=100)
    return work


def new_leader(cluster: ReplicatedCluster, partition: int, old: int) -> float:
    """Seconds until ZooKeeper names a leader other than ``old``."""
    return wait_for(
        lambda: cluster.state(TOPIC, partition).leader not in (old, -1),
        f"a new leader of {TOPIC}-{partition}",
    )


def test_kill_leader_repeatedly(cluster: ReplicatedCluster, tmp_path: Path) -> None:
    """Each round kills the leader of the next partition, restarts it at once, and goes on
    as soon as writes flow again: the victim may still be catching up when its
    successor dies, so elections also meet shrunken ISRs."""
    work = start_workload(cluster)
    failovers = []
    for round_ in range(KILLS):
        partition = round_ % PARTITIONS
        victim = cluster.state(TOPIC, partition).leader
        acked, polled = work.acked, work.polled
        cluster.brokers[victim].kill()
        failovers.append(new_leader(cluster, partition, victim))
        cluster.brokers[victim].start()
        work.wait_progress(acked=acked + 200, polled=polled + 200)
        wait_for(lambda p=partition: len(cluster.state(TOPIC, p).isr) >= 2, "two in-sync replicas")
    cluster.wait_for_full_isr(TOPIC, PARTITIONS)
    history = work.stop(cluster)
    print(f"time to a new leader after kill -9: {[f'{t:.1f} s' for t in failovers]}")
    check_history(history, tmp_path)


def test_paused_follower_leaves_and_rejoins_isr(cluster: ReplicatedCluster, tmp_path: Path) -> None:
    work = start_workload(cluster)
    state = cluster.state(TOPIC, 0)
    follower = next(b for b in state.isr if b != state.leader)
    process = cluster.brokers[follower].process
    os.kill(process.pid, signal.SIGSTOP)
    try:
        shrunk = wait_for(lambda: follower not in cluster.state(TOPIC, 0).isr, "the ISR to shrink")
        acked = work.acked
        work.wait_progress(acked=acked + 200)
    finally:
        os.kill(process.pid, signal.SIGCONT)
    rejoined = wait_for(lambda: follower in cluster.state(TOPIC, 0).isr, "the follower to rejoin")
    cluster.wait_for_full_isr(TOPIC, PARTITIONS)
    history = work.stop(cluster)
    print(f"ISR shrank {shrunk:.1f} s after SIGSTOP; rejoined {rejoined:.1f} s after SIGCONT")
    check_history(history, tmp_path)


def test_paused_leader_is_replaced_and_truncated(
    cluster: ReplicatedCluster, tmp_path: Path
) -> None:
    """A write that reaches the old leader while it is paused is appended when it resumes,
    before it learns that its session expired; it must never be acknowledged, and must
    be truncated away when the old leader follows the new one."""
    work = start_workload(cluster)
    leader = cluster.state(TOPIC, 0).leader
    broker = cluster.brokers[leader]
    with RawConnection(broker.bootstrap, timeout=30) as zombie:
        os.kill(broker.process.pid, signal.SIGSTOP)
        try:
            request = produce_request(TOPIC, 0, record_batch([ZOMBIE_VALUE]))
            request.with_header(correlation_id=1)
            zombie.send(request.encode(header=True, framed=True))
            elected = new_leader(cluster, 0, leader)
            work.wait_progress(acked=work.acked + 200)
        finally:
            os.kill(broker.process.pid, signal.SIGCONT)
        response = response_class_for(request).decode(
            zombie.recv_frame(), version=request.API_VERSION, header=True
        )
        error, _ = produce_error(response)
    assert error != 0, "a write to the deposed leader was acknowledged"
    cluster.wait_for_full_isr(TOPIC, PARTITIONS)
    history = work.stop(cluster)
    print(f"new leader {elected:.1f} s after SIGSTOP of the leader; the zombie write got {error}")
    check_history(history, tmp_path)
    assert ZOMBIE_VALUE.decode() not in {e["value"] for e in history if e["op"] == "final"}
    new = cluster.brokers[cluster.state(TOPIC, 0).leader]
    wait_for(
        lambda: stored_records(broker, TOPIC, 0) == stored_records(new, TOPIC, 0),
        "the old leader's log to match the new leader's",
    )
    fencing = "ZooKeeper session lost: fencing leadership"
    wait_for(lambda: fencing in broker.log_text(), "the old leader's log of its fencing")


def test_whole_cluster_restart(cluster: ReplicatedCluster, tmp_path: Path) -> None:
    work = start_workload(cluster)
    for broker in cluster.brokers.values():
        broker.kill()
    time.sleep(0.5)
    for broker in cluster.brokers.values():
        broker.start()
    acked, polled = work.acked, work.polled
    work.wait_progress(acked=acked + 200, polled=polled + 200)
    history = work.stop(cluster)
    check_history(history, tmp_path)


def test_zookeeper_session_expiry(cluster: ReplicatedCluster, tmp_path: Path) -> None:
    work = start_workload(cluster)
    leader = cluster.state(TOPIC, 0).leader
    cluster.proxies[leader].cut()
    try:
        elected = new_leader(cluster, 0, leader)
        acked = work.acked
        work.wait_progress(acked=acked + 200)
    finally:
        cluster.proxies[leader].restore()
    cluster.wait_for_full_isr(TOPIC, PARTITIONS)
    history = work.stop(cluster)
    print(f"new leader {elected:.1f} s after cutting the leader off ZooKeeper")
    check_history(history, tmp_path)
    text = cluster.brokers[leader].log_text()
    assert "ZooKeeper session lost: fencing leadership" in text
    assert "ZooKeeper session re-established: resuming leadership" in text


def test_controller_failover(cluster: ReplicatedCluster, tmp_path: Path) -> None:
    work = start_workload(cluster)
    controller, epoch = cluster.controller(), cluster.controller_epoch()
    acked, polled = work.acked, work.polled
    cluster.brokers[controller].kill()
    took = wait_for(
        lambda: cluster.controller() not in (-1, controller) and cluster.controller_epoch() > epoch,
        "another controller, with a new epoch",
    )
    for partition in range(PARTITIONS):
        wait_for(
            lambda p=partition: cluster.state(TOPIC, p).leader not in (-1, controller),
            f"a live leader for {TOPIC}-{partition}",
        )
    work.wait_progress(acked=acked + 200, polled=polled + 200)
    cluster.brokers[controller].start()
    cluster.wait_for_full_isr(TOPIC, PARTITIONS)
    history = work.stop(cluster)
    print(f"broker {cluster.controller()} took over as controller {took:.1f} s after the kill")
    check_history(history, tmp_path)
