"""kpybroker.metrics: what each collector reports, from fakes of the state it reads."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from kpybroker.metrics import event_loop
from kpybroker.metrics.broker_metrics import BrokerMetrics
from kpybroker.metrics.connections import ConnectionCountCollector
from kpybroker.metrics.event_loop import EventLoopLag
from kpybroker.metrics.group_lag import GroupLagCollector
from kpybroker.metrics.histogram import BucketCounts
from kpybroker.metrics.log_dirs import LogDirCollector
from kpybroker.metrics.log_state import LogStateCollector
from kpybroker.metrics.registry import BrokerState, broker_registry
from kpybroker.metrics.replica_state import ReplicaStateCollector
from kpybroker.metrics.request_stats import RequestStats
from kpybroker.metrics.topic_stats import BrokerTopicStats
from tests.helpers.metrics_state import (
    FakeConnection,
    FakeController,
    FakeGroups,
    FakeHosted,
    FakeLog,
    FakeLogDirs,
    FakePartition,
    FakeTopology,
    Samples,
    scrape,
)


def samples_of(*collectors: object) -> Samples:
    """What a scrape of a registry holding ``collectors`` shows."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)  # type: ignore[arg-type]
    return scrape(registry)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


# -- counted on the request path ----------------------------------------------------------


def test_topic_stats_count_per_topic_and_for_all_topics() -> None:
    stats = BrokerTopicStats(lambda: {"a", "b"})
    stats.produced("a", 10, 1000)
    stats.produced("a", 5, 400)
    stats.produced("b", 1, 80)
    stats.produce_errored("b", failed=True)
    stats.produce_errored("b", failed=False)
    stats.fetched("a", 700, failed=False, follower=False)
    stats.fetched("a", 300, failed=False, follower=True)
    samples = samples_of(stats)
    prefix = "kafka_server_brokertopicmetrics_"
    assert value(samples, prefix + "messagesin_total", topic="a") == 15
    assert value(samples, prefix + "messagesin_total", topic="b") == 1
    assert value(samples, prefix + "messagesin_total") == 16
    assert value(samples, prefix + "bytesin_total", topic="a") == 1400
    assert value(samples, prefix + "totalproducerequests_total", topic="b") == 3
    assert value(samples, prefix + "failedproducerequests_total", topic="b") == 1
    assert value(samples, prefix + "failedproducerequests_total") == 1
    assert value(samples, prefix + "totalfetchrequests_total", topic="a") == 2
    # A follower's bytes are replication, not consumers' bytes out.
    assert value(samples, prefix + "bytesout_total", topic="a") == 700
    assert value(samples, prefix + "replicationbytesout_total") == 300


def test_a_deleted_topic_leaves_the_scrape_but_not_the_all_topics_count() -> None:
    known = {"kept", "deleted"}
    stats = BrokerTopicStats(lambda: known)
    stats.produced("kept", 1, 100)
    stats.produced("deleted", 2, 200)
    known.discard("deleted")
    samples = samples_of(stats)
    name = "kafka_server_brokertopicmetrics_messagesin_total"
    assert (name, frozenset({("topic", "deleted")})) not in samples
    assert value(samples, name, topic="kept") == 1
    assert value(samples, name) == 3


def test_request_stats_count_and_time_by_api_and_version() -> None:
    stats = RequestStats()
    for elapsed_ms in (0.1, 0.3, 7.0, 40_000.0):
        stats.record("Produce", 11, elapsed_ms)
    stats.record("Fetch", 17, 2.0)
    samples = samples_of(stats)
    produce = {"request": "Produce", "version": "11"}
    assert value(samples, "kafka_network_requestmetrics_requests_total", **produce) == 4
    histogram = "kafka_network_requestmetrics_totaltimems"
    assert value(samples, histogram + "_count", **produce) == 4
    assert value(samples, histogram + "_sum", **produce) == pytest.approx(40_007.4)
    assert value(samples, histogram + "_bucket", le="0.25", **produce) == 1
    assert value(samples, histogram + "_bucket", le="0.5", **produce) == 2
    assert value(samples, histogram + "_bucket", le="10.0", **produce) == 3
    assert value(samples, histogram + "_bucket", le="30000.0", **produce) == 3
    assert value(samples, histogram + "_bucket", le="+Inf", **produce) == 4
    fetch = {"request": "Fetch", "version": "17"}
    assert value(samples, "kafka_network_requestmetrics_requests_total", **fetch) == 1


def test_a_value_on_a_bound_falls_in_that_bucket() -> None:
    counts = BucketCounts((1, 2))
    for observed in (1, 2, 2.5):
        counts.observe(observed)
    assert counts.counts == [1, 1, 1]


def test_event_loop_lag_is_sampled_while_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_loop, "SAMPLE_INTERVAL_S", 0.001)
    lag = EventLoopLag()

    async def sample_twice() -> None:
        task = asyncio.create_task(lag.run())
        while sum(lag.lag.counts) < 2:
            await asyncio.sleep(0.001)
        task.cancel()

    asyncio.run(sample_twice())
    assert value(samples_of(lag), "kpybroker_event_loop_lag_seconds_count") >= 2


