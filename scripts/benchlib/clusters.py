"""Three-broker clusters for workload 15: kpybroker on ZooKeeper, Apache Kafka in KRaft mode.

Each node is a :class:`Measured` broker (its startup probe and ``/proc`` readings), so a
follower restarted by the workload is timed as workload 5 times a start. kpybroker's three
brokers share one ZooKeeper (``tests/helpers/zookeeper.py``), under a chroot of their own.
Kafka's are three combined broker+controller nodes whose ``controller.quorum.voters`` lists
all three, each formatted with the same cluster id, with the heap of the other workloads.
Both get the replication settings of a three-node cluster (``REPLICATED_SETTINGS``).
"""

from __future__ import annotations

import abc
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchlib import procstat
from benchlib.brokers import CachedBytecode, Measured
from benchlib.plan import KAFKA_HEAP, KAFKA_SETTINGS, KPYBROKER_SETTINGS, REPLICATED_SETTINGS
from benchlib.results import KAFKA, KPYBROKER
from kpybroker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.helpers.brokers import KpyBroker
from tests.helpers.groups_wire import Wire
from tests.helpers.reference_kafka import ReferenceKafka
from tests.helpers.zookeeper import ZooKeeperServer

#: The node ids of either cluster.
NODE_IDS = (1, 2, 3)

#: Metadata version for the ISR polls (both brokers implement 0-12).
METADATA_VERSION = 12

#: Seconds the brokers may take to see each other after starting.
FORMING_TIMEOUT_S = 120.0


class BenchCluster(abc.ABC):
    """Three measured brokers; ``label`` says which broker they are (for the results)."""

    label: str

    def __init__(self, nodes: dict[int, Measured]) -> None:
        self.nodes = nodes

    @property
    def bootstrap(self) -> str:
        """Every node's address, for the clients' ``bootstrap.servers``."""
        return ",".join(node.bootstrap for node in self.nodes.values())

    def start(self) -> None:
        """Start the nodes at once (a KRaft voter waits for a majority of the others), then
        wait until each one's Metadata lists all three."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            for future in [pool.submit(node.start) for node in self.nodes.values()]:
                future.result()
        deadline = time.monotonic() + FORMING_TIMEOUT_S
        for node in self.nodes.values():
            while len(metadata(node.bootstrap, []).brokers) < len(self.nodes):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{node.bootstrap} does not see all {self.label} brokers")
                time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL every node: their data is thrown away."""
        for node in self.nodes.values():
            node.kill()

    def cpu_seconds(self) -> float:
        """CPU time of the running nodes together."""
        return sum(procstat.cpu_seconds(n.pid) for n in self.nodes.values() if n.is_running)


def metadata(bootstrap: str, topics: list[str]) -> Any:
    """One broker's Metadata answer for ``topics`` (``[]``: the brokers only)."""
    wire = Wire(bootstrap, client_id="kpybroker-bench")
    try:
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name=name) for name in topics],
            allow_auto_topic_creation=False,
        )
        return wire.call(request, METADATA_VERSION)
    finally:
        wire.close()


def isr_by_partition(bootstrap: str, topic: str) -> dict[int, frozenset[int]]:
    """The ISR of each partition of ``topic``, as the broker at ``bootstrap`` answers."""
    (answer,) = metadata(bootstrap, [topic]).topics
    return {p.partition_index: frozenset(p.isr_nodes) for p in answer.partitions}


class ZooKeeperKpyBroker(Measured, CachedBytecode, KpyBroker):
    """One of kpybroker's three brokers: its defaults, ``KPYBROKER_SETTINGS`` and the
    replication settings, with ``broker.id`` and ``zookeeper.connect``."""

    label = KPYBROKER

    def __init__(self, base_dir: Path, node_id: int, zookeeper_connect: str) -> None:
        super().__init__(
            base_dir,
            {
                **KPYBROKER_SETTINGS,
                **REPLICATED_SETTINGS,
                "broker.id": node_id,
                "zookeeper.connect": zookeeper_connect,
            },
        )


class KpyCluster(BenchCluster):
    """Three kpybrokers on one ZooKeeper, which starts first and stops last."""

    label = KPYBROKER
    CHROOT = "/kpybroker-bench"

    def __init__(self, base_dir: Path) -> None:
        self.zookeeper = ZooKeeperServer(base_dir / "zookeeper")
        connect = self.zookeeper.connect + self.CHROOT
        super().__init__(
            {i: ZooKeeperKpyBroker(base_dir / f"node-{i}", i, connect) for i in NODE_IDS}
        )

    def start(self) -> None:
        self.zookeeper.start()
        super().start()

    def kill(self) -> None:
        super().kill()
        self.zookeeper.kill()

    def cpu_seconds(self) -> float:
        """The nodes' CPU time and ZooKeeper's: it holds the metadata that Kafka's
        controllers, inside its nodes, hold there."""
        process = self.zookeeper.process
        assert process is not None
        return super().cpu_seconds() + procstat.cpu_seconds(process.pid)


class QuorumKafka(Measured, ReferenceKafka):
    """One combined node of a three-voter KRaft quorum (``voters`` is set by the cluster)."""

    label = KAFKA

    def __init__(self, base_dir: Path, lib: Path, node_id: int) -> None:
        super().__init__(
            base_dir, {**KAFKA_SETTINGS, **REPLICATED_SETTINGS}, lib=lib, heap=KAFKA_HEAP,
            node_id=node_id,
        )  # fmt: skip
        self.voters = ""

    def settings(self) -> dict[str, str]:
        return {**super().settings(), "controller.quorum.voters": self.voters}


class KafkaCluster(BenchCluster):
    """Apache Kafka: three combined KRaft nodes, one cluster id, all three voters."""

    label = KAFKA

    def __init__(self, base_dir: Path, lib: Path) -> None:
        nodes = {i: QuorumKafka(base_dir / f"node-{i}", lib, i) for i in NODE_IDS}
        voters = ",".join(f"{i}@{n.host}:{n.controller_port}" for i, n in nodes.items())
        for node in nodes.values():
            node.voters = voters
            node.cluster_id = nodes[NODE_IDS[0]].cluster_id
        super().__init__(dict(nodes))