# -- read from the broker's state at scrape time -------------------------------------------


def test_replica_manager_gauges() -> None:
    hosted = FakeHosted(
        {
            ("t", 0): FakePartition(),
            ("t", 1): FakePartition(isr=(0,), replicas=(0, 1, 2), min_insync_replicas=2),
            ("t", 2): FakePartition(isr=(0, 1), replicas=(0, 1, 2), min_insync_replicas=2),
            ("t", 3): FakePartition(is_leader=False, isr=(1,), replicas=(0, 1)),
        }
    )
    collector = ReplicaStateCollector(hosted, FakeController(), FakeTopology({"t": [0, -1, -1]}))
    samples = samples_of(collector)
    assert value(samples, "kafka_server_replicamanager_partitioncount") == 4
    assert value(samples, "kafka_server_replicamanager_leadercount") == 3
    # Only partitions led here count; the follower's short ISR is its leader's to report.
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 2
    assert value(samples, "kafka_server_replicamanager_underminisrpartitioncount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 2


def test_only_the_active_controller_reports_offline_partitions() -> None:
    collector = ReplicaStateCollector(
        FakeHosted(), FakeController(active=False), FakeTopology({"t": [-1]})
    )
    samples = samples_of(collector)
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 0
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0


def test_log_gauges_per_partition() -> None:
    logs = [(("t", 0), FakeLog(4096, 10, 250, [object(), object()]))]
    samples = samples_of(LogStateCollector(logs))
    where = {"topic": "t", "partition": "0"}
    assert value(samples, "kafka_log_log_size", **where) == 4096
    assert value(samples, "kafka_log_log_logstartoffset", **where) == 10
    assert value(samples, "kafka_log_log_logendoffset", **where) == 250
    assert value(samples, "kafka_log_log_numlogsegments", **where) == 2


def test_group_lag_against_the_high_watermark() -> None:
    hosted = FakeHosted({("t", 0): FakePartition(high_watermark=100)})
    groups = FakeGroups([("g", "t", 0, 60), ("late", "t", 0, 120), ("g", "elsewhere", 0, 5)])
    samples = samples_of(GroupLagCollector(groups, hosted))

    def of(name: str, group: str, topic: str) -> float | None:
        labels = {"consumergroup": group, "topic": topic, "partition": "0"}
        return samples.get((name, frozenset(labels.items())))

    assert of("kafka_consumergroup_lag", "g", "t") == 40
    assert of("kafka_consumergroup_current_offset", "g", "t") == 60
    # A follower's high watermark may trail a commit: lag is never below 0.
    assert of("kafka_consumergroup_lag", "late", "t") == 0
    # A partition not held here has its committed offset but no lag.
    assert of("kafka_consumergroup_current_offset", "g", "elsewhere") == 5
    assert of("kafka_consumergroup_lag", "g", "elsewhere") is None


def test_log_dirs_offline_after_a_disk_error() -> None:
    dirs = FakeLogDirs([Path("/disk1"), Path("/disk2")], [Path("/disk2")])
    samples = samples_of(LogDirCollector(dirs))
    assert value(samples, "kafka_log_logmanager_offlinelogdirectorycount") == 1
    name = "kafka_log_logmanager_logdirectoryoffline"
    assert value(samples, name, logDirectory="/disk1") == 1
    assert value(samples, name, logDirectory="/disk2") == 0


def test_connections_per_listener_with_zero_for_an_idle_one() -> None:
    connections = [FakeConnection("PLAINTEXT"), FakeConnection("PLAINTEXT"), FakeConnection("SSL")]
    collector = ConnectionCountCollector(["PLAINTEXT", "SSL", "INTERNAL"], connections)
    samples = samples_of(collector)
    name = "kafka_server_socket_server_metrics_connection_count"
    assert value(samples, name, listener="PLAINTEXT") == 2
    assert value(samples, name, listener="SSL") == 1
    assert value(samples, name, listener="INTERNAL") == 0


def test_each_broker_has_its_own_registry() -> None:
    first, second = BrokerMetrics(lambda: {"t"}), BrokerMetrics(lambda: {"t"})
    state = BrokerState(
        FakeHosted(),
        FakeController(),
        FakeTopology(),
        [],
        FakeGroups([]),
        ["PLAINTEXT"],
        [],
        FakeLogDirs([Path("/d")], [Path("/d")]),
    )
    first_registry, second_registry = broker_registry(first, state), broker_registry(second, state)
    first.topics.produced("t", 3, 300)
    name = "kafka_server_brokertopicmetrics_messagesin_total"
    assert first_registry.get_sample_value(name, {"topic": "t"}) == 3
    assert second_registry.get_sample_value(name, {"topic": "t"}) is None
    assert REGISTRY.get_sample_value(name) is None
